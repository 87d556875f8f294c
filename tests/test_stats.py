"""History stats (`tuisched stats`, the control seam's `stats`, the detail view's block) and
the window and state filters of `tuisched history`: pure, on SQLite and PostgreSQL, through
the socket, end to end as subprocesses, and in the console at 80x24."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from rich.text import Text
from textual.widgets import Static

from tuisched.domain.errors import TuischedError
from tuisched.domain.runs import Result, RunRecord, RunState, Trigger
from tuisched.domain.stats import job_stats, parse_instant, percentile, row_of, stats_of_runs
from tuisched.domain.views import HistoryStats, JobStats, StatsQuery
from tuisched.domain.wire import decode, encode
from tuisched.frontends.tui.screens.detail import JobDetailScreen, stats_block
from tuisched.frontends.tui.widgets.jobs import JobsTable
from tuisched.runtime.cluster.database import ClusterDatabase
from tuisched.runtime.configfiles import load_config
from tuisched.runtime.control import LocalScheduler, RemoteControl, socket_path
from tuisched.runtime.runtime import Runtime
from tuisched.runtime.store import HistoryStore, prepare_state_dir
from tuisched.runtime.store.stats import read_stats

from . import preloaded
from .conftest import REPO
from .console_fixtures import make_app, until
from .pg_fixtures import PASSWORD, PostgresServer
from .runtime_fixtures import write_config

NOW = datetime(2026, 5, 7, 9, 10, tzinfo=UTC)
"""The console fixtures' fixed clock too."""
UTC_ZONE = ZoneInfo("UTC")
JOBS = """
backup:
  command: "true"
  schedule: {every: 1 day, start: 2026-01-01T03:00}
report:
  command: "true"
  schedule: manual
"""


def run(
    run_id: str, *, hours_ago: float, took: float, job: str = "backup", **changes: object
) -> RunRecord:
    """A SUCCESS run of `job` queued `hours_ago` before NOW that took `took` seconds."""
    queued = NOW - timedelta(hours=hours_ago)
    record = RunRecord(
        run_id=run_id, job=job, slot=queued, trigger=Trigger.SCHEDULE, state=RunState.SUCCESS,
        result=Result.COMPLETED, queued_at=queued, started_at=queued,
        ended_at=queued + timedelta(seconds=took), node="n1",
    )  # fmt: skip
    return replace(record, **changes)  # type: ignore[arg-type]


def sample() -> list[RunRecord]:
    """Within 7 days: backup 4 counted (1 failed), 1 not started; report 1; and one old."""
    return [
        run("b1", hours_ago=1, took=10),
        run("b2", hours_ago=2, took=20),
        run("b3", hours_ago=3, took=300, state=RunState.FAILED, result=Result.TIMED_OUT),
        run("b4", hours_ago=4, took=40),
        run("b5", hours_ago=5, took=0, state=RunState.NOT_STARTED, result=Result.SKIPPED),
        run("r1", hours_ago=6, took=5, job="report", trigger=Trigger.MANUAL),
        run("old", hours_ago=24 * 30, took=9999),
    ]


# --- pure ------------------------------------------------------------------------------------


def test_percentiles_are_nearest_rank() -> None:
    values = [timedelta(seconds=s) for s in range(1, 21)]  # 1..20 s
    assert percentile(values, 0.5) == timedelta(seconds=10)
    assert percentile(values, 0.95) == timedelta(seconds=19)
    assert percentile(values[:1], 0.95) == timedelta(seconds=1)
    assert percentile([], 0.5) is None


def test_job_stats_counts_runs_that_started_and_ended() -> None:
    stats = job_stats("backup", [row_of(r) for r in sample()[:4]])
    assert (stats.runs, stats.successes, stats.failures) == (4, 3, 1)
    assert stats.success_rate == 0.75
    assert stats.p50 == timedelta(seconds=20)
    assert stats.p95 == timedelta(seconds=300)
    assert (stats.slowest_run, stats.slowest) == ("b3", timedelta(seconds=300))
    assert stats.last_failure == "FAILED (timed_out)"
    assert stats.last_failure_at == NOW - timedelta(hours=3) + timedelta(seconds=300)


def test_times_are_iso_or_a_duration_before_now() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    assert parse_instant("7d", NOW, berlin, "--since") == NOW - timedelta(days=7)
    assert parse_instant("1h30m", NOW, berlin, "--since") == NOW - timedelta(minutes=90)
    assert parse_instant("2026-05-01T10:00", NOW, berlin, "--since") == datetime(
        2026, 5, 1, 8, 0, tzinfo=UTC
    )
    assert parse_instant("2026-05-01T10:00+00:00", NOW, berlin, "--x").hour == 10
    for bad in ("yesterday", "7", "", "7x"):
        with pytest.raises(TuischedError, match="--since: bad time"):
            parse_instant(bad, NOW, berlin, "--since")


def test_stats_cross_the_wire_unchanged() -> None:
    found = stats_of_runs(sample(), StatsQuery(since=NOW - timedelta(days=7), slowest=2))
    assert decode(HistoryStats, encode(found)) == found
    assert [r.run_id for r in found.slowest] == ["old", "b3"]  # no window: runs read as given


def test_the_detail_block_says_it_in_two_lines() -> None:
    stats = JobStats(
        job="backup", runs=4, successes=3, failures=1, p50=timedelta(seconds=20),
        p95=timedelta(minutes=5), slowest_run="b3", slowest=timedelta(minutes=5),
        last_failure_at=NOW, last_failure="FAILED (timed_out)",
    )  # fmt: skip
    head, tail = stats_block(stats, UTC_ZONE).splitlines()
    assert head == "last 7 days: 4 runs, 3 ok, 1 failed (75%)  p50 20s  p95 5m00s"
    assert tail == "slowest 5m00s (b3)  last failure 05-07 09:10 FAILED (timed_out)"
    assert stats_block(None, UTC_ZONE) == "last 7 days: no finished runs"


# --- from the database -----------------------------------------------------------------------


@pytest.fixture
def store(tmp_path: Path) -> Iterator[HistoryStore]:
    with HistoryStore.open_sqlite(tmp_path / "history.db") as opened:
        opened.write_many(sample(), [])
        yield opened


def _week(**changes: object) -> StatsQuery:
    return replace(StatsQuery(since=NOW - timedelta(days=7), until=NOW), **changes)  # type: ignore[arg-type]


def test_the_database_filters_the_window_and_the_states(store: HistoryStore) -> None:
    found = read_stats(store, _week())
    assert [(s.job, s.runs, s.failures) for s in found.jobs] == [("backup", 4, 1), ("report", 1, 0)]
    assert read_stats(store, _week(job="report")).jobs[0].runs == 1
    assert read_stats(store, _week(until=NOW - timedelta(hours=2, minutes=30))).jobs[0].runs == 2


def test_the_database_orders_the_slowest_runs(store: HistoryStore) -> None:
    found = read_stats(store, _week(slowest=3))
    assert [r.run_id for r in found.slowest] == ["b3", "b4", "b2"]
    assert read_stats(store, _week()).slowest == ()


def test_postgresql_gives_the_same_stats(postgres: PostgresServer, store: HistoryStore) -> None:
    url = postgres.url(postgres.create_database())
    with HistoryStore.open(url, password=PASSWORD) as pg:
        pg.write_many(sample(), [])
        assert read_stats(pg, _week(slowest=3)) == read_stats(store, _week(slowest=3))


# --- through the control seam ----------------------------------------------------------------


def _seed(folder: Path, runs: list[RunRecord]) -> Path:
    """A configuration in `folder` whose state already holds `runs`."""
    path = write_config(folder, JOBS)
    prepare_state_dir(folder / "state")
    with HistoryStore.open_sqlite(folder / "state" / "history.db") as seeded:
        seeded.write_many(runs, [])
    return path


async def test_an_attached_client_reads_the_same_stats(tmp_path: Path) -> None:
    path = _seed(tmp_path, sample())
    scheduler = LocalScheduler(Runtime(load_config(path), kill_grace=0.5))
    await scheduler.start()
    remote = RemoteControl(socket_path(tmp_path / "state"), client="test")
    try:
        await remote.connect()
        local = await scheduler.control("test").stats(_week(slowest=2))
        assert await remote.stats(_week(slowest=2)) == local
        assert [s.job for s in local.jobs] == ["backup", "report"]
    finally:
        await remote.close()
        await scheduler.stop(grace=1)


# --- the command line ------------------------------------------------------------------------


def _tuisched(path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return preloaded.run([*argv, "-c", str(path)], cwd=REPO)


def _recent(runs: list[RunRecord]) -> list[RunRecord]:
    """`runs` moved so that NOW is the real now (the command line reads the real clock)."""
    shift = datetime.now(UTC) - NOW
    return [
        replace(
            r,
            slot=r.slot and r.slot + shift,
            queued_at=r.queued_at + shift,
            started_at=r.started_at and r.started_at + shift,
            ended_at=r.ended_at and r.ended_at + shift,
        )
        for r in runs
    ]


@pytest.fixture
def seeded(tmp_path: Path) -> Path:
    return _seed(tmp_path, _recent(sample()))


def test_stats_json_over_the_default_week(seeded: Path) -> None:
    done = _tuisched(seeded, "stats", "--json")
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    backup = found["jobs"][0]
    assert backup["job"] == "backup"
    assert (backup["runs"], backup["successes"], backup["failures"]) == (4, 3, 1)
    assert backup["success_rate"] == 0.75
    assert (backup["p50"], backup["p95"]) == (20.0, 300.0)
    assert backup["slowest_run"] == "b3"
    assert backup["last_failure"] == "FAILED (timed_out)"
    assert found["slowest"] == []


def test_last_weeks_slowest_runs_are_one_command(seeded: Path) -> None:
    done = _tuisched(seeded, "stats", "--since", "7d", "--slowest", "2", "--json")
    assert done.returncode == 0, done.stderr
    assert [r["run_id"] for r in json.loads(done.stdout)["slowest"]] == ["b3", "b4"]
    table = _tuisched(seeded, "stats", "--sort", "duration", "--slowest", "1").stdout
    lines = table.splitlines()
    assert lines[1].split()[:4] == ["JOB", "RUNS", "OK", "FAILED"]
    assert lines[2].startswith("backup")
    assert lines[3].startswith("report")
    assert "slowest runs" in table
    assert "b3" in lines[-1]


def test_stats_of_one_job_in_a_window(seeded: Path) -> None:
    done = _tuisched(seeded, "stats", "backup", "--since", "150m", "--json")
    assert [(j["job"], j["runs"]) for j in json.loads(done.stdout)["jobs"]] == [("backup", 2)]


@pytest.mark.parametrize(
    ("argv", "code", "said"),
    [
        (["stats", "--since", "yesterday"], 2, "--since: bad time 'yesterday'"),
        (["stats", "--since", "1d", "--until", "2d"], 2, "must be after --since"),
        (["stats", "--slowest", "0"], 2, "not a count"),
        (["stats", "--sort", "colour"], 2, "invalid choice"),
        (["stats", "backpu"], 1, "no job named 'backpu'"),
        (["history", "--state", "bogus"], 2, "unknown state 'bogus'"),
        (["history", "--trigger", "cron"], 2, "unknown trigger 'cron'"),
        (["history", "--until", "soon"], 2, "--until: bad time 'soon'"),
    ],
)
def test_bad_input_is_one_clear_line(seeded: Path, argv: list[str], code: int, said: str) -> None:
    done = _tuisched(seeded, *argv)
    assert done.returncode == code
    assert said in done.stderr
    assert "Traceback" not in done.stderr


def test_help_describes_stats_with_an_example(seeded: Path) -> None:
    done = _tuisched(seeded, "stats", "--help")
    assert done.returncode == 0
    assert "Example: tuisched stats --since 7d --slowest 10" in " ".join(done.stdout.split())
    history = " ".join(_tuisched(seeded, "history", "--help").stdout.split())
    assert "--since T" in history
    assert "Example: tuisched history" in history


def test_history_filters_by_time_state_and_trigger(seeded: Path) -> None:
    def ids(*argv: str) -> list[str]:
        done = _tuisched(seeded, "history", "--json", *argv)
        assert done.returncode == 0, done.stderr
        return [r["run_id"] for r in json.loads(done.stdout)]

    assert ids("--since", "150m") == ["b1", "b2"]
    assert ids("--since", "7d", "--until", "3h30m") == ["b4", "b5", "r1"]
    assert ids("--state", "failed", "--state", "NOT_STARTED") == ["b3", "b5"]
    assert ids("--trigger", "manual") == ["r1"]
    assert ids("backup", "--since", "2d", "--state", "success") == ["b1", "b2", "b4"]
    assert "old" in ids("-n", "50")


def test_stats_with_no_history_yet(tmp_path: Path) -> None:
    done = _tuisched(write_config(tmp_path, JOBS), "stats")
    assert done.returncode == 0, done.stderr
    assert "no finished runs in this window" in done.stdout


# --- the console ---------------------------------------------------------------------------


async def test_the_history_tab_shows_the_jobs_stats(tmp_path: Path) -> None:
    app, _ = make_app(_seed(tmp_path, sample()))
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.ready)
        table = app.query_one(JobsTable)
        table.focus()
        table.move_cursor(row=table.get_row_index("backup"))
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, JobDetailScreen))
        await pilot.press("h")
        block = app.screen.query_one("#detail-stats", Static)

        def shown() -> str:
            content = block.content
            return content.plain if isinstance(content, Text) else str(content)

        await until(pilot, lambda: "4 runs" in shown())
        assert shown().startswith("last 7 days: 4 runs, 3 ok, 1 failed (75%)  p50 20s")
        assert "slowest 5m00s (b3)" in shown()
        assert block.region.height == 2
        assert block.region.width > 0
        await asyncio.wait_for(pilot.press("escape"), 5)


# --- cluster mode: the shared table ------------------------------------------------------------


CLUSTER_RUNS = [
    ("k1", "success", 10, 0), ("k2", "success", 20, 0), ("k3", "failed", 30, 0),
    ("k4", "success", 99, 30),
]  # fmt: skip
"""(run_id, state, seconds it took, days ago) of backup's runs in the cluster's table."""


async def _cluster_table(url: str) -> None:
    """The cluster's table with backup's runs: 10 s, 20 s, a failed 30 s, and one 30 days old."""
    database = ClusterDatabase(url, password=PASSWORD, node="seed")
    await database.open()
    try:
        async with database.pool.connection() as connection:
            for run_id, state, took, days in CLUSTER_RUNS:
                await connection.execute(
                    "INSERT INTO tuisched_runs (run_id, job, trigger, state, result, status, "
                    "due_at, created_at, started_at, ended_at) VALUES (%(id)s, 'backup', "
                    "'schedule', %(state)s, 'completed', '', now() - %(ago)s, now() - %(ago)s, "
                    "now() - %(ago)s, now() - %(ago)s + %(took)s)",
                    {"id": run_id, "state": state, "took": timedelta(seconds=took),
                     "ago": timedelta(days=days, minutes=5)},
                )  # fmt: skip
    finally:
        await database.close()


def test_cluster_stats_and_filters_read_the_shared_table(
    postgres: PostgresServer, tmp_path: Path
) -> None:
    url = postgres.url(postgres.create_database())
    asyncio.run(_cluster_table(url))
    path = write_config(
        tmp_path, JOBS, settings=f"cluster: {{database: '{url}', password_env: TEST_PG_PASSWORD}}"
    )
    env = {**os.environ, "TEST_PG_PASSWORD": PASSWORD}

    def tuisched(*argv: str) -> object:
        done = subprocess.run(
            [sys.executable, "-m", "tuisched", *argv, "--json", "-c", str(path)], cwd=REPO,
            capture_output=True, text=True, timeout=60, check=False, env=env,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    found = tuisched("stats", "--slowest", "1")
    assert isinstance(found, dict)
    backup = found["jobs"][0]
    assert (backup["runs"], backup["failures"], backup["p50"]) == (3, 1, 20.0)
    assert [run["run_id"] for run in found["slowest"]] == ["k3"]
    assert [r["run_id"] for r in tuisched("history", "--state", "failed")] == ["k3"]  # type: ignore[attr-defined]
    assert len(tuisched("history", "--since", "7d")) == 3  # type: ignore[arg-type]
