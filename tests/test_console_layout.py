"""80x24 is the design size (issue 28): how many job rows fit, which columns show, and
that no cell is cut mid-word, at 80x24 and 60x20 with the console hosting the scheduler."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.app import App, ComposeResult
from textual.pilot import Pilot

from tuisched.frontends.tui.app import TuischedApp
from tuisched.frontends.tui.screens.dialogs import LeaveScreen, QuitScreen
from tuisched.frontends.tui.view import (
    ELLIPSIS,
    RunRow,
    fit,
    group_forms,
    lead_forms,
    schedule_forms,
)
from tuisched.frontends.tui.widgets.audit import AuditPane
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


def _visible_rows(app: TuischedApp) -> list[str]:
    """The job names at the start of the lines on screen, as a person reads them."""
    names = set(app.query_one(JobsTable).index.shown())
    lines = screen_text(app).splitlines()
    words = (line.lstrip("│* ").split(" ", maxsplit=1)[0] for line in lines)
    return [word for word in words if word in names]


async def _with_a_run(pilot: Pilot[int], app: TuischedApp) -> JobsTable:
    """The console started, and `long` running with its PID known."""
    table = app.query_one(JobsTable)
    await until(pilot, lambda: app.ready and table.row_count == 31)
    await on_lane(app, lambda rt: rt.actions.run_now("long"))
    state = app.state
    await until(pilot, lambda: any(status.run.pid for status in state.runs))
    await until(pilot, lambda: app.query_one(RunningTable).row_count == 1)
    await pilot.pause()
    return table


def _shortened_from(shown: str, full: str, forms: list[str]) -> bool:
    """Whether `shown` is `full`, one of its defined short forms, or the last form's first
    whole words and `…`: never a word cut."""
    if shown in forms:
        return True
    words = shown.removesuffix(ELLIPSIS).split()
    return shown.endswith(ELLIPSIS) and forms[-1].split()[: len(words)] == words


# --- 80x24 -------------------------------------------------------------------------------


async def test_80x24_shows_twelve_job_rows_with_a_run_showing(config: Path) -> None:
    app, _runtime = make_app(config)
    async with app.run_test(size=(80, 24)) as pilot:
        await _with_a_run(pilot, app)
        assert len(_visible_rows(app)) >= 12  # 6 when panes were boxes and scrolled sideways
        await on_lane(app, lambda rt: rt.actions.run_now("check-it"))  # a line in the audit log
        audit = app.query_one(AuditPane)
        await until(pilot, lambda: audit.line_count > 0 and audit.size.height >= 2)
        await pilot.pause()
        assert len(_visible_rows(app)) >= 12
        assert audit.size.height >= 2  # and the audit log shows two lines


async def test_80x24_cells_fit_whole_or_in_a_short_form(config: Path) -> None:
    app, _runtime = make_app(config)
    async with app.run_test(size=(80, 24)) as pilot:
        table = await _with_a_run(pilot, app)
        text = screen_text(app)
        header = text.splitlines()[2]
        for heading in ("Job", "State", "Next run", "Last", "Schedule"):
            assert f" {heading} " in header
        assert header.rstrip().endswith(">")  # Kind and Groups wait to the right
        forms = {"schedule": schedule_forms, "next_run": lead_forms, "state": lead_forms}
        seen = set()
        for name in _visible_rows(app):
            cells = table.shown_cells(name)
            line = next(line for line in text.splitlines() if line[1:].startswith(name + " "))
            for key, shown in cells.items():
                assert f" {shown} " in f"{line} ", (name, key, shown)  # drawn as worked out
                full = table.get_cell(name, key)
                assert _shortened_from(shown, full, forms.get(key, lambda t: [t])(full))
                seen.add(shown)
        assert {"every 10 minutes", "after 'check-it'", "at 05:00 on Mon-Fri"} <= seen


async def test_sideways_the_job_column_stays_and_caret_goes_back(config: Path) -> None:
    app, _runtime = make_app(config)
    async with app.run_test(size=(80, 24)) as pilot:
        await _with_a_run(pilot, app)
        table = app.query_one(JobsTable)
        await pilot.press("down", "down", "right", "right")
        header = screen_text(app).splitlines()[2].split()
        assert header[:2] == ["Job", "<Last"]  # the name stays; columns went to the left
        assert header[-2:] == ["Kind", "Groups"]
        assert "job-01" in _visible_rows(app)
        await pilot.press("dollar_sign", "right", "right")  # no further than the last column
        assert screen_text(app).splitlines()[2].split()[-1] == "Groups"
        await pilot.press("home")  # as in htop: the first job; the columns stay
        assert table.cursor_row == 0
        assert screen_text(app).splitlines()[2].split()[-1] == "Groups"
        await pilot.press("circumflex_accent")  # as in htop: back to the first column
        assert screen_text(app).splitlines()[2].split()[:2] == ["Job", "State"]


async def test_80x24_running_pane_shows_run_id_and_pid_and_no_node_on_one_node(
    config: Path,
) -> None:
    app, _runtime = make_app(config)
    async with app.run_test(size=(80, 24)) as pilot:
        await _with_a_run(pilot, app)
        run = app.state.runs[0].run
        lines = screen_text(app).splitlines()
        at = next(i for i, line in enumerate(lines) if "2 Running" in line)
        assert lines[at + 1].split() == [
            "Job",
            "Run",
            "PID",
            "Started",
            "Elapsed",
            "Last",
            "output",
        ]
        assert lines[at + 2].split()[:3] == ["long", run.run_id, str(run.pid)]


async def test_80x24_history_shows_duration_and_status(config: Path) -> None:
    app, _runtime = make_app(config)
    async with app.run_test(size=(80, 24)) as pilot:
        table = app.query_one(JobsTable)
        await until(pilot, lambda: app.ready and table.row_count == 31)
        await on_lane(app, lambda rt: rt.actions.run_now("check-it"))
        await until(pilot, lambda: app.state.jobs["check-it"].last is not None)
        table.move_cursor(row=table.get_row_index("check-it"))
        await pilot.press("enter", "h")
        await until(pilot, lambda: "completed" in screen_text(app))
        header = next(line for line in screen_text(app).splitlines() if "Started" in line)
        assert header.split()[:5] == ["Started", "Duration", "State", "Result", "Status"]


# --- 60x20 -------------------------------------------------------------------------------


async def test_60x20_lists_several_jobs_and_buttons_fit(config: Path) -> None:
    app, _runtime = make_app(config)
    async with app.run_test(size=(60, 20)) as pilot:
        await _with_a_run(pilot, app)
        assert len(_visible_rows(app)) >= 8  # 3 before
        header = screen_text(app).splitlines()[2]
        assert header.split()[:5] == ["Job", "State", "Next", "run", "Last"]
        await pilot.press("enter")  # the detail's legend: whole words
        await until(pilot, lambda: "o Output" in screen_text(app).splitlines()[-1])
        assert "s Stop " in screen_text(app).splitlines()[-1]
        await pilot.press("escape", "q")
        await until(pilot, lambda: isinstance(app.screen, LeaveScreen | QuitScreen))
        text = screen_text(app)
        for label in ("Stay (esc)", "Detach (d)", "Stop the scheduler (s)"):
            assert label in text


# --- short forms -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("full", "short"),
    [
        ("every 10 minutes from 2026-06-01 08:20", "every 10m"),
        ("after 'check' succeeds (+10s)", "after 'check'"),
        ("at 05:00 on Monday-Friday (cron 0 5 * * 1-5)", "at 05:00 on Mon-Fri"),
        ("every day from 2020-01-01 06:00 until 2020-02-01 06:00", "every day"),
        ("after 'check' fails", "after 'check' fails"),
    ],
)
def test_a_schedule_has_meaningful_short_forms(full: str, short: str) -> None:
    assert schedule_forms(full)[0] == full
    assert schedule_forms(full)[-1] == short
    assert fit(schedule_forms(full), len(short)) == short


@pytest.mark.parametrize("width", range(1, 40))
def test_fit_never_cuts_a_word(width: int) -> None:
    for full, forms in (
        ("cron */7 3-5 * * 1,3,5", schedule_forms("cron */7 3-5 * * 1,3,5")),
        ("in 2h05m (Fri 09:30)", lead_forms("in 2h05m (Fri 09:30)")),
        ("nightly, backups, db", group_forms("nightly, backups, db")),
    ):
        shown = fit(forms, width)
        assert len(shown) <= width
        assert _shortened_from(shown, full, forms), (shown, width)


async def test_the_node_column_shows_in_cluster_mode_only() -> None:
    class Panes(App[None]):
        def compose(self) -> ComposeResult:
            yield RunningTable(id="running")

    row = RunRow(
        job="long", run_id="0123456789ab", pid="4242", started="09:10:00", elapsed="5s",
        trigger="manual", last_line="copying", node="vm:4242:abcd",
    )  # fmt: skip
    async with Panes().run_test(size=(100, 10)) as pilot:
        table = pilot.app.query_one(RunningTable)
        table.show([row])
        await pilot.pause()
        assert "node" not in [column.key for column, _ in table.fitted]
        table.show([row], nodes=True)
        await pilot.pause()
        assert "node" in [column.key for column, _ in table.fitted]
        assert str(table.get_cell("0123456789ab", "node")) == "vm:4242:abcd"
