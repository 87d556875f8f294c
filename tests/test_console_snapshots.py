"""A few snapshots pin the console's look at 80x24 (clock fixed, Textual pinned)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import textual.constants
from rich.color import Color as RichColor
from rich.color import ColorSystem
from textual.app import App
from textual.color import Color

from tuisched.frontends.tui.screens.main import FOCUS_MARK
from tuisched.frontends.tui.widgets.jobs import JobsTable

from .console_fixtures import make_app, on_lane, until
from .runtime_fixtures import write_config
from .snapshots import assert_snapshot, screen_text

# Jobs whose rows do not depend on the real date: manual, after, disabled, finished.
JOBS = """
backup: {command: [/usr/local/bin/backup], schedule: manual, description: nightly backup}
compress: {command: [gzip, dump], after: {job: backup, delay: 10s}}
legacy: {command: [/bin/false], schedule: {cron: "@hourly"}, enabled: false}
report:
  python: "tests.engine_jobs:noop"
  schedule: {every: 1 day, start: 2020-01-01T06:00, stop: 2020-02-01T06:00}
"""


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # the status line shows the path relative to here
    # A busy test machine can stall the loop past the watchdog's threshold, and the
    # status line would show the lag: the look must not depend on the machine.
    monkeypatch.setattr("tuisched.runtime.watchdog.THRESHOLD", 3600.0)
    path = write_config(tmp_path, JOBS)
    path.write_text(path.read_text() + "groups:\n  nightly: {jobs: [backup, compress]}\n")
    return path


async def test_main_screen(config: Path) -> None:
    app, _runtime = make_app(config)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.ready and app.query_one(JobsTable).row_count == 4)
        await pilot.pause()
        assert_snapshot("main_80x24", screen_text(app))


async def test_confirmation_dialog(config: Path) -> None:
    app, _runtime = make_app(config)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.ready and app.query_one(JobsTable).row_count == 4)
        await pilot.press("d")
        await pilot.pause()
        assert_snapshot("confirm_delete_80x24", screen_text(app))


async def test_help_screen(config: Path) -> None:
    app, _runtime = make_app(config)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.ready and app.query_one(JobsTable).row_count == 4)
        await pilot.press("question_mark")
        await pilot.pause()
        assert_snapshot("help_80x24", screen_text(app))


async def test_running_and_audit_panes_give_their_rows_to_the_jobs_when_empty(
    config: Path,
) -> None:
    app, _runtime = make_app(config)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.ready and app.query_one(JobsTable).row_count == 4)
        await pilot.pause()
        assert app.query_one("#running").size.height == 1  # its header line
        assert app.query_one("#audit").size.height == 1
        assert app.query_one(JobsTable).size.height >= 12  # 9 when those panes kept theirs
        # fails at once: a line in the audit log
        await on_lane(app, lambda rt: rt.actions.run_now("backup"))
        await until(pilot, lambda: app.query_one("#audit").size.height == 3)


# --- colours: the same characters, and what must stay readable without colour --------


@dataclass(frozen=True, slots=True)
class Cell:
    """A run of text on screen as the terminal gets it (after the app's line filters)."""

    text: str
    color: RichColor | None
    bgcolor: RichColor | None
    reverse: bool
    bold: bool


def _lines(app: App[int], system: ColorSystem | None = None) -> list[list[Cell]]:
    """The screen's lines through the app's filters (NO_COLOR's among them), colours cut
    down to `system` as the terminal's console does."""
    lines = []
    for drawn in app.screen._compositor.render_strips():
        strip = drawn
        for line_filter in app.get_line_filters():
            strip = strip.apply_filter(line_filter, Color(0, 0, 0))
        cells = []
        for segment in strip:
            style = segment.style
            if style is None:
                continue
            color, bgcolor = style.color, style.bgcolor
            if system is not None:
                color = color.downgrade(system) if color else None
                bgcolor = bgcolor.downgrade(system) if bgcolor else None
            cells.append(Cell(segment.text, color, bgcolor, bool(style.reverse), bool(style.bold)))
        lines.append(cells)
    return lines


def _cell(line: list[Cell], text: str) -> Cell:
    return next(cell for cell in line if text in cell.text)


def _readable_without_colour(lines: list[list[Cell]], text: str) -> None:
    """Focus, cursor and legend are told by text and attributes, not by colour alone."""
    assert f"{FOCUS_MARK}1 Jobs" in text.splitlines()[1]
    title = _cell(lines[1], "1 Jobs")
    assert (title.reverse, title.bold) == (True, True)  # the focused pane's title
    assert _cell(lines[3], "backup").bold  # the cursor's row
    assert not _cell(lines[4], "compress").bold
    footer = lines[23]
    assert _cell(footer, "q").bold  # the legend's keys stand out from their words
    assert not _cell(footer, "Quit").bold
    assert "q Quit ? Help r Run p Pause e Edit y Copy" in text.splitlines()[23]


async def test_main_screen_in_16_colours(config: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(textual.constants, "COLOR_SYSTEM", "standard")  # TEXTUAL_COLOR_SYSTEM
    app, _runtime = make_app(config)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.ready and app.query_one(JobsTable).row_count == 4)
        await pilot.pause()
        assert app.console.color_system == "standard"
        text = screen_text(app)
        assert_snapshot("main_80x24_16_colours", text)
        lines = _lines(app, ColorSystem.STANDARD)
        _readable_without_colour(lines, text)
        # In 16 colours the cursor's row still has a background of its own.
        assert _cell(lines[3], "backup").bgcolor != _cell(lines[4], "compress").bgcolor


async def test_main_screen_with_no_color(config: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app, _runtime = make_app(config)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.ready and app.query_one(JobsTable).row_count == 4)
        await pilot.pause()
        assert app.no_color
        text = screen_text(app)
        assert_snapshot("main_80x24_no_color", text)
        lines = _lines(app)
        colours = {c for line in lines for cell in line for c in (cell.color, cell.bgcolor) if c}
        assert colours
        assert all(len(set(c.get_truecolor())) == 1 for c in colours)  # greys only
        _readable_without_colour(lines, text)
