"""Firing slots: APScheduler 3.11 in its own thread, due slots handed to the loop in batches.

APScheduler's scheduler core runs as a `BackgroundScheduler`: when thousands
of slots fall due at once, its synchronous submission pass would otherwise
freeze the event loop the console shares. Its only executor hands the due
slots to the loop through an inbox; the loop takes them FIRES_PER_STEP at a
time, runs the slots less than `grace` late and records the later ones as
MISSED. APScheduler only ever asks `SlotTrigger` for a next fire time: it
never parses a user's expression.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from apscheduler.executors.base import BaseExecutor
from apscheduler.job import Job as ApsJob
from apscheduler.schedulers.background import BackgroundScheduler

from tuisched.domain.config.config import collector_paused
from tuisched.domain.model import Config, Job, ManualSchedule
from tuisched.domain.runs import Trigger
from tuisched.domain.schedule.slots import next_slot
from tuisched.runtime.clock import Clock
from tuisched.runtime.engine.catchup import MAX_MISSED_RECORDED, Submit
from tuisched.runtime.engine.jobstore import HeapJobStore
from tuisched.runtime.engine.outcomes import Outcomes
from tuisched.runtime.engine.trigger import SlotTrigger

log = logging.getLogger(__name__)

FIRES_PER_STEP = 200
"""Due slots handled per loop iteration, so a burst never freezes the loop."""

LOADS_PER_STEP = 500
"""Jobs loaded per loop iteration at start and on a reload (40,000 jobs take about 1 s)."""


Due = tuple[datetime, datetime]
"""A slot and its fire time (later than the slot by the job's jitter delay)."""


def _noop() -> None:
    """Stands in for APScheduler's job function; our executor never calls it."""


_NOOP = f"{__name__}:_noop"


class _LoopExecutor(BaseExecutor):  # type: ignore[misc]  # APScheduler is untyped
    """Hands due slots to the loop instead of running anything.

    Bypasses APScheduler's instance counting: the engine applies `overlap`.
    """

    def __init__(self, deliver: Callable[[str, list[Due]], None]) -> None:
        super().__init__()
        self._deliver = deliver

    def submit_job(self, job: Any, run_times: list[datetime]) -> None:
        trigger: SlotTrigger = job.trigger
        self._deliver(job.id, [(trigger.slot_of(fire), fire) for fire in run_times])

    def _do_submit_job(self, job: Any, run_times: list[datetime]) -> None:  # pragma: no cover
        raise NotImplementedError


@dataclass(slots=True)
class _Inbox:
    """Due slots crossing from APScheduler's thread to the loop, batched."""

    loop: asyncio.AbstractEventLoop
    take: Callable[[], None]
    items: deque[tuple[str, list[Due]]] = field(default_factory=deque)
    lock: threading.Lock = field(default_factory=threading.Lock)
    scheduled: bool = False

    def put(self, job: str, run_times: list[Due]) -> None:
        with self.lock:
            self.items.append((job, run_times))
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
        submit: Submit,
        fires: Callable[[Job], bool],
    ) -> None:
        """`fires(job)` says whether a slot of `job` may run now (not paused, not stopping)."""
        self._config = config
        self._clock = clock
        self._outcomes = outcomes
        self._submit = submit
        self._fires = fires
        self._scheduler: BackgroundScheduler | None = None
        self._inbox: _Inbox | None = None
        self._fired: dict[str, datetime] = {}
        """The newest slot of each job that fired or that the history holds."""

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
        self._scheduler = BackgroundScheduler(
            timezone=UTC,
            jobstores={"default": store},
            executors={"default": _LoopExecutor(self._inbox.put)},
            job_defaults={"misfire_grace_time": None, "coalesce": False, "max_instances": 1},
        )
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
        """The APScheduler job of `job`, built the way APScheduler's own job stores
        rebuild theirs (`__setstate__`): `add_job` checks the function's signature and
        every option of each of 100,000 jobs, more than half of loading them."""
        built: ApsJob = ApsJob.__new__(ApsJob)
        built.__setstate__({
            "version": 1, "id": name, "func": _NOOP, "trigger": trigger,
            "executor": "default", "args": (), "kwargs": {}, "name": name,
            "misfire_grace_time": None, "coalesce": False, "max_instances": 1,
            "next_run_time": None if paused else first,
        })  # fmt: skip
        built._scheduler = self._scheduler
        built._jobstore_alias = "default"
        return built

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
        batch, more = self._inbox.take_some(FIRES_PER_STEP)
        try:
            now = self._clock.now()
            jobs = self._config().jobs
            for name, dues in batch:
                job = jobs.get(name)
                if job is None or not self._fires(job):
                    continue  # deleted, stopping, or paused since APScheduler fired it
                try:
                    self._fire(job, [slot for slot, _ in dues], now, [f for _, f in dues])
                except Exception:
                    log.exception("could not fire %s at %s", name, dues)
        finally:
            if more:
                asyncio.get_running_loop().call_soon(self._take)

    def _fire(
        self, job: Job, slots: list[datetime], now: datetime, fires: list[datetime] | None = None
    ) -> None:
        """Run the slots less than `grace` late, counted from their `fires` (fire times,
        the slots themselves by default: a jitter delay is not lateness); record the
        others as MISSED."""
        dues = list(zip(slots, slots if fires is None else fires, strict=True))
        fired = self._fired.get(job.name)
        if fired is not None:  # held by the history already (the clock was set back)
            dues = [(slot, fire) for slot, fire in dues if slot > fired]
        if dues:
            self._fired[job.name] = max(slot for slot, _ in dues)
        late = [slot for slot, fire in dues if now - fire >= job.grace]
        kept = late[-MAX_MISSED_RECORDED:]
        for slot in kept:
            seconds = int((now - slot).total_seconds())
            reason = f"too late to run ({seconds}s late)"
            if slot == kept[0] and len(late) > len(kept):
                reason += f" (and {len(late) - MAX_MISSED_RECORDED} earlier slots)"
            self._outcomes.slot_missed(job, slot, now, reason)
        for slot, fire in dues:
            if now - fire < job.grace:
                self._submit(job, slot, Trigger.SCHEDULE)
