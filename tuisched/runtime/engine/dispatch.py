"""Runs waiting for a worker (SPEC R12): the run queue, `overlap`, and `max_workers`.

A run is queued QUEUED under its job's `overlap` rule: `skip` records it
NOT_STARTED while another run of the job is queued or running, `queue` puts
it in the job's backlog (at most MAX_BACKLOG), `allow` queues it at once.
A run by hand is asked first (`refusal`): one the rule would not take is
refused, not recorded; one asked to wait (`trigger --queue`) goes to the
backlog where `skip` would refuse it.
A `skip` job's run that comes while only a catch-up of the job is queued or
running (a start's `misfire: once`, which takes a moment to begin) waits in
the backlog behind it instead: the slot after a restart is not skipped for
the run that makes up the one before.
Queued runs leave by (slot, higher priority, name) whenever fewer than
`max_workers` runs hold a worker.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, replace

from tuisched.domain.errors import Refusal
from tuisched.domain.events import RunQueued
from tuisched.domain.model import Config, Job, Overlap
from tuisched.domain.reasons import overlap_refusal
from tuisched.domain.runs import Result, RunRecord, RunState, Trigger
from tuisched.runtime.clock import Clock, Timer
from tuisched.runtime.engine.lane import ThreadRun, ThreadRunner, thread_run
from tuisched.runtime.engine.outcomes import Outcomes
from tuisched.runtime.engine.runqueue import RunQueue
from tuisched.runtime.execution import Runner
from tuisched.runtime.execution.output import OutputCapture
from tuisched.runtime.store import AsyncHistory

SHUTTING_DOWN = "the scheduler is shutting down"


@dataclass(slots=True)
class Active:
    """A run holding a worker."""

    run: RunRecord
    job: Job
    thread: ThreadRun | None = None
    """Set for a run a job thread starts by itself (see `lane`)."""
    output: OutputCapture | None = None
    runner: Runner | ThreadRunner | None = None
    stop_result: Result | None = None
    kill: bool = False
    began: float | None = None
    """When it was launched, on the clock's monotonic scale (its duration is measured on it)."""
    timer: Timer | None = None
    """Its timeout, armed while it runs (for a run started without a task of its own)."""


class Dispatcher:
    """Queues runs under the overlap rules and hands them to workers as workers free up."""

    def __init__(
        self,
        *,
        config: Callable[[], Config],
        history: AsyncHistory,
        outcomes: Outcomes,
        clock: Clock,
        accepting: Callable[[], bool],
        start: Callable[[Active], None],
        queue: RunQueue,
    ) -> None:
        """`start(active)` runs a run that got a worker (it calls `release` when done);
        `queue` is shared with the job threads (see `lane`)."""
        self._config = config
        self._history = history
        self._outcomes = outcomes
        self._clock = clock
        self._accepting = accepting
        self._start = start
        self._queue = queue
        self.active: dict[str, Active] = {}
        """Runs holding a worker, by run id."""
        self._jobs_of: dict[str, Job] = {}
        """The job definition each queued or running run was created from."""
        self._queued_as: dict[str, RunRecord] = {}
        """Each queued or running run as it was queued (a running one's is in `active`)."""
        self._busy: defaultdict[str, set[str]] = defaultdict(set)
        """Run ids queued, backlogged or running, per job."""
        self._backlog: defaultdict[str, deque[RunRecord]] = defaultdict(deque)
        self._tickets: dict[str, int] = {}
        """History tickets of the QUEUED rows of runs not started yet."""
        self._catchups: set[str] = set()
        """Run ids of the catch-ups queued, backlogged or running."""

    def queued(self) -> list[RunRecord]:
        """Runs waiting for a worker, in leaving order, then backlogged ones."""
        backlog = [run for runs in self._backlog.values() for run in runs]
        return [*self._queue.runs(), *backlog]

    def enqueue(
        self, run: RunRecord, job: Job, *, recorded: bool = False, behind: bool = False
    ) -> RunRecord:
        """Queue `run` under the overlap rules; `recorded` when its row exists already;
        `behind`: it waits behind the job's run in progress where `skip` would skip it."""
        if not self._accepting():
            return self._outcomes.not_started(
                run, Result.SHUTDOWN, SHUTTING_DOWN, recorded=recorded
            )
        if run.state is not RunState.QUEUED or run.reason:  # e.g. it was WAITING
            run = replace(run, state=RunState.QUEUED, reason="")
        busy = self._busy[job.name]
        refused = self.refusal(job, behind=behind)
        if refused is not None:
            return self._outcomes.not_started(
                run, Result.SKIPPED, refused.reason, recorded=recorded
            )
        backlogged = self._backlogged(job, busy, behind=behind)
        write = self._history.update_soon if recorded else self._history.insert_soon
        ticket = self._tickets[run.run_id] = write(run)
        self._jobs_of[run.run_id] = job
        self._queued_as[run.run_id] = run
        self._outcomes.publish(RunQueued(at=self._clock.now(), run=run))
        if backlogged:
            self._backlog[job.name].append(run)
        else:
            self._queue.push(run, job, ticket)
        busy.add(run.run_id)
        if run.trigger is Trigger.CATCHUP:
            self._catchups.add(run.run_id)
        self.dispatch()
        return run

    def enqueue_many(self, items: list[tuple[RunRecord, Job]]) -> None:
        """Queue new runs (QUEUED, no row yet) under the overlap rules, in order: `enqueue`
        of each, with one batch of history writes and one publication for all."""
        if not self._accepting():
            for run, _ in items:
                self._outcomes.not_started(run, Result.SHUTDOWN, SHUTTING_DOWN)
            return
        admitted: list[tuple[RunRecord, Job, bool]] = []
        for run, job in items:
            busy = self._busy[job.name]
            refused = self.refusal(job)
            if refused is not None:
                self._outcomes.not_started(run, Result.SKIPPED, refused.reason)
                continue
            admitted.append((run, job, self._backlogged(job, busy)))
            self._queued_as[run.run_id] = run  # the next run of the job in `items` meets it
            busy.add(run.run_id)
            if run.trigger is Trigger.CATCHUP:
                self._catchups.add(run.run_id)
        if not admitted:
            return
        first = self._history.write_soon([run for run, _, _ in admitted], ()) - len(admitted) + 1
        now = self._clock.now()
        events: list[RunQueued] = []
        queued: list[tuple[RunRecord, Job, int]] = []
        for index, (run, job, backlogged) in enumerate(admitted):
            self._tickets[run.run_id] = first + index
            self._jobs_of[run.run_id] = job
            events.append(RunQueued(at=now, run=run))
            if backlogged:
                self._backlog[job.name].append(run)
            else:
                queued.append((run, job, first + index))
        self._outcomes.publish_many(events)
        self._queue.push_many(queued)
        self.dispatch()

    def _backlogged(self, job: Job, busy: set[str], *, behind: bool = False) -> bool:
        """Whether a new run of `job` (with `busy` queued or running) waits in the backlog;
        `behind`: it asked to, where `skip` would skip it."""
        if not busy or job.overlap is Overlap.ALLOW:
            return False
        return job.overlap is Overlap.QUEUE or behind or busy <= self._catchups

    def refusal(self, job: Job, *, behind: bool = False) -> Refusal | None:
        """Why a new run of `job` would not be queued now under its overlap rule (None:
        it would); `behind`: it asks to wait behind the run in progress where `skip`
        would skip it."""
        busy = self._busy.get(job.name)
        if not busy or job.overlap is Overlap.ALLOW:
            return None
        running: list[RunRecord] = []
        queued: list[RunRecord] = []
        for run_id in busy:
            active, waiting = self.active.get(run_id), self._queued_as.get(run_id)
            if active is not None:
                running.append(active.run)
            elif waiting is not None:
                queued.append(waiting)
        running.sort(key=lambda run: run.started_at or run.queued_at)
        queued.sort(key=lambda run: run.queued_at)
        backlog = len(self._backlog.get(job.name, ()))
        return overlap_refusal(
            job.name, job.overlap, job.timezone, running, queued, backlog=backlog, behind=behind
        )

    def dispatch(self) -> None:
        """Give free workers to the next queued runs."""
        limit = self._config().settings.max_workers
        while self._accepting() and len(self.active) < limit:
            popped = self._queue.pop()
            if popped is None:
                return
            run, job, ticket = popped
            active = Active(run=run, job=job, thread=thread_run(run, job, ticket))
            self.active[run.run_id] = active
            self._start(active)

    def adopt(self, thread: ThreadRun) -> Active:
        """A job thread took `thread` from the queue: it holds a worker now (the one of the
        run that ended on that thread, released in the same pass)."""
        run_id = thread.run.run_id
        self._tickets.pop(run_id, None)
        active = self.active[run_id] = Active(
            run=thread.run, job=self._jobs_of[run_id], thread=thread
        )
        return active

    def backlogged(self, job: str) -> bool:
        """Whether runs of `job` wait behind its running one (`overlap: queue`); from any
        thread."""
        return bool(self._backlog.get(job))

    def ticket(self, run_id: str) -> int:
        """The history ticket of `run_id`'s QUEUED row (0 when none is pending)."""
        return self._tickets.pop(run_id, 0)

    def release(self, run: RunRecord) -> None:
        """Forget `run` (finished, or taken out of the queue or backlog)."""
        self.active.pop(run.run_id, None)
        self._tickets.pop(run.run_id, None)
        self._catchups.discard(run.run_id)
        self._jobs_of.pop(run.run_id, None)
        self._queued_as.pop(run.run_id, None)
        busy = self._busy.get(run.job, set())
        busy.discard(run.run_id)
        backlog = self._backlog.get(run.job)
        if backlog and self._accepting() and not busy - {waiting.run_id for waiting in backlog}:
            waiting = backlog.popleft()
            job = self._jobs_of[waiting.run_id]
            self._queue.push(waiting, job, self._tickets.get(waiting.run_id, 0))
        if not busy:
            self._busy.pop(run.job, None)
            self._backlog.pop(run.job, None)

    def take(self, run_id: str) -> RunRecord | None:
        """Take a queued or backlogged run out (it will not start); None if it is not there."""
        run = self._queue.remove(run_id) or self._take_backlogged(run_id)
        if run is not None:
            self.release(run)
        return run

    def cancel(self, reason: str, *, job: str | None = None) -> None:
        """Close every queued or backlogged run (of `job`, or of all jobs) as NOT_STARTED."""
        result = Result.SHUTDOWN if job is None else Result.STOPPED
        for run in self.queued():
            if (job is None or run.job == job) and self.take(run.run_id) is not None:
                self._outcomes.not_started(run, result, reason, recorded=True)

    def _take_backlogged(self, run_id: str) -> RunRecord | None:
        for runs in self._backlog.values():
            for run in runs:
                if run.run_id == run_id:
                    runs.remove(run)
                    return run
        return None

    # --- why not running (R25) --------------------------------------------------------

    def queue_parts(self) -> tuple[list[RunRecord], dict[str, list[RunRecord]]]:
        """The queue in leaving order, and each job's backlog (`overlap: queue`)."""
        backlogs = {job: list(runs) for job, runs in self._backlog.items() if runs}
        return self._queue.runs(), backlogs
