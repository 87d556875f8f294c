"""History retention (`settings.history_retention`): which runs are forgotten, in bounded
batches, with their output files, in the background of a running scheduler; SQLite and
PostgreSQL."""

from __future__ import annotations

import asyncio
import functools
import sqlite3
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tuisched.domain.errors import ConfigError
from tuisched.domain.model import Retention
from tuisched.domain.runs import Result, RunRecord, RunState, Trigger
from tuisched.runtime.clock import ManualClock
from tuisched.runtime.cluster.store import PRUNE_LOCK, ClusterStore
from tuisched.runtime.configfiles import parse_config
from tuisched.runtime.store import AsyncHistory, HistoryStore
from tuisched.runtime.store.retention import (
    PRUNE_EVERY_SECONDS,
    keep_pruning,
    prune_history,
    prune_shared,
    remove_output_files,
)

from .pg_fixtures import PASSWORD, PostgresServer
from .runtime_fixtures import running, write_config

NOW = datetime(2026, 5, 7, 12, 0, tzinfo=UTC)
JOBS = """
backup:
  command: "true"
  schedule: {every: 1 day, start: 2026-01-01T03:00}
"""


def run(run_id: str, *, days_ago: float, job: str = "backup", **changes: object) -> RunRecord:
    """A SUCCESS run of `job` queued `days_ago` days before NOW, one second long."""
    queued = NOW - timedelta(days=days_ago)
    record = RunRecord(
        run_id=run_id, job=job, slot=queued, trigger=Trigger.SCHEDULE, state=RunState.SUCCESS,
        result=Result.COMPLETED, queued_at=queued, started_at=queued,
        ended_at=queued + timedelta(seconds=1), node="n1",
    )  # fmt: skip
    return replace(record, **changes)  # type: ignore[arg-type]


def kept(store: HistoryStore) -> set[str]:
    return {record.run_id for record in store.recent(limit=1000)}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[HistoryStore]:
    with HistoryStore.open_sqlite(tmp_path / "history.db") as opened:
        yield opened


# --- the setting ---------------------------------------------------------------------------


def _settings(tmp_path: Path, retention: str) -> str:
    return write_config(tmp_path, JOBS, settings=f"history_retention: {retention}").read_text()


def test_no_retention_keeps_everything(tmp_path: Path) -> None:
    text = write_config(tmp_path, JOBS).read_text()
    assert parse_config(text, tmp_path / "tuisched.yaml").settings.history_retention is None


def test_retention_reads_days_and_runs_per_job(tmp_path: Path) -> None:
    text = _settings(tmp_path, "{days: 30, runs_per_job: 500}")
    settings = parse_config(text, tmp_path / "tuisched.yaml").settings
    assert settings.history_retention == Retention(days=30, runs_per_job=500)
    text = _settings(tmp_path, "{days: 7}")
    settings = parse_config(text, tmp_path / "tuisched.yaml").settings
    assert settings.history_retention == Retention(days=7)


@pytest.mark.parametrize(
    ("retention", "said"),
    [
        ("{days: 0}", "settings.history_retention.days"),
        ("{runs_per_job: -3}", "settings.history_retention.runs_per_job"),
        ("{dayz: 3}", "days"),
        ("30", "settings.history_retention must be a mapping"),
    ],
)
def test_a_bad_retention_is_rejected_with_its_line(
    tmp_path: Path, retention: str, said: str
) -> None:
    text = _settings(tmp_path, retention)
    with pytest.raises(ConfigError) as caught:
        parse_config(text, tmp_path / "tuisched.yaml")
    problems = [str(problem) for problem in caught.value.problems]
    assert any(said in problem and ":5:" in problem for problem in problems), problems


# --- what is forgotten -----------------------------------------------------------------------


def test_days_forgets_finished_runs_older_than_the_limit(store: HistoryStore) -> None:
    store.write_many([run("old", days_ago=40), run("recent", days_ago=3)], [])
    gone = store.prune(NOW, Retention(days=30), batch=100)
    assert gone == [("backup", "old")]
    assert kept(store) == {"recent"}


def test_unfinished_runs_and_pending_missed_slots_are_never_forgotten(
    store: HistoryStore,
) -> None:
    old = 400
    store.write_many(
        [
            run("queued", days_ago=old, state=RunState.QUEUED, result=None, ended_at=None),
            run("waiting", days_ago=old, state=RunState.WAITING, result=None, ended_at=None),
            run("running", days_ago=old, state=RunState.RUNNING, result=None, ended_at=None),
            run("pending", days_ago=old, state=RunState.MISSED, result=Result.MISSED, status=""),
            run("decided", days_ago=old, state=RunState.MISSED, status="skipped by alice"),
            run("failed", days_ago=old, state=RunState.FAILED),
        ],
        [],
    )
    gone = store.prune(NOW, Retention(days=1, runs_per_job=1), batch=100)
    assert {run_id for _, run_id in gone} == {"decided", "failed"}
    assert kept(store) == {"queued", "waiting", "running", "pending"}


def test_runs_per_job_keeps_each_jobs_newest(store: HistoryStore) -> None:
    store.write_many(
        [run(f"b{i}", days_ago=i) for i in range(5)]
        + [run(f"c{i}", days_ago=i, job="cleanup") for i in range(2)],
        [],
    )
    store.prune(NOW, Retention(runs_per_job=3), batch=100)
    assert kept(store) == {"b0", "b1", "b2", "c0", "c1"}


def test_a_running_run_counts_among_the_newest(store: HistoryStore) -> None:
    now_running = run("live", days_ago=0, state=RunState.RUNNING, result=None, ended_at=None)
    store.write_many([now_running, run("b1", days_ago=1), run("b2", days_ago=2)], [])
    store.prune(NOW, Retention(runs_per_job=2), batch=100)
    assert kept(store) == {"live", "b1"}


def test_each_prune_forgets_one_bounded_batch_oldest_first(store: HistoryStore) -> None:
    store.write_many([run(f"r{i}", days_ago=10 + i) for i in range(5)], [])
    gone = store.prune(NOW, Retention(days=1), batch=2)
    assert [run_id for _, run_id in gone] == ["r4", "r3"]
    assert len(kept(store)) == 3


def test_nothing_to_keep_by_means_nothing_forgotten(store: HistoryStore) -> None:
    store.write_many([run("ancient", days_ago=10_000)], [])
    assert store.prune(NOW, Retention(), batch=100) == []
    assert kept(store) == {"ancient"}


# --- output files, batches, the background pass ------------------------------------------


def _output(folder: Path, job: str, run_id: str) -> Path:
    path = folder / job / f"{run_id}.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("some output\n")
    return path


async def test_pruning_goes_batch_by_batch_and_takes_the_output_files(
    store: HistoryStore, tmp_path: Path
) -> None:
    output = tmp_path / "output"
    store.write_many([run(f"r{i}", days_ago=10 + i) for i in range(7)], [])
    store.write_many([run("fresh", days_ago=0)], [])
    files = {run_id: _output(output, "backup", run_id) for run_id in ("r0", "r6", "fresh")}
    history = AsyncHistory(store)
    history.start()
    try:
        forgotten = await prune_history(history, Retention(days=1), NOW, output, batch=3)
        assert forgotten == 7
        assert await history.call(kept) == {"fresh"}
    finally:
        await history.close()
    assert not files["r0"].exists()
    assert not files["r6"].exists()
    assert files["fresh"].exists()


def test_a_missing_output_file_is_no_error(tmp_path: Path) -> None:
    present = _output(tmp_path, "backup", "here")
    assert remove_output_files(tmp_path, [("backup", "gone"), ("backup", "here")]) == 1
    assert not present.exists()


async def test_the_background_pass_runs_at_start_then_every_hour(
    store: HistoryStore, tmp_path: Path
) -> None:
    clock = ManualClock(NOW)
    store.write_many([run("a", days_ago=2)], [])
    history = AsyncHistory(store)
    history.start()
    passes: asyncio.Queue[int] = asyncio.Queue()
    task = asyncio.create_task(keep_pruning(
        history, lambda: Retention(days=3), clock, tmp_path / "output", passed=passes.put_nowait
    ))  # fmt: skip
    try:
        async with asyncio.timeout(10):
            assert await passes.get() == 0  # at start: 2 days old is kept
            await clock.advance(PRUNE_EVERY_SECONDS)
            assert await passes.get() == 0  # an hour on: still kept
            assert await history.call(kept) == {"a"}
            await clock.advance(3 * 86_400)
            while await passes.get() == 0:  # the first hourly pass past 3 days forgets it
                await clock.advance(PRUNE_EVERY_SECONDS)
        assert await history.call(kept) == set()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await history.close()


async def _until(read: object, wanted: object, within: float = 10) -> None:
    """Await `read()` until it equals `wanted` (the scheduler prunes in its own time)."""
    async with asyncio.timeout(within):
        while await read() != wanted:  # type: ignore[operator]  # noqa: ASYNC110  (a thread's work)
            await asyncio.sleep(0.02)


async def test_a_running_scheduler_forgets_old_runs_and_their_output(tmp_path: Path) -> None:
    path = write_config(tmp_path, JOBS, settings="history_retention: {days: 30}")
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    real_now = datetime.now(UTC)
    with HistoryStore.open_sqlite(state / "history.db") as seed:
        seed.write_many(
            [
                run("old", days_ago=0, queued_at=real_now - timedelta(days=90)),
                run("new", days_ago=0, queued_at=real_now - timedelta(days=1)),
            ],
            [],
        )
    old_output = _output(state / "output", "backup", "old")
    new_output = _output(state / "output", "backup", "new")
    async with running(path) as (runtime, _):
        await _until(lambda: runtime.history.call(kept), {"new"})
    assert not old_output.exists()
    assert new_output.exists()


# --- PostgreSQL ----------------------------------------------------------------------------


def test_postgresql_forgets_the_same_runs(postgres: PostgresServer) -> None:
    url = postgres.url(postgres.create_database())
    with HistoryStore.open(url, password=PASSWORD) as pg:
        pg.write_many(
            [run(f"b{i}", days_ago=10 * i) for i in range(5)]
            + [
                run("pending", days_ago=99, state=RunState.MISSED, status=""),
                run("live", days_ago=99, state=RunState.RUNNING, result=None, ended_at=None),
                run("c0", days_ago=1, job="cleanup"),
            ],
            [],
        )
        first = pg.prune(NOW, Retention(days=25, runs_per_job=2), batch=2)
        rest = pg.prune(NOW, Retention(days=25, runs_per_job=2), batch=2)
        assert [run_id for _, run_id in first + rest] == ["b4", "b3", "b2"]
        assert kept(pg) == {"b0", "b1", "pending", "live", "c0"}


# --- the cluster's shared table ---------------------------------------------------------------


async def _cluster_rows(store: ClusterStore, rows: list[tuple[str, str, str, int]]) -> None:
    """Rows (run_id, job, state, days ago) of the shared table, created that long ago."""
    async with store._db.pool.connection() as connection:
        for run_id, job, state, days in rows:
            await connection.execute(
                "INSERT INTO tuisched_runs (run_id, job, trigger, state, status, due_at, "
                "created_at) VALUES (%s, %s, 'manual', %s, %s, now() - make_interval(days => %s), "
                "now() - make_interval(days => %s))",
                (run_id, job, state, "" if state == "missed" else "done", days, days),
            )


async def test_the_cluster_table_forgets_what_retention_lets_go(
    nodes: list[ClusterStore], tmp_path: Path
) -> None:
    store = nodes[0]
    await _cluster_rows(store, [
        ("old-ok", "backup", "success", 40), ("old-failed", "backup", "failed", 35),
        ("old-due", "backup", "due", 40), ("old-running", "backup", "running", 40),
        ("old-missed", "backup", "missed", 40), ("new", "backup", "success", 1),
        ("c1", "cleanup", "success", 2), ("c2", "cleanup", "success", 3),
    ])  # fmt: skip
    output = tmp_path / "output"
    here = _output(output, "backup", "old-ok")
    now = datetime.now(UTC)
    forgotten = await prune_shared(
        functools.partial(store.prune, batch=1), Retention(days=30, runs_per_job=1), now,
        output, batch=1,
    )  # fmt: skip
    assert forgotten == 3
    left = {str(row[0]) for row in await store.runs()}
    assert left == {"old-due", "old-running", "old-missed", "new", "c1"}
    assert not here.exists()


async def test_one_node_prunes_the_cluster_table_at_a_time(nodes: list[ClusterStore]) -> None:
    first, second, _ = nodes
    await _cluster_rows(first, [("old", "backup", "success", 40)])
    async with first._db.pool.connection() as connection, connection.transaction():
        await connection.execute("SELECT pg_advisory_xact_lock(%s)", (PRUNE_LOCK,))
        assert await second.prune(datetime.now(UTC), None, batch=10) is None
    assert await second.prune(datetime.now(UTC), None, batch=10) == [("backup", "old")]


def test_an_output_file_that_cannot_go_is_left_and_said(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocked = tmp_path / "backup" / "stuck.log"
    blocked.mkdir(parents=True)  # a folder where the file should be: unlink refuses
    assert remove_output_files(tmp_path, [("backup", "stuck")]) == 0
    assert "could not remove the output of run stuck" in caplog.text


def test_a_history_written_before_the_queued_at_index_gets_it_and_retention_walks_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "history.db"
    HistoryStore.open_sqlite(path).close()
    with sqlite3.connect(path) as connection:  # as a file from before the index
        connection.execute("DROP INDEX ix_runs_queued_at")
    HistoryStore.open_sqlite(path).close()
    with sqlite3.connect(path) as connection:
        names = {row[1] for row in connection.execute("PRAGMA index_list(runs)")}
        plan = " ".join(str(row[3]) for row in connection.execute(
            "EXPLAIN QUERY PLAN SELECT job, run_id FROM runs WHERE queued_at < '2026' "
            "ORDER BY queued_at, run_id LIMIT 500"
        ))  # fmt: skip
    assert "ix_runs_queued_at" in names
    assert "USING INDEX ix_runs_queued_at" in plan
    assert "TEMP B-TREE" not in plan  # the oldest first, without sorting the table
