"""Text snapshots of the console: the screen's characters, as a person reads them.

Textual's screenshot is an SVG whose text runs carry their line and x offset;
they are put back on a grid of the terminal's size. A cell's width is read from the
SVG itself (each run's `textLength` over its characters, as Rich writes it), not
assumed, and a wide character takes its two cells. Colours are not compared here
(the layout and the words are; `test_console_snapshots.py` checks what must stay
readable without colour on the rendered lines); Textual is pinned in pyproject.toml
so a new release cannot shift a character unnoticed. Regenerate with
`TUISCHED_UPDATE_SNAPSHOTS=1 pytest tests/test_console_snapshots.py`.

Why not pytest-textual-snapshot (Textual's own plugin, which stores the SVG):
- a text snapshot reads as the screen in a review's diff; an SVG diff is a wall of
  markup and its report is an HTML page, so a changed word or column is hard to see;
- its 1.1.0 pins `syrupy==4.8.0`, which needs pytest < 9, and the suite runs
  pytest 9 (Textualize/pytest-textual-snapshot#24 and #28 are open about it);
- `snap_compare` starts the app itself from a sync test, where these tests drive a
  console on a real scheduler and wait on its state (`until`) before the picture;
- an SVG compares colours too, so a theme tweak rewrites every snapshot; the colour
  rules that matter are asserted by name instead.
"""

from __future__ import annotations

import html
import os
import re
from pathlib import Path

from rich.cells import cell_len
from textual.app import App

SNAPSHOTS = Path(__file__).parent / "snapshots"
_RUN = re.compile(
    r'<text class="[^"]*" x="([\d.]+)" y="[\d.]+" textLength="([\d.]+)"'
    r'[^>]*line-(\d+)\)">(.*?)</text>'
)
"""A run of text in Rich's SVG: its x, its length (a cell's width times its characters),
its line, its characters (escaped; spaces as no-break spaces)."""


def screen_text(app: App[object]) -> str:
    """The characters on screen, one line per row, trailing spaces kept off."""
    width, height = app.size
    grid = [[" "] * width for _ in range(height)]
    for x, length, line, content in _RUN.findall(app.export_screenshot()):
        text = html.unescape(content).replace("\xa0", " ")
        if not text or int(line) >= height:
            continue
        column = round(float(x) * len(text) / float(length))  # x over one cell's width
        for char in text:
            cells = cell_len(char)
            if column < width and cells:
                grid[int(line)][column] = char
                for covered in range(column + 1, min(column + cells, width)):
                    grid[int(line)][covered] = ""  # the second half of a wide character
            column += cells
    return "\n".join("".join(row).rstrip() for row in grid) + "\n"


def assert_snapshot(name: str, text: str) -> None:
    """`text` equals the stored snapshot `name` (or becomes it, when updating)."""
    path = SNAPSHOTS / f"{name}.txt"
    if os.environ.get("TUISCHED_UPDATE_SNAPSHOTS") == "1" or not path.exists():
        path.write_text(text)
        assert os.environ.get("TUISCHED_UPDATE_SNAPSHOTS") == "1", f"{path} was missing: written"
    assert text == path.read_text(), f"the screen differs from {path}:\n{text}"
