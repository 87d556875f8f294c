"""Firing slots: APScheduler 3.11 in its own thread, due slots handed to the loop in batches.

APScheduler's scheduler core runs as a `BackgroundScheduler`: when thousands
of slots fall due at once, its synchronous submission pass would otherwise
freeze the event loop the console shares. Its pass over due jobs is our own
(`_BurstScheduler`): every job due at an instant crosses to the loop in one
batch, through an inbox, before any next fire time is worked out. The loop
takes FIRST_FIRES of them, then twice as many each iteration up to
FIRES_PER_STEP, runs the slots less than `grace` late and records the later
ones as MISSED. APScheduler only ever asks
`SlotTrigger` for a next fire time: it never parses a user's expression.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from threading import TIMEOUT_MAX
from typing import Any

from apscheduler.executors.base import BaseExecutor
from apscheduler.job import Job as ApsJob
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.schedulers.base import STATE_PAUSED

from tuisched.domain.config.config import collector_paused
from tuisched.domain.model import Config, Job, ManualSchedule
from tuisched.domain.schedule.duration import format_elapsed
from tuisched.domain.schedule.slots import next_slot
from tuisched.domain.text import counted
from tuisched.runtime.clock import Clock, SystemClock
from tuisched.runtime.engine.catchup import MAX_MISSED_RECORDED
from tuisched.runtime.engine.jobstore import HeapJobStore
from tuisched.runtime.engine.outcomes import Outcomes
from tuisched.runtime.engine.trigger import SlotTrigger

log = logging.getLogger(__name__)

FIRES_PER_STEP = 1000
"""Due slots handled per loop iteration, so a burst never freezes the loop."""
FIRST_FIRES = 125
"""Due slots handled in a burst's first iteration, doubled in each next one up to
FIRES_PER_STEP: the first runs' rows are written, and the runs started, while the loop
queues the rest."""

HANDOVER = 1000
"""Due jobs handed to the loop at a time by APScheduler's thread (the loop starts on the
first ones while the thread takes out the next)."""

MAX_WALKED = 100
"""Fire times after the one handed over that APScheduler's thread lists for a job found due
again and again (the process was stopped, or the clock jumped): beyond them, the job goes on
from its first slot after now. The loop records only the newest few as MISSED anyway."""

LOADS_PER_STEP = 500
"""Jobs loaded per loop iteration at start and on a reload (40,000 jobs take about 1 s)."""


Due = tuple[datetime, datetime]
"""A slot and its fire time (later than the slot by the job's jitter delay)."""
Deliver = Callable[[list[tuple[str, list[Due]]]], None]
"""Hands job ids with their due slots to the loop (from APScheduler's thread)."""


def _noop() -> None:
    """Stands in for APScheduler's job function; our executor never calls it."""


_NOOP = f"{__name__}:_noop"


class _LoopExecutor(BaseExecutor):  # type: ignore[misc]  # APScheduler is untyped
    """Hands due slots to the loop instead of running anything (for a job APScheduler
    submits itself; `_BurstScheduler` hands its due jobs over without it).

    Bypasses APScheduler's instance counting: the engine applies `overlap`.
    """

    def __init__(self, deliver: Deliver) -> None:
        super().__init__()
        self._deliver = deliver

    def submit_job(self, job: Any, run_times: list[datetime]) -> None:
        self._deliver([(job.id, [_due(job, fire) for fire in run_times])])

    def _do_submit_job(self, job: Any, run_times: list[datetime]) -> None:  # pragma: no cover
        raise NotImplementedError


class _BurstScheduler(BackgroundScheduler):  # type: ignore[misc]  # APScheduler is untyped
    """APScheduler's background scheduler, with a pass over due jobs made for bursts.

    APScheduler 3's own pass (`BaseScheduler._process_jobs`) submits due jobs
    one at a time, each with its next fire times worked out, an event and a
    job store update: about 25 us a job here, all before the last of 10,000
    slots due together is handed over. This pass hands every due job's fire
    time to the loop in one batch first, then works out the next fire times (a
    slot found due too, after a stall, follows in a second batch). It keeps
    the method's contract: it returns the seconds until it should run again,
    None to wait for a wake-up. It relies on what this module sets up: our
    job store and executor are the only ones, `coalesce` and instance limits
    are off (the engine applies `overlap`), and nobody listens to
    APScheduler's events. tests/test_libraries.py checks that APScheduler
    still calls the method this way.
    """

    def __init__(
        self, store: HeapJobStore, deliver: Deliver, *, now: Callable[[], datetime]
    ) -> None:
        """`now`: the wall clock that says which slots are due (see `SlotFiring`)."""
        super().__init__(
            timezone=UTC,
            jobstores={"default": store},
            executors={"default": _LoopExecutor(deliver)},
            job_defaults={"misfire_grace_time": None, "coalesce": False, "max_instances": 1},
        )
        self._store = store
        self._deliver = deliver
        self._now = now

    def _process_jobs(self) -> float | None:
        if self.state == STATE_PAUSED:
            return None
        now = self._now()
        with self._jobstores_lock:
            due: list[Any] = []
            while chunk := self._store.take_due(now, HANDOVER):
                self._deliver([(job.id, [_due(job, job.next_run_time)]) for job in chunk])
                due += chunk
            later = [found for found in (self._advance(job, now) for job in due) if found]
            if later:
                self._deliver(later)
            upcoming: datetime | None = self._store.get_next_run_time()
        if upcoming is None or self.state == STATE_PAUSED:
            return None
        wait = upcoming.timestamp() - self._now().timestamp()
        return float(min(max(wait, 0.0), TIMEOUT_MAX))

    def _advance(self, job: Any, now: datetime) -> tuple[str, list[Due]] | None:
        """Move `job` on to its first fire time after `now`, or drop it when it has none;
        returns the fire times before that one, after the one handed over, if any."""
        trigger: SlotTrigger = job.trigger
        also: list[Due] = []
        try:
            upcoming = trigger.get_next_fire_time(job.next_run_time, now)
            while upcoming is not None and upcoming <= now:
                if len(also) == MAX_WALKED:  # a long stall: the rest are counted, not listed
                    upcoming = trigger.get_next_fire_time(None, now)
                    break
                also.append(_due(job, upcoming))
                upcoming = trigger.get_next_fire_time(upcoming, now)
        except Exception:  # a bug of ours: this job fires no more, the others go on
            log.exception("no next slot of %s after %s: it fires no more", job.id, now)
            upcoming = None
        if upcoming is None:
            self._store.remove_job(job.id)
        else:
            job.next_run_time = upcoming  # what `Job._modify` would set: our trigger's value
            self._store.update_job(job)
        return (job.id, also) if also else None


def built_job(
    scheduler: BackgroundScheduler | None, name: str, trigger: SlotTrigger, first: datetime | None
) -> ApsJob:
    """The APScheduler job called `name`, first due at `first` (None: paused), built the
    way APScheduler's own job stores rebuild theirs (`__setstate__`): `add_job` checks
    the function's signature and every option of each of 100,000 jobs, more than half
    of loading them. It sets the job's private `_scheduler` and `_jobstore_alias` as
    `add_job` does; tests/test_libraries.py checks that it is the job `add_job` builds.
    """
    built: ApsJob = ApsJob.__new__(ApsJob)
    built.__setstate__({
        "version": 1, "id": name, "func": _NOOP, "trigger": trigger,
        "executor": "default", "args": (), "kwargs": {}, "name": name,
        "misfire_grace_time": None, "coalesce": False, "max_instances": 1,
        "next_run_time": first,
    })  # fmt: skip
    built._scheduler = scheduler
    built._jobstore_alias = "default"
    return built


def _due(job: Any, fire: datetime) -> Due:
    """The slot of an APScheduler job's fire time, and the fire time."""
    trigger: SlotTrigger = job.trigger
    return (trigger.slot_of(fire), fire)


@dataclass(slots=True)
class _Inbox:
    """Due slots crossing from APScheduler's thread to the loop, batched."""

    loop: asyncio.AbstractEventLoop
    take: Callable[[], None]
    items: deque[tuple[str, list[Due]]] = field(default_factory=deque)
    lock: threading.Lock = field(default_factory=threading.Lock)
    scheduled: bool = False

    def put(self, batch: list[tuple[str, list[Due]]]) -> None:
        """Queue `batch` for the loop and wake it, once for all items queued meanwhile."""
        with self.lock:
            self.items.extend(batch)
            if self.scheduled:
                return
            self.scheduled = True
        self.loop.call_soon_threadsafe(self.take)

    def take_some(self, limit: int) -> tuple[list[tuple[str, list[Due]]], bool]:
        """Up to `limit` items, and whether more remain."""
        with self.lock:
            batch = [self.items.popleft() for _ in range(min(limit, len(self.items)))]
            more = bool(self.items)
            self.scheduled = more
        return batch, more


class SlotFiring:
    """Keeps APScheduler's jobs in step with the configuration and turns due slots into runs."""

    def __init__(
        self,
        *,
        config: Callable[[], Config],
        clock: Clock,
        outcomes: Outcomes,
        submit: Callable[[list[tuple[Job, datetime]]], None],
        fires: Callable[[Job], bool],
        paused_since: Callable[[Job], datetime | None] = lambda job: None,
    ) -> None:
        """`submit(slots)` queues a run of each (job, slot) due, in one go; `fires(job)` says
        whether a slot of `job` may run now (not paused, not stopping); `paused_since(job)`
        when a paused job's firing was paused."""
        self._config = config
        self._clock = clock
        self._outcomes = outcomes
        self._submit_slots = submit
        self._fires = fires
        self._paused_since = paused_since
        self._scheduler: BackgroundScheduler | None = None
        self._inbox: _Inbox | None = None
        self._fired: dict[str, datetime] = {}
        """The newest slot of each job that fired or that the history holds."""
        self._step = FIRST_FIRES
        """Due slots the loop takes in its next iteration (a burst's grow: `FIRST_FIRES`)."""

    async def start(
        self, jobs: list[tuple[Job, bool]], now: datetime, held: dict[str, datetime]
    ) -> None:
        """Load `jobs` (each with whether it is paused) and start firing slots after `now`,
        and after the newest slot of each job that the history holds (`held`).

        A slot the history holds never fires again, even when the wall clock is
        now behind it (a restart after the clock was set back). Jobs are loaded
        a few hundred at a time, the loop free in between, and APScheduler
        starts once all are in (100,000 jobs: about 2 s); a slot that fell due
        meanwhile fires at once then (within its `grace`, like any late slot),
        because each job's first slot is counted from `now`.
        """
        self._fired = dict(held)
        self._inbox = _Inbox(asyncio.get_running_loop(), self._take)
        store = HeapJobStore()
        # APScheduler's thread fires slots as the system's wall clock reaches them, whatever
        # the injected clock says (see `tuisched.runtime.clock`): tests drive runs by hand.
        self._scheduler = _BurstScheduler(store, self._inbox.put, now=SystemClock().now)
        for chunk in range(0, len(jobs), LOADS_PER_STEP):
            with collector_paused():  # 100,000 APScheduler jobs: no cycles, many objects
                for job, paused in jobs[chunk : chunk + LOADS_PER_STEP]:
                    due = self._first_slot(job, now)
                    if due is not None:
                        store.add_job(self._job_for(job.name, *due, paused=paused))
            await asyncio.sleep(0)
        # Started once every job is in: a slot due meanwhile fires at once now.
        self._scheduler.start()

    def stop(self) -> None:
        """Fire no more slots."""
        if self._scheduler is not None and self._scheduler.running:
            self._scheduler.shutdown(wait=False)

    def load(self, job: Job, now: datetime, *, paused: bool) -> None:
        """Fire `job`'s slots after `now` (a job whose window is past is not loaded)."""
        due = self._first_slot(job, now)
        if due is None or self._scheduler is None:
            return
        trigger, first = due
        self._scheduler.add_job(
            _noop, trigger=trigger, id=job.name, name=job.name,
            replace_existing=True, next_run_time=None if paused else first,
        )  # fmt: skip

    def _first_slot(self, job: Job, now: datetime) -> tuple[SlotTrigger, datetime] | None:
        """`job`'s trigger and the fire time of its first slot after `now` and after what
        the history holds; None when it has none to fire (disabled, manual, `after` a
        job, stop past)."""
        schedule = job.schedule
        if not job.enabled or schedule is None or isinstance(schedule, ManualSchedule):
            return None
        fired = self._fired.get(job.name)
        first = next_slot(schedule, now if fired is None else max(now, fired))
        if first is None:
            return None
        trigger = SlotTrigger(schedule, job.name, job.jitter)
        return trigger, trigger.fire_at(first)

    def _job_for(self, name: str, trigger: SlotTrigger, first: datetime, *, paused: bool) -> ApsJob:
        """The APScheduler job of `job` (see `built_job`)."""
        return built_job(self._scheduler, name, trigger, None if paused else first)

    def unload(self, name: str) -> None:
        """Fire no more slots of the job called `name`."""
        if self._scheduler is not None and self._scheduler.get_job(name) is not None:
            self._scheduler.remove_job(name)

    def set_paused(self, job: Job, paused: bool) -> None:
        """Hold `job`'s slots (or let them fire again from the next one after now)."""
        scheduler = self._scheduler
        if scheduler is None or scheduler.get_job(job.name) is None:
            return
        if paused:
            scheduler.pause_job(job.name)
        else:
            scheduler.resume_job(job.name)

    def next_fire(self, name: str) -> datetime | None:
        """The slot `name` fires next (without its jitter delay: the slot is what the
        console and `tuisched next` show); None when paused, finished, manual or
        `after` a job."""
        job = self._scheduler.get_job(name) if self._scheduler is not None else None
        if job is None or job.next_run_time is None:
            return None
        trigger: SlotTrigger = job.trigger
        slot: datetime = trigger.slot_of(job.next_run_time)
        return slot

    def _take(self) -> None:
        assert self._inbox is not None  # noqa: S101  (set in start before any fire)
        batch, more = self._inbox.take_some(self._step)
        self._step = min(FIRES_PER_STEP, self._step * 2) if more else FIRST_FIRES
        due: list[tuple[Job, datetime]] = []
        try:
            now = self._clock.now()
            jobs = self._config().jobs
            for name, dues in batch:
                job = jobs.get(name)
                if job is None:
                    continue  # deleted since APScheduler fired it
                if not self._fires(job):  # stopping, or paused since APScheduler fired it
                    self._held_back(job, dues, now)
                    continue
                try:
                    self._fire(job, dues, now, due)
                except Exception:
                    log.exception("could not fire %s at %s", name, dues)
            self._submit_slots(due)
        finally:
            if more:
                asyncio.get_running_loop().call_soon(self._take)

    def _held_back(self, job: Job, dues: list[Due], now: datetime) -> None:
        """Slots APScheduler fired before `job` was paused, taken only after: recorded
        MISSED (their decision waits in the downtime ledger), never dropped. The slots
        after the pause began are its own, recorded when it is resumed."""
        since = self._paused_since(job)
        if since is None:
            return  # the scheduler is stopping: its next start counts what it missed
        for slot, _ in dues:
            if slot <= since:
                reason = "the job was paused before this slot could start"
                self._outcomes.slot_missed(job, slot, now, reason)

    def _fire(
        self, job: Job, dues: list[Due], now: datetime, due: list[tuple[Job, datetime]]
    ) -> None:
        """Add the slots less than `grace` late, counted from their fire times (a jitter
        delay is not lateness), to `due`; record the others as MISSED."""
        fired = self._fired.get(job.name)
        if fired is not None:  # held by the history already (the clock was set back)
            dues = [(slot, fire) for slot, fire in dues if slot > fired]
        # Not due yet by the runtime's clock: only where that clock is not the wall clock
        # APScheduler fires by (a test's), which tells it when a slot comes.
        dues = [(slot, fire) for slot, fire in dues if fire <= now]
        if not dues:
            return
        self._fired[job.name] = max(slot for slot, _ in dues)
        grace = job.grace
        late = [slot for slot, fire in dues if now - fire >= grace]
        kept = late[-MAX_MISSED_RECORDED:]
        for slot in kept:
            reason = f"too late to run ({format_elapsed(now - slot)} late)"
            if slot == kept[0] and len(late) > len(kept):
                reason += f" (and {counted(len(late) - MAX_MISSED_RECORDED, 'earlier slot')})"
            self._outcomes.slot_missed(job, slot, now, reason)
        due.extend((job, slot) for slot, fire in dues if now - fire < grace)
