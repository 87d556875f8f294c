"""The engine: fires every job's slots through APScheduler 3.11 and runs them.

APScheduler's scheduler core runs in its own thread (`BackgroundScheduler`):
when thousands of slots fall due at once, its synchronous submission pass
would otherwise freeze the asyncio loop that the console shares. Its only
executor hands the due slots to this loop in batches; everything else (grace
and MISSED slots, the run queue, overlap, runners, timeouts, retries) happens
here, on the loop thread, one small step at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from collections import defaultdict, deque
from collections.abc import Callable, Collection, Coroutine, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from apscheduler.executors.base import BaseExecutor
from apscheduler.schedulers.background import BackgroundScheduler

from tuisched.domain.bus import EventBus
from tuisched.domain.config.config import collector_paused
from tuisched.domain.errors import JobActionError
from tuisched.domain.events import (
    Event,
    PauseChanged,
    RunConcluded,
    RunFinished,
    RunNotStarted,
    RunOutputWritten,
    RunQueued,
    RunStarted,
    SlotMissed,
)
from tuisched.domain.model import (
    CommandSpec,
    Config,
    Job,
    ManualSchedule,
    Misfire,
    Overlap,
    Schedule,
)
from tuisched.domain.runs import Outcome, Result, RunRecord, RunState, Trigger, new_run_id
from tuisched.domain.schedule.slots import next_slot, slots_between
from tuisched.runtime.engine.jobstore import HeapJobStore
from tuisched.runtime.engine.runqueue import RunQueue
from tuisched.runtime.engine.trigger import SlotTrigger
from tuisched.runtime.engine.waiting import WaitingRoom
from tuisched.runtime.execution import LaunchError, Runner, make_runner
from tuisched.runtime.execution.output import OutputCapture
from tuisched.runtime.store import AsyncHistory

log = logging.getLogger(__name__)

FIRES_PER_STEP = 200
"""Due slots handled per loop iteration, so a burst never freezes the loop."""
MAX_MISSED_RECORDED = 20
"""MISSED rows written per job at a time; older missed slots are counted, not listed."""
MAX_BACKLOG = 10
"""Runs an `overlap: queue` job may have waiting behind its running one."""
OUTPUT_FILES_KEPT = 50
"""Output files kept per job."""
SCAN_LIMIT = 10_000
"""Missed slots walked one by one per job at start-up before estimating the rest."""


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _noop() -> None:
    """Stands in for APScheduler's job function; our executor never calls it."""


class _LoopExecutor(BaseExecutor):  # type: ignore[misc]  # APScheduler is untyped
    """Hands due slots to the engine instead of running anything.

    Bypasses APScheduler's instance counting: the engine applies `overlap`.
    """

    def __init__(self, deliver: Callable[[str, list[datetime]], None]) -> None:
        super().__init__()
        self._deliver = deliver

    def submit_job(self, job: Any, run_times: list[datetime]) -> None:
        self._deliver(job.id, list(run_times))

    def _do_submit_job(self, job: Any, run_times: list[datetime]) -> None:  # pragma: no cover
        raise NotImplementedError


@dataclass(slots=True)
class _Inbox:
    """Due slots crossing from APScheduler's thread to the loop, batched."""

    loop: asyncio.AbstractEventLoop
    take: Callable[[], None]
    items: deque[tuple[str, list[datetime]]] = field(default_factory=deque)
    lock: threading.Lock = field(default_factory=threading.Lock)
    scheduled: bool = False

    def put(self, job: str, run_times: list[datetime]) -> None:
        with self.lock:
            self.items.append((job, run_times))
            if self.scheduled:
                return
            self.scheduled = True
        self.loop.call_soon_threadsafe(self.take)

    def take_some(self, limit: int) -> tuple[list[tuple[str, list[datetime]]], bool]:
        """Up to `limit` items, and whether more remain."""
        with self.lock:
            batch = [self.items.popleft() for _ in range(min(limit, len(self.items)))]
            more = bool(self.items)
            self.scheduled = more
        return batch, more


@dataclass(slots=True)
class _Active:
    """A run holding a worker."""

    run: RunRecord
    job: Job
    output: OutputCapture | None = None
    runner: Runner | None = None
    stop_result: Result | None = None
    kill: bool = False


def is_paused(job: Job, pauses: Collection[tuple[str, str]]) -> bool:
    """Whether `pauses` (as (kind, name)) hold `job`: itself, one of its groups, or all."""
    if not pauses:
        return False
    if ("all", "") in pauses or ("job", job.name) in pauses:
        return True
    return any(("group", group) in pauses for group in job.groups)


class Engine:
    """Fires slots, queues runs, runs them, records every step on the bus and in history."""

    def __init__(
        self,
        config: Config,
        *,
        bus: EventBus,
        history: AsyncHistory,
        node: str,
        output_dir: Path,
        clock: Callable[[], datetime] = _utcnow,
        kill_grace: float = 5.0,
    ) -> None:
        self.config = config
        self.node = node
        self._bus = bus
        self._history = history
        self._output_dir = output_dir
        self._clock = clock
        self._kill_grace = kill_grace
        self._queue = RunQueue()
        self._jobs_of: dict[str, Job] = {}
        """The job definition each queued or running run was created from."""
        self._active: dict[str, _Active] = {}
        self._busy: defaultdict[str, set[str]] = defaultdict(set)
        """Run ids queued, backlogged or running, per job."""
        self._backlog: defaultdict[str, deque[RunRecord]] = defaultdict(deque)
        self._tasks: set[asyncio.Task[None]] = set()
        self._retries: dict[asyncio.TimerHandle, tuple[RunRecord, Mapping[str, object]]] = {}
        """Pending retries: the failed attempt (and its message_data) each one follows."""
        self._finished_count: defaultdict[str, int] = defaultdict(int)
        self._tickets: dict[str, int] = {}
        """History tickets of the QUEUED rows of runs not started yet."""
        self._accepting = False
        self._scheduler: BackgroundScheduler | None = None
        self._inbox: _Inbox | None = None
        self._pauses: set[tuple[str, str]] = set()
        """Pauses in force, as (kind, name): ("job", n), ("group", n) or ("all", "")."""
        self.waiting_room = WaitingRoom(
            history=history, bus=bus, config=lambda: self.config, admit=self._admit,
            give_up=self._gave_up, clock=clock,
        )  # fmt: skip

    # --- life cycle ------------------------------------------------------------

    async def start(self, *, down_since: datetime | None = None) -> None:
        """Record slots missed since `down_since`, then start firing."""
        loop = asyncio.get_running_loop()
        self._inbox = _Inbox(loop, self._take_fires)
        self._accepting = True
        self._pauses = await self._history.call(lambda store: store.pauses())
        self.waiting_room.start()
        await self._take_back_waiting()
        now = self._clock()
        if down_since is not None:
            await self._record_missed(down_since, now)
        self._scheduler = BackgroundScheduler(
            timezone=UTC,
            jobstores={"default": HeapJobStore()},
            executors={"default": _LoopExecutor(self._inbox.put)},
            job_defaults={"misfire_grace_time": None, "coalesce": False, "max_instances": 1},
        )
        with collector_paused():  # 100,000 APScheduler jobs: no cycles, many objects
            for job in self.config.jobs.values():
                # Slots after `now` fire; those up to `now` were just recorded as missed.
                self._add_to_scheduler(job, now)
            self._scheduler.start()

    async def _take_back_waiting(self) -> None:
        """WAITING runs of a previous instance go on waiting (R9 survives a restart)."""
        rows = await self._history.call(lambda store: store.unfinished(self.node))
        for run in rows:
            job = self.config.jobs.get(run.job)
            if run.state is not RunState.WAITING:
                continue
            if job is None or not job.enabled:
                reason = "its job was deleted or disabled"
                self._not_started(run, Result.STOPPED, reason, recorded=True)
            else:
                await self.waiting_room.enter(run, job, recorded=True)

    async def drain(self, grace: float) -> None:
        """Stop firing; give running runs `grace` seconds, then stop them (SHUTDOWN).

        WAITING runs stay WAITING in the history: the next start takes them back.
        """
        self._accepting = False
        self.waiting_room.stop()
        if self._scheduler is not None and self._scheduler.running:
            self._scheduler.shutdown(wait=False)
        for timer, (failed, data) in list(self._retries.items()):
            timer.cancel()
            self._conclude(failed, data)  # the retry will not come: this is the outcome
        self._retries.clear()
        self._cancel_waiting("the scheduler shut down before it started")
        pending = set(self._tasks)
        if pending:
            _, pending = await asyncio.wait(pending, timeout=grace)
        self.stop_all(Result.SHUTDOWN)
        if pending:
            await asyncio.wait(pending, timeout=self._kill_grace + 5)

    @property
    def accepting(self) -> bool:
        """True while new runs may start."""
        return self._accepting

    def running(self) -> list[RunRecord]:
        """Runs holding a worker now."""
        return [active.run for active in self._active.values()]

    def queued(self) -> list[RunRecord]:
        """Runs waiting for a worker, in leaving order, then backlogged ones."""
        backlog = [run for runs in self._backlog.values() for run in runs]
        return [*self._queue.runs(), *backlog]

    # --- configuration ----------------------------------------------------------

    def apply(self, config: Config) -> None:
        """Schedule `config` instead of the current one. Runs in progress go on."""
        old = self.config
        self.config = config
        now = self._clock()
        for name in old.jobs.keys() - config.jobs.keys():
            self._remove_from_scheduler(name)
            self._cancel_waiting("its job was deleted", job=name)
        for name, job in config.jobs.items():
            if old.jobs.get(name) != job:
                self._remove_from_scheduler(name)
                self._add_to_scheduler(job, now)
                self._rewait(job)
            if not job.enabled:
                self._cancel_waiting("its job was disabled", job=name)
        self._dispatch()  # max_workers may have grown

    def _add_to_scheduler(self, job: Job, now: datetime) -> None:
        schedule = job.schedule
        if not job.enabled or schedule is None or isinstance(schedule, ManualSchedule):
            return
        first = next_slot(schedule, now)
        if first is None or self._scheduler is None:  # stop (or `at`) is past: not loaded
            return
        self._scheduler.add_job(
            _noop, trigger=SlotTrigger(schedule), id=job.name, name=job.name,
            replace_existing=True, next_run_time=None if self.is_paused(job) else first,
        )  # fmt: skip

    def _remove_from_scheduler(self, name: str) -> None:
        if self._scheduler is not None and self._scheduler.get_job(name) is not None:
            self._scheduler.remove_job(name)

    # --- firing -----------------------------------------------------------------

    def _take_fires(self) -> None:
        assert self._inbox is not None  # noqa: S101  (set in start before any fire)
        batch, more = self._inbox.take_some(FIRES_PER_STEP)
        try:
            now = self._clock()
            for name, run_times in batch:
                job = self.config.jobs.get(name)
                if job is None or not self._accepting or self.is_paused(job):
                    continue  # deleted, stopping, or paused since APScheduler fired it
                try:
                    self._fire(job, run_times, now)
                except Exception:
                    log.exception("could not fire %s at %s", name, run_times)
        finally:
            if more:
                asyncio.get_running_loop().call_soon(self._take_fires)

    def _fire(self, job: Job, run_times: list[datetime], now: datetime) -> None:
        """Run the slots less than `grace` late; record the others as MISSED."""
        late = [slot for slot in run_times if now - slot >= job.grace]
        kept = late[-MAX_MISSED_RECORDED:]
        for slot in kept:
            seconds = int((now - slot).total_seconds())
            reason = f"too late to run ({seconds}s late)"
            if slot == kept[0] and len(late) > len(kept):
                reason += f" (and {len(late) - MAX_MISSED_RECORDED} earlier slots)"
            self._record_slot_missed(job, slot, now, reason)
        for slot in run_times:
            if now - slot < job.grace:
                self.submit(job, slot=slot, trigger=Trigger.SCHEDULE)

    async def _record_missed(self, since: datetime, now: datetime) -> None:
        """Record the slots in [since, now] that have no run as MISSED (the newest few)."""
        recorded = await self._history.call(lambda store: store.slots_since(since))
        after = since - timedelta(microseconds=1)  # a slot at the last heartbeat counts too
        for index, job in enumerate(self.config.jobs.values()):
            if index % 100 == 99:
                await asyncio.sleep(0)  # thousands of jobs: let the loop breathe
            if not job.enabled or job.schedule is None:
                continue
            newest, total = recent_slots(job.schedule, after, now, MAX_MISSED_RECORDED)
            missed = [s for s in newest if (job.name, s.astimezone(UTC)) not in recorded]
            for slot in missed:
                reason = "the scheduler was not running at this slot"
                if slot == missed[0] and total > len(newest):
                    reason += f" (and about {total - len(newest)} earlier slots)"
                self._record_slot_missed(job, slot, now, reason)
            if missed and job.misfire is Misfire.ONCE:
                self.submit(job, slot=missed[-1], trigger=Trigger.CATCHUP)

    def _record_slot_missed(self, job: Job, slot: datetime, now: datetime, reason: str) -> None:
        # Queued "at its slot": the history then lists missed slots where they belong.
        run = RunRecord(
            run_id=new_run_id(), job=job.name, slot=slot, trigger=Trigger.SCHEDULE,
            state=RunState.MISSED, result=Result.MISSED, queued_at=slot, ended_at=now,
            node=self.node, reason=reason,
        )  # fmt: skip
        self._history.insert_soon(run)
        self._publish(SlotMissed(at=now, run=run))

    # --- queueing ---------------------------------------------------------------

    def run_now(self, name: str) -> RunRecord:
        """Queue a manual run of the job called `name` (UnknownJobError if none)."""
        return self.submit(self.config.job(name), slot=None, trigger=Trigger.MANUAL)

    def submit(
        self, job: Job, *, slot: datetime | None, trigger: Trigger, attempt: int = 0
    ) -> RunRecord:
        """Create a run of `job` and queue it, or record why it cannot run."""
        now = self._clock()
        run = RunRecord(
            run_id=new_run_id(), job=job.name, slot=slot, trigger=trigger,
            state=RunState.QUEUED, queued_at=now, node=self.node, attempt=attempt,
        )  # fmt: skip
        if not self._accepting:
            return self._not_started(run, Result.SHUTDOWN, "the scheduler is shutting down")
        if job.requires and slot is not None and trigger is not Trigger.MANUAL and attempt == 0:
            self._spawn(self.waiting_room.enter(run, job))  # R9: may wait for upstream slots
            return run
        return self._enqueue(run, job)

    def _enqueue(self, run: RunRecord, job: Job, *, recorded: bool = False) -> RunRecord:
        """Queue `run` under the overlap rules; `recorded` when its row exists already."""
        now = self._clock()
        if not self._accepting:
            reason = "the scheduler is shutting down"
            return self._not_started(run, Result.SHUTDOWN, reason, recorded=recorded)
        run = replace(run, state=RunState.QUEUED, reason="")
        busy = self._busy[job.name]
        if busy and job.overlap is Overlap.SKIP:
            reason = self._busy_reason(job.name)
            return self._not_started(run, Result.SKIPPED, reason, recorded=recorded)
        if busy and job.overlap is Overlap.QUEUE and len(self._backlog[job.name]) >= MAX_BACKLOG:
            reason = f"{MAX_BACKLOG} runs already waiting"
            return self._not_started(run, Result.SKIPPED, reason, recorded=recorded)
        write = self._history.update_soon if recorded else self._history.insert_soon
        self._tickets[run.run_id] = write(run)
        self._jobs_of[run.run_id] = job
        self._publish(RunQueued(at=now, run=run))
        if busy and job.overlap is Overlap.QUEUE:
            self._backlog[job.name].append(run)
        else:
            self._queue.push(run, job.priority)
        busy.add(run.run_id)
        self._dispatch()
        return run

    def record_not_started(
        self, job: Job, *, slot: datetime | None, trigger: Trigger, result: Result, reason: str
    ) -> RunRecord:
        """Record that a run of `job` could not begin (e.g. its upstream failed)."""
        run = RunRecord(
            run_id=new_run_id(), job=job.name, slot=slot, trigger=trigger,
            state=RunState.QUEUED, queued_at=self._clock(), node=self.node,
        )  # fmt: skip
        return self._not_started(run, result, reason)

    def _not_started(
        self, run: RunRecord, result: Result, reason: str, *, recorded: bool = False
    ) -> RunRecord:
        """Close `run` as NOT_STARTED; `recorded` when its QUEUED row exists already."""
        now = self._clock()
        outcome = Outcome(state=RunState.NOT_STARTED, result=result, reason=reason)
        closed = run.finished(outcome, now)
        if recorded:
            self._history.update_soon(closed)
        else:
            self._history.insert_soon(closed)
        self._publish(RunNotStarted(at=now, run=closed))
        self._conclude(closed, {})
        return closed

    def _dispatch(self) -> None:
        while self._accepting and len(self._active) < self.config.settings.max_workers:
            run = self._queue.pop()
            if run is None:
                return
            active = _Active(run=run, job=self._jobs_of[run.run_id])
            self._active[run.run_id] = active
            task = asyncio.get_running_loop().create_task(self._execute(active))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    # --- running ------------------------------------------------------------------

    async def _execute(self, active: _Active) -> None:
        """Run one run to its end; whatever happens, it is recorded and the worker freed."""
        try:
            outcome = await self._run(active)
        except Exception as error:  # a bug of ours must not take the scheduler down
            log.exception(
                "run %s of %s failed in the scheduler", active.run.run_id, active.job.name
            )
            status = f"scheduler error: {error}"
            outcome = Outcome(state=RunState.FAILED, result=Result.ERROR, status=status)
        self._finish(active, outcome)

    async def _run(self, active: _Active) -> Outcome:
        run, job = active.run, active.job
        active.run = replace(run, state=RunState.RUNNING, started_at=self._clock())
        ticket = self._tickets.pop(run.run_id, 0)
        if self._history.committed(ticket):  # usually: it was queued a while ago
            self._history.update_soon(active.run)
        else:  # the row must be in the database before anything starts
            await self._history.update(active.run)
        if active.stop_result is not None:
            reason = "stopped before it started"
            return Outcome(state=RunState.NOT_STARTED, result=active.stop_result, reason=reason)
        active.output = OutputCapture(
            self._output_path(run), on_lines=lambda lines: self._on_output(active, lines)
        )
        active.runner = make_runner(
            job.kind, env=self._environment(job, run), output=active.output,
            kill_grace=self._kill_grace,
        )  # fmt: skip
        timer = self._start_timeout(active)  # an import or exec can hang too
        try:
            pid = await active.runner.start()
        except LaunchError as error:
            if timer is not None:
                timer.cancel()
            return _launch_failed(error)
        active.run = replace(active.run, pid=pid, started_at=self._clock())
        self._history.update_soon(active.run)
        self._publish(RunStarted(at=active.run.started_at or self._clock(), run=active.run))
        if active.stop_result is not None:  # a stop came while it was launching
            active.runner.stop(active.stop_result, kill=active.kill)
        try:
            return await active.runner.wait()
        finally:
            if timer is not None:
                timer.cancel()

    def _start_timeout(self, active: _Active) -> asyncio.TimerHandle | None:
        if active.job.timeout is None:
            return None
        seconds = active.job.timeout.total_seconds()
        loop = asyncio.get_running_loop()
        return loop.call_later(seconds, self._request_stop, active, Result.TIMED_OUT, False)

    def _finish(self, active: _Active, outcome: Outcome) -> None:
        run, job = active.run, active.job
        try:
            now = self._clock()
            tail = active.output.tail() if active.output is not None else ""
            if active.output is not None:
                active.output.close()
            closed = run.finished(outcome, now, tail)
            self._history.update_soon(closed)
            data = active.runner.message_data if active.runner is not None else {}
            final = not self._maybe_retry(job, closed, data)
            if outcome.state is RunState.NOT_STARTED:
                self._publish(RunNotStarted(at=now, run=closed, final=final))
            else:
                self._publish(RunFinished(at=now, run=closed, final=final, message_data=data))
            if final:
                self._conclude(closed, data)
        finally:
            self._release(run)
            self._dispatch()

    def _release(self, run: RunRecord) -> None:
        """Forget `run` (finished, or taken out of the queue or backlog)."""
        self._active.pop(run.run_id, None)
        self._tickets.pop(run.run_id, None)
        self._jobs_of.pop(run.run_id, None)
        busy = self._busy[run.job]
        busy.discard(run.run_id)
        backlog = self._backlog[run.job]
        backlogged = {waiting.run_id for waiting in backlog}
        if backlog and self._accepting and not busy - backlogged:
            waiting = backlog.popleft()
            self._queue.push(waiting, self._jobs_of[waiting.run_id].priority)
        if not busy:
            self._busy.pop(run.job, None)
            self._backlog.pop(run.job, None)
        self._finished_count[run.job] += 1
        if self._finished_count[run.job] % 10 == 0:
            self._prune_output(run.job)
        if run.job not in self.config.jobs:
            self._finished_count.pop(run.job, None)

    def _maybe_retry(self, job: Job, run: RunRecord, data: Mapping[str, object]) -> bool:
        """Schedule a retry of a failed run if the job allows one; True if it did."""
        retryable = run.state is RunState.FAILED and run.result is Result.COMPLETED
        if not retryable or run.attempt >= job.retries or not self._accepting:
            return False

        def retry() -> None:
            self._retries.pop(handle, None)
            current = self.config.jobs.get(job.name)
            if current is None or not current.enabled:
                log.info("retry of %s dropped: the job was deleted or disabled", job.name)
                self._conclude(run, data)
                return
            self.submit(current, slot=run.slot, trigger=run.trigger, attempt=run.attempt + 1)

        delay = job.retry_delay.total_seconds()
        handle = asyncio.get_running_loop().call_later(delay, retry)
        self._retries[handle] = (run, data)
        return True

    def _conclude(self, run: RunRecord, data: Mapping[str, object]) -> None:
        """Publish the final outcome of `run` and its retries (alerts and dependants)."""
        self._publish(RunConcluded(at=self._clock(), run=run, message_data=data))

    # --- waiting (R9) ------------------------------------------------------------------

    def _admit(self, run: RunRecord, job: Job) -> None:
        """The waiting room lets `run` go: queue it (its row may exist, WAITING)."""
        current = self.config.jobs.get(job.name)
        recorded = run.state is RunState.WAITING
        if current is None or not current.enabled:
            reason = "its job was deleted or disabled"
            self._not_started(run, Result.STOPPED, reason, recorded=recorded)
            return
        if self.is_paused(current):
            self._not_started(run, Result.STOPPED, "the job is paused", recorded=recorded)
            return
        self._enqueue(run, current, recorded=recorded)

    def _rewait(self, job: Job) -> None:
        """A changed job's waiting runs wait again, for what the new definition requires."""
        if not job.enabled:
            return
        for run in self.waiting_room.runs():
            if run.job == job.name and self.waiting_room.remove(run.run_id) is not None:
                self._spawn(self.waiting_room.enter(run, job, recorded=True))

    def _gave_up(self, run: RunRecord, reason: str) -> None:
        self._not_started(run, Result.DEPENDENCY, reason, recorded=True)

    def live_status(self, run_id: str) -> str:
        """What a running run says of itself now (a python job's `status`), or ""."""
        active = self._active.get(run_id)
        return active.runner.status if active is not None and active.runner is not None else ""

    def next_fire(self, name: str) -> datetime | None:
        """When `name` fires next; None when paused, finished, manual or `after` a job."""
        job = self._scheduler.get_job(name) if self._scheduler is not None else None
        return job.next_run_time if job is not None else None

    def waiting(self) -> list[RunRecord]:
        """Runs WAITING for their requirements."""
        return self.waiting_room.runs()

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- pausing --------------------------------------------------------------------------

    def is_paused(self, job: Job) -> bool:
        """Whether `job` is paused: itself, through one of its groups, or everything."""
        return is_paused(job, self._pauses)

    @property
    def pauses(self) -> frozenset[tuple[str, str]]:
        """Pauses in force, as (kind, name)."""
        return frozenset(self._pauses)

    async def set_paused(self, kind: str, name: str, *, paused: bool) -> None:
        """Pause or resume a job, a group (`kind` "group") or everything (`kind` "all").

        Paused jobs fire no slots (no runs, no MISSED records); a resumed one
        goes on from its next slot after now. Runs in progress are untouched.
        A run started by hand still runs. The pause is stored, so it survives
        a restart.

        Raises:
            UnknownJobError: no such job. JobActionError: no such group.
        """
        if kind == "job":
            self.config.job(name)
        elif kind == "group":
            stale = not paused and ("group", name) in self._pauses  # a deleted group's pause
            if name not in self.config.groups and not stale:
                raise JobActionError(f"no group named '{name}'")
        elif kind == "all":
            name = ""
        else:
            raise JobActionError(f"cannot pause a '{kind}'")
        if not paused:
            self._check_resumable(kind, name)
        at = self._clock()
        await self._history.call(lambda store: store.set_pause(kind, name, paused=paused, at=at))
        before = {job.name for job in self.config.jobs.values() if self.is_paused(job)}
        (self._pauses.add if paused else self._pauses.discard)((kind, name))
        self._apply_pauses(before)
        self._publish(PauseChanged(at=at, kind=kind, name=name, paused=paused))

    def _check_resumable(self, kind: str, name: str) -> None:
        """Resuming one job (or group) cannot lift a pause that covers it from above."""
        if ("all", "") in self._pauses and kind != "all":
            raise JobActionError("everything is paused: resume everything, not one part")
        if kind == "job":
            held = [g for g in self.config.job(name).groups if ("group", g) in self._pauses]
            if held:
                raise JobActionError(f"job '{name}' is paused through group '{held[0]}'")

    def _apply_pauses(self, before: set[str]) -> None:
        scheduler = self._scheduler
        if scheduler is None:
            return
        for job in self.config.jobs.values():
            now_paused = self.is_paused(job)
            if now_paused == (job.name in before) or scheduler.get_job(job.name) is None:
                continue
            if now_paused:
                scheduler.pause_job(job.name)
            else:
                scheduler.resume_job(job.name)

    # --- stopping ---------------------------------------------------------------------

    def stop_run(self, run_id: str, *, kill: bool = False) -> None:
        """Stop a queued or running run (SIGTERM, or SIGKILL at once with `kill`)."""
        active = self._active.get(run_id)
        if active is not None:
            self._request_stop(active, Result.STOPPED, kill=kill)
            return
        waiting = self.waiting_room.remove(run_id)
        if waiting is not None:
            self._not_started(waiting, Result.STOPPED, "stopped while waiting", recorded=True)
            return
        run = self._queue.remove(run_id) or self._take_backlogged(run_id)
        if run is None:
            raise JobActionError(f"no run '{run_id}' is queued, waiting or running")
        self._release(run)
        self._not_started(run, Result.STOPPED, "stopped before it started", recorded=True)

    def stop_all(self, result: Result, *, kill: bool = False) -> None:
        """Stop every running run, recording `result` (e.g. SHUTDOWN)."""
        for active in list(self._active.values()):
            self._request_stop(active, result, kill)

    def _request_stop(self, active: _Active, result: Result, kill: bool) -> None:
        if active.stop_result is None or kill:
            active.stop_result = active.stop_result or result
            active.kill = active.kill or kill
            if active.runner is not None:
                active.runner.stop(active.stop_result, kill=kill)

    def _busy_reason(self, job: str) -> str:
        running = [a.run.run_id for a in self._active.values() if a.run.job == job]
        if running:
            return f"run {running[0]} still running"
        return "a run of this job is already queued"

    def _take_backlogged(self, run_id: str) -> RunRecord | None:
        for runs in self._backlog.values():
            for run in runs:
                if run.run_id == run_id:
                    runs.remove(run)
                    return run
        return None

    def _cancel_waiting(self, reason: str, *, job: str | None = None) -> None:
        """Close every queued or backlogged run (of `job`, or of all jobs) as NOT_STARTED.

        For one job (deleted or disabled), its runs WAITING for requirements too.
        """
        result = Result.SHUTDOWN if job is None else Result.STOPPED
        if job is not None:
            for waiting in self.waiting_room.runs():
                if waiting.job == job and self.waiting_room.remove(waiting.run_id) is not None:
                    self._not_started(waiting, result, reason, recorded=True)
        for run in self.queued():
            if job is not None and run.job != job:
                continue
            self._queue.remove(run.run_id)
            self._take_backlogged(run.run_id)
            self._release(run)
            self._not_started(run, result, reason, recorded=True)

    # --- helpers ------------------------------------------------------------------------

    def _publish(self, event: Event) -> None:
        self._bus.publish(event)

    def _on_output(self, active: _Active, lines: tuple[str, ...]) -> None:
        self._publish(RunOutputWritten(at=self._clock(), run=active.run, lines=lines[-100:]))

    def _environment(self, job: Job, run: RunRecord) -> dict[str, str]:
        # Only commands get an environment: building one costs a copy of os.environ.
        return job_environment(self.config, job, run) if isinstance(job.kind, CommandSpec) else {}

    def _output_path(self, run: RunRecord) -> Path:
        # OutputCapture creates the folder at the first output, if any comes.
        return self._output_dir / run.job / f"{run.run_id}.log"

    def _prune_output(self, job: str) -> None:
        """Keep the newest OUTPUT_FILES_KEPT output files of `job`."""
        folder = self._output_dir / job
        running = {f"{run_id}.log" for run_id in self._active}
        try:
            files = [f for f in folder.glob("*.log") if f.is_file() and f.name not in running]
            files.sort(key=lambda f: f.stat().st_mtime)
        except OSError:
            return
        for old in files[: max(0, len(files) - OUTPUT_FILES_KEPT)]:
            with contextlib.suppress(OSError):
                old.unlink()


def secret_names(config: Config) -> set[str]:
    """Environment variables holding the scheduler's own secrets (never passed to jobs)."""
    names: set[str] = set()
    if config.email is not None:
        smtp = config.email.smtp
        names.update(filter(None, (smtp.password_env, smtp.username_env)))
    if config.settings.cluster is not None and config.settings.cluster.password_env:
        names.add(config.settings.cluster.password_env)
    return names


def job_environment(config: Config, job: Job, run: RunRecord) -> dict[str, str]:
    """The environment of a run: the scheduler's minus its secrets, the job's `env`, our names."""
    hidden = secret_names(config)
    env = {key: value for key, value in os.environ.items() if key not in hidden}
    if isinstance(job.kind, CommandSpec):
        env.update(job.kind.env)
    env["TUISCHED_JOB"] = job.name
    env["TUISCHED_RUN_ID"] = run.run_id
    env["TUISCHED_SLOT"] = run.slot.isoformat() if run.slot is not None else ""
    return env


def recent_slots(
    schedule: Schedule, after: datetime, until: datetime, keep: int
) -> tuple[list[datetime], int]:
    """The newest `keep` slots in (after, until], and how many there are in all.

    Walks at most SCAN_LIMIT slots: past that (an every-second job down for a
    month), the total is estimated from the pace so far and only the last
    stretch is walked.
    """
    newest: deque[datetime] = deque(maxlen=keep)
    first: datetime | None = None
    count = 0
    for slot in slots_between(schedule, after, until):
        first = first or slot
        newest.append(slot)
        count += 1
        if count == SCAN_LIMIT:
            break
    else:
        return list(newest), count
    assert first is not None  # noqa: S101  (count reached SCAN_LIMIT)
    pace = (newest[-1] - first) / (count - 1)
    if not pace:
        return list(newest), count
    skip_to = max(newest[-1], until - pace * keep * 2)
    estimate = count + int((skip_to - newest[-1]) / pace)
    for slot in slots_between(schedule, skip_to, until):
        newest.append(slot)
        estimate += 1
    return list(newest), estimate


def _launch_failed(error: LaunchError) -> Outcome:
    return Outcome(state=RunState.NOT_STARTED, result=Result.LAUNCH_FAILED, reason=str(error))
