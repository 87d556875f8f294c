"""Runs that wait for their data (SPEC R9): WAITING until the upstream slots succeed.

A scheduled run of a job with `requires` enters the waiting room. Each
requirement names an upstream job and the slot it must have succeeded for
(`tuisched.domain.config.dependencies.required_slot`; the job's own previous slot for
`self`). The room checks the history once, then listens for upstream
successes on the bus: no polling. A run whose requirements all hold leaves
for the run queue; one still waiting at its deadline (`wait_timeout`, else
the job's next slot; a backfill run of a past slot waits as long from when it was
queued) is NOT_STARTED. WAITING rows stay in the history, so a
restarted scheduler takes them back in.

`requires: [self]` holds unless the job's previous slot has a run that did not
succeed (FAILED, NOT_STARTED, MISSED...) and nothing later succeeded: a
previous slot with no run at all (the first run, or the job was paused) does
not hold it back. A successful run started by hand at or after the required
slot counts, so an operator can always unblock a chain by hand.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from tuisched.domain.bus import EventBus, Subscription
from tuisched.domain.config.config import SELF
from tuisched.domain.config.dependencies import previous_own_slot, required_slot
from tuisched.domain.events import RunFinished, RunWaiting
from tuisched.domain.model import Config, Job
from tuisched.domain.runs import RunRecord, RunState, Trigger
from tuisched.domain.schedule.slots import next_slot
from tuisched.runtime.clock import Clock, Timer
from tuisched.runtime.store import AsyncHistory, HistoryStore
from tuisched.runtime.store.slots import has_run_for, has_success

log = logging.getLogger(__name__)

DEFAULT_WAIT = timedelta(days=1)
"""How long a run waits when the job has no `wait_timeout` and no next slot."""


@dataclass(frozen=True, slots=True)
class Requirement:
    """`job` must have succeeded for `slot` (or later) before the run may start."""

    job: str
    slot: datetime
    own: bool = False
    """The job's own previous slot (`requires: [self]`)."""

    def describe(self) -> str:
        """`export slot 2026-05-07T01:30:00+02:00`."""
        return f"{self.job} slot {self.slot.isoformat()}"


def requirements_of(config: Config, job: Job, slot: datetime) -> list[Requirement]:
    """What a run of `job` at `slot` needs (pure; see the module docstring)."""
    if job.schedule is None:
        return []
    needed = []
    for name in job.requires:
        if name in (SELF, job.name):
            previous = previous_own_slot(job.schedule, slot)
            if previous is not None:
                needed.append(Requirement(job.name, previous, own=True))
            continue
        upstream = config.jobs.get(name)
        if upstream is None or upstream.schedule is None:
            continue  # validation prevents it; a reload may remove an upstream meanwhile
        required = required_slot(job.schedule, upstream.schedule, slot)
        if required is not None:
            needed.append(Requirement(name, required))
    return needed


def holds(store: HistoryStore, requirement: Requirement) -> bool:
    """Whether the history satisfies `requirement` (runs on the history's thread)."""
    if has_success(store, requirement.job, requirement.slot):
        return True
    return requirement.own and not has_run_for(store, requirement.job, requirement.slot)


def _unmet(needed: list[Requirement]) -> Callable[[HistoryStore], list[Requirement]]:
    """A history query: which of `needed` do not hold."""
    return lambda store: [requirement for requirement in needed if not holds(store, requirement)]


@dataclass(slots=True)
class _Waiting:
    run: RunRecord
    job: Job
    needs: list[Requirement]
    timer: Timer | None = None


@dataclass(slots=True)
class WaitingRoom:
    """WAITING runs, admitted to the queue once their requirements hold."""

    history: AsyncHistory
    bus: EventBus
    config: Callable[[], Config]
    admit: Callable[[RunRecord, Job], None]
    """Called when a run may go to the run queue."""
    give_up: Callable[[RunRecord, str], object]
    """Called with the reason when a run stops waiting without its requirements."""
    clock: Clock
    unmet: Callable[[list[Requirement]], Awaitable[list[Requirement]]] | None = None
    """Which requirements do not hold, when not the history's say (cluster mode: the
    cluster's runs, whichever node ran them)."""
    _waiting: dict[str, _Waiting] = field(default_factory=dict)
    _subscription: Subscription | None = None
    _stopped: bool = False

    def start(self) -> None:
        """Listen for upstream successes."""
        self._stopped = False
        self._subscription = self.bus.subscribe(RunFinished, self._on_finished)

    def stop(self) -> None:
        """Stop listening and timing. The runs stay WAITING in the history."""
        self._stopped = True
        if self._subscription is not None:
            self._subscription.unsubscribe()
        for waiting in self._waiting.values():
            if waiting.timer is not None:
                waiting.timer.cancel()
        self._waiting.clear()

    def runs(self) -> list[RunRecord]:
        """The runs waiting now."""
        return [waiting.run for waiting in self._waiting.values()]

    def needs(self, run_id: str) -> list[Requirement]:
        """What the run `run_id` still waits for."""
        waiting = self._waiting.get(run_id)
        return list(waiting.needs) if waiting is not None else []

    async def enter(self, run: RunRecord, job: Job, *, recorded: bool = False) -> None:
        """Take `run` in: admit it at once if its requirements hold, else keep it WAITING.

        `recorded` when its row exists already (a run taken back after a restart).
        The run is registered before the history is asked, so an upstream success
        that lands meanwhile is not missed.
        """
        if self._stopped:
            return
        needed = requirements_of(self.config(), job, run.slot) if run.slot is not None else []
        waiting = _Waiting(run=run, job=job, needs=needed)
        self._waiting[run.run_id] = waiting
        if recorded and self._deadline(waiting) <= self.clock.now():
            self._waiting.pop(run.run_id)  # its time ran out while the scheduler was down
            self.give_up(run, "requirements not met in time (the scheduler was not running)")
            return
        pending = await self._pending(needed)
        if self._stopped or self._waiting.get(run.run_id) is not waiting:
            return  # released by a success meanwhile, removed, or shutting down
        waiting.needs = [need for need in waiting.needs if need in pending]
        if not waiting.needs:
            self._release(waiting)
            return
        self._wait(waiting, recorded=recorded)

    async def _pending(self, needed: list[Requirement]) -> list[Requirement]:
        if not needed:
            return []
        if self.unmet is not None:
            return await self.unmet(needed)
        return await self.history.call(_unmet(needed))

    def _wait(self, waiting: _Waiting, *, recorded: bool) -> None:
        reason = "waiting for " + ", ".join(r.describe() for r in waiting.needs)
        waiting.run = replace(waiting.run, state=RunState.WAITING, reason=reason)
        if recorded:
            self.history.update_soon(waiting.run)
        else:
            self.history.insert_soon(waiting.run)
        self._arm_deadline(waiting)
        self.bus.publish(RunWaiting(at=self.clock.now(), run=waiting.run))

    async def recheck(self) -> None:
        """Ask the history again: successes from elsewhere (`tuisched run`, another
        node) are not on this bus. Runs from the heartbeat and at each deadline."""
        for waiting in list(self._waiting.values()):
            pending = await self._pending(list(waiting.needs))
            if self._waiting.get(waiting.run.run_id) is waiting:
                waiting.needs = [need for need in waiting.needs if need in pending]
                if not waiting.needs:
                    self._release(waiting)

    def _arm_deadline(self, waiting: _Waiting) -> None:
        deadline = self._deadline(waiting)
        delay = max(0.0, (deadline - self.clock.now()).total_seconds())
        waiting.timer = self.clock.call_later(delay, self._expire, waiting.run.run_id)

    def _deadline(self, waiting: _Waiting) -> datetime:
        job, run = waiting.job, waiting.run
        if job.wait_timeout is not None:
            return run.queued_at + job.wait_timeout
        following = next_slot(job.schedule, run.slot) if job.schedule and run.slot else None
        if following is not None and run.slot is not None and run.trigger is Trigger.BACKFILL:
            # A past slot's next one has passed too: a backfill run waits as long as the
            # scheduled run of its slot would have, from when it was queued.
            return run.queued_at + (following.astimezone(UTC) - run.slot.astimezone(UTC))
        return following if following is not None else run.queued_at + DEFAULT_WAIT

    def _expire(self, run_id: str) -> None:
        waiting = self._waiting.get(run_id)
        if waiting is not None:
            asyncio.get_running_loop().create_task(self._expire_after_check(waiting))

    async def _expire_after_check(self, waiting: _Waiting) -> None:
        await self.recheck()  # a success recorded elsewhere may have come in time
        if self._stopped or self._waiting.get(waiting.run.run_id) is not waiting:
            return
        self._waiting.pop(waiting.run.run_id)
        missing = ", ".join(r.describe() for r in waiting.needs)
        self.give_up(waiting.run, f"requirements not met in time: {missing}")

    def _on_finished(self, event: RunFinished) -> None:
        run = event.run
        if run.state is not RunState.SUCCESS:
            return
        instant = run.slot if run.slot is not None else run.started_at
        if instant is None:
            return
        for waiting in list(self._waiting.values()):
            waiting.needs = [
                need for need in waiting.needs if not (need.job == run.job and instant >= need.slot)
            ]
            if not waiting.needs:
                self._release(waiting)

    def _release(self, waiting: _Waiting) -> None:
        self._waiting.pop(waiting.run.run_id, None)
        if waiting.timer is not None:
            waiting.timer.cancel()
        self.admit(waiting.run, waiting.job)

    def runs_of(self, job: str) -> list[RunRecord]:
        """Take every waiting run of `job` out (its job changed, was deleted or disabled)."""
        taken = [w.run for w in list(self._waiting.values()) if w.run.job == job]
        return [run for run in taken if self.remove(run.run_id) is not None]

    def remove(self, run_id: str) -> RunRecord | None:
        """Take a waiting run out (stopped by an operator, its job deleted)."""
        waiting = self._waiting.pop(run_id, None)
        if waiting is None:
            return None
        if waiting.timer is not None:
            waiting.timer.cancel()
        return waiting.run
