"""Python functions on job threads that start the next queued run themselves (R26).

A python job with `isolation: thread` whose target is a plain function of a
module imported already needs nothing before it runs: no import, no
instance, no process. Such a run gets a `ThreadRun`, and runs on a job
thread; when it ends, its thread takes the next queued run itself if that
one has a `ThreadRun` too. The end of one run and the start of the next do
not both wait for the event loop, which is what makes a pool of threads fast.

The thread stamps each start and end on the clock and reports them; the loop
hears all of a turn's reports at once and records them in one pass
(`running.Workers`). A thread hands its run's worker straight to the run it
takes, so no more than `max_workers` runs ever hold one: the loop counts the
worker under the run it last heard of, and it hears of a run taken (`TAKEN`
or `STARTED`) in the same report as the end of the run before. What a thread
and the loop decide about the same run (taking it, stopping it, giving up on
it) is decided under the run queue's lock.

A run's row still guards its slot: a thread starts a run only once its QUEUED
row is in the history (a slot the history holds never runs again), waiting
ROW_WAIT_SECONDS for it at most, as a run the loop starts does.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType

from tuisched.domain.model import Job, PythonSpec
from tuisched.domain.runs import Result, RunRecord
from tuisched.runtime.clock import Clock, Timer
from tuisched.runtime.engine.runqueue import RunQueue
from tuisched.runtime.execution.python import call_function, function_now, run_on_job_thread
from tuisched.runtime.store import AsyncHistory

log = logging.getLogger(__name__)

ROW_WAIT_SECONDS = 1.0
"""How long a run waits for its row to land before it starts anyway (the history is out)."""


class Report(enum.Enum):
    """What a job thread reports of a run."""

    TAKEN = "taken"
    """It took the run from the queue; it starts once its row is in the history."""
    STARTED = "started"
    ENDED = "ended"
    """It returned, raised, or was not started (stopped while it waited)."""


@dataclass(eq=False, slots=True)
class ThreadRun:
    """A queued run that a job thread can start by itself, and what the thread found.

    The thread writes `started`, `began`, `ended` and `raised` before it
    reports them; `stop`, `kill`, `done` and `abandoned` change under the
    queue's lock only.
    """

    run: RunRecord
    """The run as it was queued."""
    call: Callable[[], object]
    ticket: int
    """The history ticket of its QUEUED row (0: the row was there already)."""
    thread_name: str
    started: datetime | None = None
    began: float = 0.0
    """When it started, on the clock's monotonic scale."""
    ended: float = 0.0
    raised: tuple[str, str] | None = None
    """What the function raised (`Error: message`) and its traceback, if it did."""
    stop: Result | None = None
    """The result a stop asked for (the first one asked wins)."""
    kill: bool = False
    done: bool = False
    """The thread is through with it: ended, or never started."""
    abandoned: bool = False
    """The loop gave up on its thread (it did not stop in time) and closed the run."""


Reports = list[tuple[Report, ThreadRun]]


def thread_run(run: RunRecord, job: Job, ticket: int) -> ThreadRun | None:
    """What a job thread needs to start `run` of `job` by itself, if it can: a python job
    on a thread whose target is a plain function imported already. From any thread."""
    kind = job.kind
    if not isinstance(kind, PythonSpec) or not kind.in_thread:
        return None
    call = function_now(kind.target)
    if call is None:
        return None
    return ThreadRun(run, call, ticket, f"tuisched-job-{job.name}")


class Lane:
    """Job threads that run `ThreadRun`s, take the next one themselves, and report both."""

    def __init__(
        self,
        *,
        queue: RunQueue,
        history: AsyncHistory,
        clock: Clock,
        heard: Callable[[], None],
        backlogged: Callable[[str], bool],
    ) -> None:
        """`heard()` is called on the loop after reports came (take them with `reports()`);
        `backlogged(job)` tells whether runs of `job` wait behind its running one (`overlap:
        queue`): then the next run is the loop's to pick, not the thread's. Call it from
        any thread."""
        self._queue = queue
        self._lock = queue.lock
        self._history = history
        self._clock = clock
        self._heard = heard
        self._backlogged = backlogged
        self._open = True
        self._surplus = 0
        """Workers to give back rather than pass on (`max_workers` was lowered)."""
        self._in_flight: dict[str, ThreadRun] = {}
        """Runs threads took and whose TAKEN or STARTED the loop has not yet taken in."""
        self._reports: deque[tuple[Report, ThreadRun]] = deque()
        self._reports_lock = threading.Lock()
        self._woken = False
        self._loop: asyncio.AbstractEventLoop | None = None

    # --- on the loop ------------------------------------------------------------------

    def open(self, *, accepting: bool) -> None:
        """Let threads take queued runs (or, with `accepting` False, no more)."""
        with self._lock:
            self._open = accepting

    def shrink(self, surplus: int) -> None:
        """`surplus` more runs hold a worker than `max_workers` allows now (a reload lowered
        it): so many threads give their worker back at their run's end instead of passing
        it on."""
        with self._lock:
            self._surplus = max(self._surplus, surplus)

    def hand(self, run: ThreadRun) -> None:
        """Start `run` on a job thread (the loop gave it a worker)."""
        self._loop = asyncio.get_running_loop()
        run_on_job_thread(lambda: self._serve(run), run.thread_name)

    def reports(self, limit: int) -> tuple[Reports, bool]:
        """What the threads reported since the last call, in order, `limit` at most; and
        whether more are left (then call again: the threads do not wake the loop for them)."""
        with self._reports_lock:
            reports = self._reports
            found = [reports.popleft() for _ in range(min(limit, len(reports)))]
            more = self._woken = bool(reports)
        return found, more

    def adopted(self, run: ThreadRun) -> None:
        """The loop has taken in that a thread took `run`: it holds a worker there now."""
        # No lock: the thread added it before reporting it, and one dict operation is atomic.
        self._in_flight.pop(run.run.run_id, None)

    def in_flight(self, run_id: str) -> ThreadRun | None:
        """A run a thread took that the loop has not heard of yet, if `run_id` is one."""
        return self._in_flight.get(run_id)

    def stop(self, run: ThreadRun, result: Result, *, kill: bool) -> bool:
        """Ask `run` to stop: a run not started yet will not start. False when its thread
        is through with it already (its ENDED report is on its way)."""
        with self._lock:
            if run.done:
                return False
            run.stop = run.stop or result
            run.kill = run.kill or kill
            return True

    def abandon(self, run: ThreadRun) -> bool:
        """Give up on `run`'s thread (the run is closed now; the thread, when it returns,
        takes nothing next). False when the thread is through with it already."""
        with self._lock:
            if run.done:
                return False
            run.abandoned = True
            return True

    # --- on a job thread ---------------------------------------------------------------

    def _serve(self, first: ThreadRun) -> None:
        """Run `first`, then each run this thread takes when the one before ends."""
        said: Reports = []
        run: ThreadRun | None = first
        while run is not None:
            if not self._history.landed(run.ticket):
                said.append((Report.TAKEN, run))
                self._report(said)
                said = []
                self._wait_for_row(run)
            if run.stop is None:
                run.started = self._clock.now()
                run.began = self._clock.monotonic()
                said.append((Report.STARTED, run))
                self._report(said)
                said = []
                threading.current_thread().name = run.thread_name
                run.raised = call_function(run.call)
                run.ended = self._clock.monotonic()
            said.append((Report.ENDED, run))
            run = self._take_next(run)
        self._report(said)

    def _wait_for_row(self, run: ThreadRun) -> None:
        """Wait for `run`'s QUEUED row to be in the history (ROW_WAIT_SECONDS at most)."""
        if not self._history.wait_landed(run.ticket, ROW_WAIT_SECONDS):
            log.info("run %s of %s starts before its row is in the history",
                     run.run.run_id, run.run.job)  # fmt: skip

    def _take_next(self, ended: ThreadRun) -> ThreadRun | None:
        """Pass `ended`'s worker to the next queued run, if a thread may start that one
        and the worker is still `ended`'s to pass (the loop did not give up on it)."""
        with self._lock:
            ended.done = True
            if ended.abandoned or not self._open or self._backlogged(ended.run.job):
                return None
            if self._surplus:
                self._surplus -= 1
                return None
            taken = self._queue.pop_if(thread_run)
            if taken is not None:
                self._in_flight[taken.run.run_id] = taken
            return taken

    def _report(self, said: Reports) -> None:
        """Hand `said` to the loop, waking it once for everything reported meanwhile."""
        with self._reports_lock:
            self._reports.extend(said)
            if self._woken:
                return
            self._woken = True
        loop = self._loop
        if loop is not None:  # the loop may be closed when an abandoned thread returns
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._heard)


class ThreadRunner:
    """The loop's handle on a `ThreadRun` holding a worker: stop it, or give up on it."""

    def __init__(
        self, run: ThreadRun, lane: Lane, clock: Clock, kill_grace: float,
        gave_up: Callable[[ThreadRun], None],
    ) -> None:  # fmt: skip
        """`gave_up(run)` is called on the loop when the run's thread did not stop in time
        (the run is then closed as abandoned)."""
        self.run = run
        self._lane = lane
        self._clock = clock
        self._kill_grace = kill_grace
        self._gave_up = gave_up
        self._give_up: Timer | None = None

    status = ""
    """A plain function says nothing of itself while it runs."""
    message_data: Mapping[str, object] = MappingProxyType({})
    """Nor has it any `message_data`."""

    def stop(self, result: Result, *, kill: bool = False) -> None:
        """Ask the run to stop (`result` is recorded; the first asked wins). A function
        cannot be interrupted: its thread is given up on after `kill_grace`, at once with
        `kill`. Nothing happens once the run has ended."""
        if not self._lane.stop(self.run, result, kill=kill):
            return
        if kill or self._give_up is None:
            if self._give_up is not None:
                self._give_up.cancel()
            delay = 0.0 if self.run.kill else self._kill_grace
            self._give_up = self._clock.call_later(delay, self._abandon)

    def ended(self) -> None:
        """The run ended: nothing is given up on any more."""
        if self._give_up is not None:
            self._give_up.cancel()
            self._give_up = None

    def _abandon(self) -> None:
        self._give_up = None
        if self._lane.abandon(self.run):
            self._gave_up(self.run)
