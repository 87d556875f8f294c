"""The schedule simulator (R25): every run of a window, dependency runs and DST warnings
included; pure, then the command line as an operator runs it, the seam over the socket,
and the console's `S` screen."""

from __future__ import annotations

import json
import re
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from textual.widgets import DataTable, Static

from tuisched.domain.errors import ScheduleError, UnknownJobError
from tuisched.domain.model import Config, Outcome
from tuisched.domain.schedule.simulate import COUNT_BUDGET, simulate
from tuisched.domain.views import SimulatedRun
from tuisched.frontends.tui.screens.simulate import (
    DST_STYLE,
    SimulateScreen,
    collapsed,
    row_cells,
)
from tuisched.runtime.configfiles import load_config
from tuisched.runtime.control import LocalScheduler, RemoteControl, socket_path
from tuisched.runtime.runtime import Runtime

from . import preloaded
from .console_fixtures import FIXED, make_app, until
from .runtime_fixtures import write_config

BERLIN = ZoneInfo("Europe/Berlin")
JOBS = """
export: {command: [/bin/true], schedule: {cron: "30 2 * * *"}}
compress: {command: [/bin/true], after: {job: export, delay: 10m}}
upload: {command: [/bin/true], after: {job: compress, on: both, delay: 5m}}
alarm: {command: [/bin/true], after: {job: export, on: failure}}
ticker: {command: [/bin/true], schedule: {cron: "*/30 * * * *"}}
hourly: {command: [/bin/true], schedule: {every: 1 hour, start: 2026-03-01T00:15}}
daily: {command: [/bin/true], schedule: {every: 1 day, start: 2026-03-01T02:30}}
report:
  command: [/bin/true]
  schedule: {cron: "0 6 * * *"}
  requires: [export]
off: {command: [/bin/true], enabled: false, schedule: {cron: "0 * * * *"}}
byhand: {command: [/bin/true], schedule: manual}
"""


@pytest.fixture
def config(tmp_path: Path) -> Config:
    return load_config(write_config(tmp_path, JOBS, settings="timezone: Europe/Berlin"))


def _at(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=BERLIN)  # type: ignore[misc]


def _lines(config: Config, start: datetime, end: datetime, **kwargs: object) -> list[str]:
    found = simulate(config, start, end, **kwargs)  # type: ignore[arg-type]
    return [
        " ".join(filter(None, (run.at.isoformat(), run.job, run.trigger, run.dst)))
        for run in found.runs
    ]


# --- pure ----------------------------------------------------------------------------


def test_spring_forward_moves_fixed_times_and_drops_frequent_ones(config: Config) -> None:
    lines = _lines(config, _at(2026, 3, 29, 1, 0), _at(2026, 3, 29, 3, 20), jobs=["export",
                   "compress", "upload", "ticker", "hourly", "daily"])  # fmt: skip
    assert lines == [
        "2026-03-29T01:00:00+01:00 ticker schedule",
        "2026-03-29T01:15:00+01:00 hourly schedule",
        "2026-03-29T01:30:00+01:00 ticker schedule",
        "2026-03-29T03:00:00+02:00 export schedule "
        "02:30 does not exist on 2026-03-29 (DST starts): runs at 03:00",
        "2026-03-29T03:00:00+02:00 ticker schedule "
        "no slots 02:00-03:00 on 2026-03-29: DST starts, those times do not exist",
        "2026-03-29T03:00:00+02:00 daily schedule "
        "02:30 does not exist on 2026-03-29 (DST starts): runs at 03:00",
        "2026-03-29T03:10:00+02:00 compress dependency",
        "2026-03-29T03:15:00+02:00 upload dependency",  # one instant: the file's order
        "2026-03-29T03:15:00+02:00 hourly schedule",  # elapsed hours: no gap to fall in
    ]


def test_fall_back_runs_fixed_times_once_and_frequent_ones_twice(config: Config) -> None:
    lines = _lines(config, _at(2026, 10, 25, 2, 0), _at(2026, 10, 25, 3, 0), jobs=["export",
                   "ticker", "hourly"])  # fmt: skip
    twice = "happens twice on 2026-10-25 (DST ends)"
    assert lines == [
        f"2026-10-25T02:00:00+02:00 ticker schedule 02:00 {twice}: this is the first",
        f"2026-10-25T02:15:00+02:00 hourly schedule 02:15 {twice}: this is the first",
        f"2026-10-25T02:30:00+02:00 export schedule 02:30 {twice}: runs once, at the first",
        f"2026-10-25T02:30:00+02:00 ticker schedule 02:30 {twice}: this is the first",
        f"2026-10-25T02:00:00+01:00 ticker schedule 02:00 {twice}: this is the second",
        f"2026-10-25T02:15:00+01:00 hourly schedule 02:15 {twice}: this is the second",
        f"2026-10-25T02:30:00+01:00 ticker schedule 02:30 {twice}: this is the second",
    ]


def test_after_chains_follow_the_assumed_outcome_with_their_delays(config: Config) -> None:
    window = (_at(2026, 5, 7, 0, 0), _at(2026, 5, 8, 0, 0))
    chain = ["export", "compress", "upload", "alarm"]
    ok = simulate(config, *window, jobs=chain)
    assert [(r.at.strftime("%H:%M"), r.job, r.upstream) for r in ok.runs] == [
        ("02:30", "export", ""),
        ("02:40", "compress", "export"),
        ("02:45", "upload", "compress"),
    ]
    assert ok.runs[1].note == "after 'export' succeeds (+10m), assumed"
    assert ok.assumptions[0] == "every run succeeds"
    failing = simulate(config, *window, jobs=chain, outcome=Outcome.FAILURE)
    assert [(r.at.strftime("%H:%M"), r.job) for r in failing.runs] == [
        ("02:30", "export"),
        ("02:30", "alarm"),
    ]
    assert failing.assumptions[0] == "every run fails"


def test_a_dependant_in_the_window_of_an_upstream_before_it_is_listed(config: Config) -> None:
    """export runs at 02:30, before the window: its dependants at 02:40 and 02:45 are in it."""
    found = simulate(config, _at(2026, 5, 7, 2, 35), _at(2026, 5, 7, 3, 0), jobs=["upload"])
    assert [(r.at.strftime("%H:%M"), r.job, r.trigger) for r in found.runs] == [
        ("02:45", "upload", "dependency")
    ]


def test_requires_and_pauses_are_noted_disabled_and_manual_jobs_have_no_runs(
    config: Config,
) -> None:
    found = simulate(
        config, _at(2026, 5, 7, 5, 0), _at(2026, 5, 7, 7, 0), jobs=["report", "off", "byhand"],
        paused=["report"],
    )  # fmt: skip
    (run,) = found.runs
    assert run.job == "report"
    assert run.note == (
        "needs export's 2026-05-07T02:30:00+02:00 run; paused now: will not run unless resumed"
    )


def test_the_limit_lists_the_first_runs_and_counts_the_rest(config: Config) -> None:
    found = simulate(config, _at(2026, 5, 7, 0, 0), _at(2026, 5, 8, 0, 0), jobs=["ticker"], limit=5)
    assert [r.at.strftime("%H:%M") for r in found.runs] == [
        "00:00",
        "00:30",
        "01:00",
        "01:30",
        "02:00",
    ]
    assert (found.left_out, found.counted_all, found.limit) == (43, True, 5)


def test_counting_past_the_limit_stops_at_its_budget(tmp_path: Path) -> None:
    """Every second for a year is 31 million runs: listed up to the limit, counted up to the
    budget, then "at least" (no hang, no memory for the runs left out)."""
    path = write_config(tmp_path, "s: {command: [/bin/true], schedule: {cron: '* * * * * *'}}")
    found = simulate(load_config(path), FIXED, FIXED + timedelta(days=365), limit=10)
    assert (len(found.runs), found.left_out, found.counted_all) == (10, COUNT_BUDGET, False)


@pytest.mark.parametrize(
    ("start", "end", "message"),
    [
        (FIXED, FIXED, "ends .* before it starts"),
        (FIXED, FIXED + timedelta(days=400), "400 days long; at most 366"),
        (FIXED.replace(tzinfo=None), FIXED, "must carry a time zone"),
    ],
)
def test_a_bad_window_is_refused(
    config: Config, start: datetime, end: datetime, message: str
) -> None:
    with pytest.raises(ScheduleError, match=message):
        simulate(config, start, end)


def test_an_unknown_job_or_limit_is_refused(config: Config) -> None:
    with pytest.raises(UnknownJobError):
        simulate(config, FIXED, FIXED + timedelta(hours=1), jobs=["nope"])
    with pytest.raises(ScheduleError, match="limit must be 1 to"):
        simulate(config, FIXED, FIXED + timedelta(hours=1), limit=0)


# --- the command line ---------------------------------------------------------------------


def _tuisched(*args: str) -> subprocess.CompletedProcess[str]:
    return preloaded.run(args)


def test_the_command_lists_runs_as_lines_and_as_json(tmp_path: Path) -> None:
    path = str(write_config(tmp_path, JOBS, settings="timezone: Europe/Berlin"))
    window = ("--from", "2026-03-29T02:00", "--to", "2026-03-29T03:12")
    done = _tuisched("simulate", "-c", path, *window, "export", "compress")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "2026-03-29T03:00:00+02:00  export    schedule    "
        "DST: 02:30 does not exist on 2026-03-29 (DST starts): runs at 03:00",
        "2026-03-29T03:10:00+02:00  compress  dependency  after 'export' succeeds (+10m), assumed",
    ]
    assert "assuming every run succeeds" in done.stderr
    done = _tuisched("simulate", "-c", path, *window, "--json", "--assume", "failure")
    assert done.returncode == 0, done.stderr
    runs = json.loads(done.stdout)
    assert [(r["job"], r["trigger"], r["upstream"]) for r in runs] == [
        ("export", "schedule", None),
        ("alarm", "dependency", "export"),
        ("ticker", "schedule", None),
        ("daily", "schedule", None),
    ]
    assert runs[0]["at"] == "2026-03-29T03:00:00+02:00"
    assert runs[0]["dst"].startswith("02:30 does not exist")
    assert runs[1]["dst"] is None


def test_the_text_columns_line_up_with_names_of_any_length_and_dst_warnings(
    tmp_path: Path,
) -> None:
    """As `column -t` would: each column starts where it starts on every line (issue 27)."""
    jobs = JOBS + 'a-much-longer-job-name: {command: [/bin/true], schedule: {cron: "0 3 * * *"}}\n'
    path = str(write_config(tmp_path, jobs, settings="timezone: Europe/Berlin"))
    window = ("--from", "2026-03-29T01:50", "--to", "2026-03-29T06:01")
    done = _tuisched("simulate", "-c", path, *window)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert any("DST: " in line for line in lines)
    assert any(" after 'export' " in line for line in lines)
    found = [re.match(r"(\S+ +)(\S+ +)(\S+)( +(\S))?", line) for line in lines]
    assert all(found), lines
    longest = len("a-much-longer-job-name")
    assert {match.start(2) for match in found if match} == {27}, lines
    assert {match.start(3) for match in found if match} == {27 + longest + 2}, lines
    last = {match.start(5) for match in found if match and match.group(5)}
    assert last == {27 + longest + 2 + len("dependency") + 2}, lines
    assert all(line == line.rstrip() for line in lines)


def test_the_command_says_what_the_limit_left_out(tmp_path: Path) -> None:
    path = str(write_config(tmp_path, JOBS, settings="timezone: Europe/Berlin"))
    done = _tuisched("simulate", "-c", path, "--from", "2026-05-07", "--to", "2026-05-08",
                     "--limit", "3", "ticker")  # fmt: skip
    assert done.returncode == 0
    assert len(done.stdout.splitlines()) == 3
    assert "3 runs listed; 45 more left out by the limit" in done.stderr


@pytest.mark.parametrize(
    ("args", "status", "message"),
    [
        (("--from", "yesterday"), 2, "--from: bad date-time 'yesterday'"),
        (("--from", "2026-01-01", "--to", "2027-06-01"), 2, "at most 366"),
        (("--from", "2026-01-02", "--to", "2026-01-01"), 2, "before it starts"),
        (("--limit", "0"), 2, "the limit must be 1 to"),
        (("exprot",), 1, "did you mean 'export'"),
    ],
)
def test_bad_input_gets_one_line_and_an_exit_status(
    tmp_path: Path, args: tuple[str, ...], status: int, message: str
) -> None:
    path = str(write_config(tmp_path, JOBS))
    done = _tuisched("simulate", "-c", path, *args)
    assert done.returncode == status
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert message in line
    assert "Traceback" not in done.stderr


def test_a_bad_configuration_exits_78(tmp_path: Path) -> None:
    path = tmp_path / "tuisched.yaml"
    path.write_text("jobs: {a: {command: x}}\n")
    assert _tuisched("simulate", "-c", str(path)).returncode == 78


# --- the seam and the console -------------------------------------------------------------


async def test_an_attached_client_gets_the_same_simulation(tmp_path: Path) -> None:
    path = write_config(tmp_path, JOBS, settings="timezone: Europe/Berlin")
    scheduler = LocalScheduler(Runtime(load_config(path), kill_grace=0.5))
    await scheduler.start()
    remote = RemoteControl(socket_path(tmp_path / "state"), client="test")
    window = (_at(2026, 3, 29, 0, 0), _at(2026, 3, 30, 0, 0))
    try:
        await remote.connect()
        here = await scheduler.control("test").simulate(*window, jobs=("export",))
        there = await remote.simulate(*window, jobs=("export",))
        assert there == here
        assert there.runs[0].dst.startswith("02:30 does not exist")
        with pytest.raises(ScheduleError, match="at most 366"):
            await remote.simulate(window[0], window[0] + timedelta(days=999))
    finally:
        await remote.close()
        await scheduler.stop(grace=1)


async def test_s_shows_the_next_day_and_moves_a_day_at_a_time(tmp_path: Path) -> None:
    app, _ = make_app(write_config(tmp_path, JOBS, settings="timezone: Europe/Berlin"))
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.ready and bool(app.state.jobs))
        await pilot.press("S")
        await until(pilot, lambda: isinstance(app.screen, SimulateScreen))
        screen = app.screen
        assert isinstance(screen, SimulateScreen)
        await until(pilot, lambda: screen.simulation is not None)
        assert screen.simulation is not None
        first = screen.simulation.runs[0]
        assert (first.job, first.at) == ("hourly", _at(2026, 5, 7, 11, 15))  # FIXED is 11:10 here
        assert screen.simulation.start == FIXED
        await pilot.press("n")
        await until(
            pilot, lambda: screen.simulation is not None and screen.simulation.start != FIXED
        )
        assert screen.simulation.start == FIXED + timedelta(days=1)
        await pilot.press("p", "p")
        await until(pilot, lambda: screen.simulation.start == FIXED - timedelta(days=1))
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, SimulateScreen))


async def test_the_filter_narrows_the_jobs_and_dst_rows_stand_out(tmp_path: Path) -> None:
    app, _ = make_app(write_config(tmp_path, JOBS, settings="timezone: Europe/Berlin"))
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.ready and bool(app.state.jobs))
        await pilot.press("slash", *"export", "enter")
        await pilot.press("S")
        await until(pilot, lambda: isinstance(app.screen, SimulateScreen))
        screen = app.screen
        assert isinstance(screen, SimulateScreen)
        await until(pilot, lambda: screen.simulation is not None)
        assert screen.simulation is not None
        assert {run.job for run in screen.simulation.runs} == {"export"}
        await pilot.press("escape")
        # The day DST starts, in a screen of its own whose clock says so.
        spring = SimulateScreen(
            app.control, clock=lambda: _at(2026, 3, 29, 0, 0), tz=BERLIN, jobs=("export", "ticker")
        )
        await app.push_screen(spring)
        await until(pilot, lambda: spring.simulation is not None)
        table = spring.query_one(DataTable)
        marked = [
            str(table.get_row_at(row)[3])
            for row in range(table.row_count)
            if table.get_row_at(row)[0].style == DST_STYLE
        ]
        assert marked == [
            "DST: 02:30 does not exist on 2026-03-29 (DST starts): runs at 03:00",
            "DST: no slots 02:00-03:00 on 2026-03-29: DST starts, those times do not exist",
        ]


# --- issue 28: seconds, and a job's frequent repeats on one row -----------------------------

FREQUENT = """
tick:
  command: [/bin/true]
  schedule: {every: 10s, start: 2026-05-07T10:00, stop: 2026-05-07T10:59:50}
fast: {command: [/bin/true], schedule: {every: 5s, start: 2026-01-01T00:00}}
hourly: {command: [/bin/true], schedule: {every: 1 hour, start: 2026-01-01T00:15}}
"""


def _run(job: str, at: datetime, **kwargs: str) -> SimulatedRun:
    return SimulatedRun(at=at, job=job, trigger="schedule", **kwargs)


def test_a_jobs_runs_repeating_within_an_hour_fold_into_one_row() -> None:
    start = datetime(2026, 5, 7, 7, 0, tzinfo=UTC)
    ticks = [_run("tick", start + timedelta(seconds=10 * n)) for n in range(360)]
    daily = _run("daily", start + timedelta(minutes=30))
    twice = [_run("twice", start + timedelta(minutes=m)) for m in (5, 20)]
    dst = _run("tick", start + timedelta(hours=1), dst="02:30 does not exist")
    runs = sorted([*ticks, daily, *twice, dst], key=lambda run: run.at)
    rows = collapsed(runs)
    assert [(row.run.job, row.count) for row in rows] == [
        ("tick", 360), ("twice", 1), ("twice", 1), ("daily", 1), ("tick", 1),
    ]  # fmt: skip
    cells = [str(cell) for cell in row_cells(rows[0], seconds=True)]
    assert cells[0] == "2026-05-07 07:00:00 +00:00"
    assert cells[3] == "360 runs, every 10s to 07:59:50"
    assert rows[-1].run.dst  # a DST run stands on a row of its own, marked


async def test_s_shows_seconds_and_one_row_for_a_frequent_job(tmp_path: Path) -> None:
    app, _ = make_app(write_config(tmp_path, FREQUENT))
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.ready and bool(app.state.jobs))
        await pilot.press("S")
        await until(pilot, lambda: isinstance(app.screen, SimulateScreen))
        screen = app.screen
        assert isinstance(screen, SimulateScreen)
        await until(pilot, lambda: screen.simulation is not None)
        assert screen.simulation is not None
        assert len(screen.simulation.runs) == 17_280 + 360 + 24  # a day: none left out
        table = screen.query_one(DataTable)
        rows = [[str(cell) for cell in table.get_row_at(row)] for row in range(table.row_count)]
        note = str(screen.query_one("#sim-note", Static).render())
    assert table.row_count == 1 + 1 + 24
    assert rows[0] == ["2026-05-07 09:10:00 +00:00", "fast", "schedule",
                       "17280 runs, every 5s to 05-08 09:09:55"]  # fmt: skip
    tick = next(row for row in rows if row[1] == "tick")
    assert tick[::3] == ["2026-05-07 10:00:00 +00:00", "360 runs, every 10s to 10:59:50"]
    assert [row[0] for row in rows if row[1] == "hourly"][:2] == [
        "2026-05-07 09:15:00 +00:00", "2026-05-07 10:15:00 +00:00",
    ]  # fmt: skip
    assert "left out" not in note
