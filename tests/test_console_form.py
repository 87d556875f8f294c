"""The job form at 80x24 (SPEC R25, issue 15): the impact preview appears, follows the
schedule as it is typed, warns of a clock change and lists the dependants, in a hosting
and in an attached console; and one mistake gives one message, next to its field."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest
from textual.app import App, ComposeResult
from textual.pilot import Pilot
from textual.widgets import Input, Static

from tuisched.frontends.tui.app import TuischedApp
from tuisched.frontends.tui.screens.form import JobFormScreen, placed_problems
from tuisched.frontends.tui.widgets.choice import Choice
from tuisched.frontends.tui.widgets.jobs import JobsTable
from tuisched.runtime.clock import ManualClock
from tuisched.runtime.configfiles import load_config
from tuisched.runtime.control import LocalScheduler, RemoteControl, socket_path
from tuisched.runtime.runtime import Runtime

from .console_fixtures import until
from .runtime_fixtures import write_config

NOW = datetime(2026, 3, 27, 12, 0, tzinfo=UTC)
"""Two days before Paris springs forward (2026-03-29, 02:00 -> 03:00)."""
SIZE = (80, 24)
JOBS = """
export:
  command: [/bin/echo, exported]
  schedule: {cron: "30 1 * * *"}
report:
  command: [/bin/true]
  schedule: {cron: "10 4 * * *"}
  requires: [export]
chained:
  command: [/bin/true]
  after: export
"""


@asynccontextmanager
async def _console(
    tmp_path: Path, *, attached: bool, jobs: str = JOBS
) -> AsyncIterator[TuischedApp]:
    """A console on a scheduler whose clock stands at NOW: hosting it, or attached to it
    through its control socket (the scheduler then runs beside the console)."""
    path = write_config(tmp_path, jobs, settings="timezone: Europe/Paris")
    runtime = Runtime(load_config(path), kill_grace=0.5, clock=ManualClock(NOW))
    scheduler = LocalScheduler(runtime)
    if not attached:
        yield TuischedApp(scheduler.control("tester (console)"), scheduler=scheduler)
        return
    await scheduler.start()
    remote = RemoteControl(socket_path(path.parent / "state"), client="test console")
    try:
        await remote.connect()
        yield TuischedApp(remote)
    finally:
        await remote.close()
        await scheduler.stop(grace=1)


async def _edit(pilot: Pilot[int], job: str) -> JobFormScreen:
    app = pilot.app
    table = app.query_one(JobsTable)
    await until(pilot, lambda: job in table.rows)
    table.move_cursor(row=table.get_row_index(job))
    await pilot.press("e")
    await until(pilot, lambda: isinstance(app.screen, JobFormScreen))
    form = app.screen
    assert isinstance(form, JobFormScreen)
    # Current before its fields are mounted (seen beside a CPU hog): wait for them too.
    await until(pilot, lambda: bool(form.query("#form-description")))
    return form


def _shown(form: JobFormScreen, selector: str = "#form-impact") -> str:
    return "\n".join(str(widget.content) for widget in form.query(selector))


@pytest.mark.parametrize("attached", [False, True], ids=["hosting", "attached"])
async def test_the_preview_follows_the_schedule_warns_of_dst_and_lists_dependants(
    tmp_path: Path, attached: bool
) -> None:
    async with _console(tmp_path, attached=attached) as app, app.run_test(size=SIZE) as pilot:
        form = await _edit(pilot, "export")
        await until(pilot, lambda: "after this edit" in _shown(form))
        preview = _shown(form)
        assert "Next runs (Europe/Paris)" in preview
        assert "Sat 2026-03-28 01:30 CET      Sat 2026-03-28 01:30 CET" in preview
        assert "report requires export" in preview
        assert "chained runs after 'export' succeeds" in preview
        form.query_one("#form-cron", Input).value = "30 2 * * *"
        await until(pilot, lambda: "03:00 CEST !" in _shown(form))
        preview = " ".join(_shown(form).split())  # long lines are wrapped
        assert "Sun 2026-03-29 01:30 CET Sun 2026-03-29 03:00 CEST !" in preview
        assert "02:30 does not exist; runs once at 03:00 CEST" in preview
        assert "will need export's slot 2026-03-28 02:30 CET (was 2026-03-28 01:30 CET)" in preview
        assert app.screen is form  # nothing saved, nothing closed


async def test_the_preview_shows_seconds_when_the_schedule_has_them(tmp_path: Path) -> None:
    jobs = "tick: {command: [/bin/true], schedule: {every: 10s, start: 2026-03-27T14:00}}"
    async with (
        _console(tmp_path, attached=False, jobs=jobs) as app,
        app.run_test(size=SIZE) as pilot,
    ):
        form = await _edit(pilot, "tick")
        await until(pilot, lambda: "after this edit" in _shown(form))
        rows = [line.split("CET")[0].strip() for line in _shown(form).splitlines()[2:7]]
    assert rows == [f"Fri 2026-03-27 14:00:{second:02d}" for second in range(0, 50, 10)]


async def test_a_bad_schedule_gives_one_message_next_to_its_field(tmp_path: Path) -> None:
    async with _console(tmp_path, attached=False) as app, app.run_test(size=SIZE) as pilot:
        form = await _edit(pilot, "export")
        form.query_one("#form-cron", Input).value = "61 1 * * *"
        await until(pilot, lambda: "not valid yet" in _shown(form))
        await pilot.press("ctrl+s")
        await until(pilot, lambda: form.query(".form-error"))
        errors = list(form.query(".form-error"))
        assert [str(error.content) for error in errors] == [
            "minute field '61': value 61 out of range 0-59"
        ]
        cron = form.query_one("#form-cron")
        assert errors[0].region.y == cron.region.y + 1  # right under the field
        assert not form.query_one("#form-problems", Static).has_class("-shown")
        # the preview points at it instead of saying it again; the dependants are not
        # told that export is unknown
        assert "see the problems in the form" in _shown(form)
        assert "minute field" not in _shown(form)
        assert "unknown" not in _shown(form) + _shown(form, "#form-problems")
        form.query_one("#form-cron", Input).value = "30 1 * * *"  # fixed: the message goes
        await until(pilot, lambda: not form.query(".form-error"))


async def test_a_malformed_argv_is_one_line_next_to_the_value(tmp_path: Path) -> None:
    async with _console(tmp_path, attached=False) as app, app.run_test(size=SIZE) as pilot:
        form = await _edit(pilot, "export")
        form.query_one("#form-target", Input).value = "[/bin/echo, hi"
        await pilot.press("ctrl+s")
        await until(pilot, lambda: form.query(".form-error"))
        assert [str(error.content) for error in form.query(".form-error")] == [
            "not a YAML list (expected ',' or ']', but got the end at column 15)"
        ]


async def test_an_unknown_after_job_is_named_once_and_what_it_breaks_once(
    tmp_path: Path,
) -> None:
    async with _console(tmp_path, attached=False) as app, app.run_test(size=SIZE) as pilot:
        form = await _edit(pilot, "export")
        trigger = form.query_one("#form-trigger", Choice)
        trigger.focus()
        while trigger.value != "after":
            await pilot.press("right")
        await until(pilot, lambda: form.query("#form-after-job"))  # built when first shown
        assert not form.query_one("#form-cron").display
        form.query_one("#form-after-job", Input).value = "nosuch"
        await pilot.press("ctrl+s")
        await until(pilot, lambda: form.query(".form-error"))
        assert [str(error.content) for error in form.query(".form-error")] == [
            "after names unknown job 'nosuch'"
        ]
        below = _shown(form, "#form-problems").splitlines()
        assert len(below) == 1  # another cause: report requires a job that has no slots
        assert below[0].endswith("job 'report': requires 'export', which has no cycle "
                                 "(it needs a cron or every schedule)")  # fmt: skip


def test_problems_are_placed_by_field_each_once() -> None:
    head = "/x/tuisched.yaml:8: job 'export': "
    problems = [
        head + "schedule.cron: minute field '61': value 61 out of range 0-59",
        head + "schedule.cron: minute field '61': value 61 out of range 0-59",
        head + "an 'every' schedule needs 'start' (its first slot)",
        head + "timeout: bad duration '5 parsecs': write it like 90s",
        "/x/tuisched.yaml:12: job 'report': requires 'export', which has no cycle",
        head + "something no field says",
    ]
    assert placed_problems(problems, "export") == [
        ("cron", "minute field '61': value 61 out of range 0-59"),
        ("start", "an 'every' schedule needs 'start' (its first slot)"),
        ("timeout", "bad duration '5 parsecs': write it like 90s"),
        ("", problems[4]),
        ("", problems[5]),
    ]


async def test_a_choice_steps_both_ways_and_wraps() -> None:
    class One(App[None]):
        def compose(self) -> ComposeResult:
            yield Choice(("skip", "allow", "queue"), "queue", blank="(default)", id="c")

    app = One()
    async with app.run_test(size=SIZE) as pilot:
        choice = app.query_one(Choice)
        choice.focus()
        assert choice.value == "queue"
        await pilot.press("right")
        assert choice.value == ""  # the blank one, shown as its words
        assert "(default)" in str(choice.render())
        await pilot.press("space", "space")
        assert choice.value == "allow"
        await pilot.press("left", "left", "left")
        assert choice.value == "queue"
