"""The console's screens (SPEC R18, R10, R14, R16, R17) on a real runtime, driven by keys.

Each test runs the app at 80x24 on a temporary state directory with a fixed
clock, and waits on real conditions (bounded), never on fixed sleeps.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from rich.color import Color as RichColor
from rich.color import ColorSystem
from rich.text import Text
from textual import constants
from textual.color import Color
from textual.command import CommandList, CommandPalette
from textual.pilot import Pilot
from textual.widgets import DataTable, Input, Log, Static, TabPane
from textual.widgets._footer import FooterKey

from tuisched.domain.events import RunFinished, RunStarted
from tuisched.domain.model import CommandSpec, EverySchedule
from tuisched.frontends.tui.app import TuischedApp
from tuisched.frontends.tui.screens.detail import HistoryTable, JobDetailScreen
from tuisched.frontends.tui.screens.dialogs import ConfirmScreen
from tuisched.frontends.tui.screens.diff import DiffScreen
from tuisched.frontends.tui.screens.form import (
    FormValues,
    JobFormScreen,
    definition_from,
    values_from,
)
from tuisched.frontends.tui.screens.groups import GroupPickerScreen
from tuisched.frontends.tui.screens.help import HelpScreen
from tuisched.frontends.tui.widgets.jobs import JobsTable
from tuisched.runtime.document import as_text
from tuisched.runtime.execution.output import read_output

from .console_fixtures import make_app, on_lane, runtime_of
from .recorder import Recorder
from .runtime_fixtures import write_config
from .snapshots import screen_text

FIXED = datetime(2026, 5, 7, 9, 10, tzinfo=UTC)
SIZE = (80, 24)
JOBS = """
heartbeat:
  command: [/bin/echo, "[bold]x[/bold]"]
  schedule: {every: 1 hour, start: 2026-01-01T00:00}
export:
  command: [/bin/echo, exported]
  schedule: {cron: "30 1 * * *"}
report:
  command: [/bin/true]
  description: the daily report
  schedule: {cron: "10 4 * * *"}
  requires: [export]
  retry_delay: 30s
"""
GROUPS = "groups:\n  nightly:\n    jobs: [export, report]\n"


def _app(tmp_path: Path, *, read_only: bool = False) -> TuischedApp:
    path = write_config(tmp_path, JOBS)
    path.write_text(path.read_text() + GROUPS)
    app, _ = make_app(path, read_only=read_only)
    return app


async def _until(pilot: Pilot[int], condition: Callable[[], object], what: str) -> None:
    """Poll `condition` while the app runs, for at most 10 seconds."""
    async with asyncio.timeout(10):
        while not condition():
            await pilot.pause(0.05)
    assert condition(), what


def app_of(pilot: Pilot[int]) -> TuischedApp:
    assert isinstance(pilot.app, TuischedApp)
    return pilot.app


async def _started(pilot: Pilot[int]) -> TuischedApp:
    app = app_of(pilot)
    await _until(pilot, lambda: app.ready, "the console shows the running scheduler")
    return app


async def _type(pilot: Pilot[int], text: str) -> None:
    await pilot.press(*("space" if char == " " else char for char in text))


def _static_text(screen: object, selector: str) -> str:
    content = screen.query_one(selector, Static).content  # type: ignore[attr-defined]
    return content.plain if isinstance(content, Text) else str(content)


async def _open_detail(pilot: Pilot[int], job: str) -> JobDetailScreen:
    app = await _started(pilot)
    table = app.query_one(JobsTable)
    table.focus()
    table.move_cursor(row=table.get_row_index(job))
    await pilot.press("enter")
    await _until(pilot, lambda: isinstance(app.screen, JobDetailScreen), "the detail view")
    screen = app.screen
    assert isinstance(screen, JobDetailScreen)
    return screen


async def _confirm(pilot: Pilot[int]) -> None:
    await _until(pilot, lambda: isinstance(pilot.app.screen, ConfirmScreen), "a confirmation")
    await pilot.press("y")


async def test_enter_opens_the_detail_with_its_tabs_and_next_runs(tmp_path: Path) -> None:
    async with _app(tmp_path).run_test(size=SIZE) as pilot:
        screen = await _open_detail(pilot, "report")
        tabs = [pane.id for pane in screen.query(TabPane)]
        assert tabs == ["tab-definition", "tab-next", "tab-history", "tab-output", "tab-waits"]
        lines = _static_text(screen, "#detail-next").splitlines()
        assert lines[:2] == ["2026-05-08T04:10:00+00:00", "2026-05-09T04:10:00+00:00"]
        assert len(lines) == 10
        waits = _static_text(screen, "#detail-waits")
        assert "the slot 2026-05-08T04:10:00+00:00 will need" in waits
        assert "export slot 2026-05-08T01:30:00+00:00" in waits
        await _until(
            pilot, lambda: "requires:" in _static_text(screen, "#detail-definition"), "the YAML"
        )
        definition = _static_text(screen, "#detail-definition")
        assert "cron: 10 4 * * *" in definition
        assert "description: the daily report" in definition
        await pilot.press("escape")
        assert not isinstance(pilot.app.screen, JobDetailScreen)
        # A job without `requires` has no "Waits for" tab.
        screen = await _open_detail(pilot, "heartbeat")
        assert len(screen.query(TabPane)) == 4


async def test_history_and_output_of_a_finished_run_as_plain_text(tmp_path: Path) -> None:
    async with _app(tmp_path).run_test(size=SIZE) as pilot:
        app = await _started(pilot)
        events = Recorder(runtime_of(app).bus)
        run = await on_lane(app, lambda rt: rt.actions.run_now("heartbeat"))
        await events.wait_for(RunFinished, lambda e: e.run.run_id == run.run_id)
        screen = await _open_detail(pilot, "heartbeat")
        history = screen.query_one(HistoryTable)
        await pilot.press("h")  # its columns fit the tab's width once it shows
        await _until(pilot, lambda: history.row_count == 1, "the finished run in the history")
        await _until(pilot, lambda: len(history.fitted) > 4, "the history's columns")
        shown = (column.key for column, _ in history.fitted)
        cells = dict(zip(shown, (str(cell) for cell in history.get_row(run.run_id)), strict=True))
        assert (cells["state"], cells["result"]) == ("SUCCESS", "completed")
        assert {"started", "duration", "status"} <= cells.keys()  # at 80 columns too
        log = screen.query_one("#detail-output", Log)
        await _until(pilot, lambda: log.line_count > 0, "the run's output")
        assert log.lines == ["[bold]x[/bold]"]  # literally: never read as markup
        assert run.run_id in _static_text(screen, "#detail-output-source")


async def test_the_detail_follows_a_running_job_live(tmp_path: Path) -> None:
    async with _app(tmp_path).run_test(size=SIZE) as pilot:
        screen = await _open_detail(pilot, "heartbeat")
        run = runtime_of(app_of(pilot)).actions.run_now("heartbeat")
        log = screen.query_one("#detail-output", Log)
        await _until(pilot, lambda: log.lines == ["[bold]x[/bold]"], "the live output")
        history = screen.query_one("#detail-history", DataTable)
        await _until(pilot, lambda: run.run_id in history.rows, "the run in the history")


async def _fill(pilot: Pilot[int], values: dict[str, str]) -> None:
    screen = pilot.app.screen
    for widget_id, value in values.items():
        screen.query_one(f"#{widget_id}", Input).value = value
    await pilot.pause()


async def test_adding_a_job_shows_problems_inline_then_saves(tmp_path: Path) -> None:
    async with _app(tmp_path).run_test(size=SIZE) as pilot:
        app = await _started(pilot)
        await pilot.press("a")
        await _until(pilot, lambda: isinstance(app.screen, JobFormScreen), "the form")
        form = app.screen
        await _fill(
            pilot,
            {"form-name": "tidy", "form-target": "[/bin/echo, yes]", "form-cron": "61 * * * *"},
        )
        await pilot.press("ctrl+s")
        await _until(pilot, lambda: form.query(".form-error"), "the problem")
        # one problem, next to the field it is about, without its file and line
        assert [str(error.content) for error in form.query(".form-error")] == [
            "minute field '61': value 61 out of range 0-59"
        ]
        assert not form.query_one("#form-problems", Static).has_class("-shown")
        assert app.screen is form  # the form stays open
        await _fill(pilot, {"form-cron": "*/5 * * * *", "form-retries": "2"})
        await pilot.click("#form-save")
        await _confirm(pilot)
        await _until(pilot, lambda: "tidy" in runtime_of(app).config.jobs, "the new job")
        job = runtime_of(app).config.job("tidy")
        assert job.retries == 2
        assert job.kind == CommandSpec(argv=("/bin/echo", "yes"))  # an argv, `yes` a word
        assert "tidy:" in runtime_of(app).config.path.read_text()


async def test_editing_a_job_keeps_the_keys_the_form_does_not_know(tmp_path: Path) -> None:
    async with _app(tmp_path).run_test(size=SIZE) as pilot:
        app = await _started(pilot)
        table = app.query_one(JobsTable)
        table.move_cursor(row=table.get_row_index("report"))
        await pilot.press("e")
        await _until(pilot, lambda: isinstance(app.screen, JobFormScreen), "the form")
        assert app.screen.query_one("#form-name", Input).disabled
        assert app.screen.query_one("#form-cron", Input).value == "10 4 * * *"
        await _fill(pilot, {"form-description": "the nightly report"})
        await pilot.press("ctrl+s")
        await _confirm(pilot)
        await _until(
            pilot,
            lambda: runtime_of(app).config.job("report").description == "the nightly report",
            "the edit",
        )
        job = runtime_of(app).config.job("report")
        assert job.requires == ("export",)
        assert job.retry_delay.total_seconds() == 30
        text = runtime_of(app).config.path.read_text()
        assert "requires: [export]" in text
        assert "retry_delay: 30s" in text


async def test_help_lists_every_key_hidden_ones_too(tmp_path: Path) -> None:
    async with _app(tmp_path).run_test(size=SIZE) as pilot:
        await _started(pilot)
        await pilot.press("question_mark")
        await _until(pilot, lambda: isinstance(pilot.app.screen, HelpScreen), "the help")
        lines = _static_text(pilot.app.screen, "#help-text").splitlines()
        keys = {line.split()[0] for line in lines if line.startswith("  ")}
        assert {"ctrl+k", "P", "v", "D", "?", "ctrl+p", "⏎"} <= keys
        assert any(line.split()[:2] == ["P", "Pause"] for line in lines)
        await pilot.press("escape")
        assert not isinstance(pilot.app.screen, HelpScreen)


async def test_diff_shows_an_offline_edit_and_reloads_it(tmp_path: Path) -> None:
    async with _app(tmp_path).run_test(size=SIZE) as pilot:
        app = await _started(pilot)
        source = runtime_of(app).source
        assert source is not None
        path = runtime_of(app).config.path
        edited = path.with_name("edited.yaml")
        edited.write_text(path.read_text().replace("every: 1 hour", "every: 2 hours"))
        edited.replace(path)  # as an editor saves
        await _until(pilot, lambda: source.pending is not None, "the offline edit")
        await pilot.press("D")
        await _until(pilot, lambda: isinstance(app.screen, DiffScreen), "the diff")
        screen = app.screen
        await _until(pilot, lambda: "~ heartbeat" in _static_text(screen, "#diff-text"), "lines")
        assert "schedule: every hour from 2026-01-01 00:00 -> every 2 hours" in _static_text(
            screen, "#diff-text"
        )
        await pilot.press("R")
        await _confirm(pilot)
        await _until(pilot, lambda: source.pending is None, "the reload")
        schedule = runtime_of(app).config.job("heartbeat").schedule
        assert isinstance(schedule, EverySchedule)
        assert schedule.step == 2


async def test_diff_without_an_offline_edit_says_so(tmp_path: Path) -> None:
    async with _app(tmp_path).run_test(size=SIZE) as pilot:
        await _started(pilot)
        await pilot.press("D")
        await _until(pilot, lambda: isinstance(pilot.app.screen, DiffScreen), "the diff")
        screen = pilot.app.screen
        await _until(pilot, lambda: "no offline edit" in _static_text(screen, "#diff-text"), "")


async def test_the_palette_runs_a_job_after_a_confirmation(tmp_path: Path) -> None:
    async with _app(tmp_path).run_test(size=SIZE) as pilot:
        app = await _started(pilot)
        events = Recorder(runtime_of(app).bus)
        await pilot.press("ctrl+p")
        await _until(pilot, lambda: isinstance(app.screen, CommandPalette), "the palette")
        await _type(pilot, "run heartbeat")
        commands = app.screen.query_one(CommandList)

        def first_hit() -> str:
            if commands.option_count == 0:
                return ""
            option = commands.get_option_at_index(0)
            return str(getattr(option, "hit", option).prompt)

        await _until(pilot, lambda: "run heartbeat" in first_hit(), "the hit")
        await pilot.press("enter")
        if commands.highlighted is None and isinstance(app.screen, CommandPalette):
            await pilot.press("down", "enter")
        await _confirm(pilot)
        (started,) = await events.wait_for(RunStarted, lambda e: e.run.job == "heartbeat")
        assert started.run.trigger.value == "manual"


async def test_the_group_picker_filters_and_pauses_a_group(tmp_path: Path) -> None:
    async with _app(tmp_path).run_test(size=SIZE) as pilot:
        app = await _started(pilot)
        table = app.query_one(JobsTable)
        await pilot.press("v")
        await _until(pilot, lambda: isinstance(app.screen, GroupPickerScreen), "the picker")
        await pilot.press("enter")
        await _until(pilot, lambda: table.filter_text == "nightly", "the filter")
        assert sorted(key.value or "" for key in table.rows) == ["export", "report"]
        await pilot.press("v")
        await _until(pilot, lambda: isinstance(app.screen, GroupPickerScreen), "the picker")
        await pilot.press("p")
        await _confirm(pilot)
        engine = runtime_of(app).engine
        await _until(pilot, lambda: ("group", "nightly") in engine.pauses, "the pause")
        assert engine.is_paused(runtime_of(app).config.job("report"))
        assert not engine.is_paused(runtime_of(app).config.job("heartbeat"))


async def test_read_only_ignores_add_edit_delete_and_run(tmp_path: Path) -> None:
    async with _app(tmp_path, read_only=True).run_test(size=SIZE) as pilot:
        app = await _started(pilot)
        before = runtime_of(app).config.path.read_text()
        for key in ("a", "e", "d", "r"):
            await pilot.press(key)
            await app.workers.wait_for_complete()
            await pilot.pause()
            assert len(app.screen_stack) == 1, key
        assert await on_lane(app, lambda rt: rt.engine.running()) == []
        assert runtime_of(app).config.path.read_text() == before


REPORT = {
    "command": ["/bin/true"],
    "description": "the daily report",
    "schedule": {"cron": "10 4 * * *"},
    "requires": ["export"],
    "retry_delay": "30s",
    "retries": "2",
    "enabled": "true",
}


def test_an_untouched_form_gives_back_the_same_definition() -> None:
    for definition in (
        REPORT,
        {"python": "jobs:run", "after": "report", "x-note": "kept"},
        {"wait_for": "/data/*.csv", "after": {"job": "a", "on": "both", "delay": "10s"}},
        {"command": "df -h | tail -1", "schedule": "manual", "overlap": "queue"},
        {"command": ["/bin/echo", "yes"], "schedule": {"every": "2 hours", "start": "2026-01-01"}},
    ):
        rebuilt = definition_from(values_from("job", definition), definition)
        assert {key: as_text(value) for key, value in rebuilt.items()} == definition
        assert list(rebuilt) == list(definition)  # same keys, same order


def test_a_new_kind_and_trigger_take_the_old_ones_places() -> None:
    values = replace(
        values_from("report", REPORT), kind="python", target="jobs:run", trigger="after",
        after_job="export", enabled=False,
    )  # fmt: skip
    rebuilt = definition_from(values, REPORT)
    assert list(rebuilt) == [
        "python", "description", "after", "requires", "retry_delay", "retries", "enabled",
    ]  # fmt: skip
    assert rebuilt["after"] == {"job": "export"}
    assert rebuilt["enabled"] is False


def test_a_malformed_argv_is_a_problem_not_a_shell_command() -> None:
    values = FormValues(name="x", target="[/bin/echo, 'unclosed]")
    with pytest.raises(ValueError, match="not a YAML list"):
        definition_from(values)


def test_the_output_tail_drops_a_cut_first_line(tmp_path: Path) -> None:
    path = tmp_path / "run.log"
    path.write_bytes(b"first line\nsecond \x1b[31mred\x1b[0m\n[bold]x[/bold]\n")
    assert read_output(path, offset=None, limit=40)[0] == ["second red", "[bold]x[/bold]"]
    assert read_output(path, offset=None, limit=200 * 1024)[0][0] == "first line"


def test_a_window_that_ends_before_the_file_leaves_its_cut_line_for_the_next_read(
    tmp_path: Path,
) -> None:
    path = tmp_path / "run.log"
    path.write_bytes(b"one\ntwo\nthree\n" + b"x" * 30 + b"\nlast")
    lines, start, end = read_output(path, offset=0, limit=12)  # "one\ntwo\nthre"
    assert (lines, start, end) == (["one", "two"], 0, 8)
    lines, _, end = read_output(path, offset=end, limit=12)
    assert (lines, end) == (["three"], 14)
    piece, _, end = read_output(path, offset=end, limit=12)  # a line longer than the window
    assert (piece, end) == (["x" * 12], 26)
    rest, _, end = read_output(path, offset=end, limit=200)  # the end of a run that ended
    assert (rest, end) == (["x" * 18, "last"], path.stat().st_size)
    assert read_output(path, offset=45, limit=200, growing=True)[0] == []  # "last" waits


async def test_keys_of_the_detail_act_on_its_job(tmp_path: Path) -> None:
    async with _app(tmp_path).run_test(size=SIZE) as pilot:
        app = await _started(pilot)
        app.show_job("export")  # as the palette's "show export" does
        await _until(pilot, lambda: isinstance(app.screen, JobDetailScreen), "the detail")
        await pilot.press("p")
        await _confirm(pilot)
        engine = runtime_of(app).engine
        await _until(pilot, lambda: ("job", "export") in engine.pauses, "the pause")
        screen = app.screen
        await _until(
            pilot, lambda: "paused" in _static_text(screen, "#detail-next"), "paused shown"
        )


async def test_stats_that_come_after_the_detail_view_lost_its_panes_are_dropped(
    tmp_path: Path,
) -> None:
    async with _app(tmp_path).run_test(size=SIZE) as pilot:
        screen = await _open_detail(pilot, "heartbeat")
        released = asyncio.Event()
        answer = screen.control.stats

        async def slow(query: object) -> object:
            await released.wait()
            return await answer(query)  # type: ignore[arg-type]

        screen.control.stats = slow  # type: ignore[method-assign]
        screen._load_stats()
        await pilot.pause()
        await screen.query_one("#detail-stats").remove()  # as when the app closes
        released.set()
        await pilot.pause()
        await pilot.pause()
        assert not screen.query("#detail-stats")


async def test_bidi_controls_in_the_files_text_never_reach_the_screen(tmp_path: Path) -> None:
    """U+202E in a description, a command or an environment value would show the rest
    of the line reversed (`invoice\u202etxt.exe` as `invoiceexe.txt`)."""
    path = write_config(
        tmp_path,
        """
        invoice:
          command: [/bin/echo, "a\u202eb"]
          description: "the invoice\u202etxt.exe"
          env: {NAME: "x\u2067y"}
          schedule: manual
        """,
    )
    app, _ = make_app(path)
    async with app.run_test(size=SIZE) as pilot:
        await _started(pilot)
        assert "\u202e" not in screen_text(app)
        screen = await _open_detail(pilot, "invoice")
        await _until(
            pilot, lambda: "description" in _static_text(screen, "#detail-definition"), "YAML"
        )
        definition = _static_text(screen, "#detail-definition")
        shown = screen_text(app)
    assert "description: the invoice\ufffdtxt.exe" in definition
    assert not {"\u202e", "\u2067"} & set(definition + shown)


def _in_16_colours(color: RichColor | None) -> int | None:
    """The colour a 16-colour terminal shows for `color` (its ANSI number)."""
    assert color is not None
    return color.downgrade(ColorSystem.STANDARD).number


async def test_in_16_colours_focus_and_keys_are_not_the_errors_red(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`TERM=xterm` without `COLORTERM`: the orange accent would become bright red."""
    monkeypatch.setattr(constants, "COLOR_SYSTEM", "standard")
    app = _app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await _started(pilot)
        jobs = app.query_one(JobsTable)
        jobs.focus()
        await pilot.pause()
        border = _in_16_colours(jobs.styles.border_top[1].rich_color)
        key = next(iter(app.screen.query(FooterKey)))
        letter = _in_16_colours(key.get_component_rich_style("footer-key--key").color)
        error = _in_16_colours(Color.parse(app.current_theme.error).rich_color)
    reds = {1, 9}  # red, bright red
    assert error in reds  # errors do read as errors
    assert border not in reds
    assert letter not in reds
    assert border == letter == 14  # bright cyan: focus and keys alike
