"""What starts and ends in one turn of the event loop, recorded in one pass (R26).

A run's start and end each make a record, a history write and an event or
three. One at a time, for thousands of short runs, that was most of the
loop's work. `Turn` keeps a turn's records and events as they come and, once
at the end of the turn (`record`), hands the history one batch of writes (one
transaction on its writer thread), publishes the events together (subscribers
that take batches get them in one call) and gives the freed workers to the
next queued runs. A kill -9 loses at most the turn in progress.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from types import MappingProxyType

from tuisched.domain.events import Event, RunConcluded, RunFinished, RunNotStarted, RunStarted
from tuisched.domain.runs import Outcome, RunRecord, RunState
from tuisched.runtime.clock import Clock
from tuisched.runtime.engine.dispatch import Active, Dispatcher
from tuisched.runtime.engine.outcomes import Outcomes
from tuisched.runtime.engine.retries import Retries
from tuisched.runtime.store import AsyncHistory

log = logging.getLogger(__name__)

_NO_DATA: Mapping[str, object] = MappingProxyType({})


class Turn:
    """The records and events of the current turn, and the pass that records them."""

    def __init__(
        self,
        *,
        dispatcher: Dispatcher,
        retries: Retries,
        outcomes: Outcomes,
        history: AsyncHistory,
        clock: Clock,
        closed: Callable[[RunRecord], None],
    ) -> None:
        """`closed(run)` is told of each run closed (after its worker was released)."""
        self._dispatcher = dispatcher
        self._retries = retries
        self._outcomes = outcomes
        self._history = history
        self._clock = clock
        self._closed = closed
        self._writes: list[RunRecord] = []
        self._events: list[Event] = []
        self._due = False
        """A pass is scheduled for the end of this turn."""
        self._on_threads = 0
        """Runs of job threads holding a worker (a drain waits for them)."""
        self._idle: asyncio.Future[None] | None = None

    # --- what happened ------------------------------------------------------------------

    def holding(self, active: Active) -> None:
        """`active`, a run of a job thread, holds a worker from now on."""
        if active.thread is not None:
            self._on_threads += 1

    def started(
        self, active: Active, at: datetime, *, pid: int | None, began: float | None = None
    ) -> None:
        """`active` started at `at` (in process `pid`; at `began` on the monotonic clock,
        now if None): RUNNING from now."""
        active.began = self._clock.monotonic() if began is None else began
        active.run = active.run.started(at, pid)
        self._writes.append(active.run)
        self._events.append(RunStarted(at=at, run=active.run))

    def ended(self, active: Active, outcome: Outcome, ended: float | None) -> None:
        """Close `active` with `outcome` (it ended at `ended` on the monotonic clock, now if
        None), free its worker, and decide its retry."""
        run = active.run
        try:
            self._close(active, outcome, ended)
        except Exception:  # a bug of ours must not lose the other runs of the turn
            log.exception("run %s of %s could not be closed", run.run_id, run.job)
        finally:
            self._dispatcher.release(run)
            if active.thread is not None:
                self._on_threads -= 1
            self._closed(run)

    def publish(self, event: Event) -> None:
        """Publish `event` with the turn's others (in order with them)."""
        self._events.append(event)
        self.record_soon()

    def _close(self, active: Active, outcome: Outcome, ended: float | None) -> None:
        now = self._clock.now()
        output = active.output
        tail = ""
        if output is not None:
            tail = output.tail()
            output.close()
        closed = active.run.finished(outcome, self._ended_at(active, now, ended), tail)
        self._writes.append(closed)
        self._outcomes.ended(closed)
        runner = active.runner
        data = runner.message_data if runner is not None else _NO_DATA
        final = not self._retries.schedule(active.job, closed, data)
        events = self._events
        if outcome.state is RunState.NOT_STARTED:
            events.append(RunNotStarted(at=now, run=closed, final=final))
        else:
            events.append(RunFinished(at=now, run=closed, final=final, message_data=data))
        if final:
            events.append(RunConcluded(at=now, run=closed, message_data=data))

    def _ended_at(self, active: Active, now: datetime, ended: float | None) -> datetime:
        """When `active` ended: its start plus the time it ran on the monotonic clock,
        so a wall clock set back (or forward) meanwhile gives no negative duration."""
        started = active.run.started_at
        if started is None or active.began is None:
            return now
        moment = self._clock.monotonic() if ended is None else ended
        return started + timedelta(seconds=max(0.0, moment - active.began))

    # --- the pass -----------------------------------------------------------------------

    def record_soon(self) -> None:
        """Record the turn at its end (once, whatever asks)."""
        if not self._due:
            self._due = True
            asyncio.get_running_loop().call_soon(self.record)

    def record(self) -> None:
        """Write the turn's records in one batch, publish its events together, and give
        the freed workers to the next queued runs."""
        self._due = False
        writes, self._writes = self._writes, []
        events, self._events = self._events, []
        try:
            if writes:
                self._history.write_soon((), writes)
            if events:
                self._outcomes.publish_many(events)
        finally:
            self._dispatcher.dispatch()
            self._settle()

    def settled(self) -> set[asyncio.Future[None]]:
        """What a drain waits on besides tasks: done once no run of a job thread holds a
        worker and the runs that ended are recorded (empty when so now)."""
        if not self._on_threads and not self._due:
            return set()
        if self._idle is None:
            self._idle = asyncio.get_running_loop().create_future()
        return {self._idle}

    def _settle(self) -> None:
        if not self._on_threads and self._idle is not None:
            idle, self._idle = self._idle, None
            if not idle.done():
                idle.set_result(None)
