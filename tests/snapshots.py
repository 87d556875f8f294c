"""Text snapshots of the console: the screen's characters, as a person reads them.

Textual's screenshot is an SVG whose text runs carry their line and x offset;
they are put back on a grid of the terminal's size. Colours are not compared
(the layout and the words are); Textual is pinned in pyproject.toml so a new
release cannot shift a character unnoticed. Regenerate with
`TUISCHED_UPDATE_SNAPSHOTS=1 pytest tests/test_console_snapshots.py`.
"""

from __future__ import annotations

import html
import os
import re
from pathlib import Path

from textual.app import App

SNAPSHOTS = Path(__file__).parent / "snapshots"
_CHAR_WIDTH = 12.2
"""Width of one cell in Rich's SVG export."""
_RUN = re.compile(r'<text class="[^"]*" x="([\d.]+)" y="[\d.]+"[^>]*line-(\d+)\)">(.*?)</text>')


def screen_text(app: App[object]) -> str:
    """The characters on screen, one line per row, trailing spaces kept off."""
    width, height = app.size
    grid = [[" "] * width for _ in range(height)]
    for x, line, content in _RUN.findall(app.export_screenshot()):
        column = round(float(x) / _CHAR_WIDTH)
        for offset, char in enumerate(html.unescape(content).replace("\xa0", " ")):
            if int(line) < height and column + offset < width:
                grid[int(line)][column + offset] = char
    return "\n".join("".join(row).rstrip() for row in grid) + "\n"


def assert_snapshot(name: str, text: str) -> None:
    """`text` equals the stored snapshot `name` (or becomes it, when updating)."""
    path = SNAPSHOTS / f"{name}.txt"
    if os.environ.get("TUISCHED_UPDATE_SNAPSHOTS") == "1" or not path.exists():
        path.write_text(text)
        assert os.environ.get("TUISCHED_UPDATE_SNAPSHOTS") == "1", f"{path} was missing: written"
    assert text == path.read_text(), f"the screen differs from {path}:\n{text}"
