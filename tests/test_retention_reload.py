"""History retention follows reloads (`settings.history_retention`, issue 16): the reload
that sets it starts pruning; the reload that removes it stops pruning, and arms no hourly
pass any more.

A real runtime on a ManualClock: the only one-hour timer of these configurations is
retention's pass (`PRUNE_EVERY_SECONDS`), so `clock.arming(PRUNE_EVERY_SECONDS)` says
that a pass has finished and waits for the next hour, with no sleep on time.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tuisched.domain.model import Retention
from tuisched.domain.runs import Result, RunRecord, RunState, Trigger
from tuisched.runtime.clock import ManualClock
from tuisched.runtime.runtime import Runtime
from tuisched.runtime.store import HistoryStore
from tuisched.runtime.store.retention import PRUNE_EVERY_SECONDS

from .runtime_fixtures import running, write_config

# A job whose slots never come in these tests: the history holds only the seeded runs.
JOBS = """
backup:
  command: "true"
  schedule: {cron: "0 3 29 2 *"}
"""
RETENTION = "history_retention: {days: 30}"
SEEDED = frozenset({"old", "new", "late"})
WITHIN = 10.0
"""Seconds a test waits, at most, for the scheduler's own work (threads, tasks)."""


def _run(run_id: str, queued: datetime) -> RunRecord:
    """A finished SUCCESS run of `backup`, queued at `queued`."""
    return RunRecord(
        run_id=run_id, job="backup", slot=queued, trigger=Trigger.SCHEDULE,
        state=RunState.SUCCESS, result=Result.COMPLETED, queued_at=queued, started_at=queued,
        ended_at=queued + timedelta(seconds=1), node="n1",
    )  # fmt: skip


def _seed(state: Path, now: datetime) -> dict[str, Path]:
    """The history a stopped scheduler left: one run 90 days old, one a day old, each with
    its output file; the files, by run id."""
    state.mkdir(mode=0o700)
    with HistoryStore.open_sqlite(state / "history.db") as seed:
        seed.write_many(
            [_run("old", now - timedelta(days=90)), _run("new", now - timedelta(days=1))], []
        )
    files = {}
    for run_id in ("old", "new"):
        files[run_id] = state / "output" / "backup" / f"{run_id}.log"
        files[run_id].parent.mkdir(parents=True, exist_ok=True)
        files[run_id].write_text("some output\n")
    return files


async def _kept(runtime: Runtime) -> set[str]:
    """The seeded runs the history still holds (a call through its writer thread: after
    any prune queued before it)."""
    records = await runtime.history.call(lambda store: store.recent(limit=1000))
    return {record.run_id for record in records} & SEEDED


async def _reload(runtime: Runtime, path: Path, *, retention: str = "") -> None:
    """Rewrite the configuration file (with `retention`, or without) and reload it."""
    write_config(path.parent, JOBS, settings=retention)
    assert await runtime.actions.reload()
    assert runtime.config.settings.history_retention == (Retention(days=30) if retention else None)


async def test_the_reload_that_sets_retention_prunes_the_old_runs(tmp_path: Path) -> None:
    clock = ManualClock(datetime.now(UTC))
    files = _seed(tmp_path / "state", clock.now())
    path = write_config(tmp_path, JOBS)
    async with running(path, clock=clock) as (runtime, _):
        pass_armed = clock.arming(PRUNE_EVERY_SECONDS)
        await clock.advance(PRUNE_EVERY_SECONDS)  # without retention, no pass comes
        assert await _kept(runtime) == {"old", "new"}
        assert not pass_armed.done()
        await _reload(runtime, path, retention=RETENTION)
        await asyncio.wait_for(pass_armed, WITHIN)  # the first pass is done: the next one waits
        assert await _kept(runtime) == {"new"}
        assert not files["old"].exists()
        assert files["new"].exists()
        # and hourly from then on: a run past the limit that comes later goes at the next pass
        late = _run("late", clock.now() - timedelta(days=31))
        await runtime.history.call(lambda store: store.write_many([late], []))
        next_armed = clock.arming(PRUNE_EVERY_SECONDS)
        await clock.advance(PRUNE_EVERY_SECONDS)
        await asyncio.wait_for(next_armed, WITHIN)
        assert await _kept(runtime) == {"new"}


async def test_the_reload_that_removes_retention_stops_pruning(tmp_path: Path) -> None:
    clock = ManualClock(datetime.now(UTC))
    _seed(tmp_path / "state", clock.now())
    path = write_config(tmp_path, JOBS, settings=RETENTION)
    first_pass = clock.arming(PRUNE_EVERY_SECONDS)
    async with running(path, clock=clock) as (runtime, _):
        await asyncio.wait_for(first_pass, WITHIN)  # the pass at start
        assert await _kept(runtime) == {"new"}
        await _reload(runtime, path)
        late = _run("late", clock.now() - timedelta(days=90))
        await runtime.history.call(lambda store: store.write_many([late], []))
        pass_armed = clock.arming(PRUNE_EVERY_SECONDS)
        await clock.advance(3 * PRUNE_EVERY_SECONDS)  # three hourly passes, were it on
        assert await _kept(runtime) == {"new", "late"}
        assert not pass_armed.done()  # keeping everything arms no hourly pass
        # set again, it starts again
        await _reload(runtime, path, retention=RETENTION)
        await asyncio.wait_for(pass_armed, WITHIN)
        assert await _kept(runtime) == {"new"}
