"""A scheduler killed with SIGKILL in the middle of a burst of 10,000 runs, then restarted.

Runs are recorded a turn of the loop at a time (R26). What the history promises must hold
all the same: each job writes its own executions to a file, and the file and the history
must agree. No slot runs twice (a run's row is written before the run starts: the next
start sees the slot taken, even with `misfire: once`); no execution is missing from the
history (its row is there); only the runs that ended in the last moments before the kill
may lack their end (the next start closes them as abandoned); and the slots that never
got a row are recorded as missed and made up once, as `misfire: once` says.
"""

from __future__ import annotations

import collections
import os
import signal
import sqlite3
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ..runtime_fixtures import Scheduler, write_config

JOBS = 10_000
LEAD = timedelta(seconds=10)
"""From writing the configuration to the slot: the scheduler loads 10,000 jobs meanwhile."""
KILL_AFTER = 3_000
"""Executions seen in the file before the kill: well into the burst, far from its end."""
LAST_MOMENTS = 2.0
"""Seconds before the kill in which a run's end may be lost (the turn in progress, and the
history's transaction under way), generous for a loaded machine."""


def _config(folder: Path, slot: datetime) -> Path:
    at = slot.strftime("%Y-%m-%dT%H:%M:%S")
    jobs = "\n".join(
        f'j{i:05d}: {{python: "tests.burst_jobs:j{i:05d}", isolation: thread,'
        f' schedule: {{at: "{at}"}}, misfire: once}}'
        for i in range(JOBS)
    )
    return write_config(folder, jobs)


def _executions(out: Path) -> list[tuple[str, int, float]]:
    """(job, pid, time) of every execution the jobs wrote down."""
    found = []
    for line in out.read_text().splitlines():
        job, pid, at = line.split()
        found.append((job, int(pid), float(at)))
    return found


def _rows(db: Path) -> list[tuple[str, str, str]]:
    """(job, state, trigger) of every run in the history."""
    with sqlite3.connect(db) as connection:
        return list(connection.execute('SELECT job, state, "trigger" FROM runs'))


def _settled(db: Path) -> bool:
    """Every job has a run and no run is in progress (the restart's work is done)."""
    if not db.exists():
        return False
    try:
        rows = _rows(db)
    except sqlite3.OperationalError:  # the scheduler holds a lock this moment
        return False
    going = {"QUEUED", "WAITING", "RUNNING"}
    return len({job for job, _, _ in rows}) == JOBS and not any(s in going for _, s, _ in rows)


def _wait_until(done: object, within: float, what: str) -> None:
    """Poll `done()`: the scheduler is another process, with nothing of ours to await."""
    deadline = time.monotonic() + within
    while not done():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"{what} within {within} s"
        time.sleep(0.005)


@pytest.mark.timeout(300)
def test_a_kill_in_a_burst_loses_no_slot_and_runs_none_twice(
    tmp_path: Path, schedulers: list[Scheduler]
) -> None:
    out = tmp_path / "executions.txt"
    out.touch()
    env = {**os.environ, "TUISCHED_BURST_OUT": str(out)}
    config = _config(tmp_path, datetime.now(UTC).replace(microsecond=0) + LEAD)
    db = tmp_path / "state" / "history.db"

    first = Scheduler(config, env=env)
    schedulers.append(first)

    def burst_under_way() -> bool:
        assert first.process.poll() is None, "the scheduler ended by itself"
        return out.read_bytes().count(b"\n") >= KILL_AFTER

    _wait_until(burst_under_way, LEAD.total_seconds() + 90, "the burst did not get under way")
    first.process.send_signal(signal.SIGKILL)
    killed_at = time.time()
    first.finish()
    at_kill = _executions(out)
    assert KILL_AFTER <= len(at_kill) < JOBS, "the kill must come in the middle of the burst"

    second = Scheduler(config, env=env)
    schedulers.append(second)
    _wait_until(lambda: _settled(db), 120, "the restart did not settle")
    second.process.send_signal(signal.SIGTERM)
    assert second.finish() == 0

    executions = _executions(out)
    rows = _rows(db)
    ran = collections.Counter(job for job, _, _ in executions)
    assert [job for job, count in ran.items() if count > 1] == []  # no slot ran twice

    by_state = collections.defaultdict(set)
    for job, state, trigger in rows:
        by_state[state, trigger].add(job)
    ran_first = {job for job, pid, _ in executions if pid == first.process.pid}
    ran_second = {job for job, pid, _ in executions if pid == second.process.pid}
    succeeded = by_state["SUCCESS", "schedule"]
    abandoned = by_state["ABANDONED", "schedule"]
    # Every run of the first scheduler has its row; its end, but for the last moments.
    assert succeeded <= ran_first
    assert ran_first <= succeeded | abandoned
    lost_ends = {job for job, pid, at in executions if job in ran_first - succeeded}
    late = [at for job, pid, at in executions if job in lost_ends]
    assert all(at >= killed_at - LAST_MOMENTS for at in late), (
        f"{len(late)} ends lost, the oldest {killed_at - min(late):.2f} s before the kill"
    )
    # The rest was decided by the restart: queued runs abandoned, the slots without a row
    # missed and made up once (misfire: once), every job once.
    missed = by_state["MISSED", "schedule"]
    assert missed == ran_second == by_state["SUCCESS", "catchup"]
    assert missed.isdisjoint(ran_first)
    assert len(succeeded | abandoned | missed) == JOBS
