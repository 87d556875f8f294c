"""The history and the clock fail; nothing is lost and nothing runs twice.

A history locked by another process keeps the writes in memory while runs go
on; a slot the history holds never runs again, even when the wall clock is
behind it; a run's duration is measured on the monotonic clock.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import tuisched.runtime.store.database
from tuisched.domain.events import RunFinished, RunNotStarted, RunStarted
from tuisched.domain.runs import RunRecord, RunState, Trigger
from tuisched.runtime.clock import ManualClock
from tuisched.runtime.control import LocalControl
from tuisched.runtime.store import HistoryStore

from ..runtime_fixtures import running, write_config

LOCKER = """
import sqlite3, sys
connection = sqlite3.connect(sys.argv[1], isolation_level=None)
connection.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
sys.stdin.readline()
connection.execute("COMMIT")
"""


@contextmanager
def locked_by_another_process(database: Path) -> Iterator[Callable[[], None]]:
    """Hold an exclusive lock on `database` from another process; yield its release."""
    locker = subprocess.Popen(
        [sys.executable, "-c", LOCKER, str(database)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert locker.stdin is not None
    assert locker.stdout is not None
    try:
        assert locker.stdout.readline() == "locked\n"

        def release() -> None:
            assert locker.stdin is not None
            locker.stdin.write("\n")
            locker.stdin.flush()
            locker.wait(10)

        yield release
    finally:
        locker.kill()
        locker.communicate(timeout=10)  # reaps it and closes its pipes


async def _until(condition: Callable[[], bool], within: float = 15) -> None:
    async with asyncio.timeout(within):
        while not condition():  # noqa: ASYNC110  (the writer thread changes it)
            await asyncio.sleep(0.05)


async def test_runs_go_on_while_another_process_holds_the_history_locked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="tuisched.runtime.store")
    # SQLite gives up on a lock after 0.1 s instead of 5 s: the test is short, the path is the same.
    monkeypatch.setattr(tuisched.runtime.store.database, "BUSY_TIMEOUT_MS", 100)
    path = write_config(
        tmp_path,
        """
        a: {command: [/bin/true], schedule: manual}
        b: {command: [/bin/true], schedule: manual, overlap: skip}
        """,
    )
    async with running(path) as (runtime, events):
        with locked_by_another_process(tmp_path / "state" / "history.db") as release:
            for done, name in enumerate(("a", "b", "a", "b"), start=1):
                runtime.actions.run_now(name)  # each starts without waiting for the history
                await events.wait_for(RunFinished, count=done)
            assert runtime.history.unwritten > 0  # kept in memory, in order
            finished = events.of(RunFinished)
            assert [e.run.state for e in finished] == [RunState.SUCCESS] * 4
            assert not [e for e in finished if "still running" in e.run.reason]
            release()
            await _until(lambda: runtime.history.unwritten == 0)
        rows = await runtime.history.call(lambda store: store.recent(limit=10))
    assert sorted(row.job for row in rows) == ["a", "a", "b", "b"]
    assert {row.state for row in rows} == {RunState.SUCCESS}
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len([w for w in warnings if w.startswith("history: cannot write")]) == 1
    assert len([w for w in warnings if w.startswith("history: writing works again")]) == 1


async def test_a_job_every_second_runs_every_slot_while_the_history_is_locked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tuisched.runtime.store.database, "BUSY_TIMEOUT_MS", 100)
    ran = tmp_path / "ran"
    path = write_config(tmp_path, f"""
        tick:
          command: "echo $TUISCHED_SLOT >> {ran}"
          schedule: {{every: 1s, start: "2026-01-01T00:00:00Z"}}
        """)  # fmt: skip
    async with running(path) as (runtime, events):
        await events.wait_for(RunFinished)
        with locked_by_another_process(tmp_path / "state" / "history.db") as release:
            await _until(lambda: runtime.history.in_outage)
            locked = len(events.of(RunFinished))
            await events.wait_for(RunFinished, count=locked + 4, within=20)  # four slots
            release()
            await _until(lambda: runtime.history.unwritten == 0)
        skipped = [e for e in events.of(RunNotStarted) if "still running" in e.run.reason]
    assert skipped == [], [e.run.reason for e in skipped]
    slots = sorted(datetime.fromisoformat(line) for line in ran.read_text().split())
    gaps = [(a, b) for a, b in itertools.pairwise(slots) if (b - a).total_seconds() != 1]
    assert gaps == [], gaps


def _hold_slots(database: Path, job: str, slots: list[datetime]) -> None:
    with HistoryStore.open_sqlite(database) as store:
        for index, slot in enumerate(slots):
            store.insert(
                RunRecord(
                    run_id=f"held{index:04d}", job=job, slot=slot, trigger=Trigger.SCHEDULE,
                    state=RunState.SUCCESS, queued_at=slot, started_at=slot, ended_at=slot,
                )
            )  # fmt: skip


async def test_a_slot_the_history_holds_never_runs_again_when_the_clock_is_behind(
    tmp_path: Path,
) -> None:
    # What a restart with the wall clock set back 30 s looks like: the history holds
    # the slots of the next 30 s already.
    path = write_config(tmp_path, "tick: {command: [/bin/true], schedule: {every: 1s}}")
    text = path.read_text().replace("every: 1s}", "every: 1s, start: 2026-01-01T00:00:00}")
    path.write_text(text)
    (tmp_path / "state").mkdir(mode=0o700)
    now = datetime.now(UTC).replace(microsecond=0)
    held = [now + timedelta(seconds=s) for s in range(-2, 31)]
    _hold_slots(tmp_path / "state" / "history.db", "tick", held)
    async with running(path) as (runtime, _events):
        (status,) = await LocalControl(runtime, actor="test").jobs()
        assert status.next_fire == held[-1] + timedelta(seconds=1)
        await asyncio.sleep(1.5)  # slots that would be due now, were they not held
        rows = await runtime.history.call(lambda store: store.recent(limit=100))
    assert sorted(row.run_id for row in rows) == [f"held{i:04d}" for i in range(len(held))]


async def test_a_duration_is_measured_on_the_monotonic_clock(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    path = write_config(
        tmp_path,
        f"slow: {{command: 'while [ ! -e {gate} ]; do sleep 0.02; done', schedule: manual}}",
    )
    clock = ManualClock(datetime(2026, 5, 7, 9, 10, tzinfo=UTC))
    async with running(path, clock=clock) as (runtime, events):
        runtime.actions.run_now("slow")
        await events.wait_for(RunStarted)
        await clock.advance(5)
        clock.jump(-3600)  # the wall clock is set back an hour while it runs
        gate.touch()
        (finished,) = await events.wait_for(RunFinished)
    assert finished.run.duration == timedelta(seconds=5)
    assert finished.run.started_at is not None
    assert finished.run.ended_at == finished.run.started_at + timedelta(seconds=5)


def test_an_old_record_with_its_end_before_its_start_has_no_negative_duration() -> None:
    start = datetime(2026, 5, 7, 9, 10, tzinfo=UTC)
    record = RunRecord(
        run_id="r", job="j", slot=None, trigger=Trigger.MANUAL, state=RunState.SUCCESS,
        queued_at=start, started_at=start, ended_at=start - timedelta(seconds=30),
    )  # fmt: skip
    assert record.duration == timedelta(0)
