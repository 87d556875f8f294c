"""Job threads that take the next queued run themselves (R26): with real threads, a real
run queue and a real history, each test awaits the reports the threads hand the loop."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from tuisched.domain.model import Job, PythonSpec
from tuisched.domain.runs import Result, RunRecord, RunState, Trigger
from tuisched.runtime.clock import SystemClock
from tuisched.runtime.engine.lane import Lane, Report, ThreadRun
from tuisched.runtime.engine.runqueue import RunQueue
from tuisched.runtime.store import AsyncHistory, HistoryStore

from . import engine_jobs

NOW = datetime(2026, 5, 7, 9, 0, tzinfo=UTC)


class Heard:
    """The loop's end of a lane: every report, in order; tests await the ones they expect."""

    def __init__(self) -> None:
        self.reports: list[tuple[Report, str]] = []
        self.changed = asyncio.Event()
        self.lane: Lane | None = None

    def take(self) -> None:
        assert self.lane is not None
        found, more = self.lane.reports(1000)
        self.reports += [(report, run.run.run_id) for report, run in found]
        if more:
            asyncio.get_running_loop().call_soon(self.take)
        self.changed.set()

    async def until(self, report: Report, run_id: str) -> None:
        async with asyncio.timeout(10):
            while (report, run_id) not in self.reports:
                self.changed.clear()
                await self.changed.wait()


@asynccontextmanager
async def lane(tmp_path: Path, *, backlogged: str = "") -> AsyncIterator[tuple[Lane, Heard]]:
    history = AsyncHistory(HistoryStore.open_sqlite(tmp_path / "history.db"))
    history.start()
    heard = Heard()
    made = heard.lane = Lane(
        queue=RunQueue(), history=history, clock=SystemClock(), heard=heard.take,
        backlogged=lambda job: job == backlogged,
    )  # fmt: skip
    try:
        yield made, heard
    finally:
        made.open(accepting=False)
        await history.close()


def queued(run_id: str, job: str = "j") -> RunRecord:
    return RunRecord(
        run_id=run_id, job=job, slot=NOW, trigger=Trigger.SCHEDULE, state=RunState.QUEUED,
        queued_at=NOW,
    )  # fmt: skip


def thread_run(
    run_id: str, call: Callable[[], object], ticket: int = 0, job: str = "j"
) -> ThreadRun:
    return ThreadRun(queued(run_id, job), call, ticket, f"tuisched-job-{run_id}")


def job(name: str, target: str = "noop") -> Job:
    """A python job on a thread whose target is a function of tests.engine_jobs (imported)."""
    kind = PythonSpec(target=f"tests.engine_jobs:{target}", in_thread=True)
    return Job(name=name, kind=kind, schedule=None, timezone=ZoneInfo("UTC"))


async def test_a_thread_takes_the_next_run_itself_and_reports_both_at_once(
    tmp_path: Path,
) -> None:
    """The end of a run and the start of the one its thread takes come in one report: the
    loop never counts the worker free in between (max_workers holds)."""
    engine_jobs.STARTED.clear()
    gate = threading.Event()

    def first() -> None:
        gate.wait(10)
        engine_jobs.STARTED.append("a")

    async with lane(tmp_path) as (made, heard):
        for name in ("c", "b"):  # they leave by name: b first
            made._queue.push(queued(name, job=name), job(name, target=f"record_{name}"), 0)
        made.hand(thread_run("a", first))
        await heard.until(Report.STARTED, "a")
        gate.set()
        await heard.until(Report.ENDED, "c")
    assert engine_jobs.STARTED == ["a", "b", "c"]
    ends = [i for i, (report, _) in enumerate(heard.reports) if report is Report.ENDED]
    # The same thread ran all three: each start came with the end before it.
    assert [heard.reports[i + 1] for i in ends[:2]] == [
        (Report.STARTED, "b"), (Report.STARTED, "c"),
    ]  # fmt: skip


async def test_a_thread_starts_a_run_only_once_its_row_is_in_the_history(
    tmp_path: Path,
) -> None:
    """The guard of a slot: the job finds its own row when it runs."""
    db = tmp_path / "history.db"
    found: list[int] = []

    def look() -> None:
        with sqlite3.connect(db) as connection:
            found.append(connection.execute("SELECT count(*) FROM runs").fetchone()[0])

    history = AsyncHistory(HistoryStore.open_sqlite(db))
    heard = Heard()
    made = heard.lane = Lane(
        queue=RunQueue(), history=history, clock=SystemClock(), heard=heard.take,
        backlogged=lambda _: False,
    )  # fmt: skip
    ticket = history.insert_soon(queued("r"))  # the writer is not started yet
    made.hand(thread_run("r", look, ticket))
    await heard.until(Report.TAKEN, "r")
    assert (Report.STARTED, "r") not in heard.reports
    history.start()
    await heard.until(Report.ENDED, "r")
    await history.close()
    assert found == [1]


async def test_a_run_stopped_after_its_thread_took_it_does_not_start(tmp_path: Path) -> None:
    ran: list[str] = []
    async with lane(tmp_path) as (made, heard):
        late = made._history.insert_soon(queued("x")) + 1_000_000  # lands only after a wait
        waiting = thread_run("b", lambda: ran.append("b"), late)
        made.hand(waiting)
        await heard.until(Report.TAKEN, "b")
        assert made.stop(waiting, Result.STOPPED, kill=False)
        await heard.until(Report.ENDED, "b")
    assert ran == []
    assert (Report.STARTED, "b") not in heard.reports
    assert waiting.started is None  # what the loop closes as NOT_STARTED


async def test_a_thread_given_up_on_takes_nothing_next(tmp_path: Path) -> None:
    gate = threading.Event()
    async with lane(tmp_path) as (made, heard):
        stuck = thread_run("stuck", lambda: gate.wait(10))
        made._queue.push(queued("next", job="n"), job("n"), 0)
        made.hand(stuck)
        await heard.until(Report.STARTED, "stuck")
        assert made.abandon(stuck)
        gate.set()
        await heard.until(Report.ENDED, "stuck")
        assert made._queue.pop() is not None  # still queued: its worker is the loop's to give
    assert not made.abandon(stuck)  # the thread is through with it


async def test_a_job_with_runs_backlogged_leaves_the_next_run_to_the_loop(
    tmp_path: Path,
) -> None:
    """`overlap: queue`: the backlogged run may come before the queue's head."""
    async with lane(tmp_path, backlogged="a") as (made, heard):
        made._queue.push(queued("next", job="n"), job("n"), 0)
        made.hand(thread_run("a1", lambda: None, job="a"))
        await heard.until(Report.ENDED, "a1")
        assert len(made._queue) == 1


async def test_a_lowered_max_workers_makes_threads_give_their_workers_back(
    tmp_path: Path,
) -> None:
    """A reload that lowers `max_workers`: a thread at its run's end hands its worker back
    to the loop (which counts it against the new limit) instead of passing it on."""
    async with lane(tmp_path) as (made, heard):
        made._queue.push(queued("next", job="n"), job("n"), 0)
        made.shrink(1)
        made.hand(thread_run("a", lambda: None))
        await heard.until(Report.ENDED, "a")
        assert len(made._queue) == 1
        made.hand(thread_run("b", lambda: None))  # given back once: the next one passes on
        await heard.until(Report.ENDED, "next")
