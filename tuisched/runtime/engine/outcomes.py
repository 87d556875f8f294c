"""How the end of a run is made known: its row in the history and its events on the bus.

Every part of the engine that closes a run (a launch failure, a skip, a
stop while queued, a missed slot, a retry that will not come) goes through
`Outcomes`, so the history and the bus always agree.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from tuisched.domain.bus import EventBus
from tuisched.domain.events import Event, RunConcluded, RunNotStarted, SlotMissed
from tuisched.domain.model import Job
from tuisched.domain.runs import Outcome, Result, RunRecord, RunState, Trigger, new_run_id
from tuisched.runtime.clock import Clock
from tuisched.runtime.store import AsyncHistory


@dataclass(slots=True)
class Outcomes:
    """Writes closed runs to the history and publishes what happened to them."""

    bus: EventBus
    history: AsyncHistory
    clock: Clock
    node: str
    ended: Callable[[RunRecord], None] = field(default=lambda run: None)
    """Called with every run that closes (in cluster mode: its end is written, fenced)."""

    def publish(self, event: Event) -> None:
        """Publish `event` on the bus."""
        self.bus.publish(event)

    def publish_many(self, events: Sequence[Event]) -> None:
        """Publish `events` on the bus, in order (a turn's: see `turn`)."""
        self.bus.publish_many(events)

    def not_started(
        self, run: RunRecord, result: Result, reason: str, *, recorded: bool = False
    ) -> RunRecord:
        """Close `run` as NOT_STARTED; `recorded` when its QUEUED row exists already."""
        now = self.clock.now()
        outcome = Outcome(state=RunState.NOT_STARTED, result=result, reason=reason)
        closed = run.finished(outcome, now)
        if recorded:
            self.history.update_soon(closed)
        else:
            self.history.insert_soon(closed)
        self.ended(closed)
        self.publish(RunNotStarted(at=now, run=closed))
        self.conclude(closed, {})
        return closed

    def conclude(self, run: RunRecord, data: Mapping[str, object]) -> None:
        """Publish the final outcome of `run` and its retries (alerts and dependants act on it)."""
        self.publish(RunConcluded(at=self.clock.now(), run=run, message_data=data))

    def slot_missed(
        self, job: Job, slot: datetime, now: datetime, reason: str, *, status: str = ""
    ) -> None:
        """Record that `job`'s `slot` passed without a run.

        Queued "at its slot": the history then lists missed slots where they belong.
        `status` says what was decided for it ("" while the operator has to: see
        `engine.ledger`).
        """
        run = RunRecord(
            run_id=new_run_id(), job=job.name, slot=slot, trigger=Trigger.SCHEDULE,
            state=RunState.MISSED, result=Result.MISSED, queued_at=slot, ended_at=now,
            node=self.node, reason=reason, status=status,
        )  # fmt: skip
        self.history.insert_soon(run)
        self.ended(run)
        self.publish(SlotMissed(at=now, run=run))
