"""80x24 is the design size (issue 28): how many job rows fit, which columns show, and
that no cell is cut mid-word, at 80x24 and 60x20 with the console hosting the scheduler."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuisched.frontends.tui.screens.dialogs import LeaveScreen, QuitScreen
from tuisched.frontends.tui.view import (
    ELLIPSIS,
    fit,
    group_forms,
    lead_forms,
    schedule_forms,
)
from tuisched.frontends.tui.widgets.jobs import JobsTable
from tuisched.frontends.tui.widgets.running import RunningTable

from .console_fixtures import make_app, on_lane, until
from .runtime_fixtures import write_config
from .snapshots import screen_text

SCHEDULES = (
    "{every: 10 minutes, start: 2026-01-01T06:00}",
    "{cron: '0 5 * * 1-5'}",
    "manual",
    "{every: 1 day, start: 2020-01-01T06:00, stop: 2020-02-01T06:00}",
)


def _jobs(count: int = 30) -> str:
    """`count` jobs of every kind of schedule, one `after` another, and `long`, which runs
    until stopped."""
    lines = ["long: {command: [sleep, '60'], schedule: manual}"]
    for number in range(1, count):
        name = f"job-{number:02d}"
        if number % 5 == 0:
            lines.append(f"{name}: {{command: [/bin/true], after: {{job: check-it, delay: 10s}}}}")
        else:
            schedule = SCHEDULES[number % len(SCHEDULES)]
            lines.append(f"{name}: {{command: [/bin/true], schedule: {schedule}}}")
    lines.append("check-it: {command: [/bin/true], schedule: manual}")
    return "\n".join(lines)


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return _config(tmp_path)


def _config(folder: Path) -> Path:
    path = write_config(folder, _jobs())
    groups = "groups:\n  nightly: {jobs: [long, job-01]}\n  backups: {jobs: [job-01]}\n"
    path.write_text(path.read_text() + groups)
    return path


def _visible_rows(app: object, table: JobsTable) -> list[str]:
    """The job names on screen, read from the screen's text."""
    names = set(table.index.shown())
    shown = []
    for line in screen_text(app).splitlines():  # type: ignore[arg-type]
        words = line[1:].split()
        if words and words[0] in names:
            shown.append(words[0])
    return shown


async def _with_a_run(pilot: object, app: object) -> JobsTable:
    table = app.query_one(JobsTable)  # type: ignore[attr-defined]
    await until(pilot, lambda: app.ready and table.row_count == 31)  # type: ignore[arg-type, attr-defined]
    await on_lane(app, lambda rt: rt.actions.run_now("long"))  # type: ignore[arg-type]
    running = app.query_one(RunningTable)  # type: ignore[attr-defined]
    await until(pilot, lambda: running.row_count == 1 and "-" not in running.get_row_at(0)[2].plain)  # type: ignore[arg-type]
    await pilot.pause()  # type: ignore[attr-defined]
    return table
