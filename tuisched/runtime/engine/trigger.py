"""The APScheduler trigger that fires at our slots: APScheduler never parses a user's expression."""

from __future__ import annotations

from datetime import datetime, timedelta

from apscheduler.triggers.base import BaseTrigger

from tuisched.domain.model import AtSchedule, Schedule
from tuisched.domain.schedule.jitter import fire_time
from tuisched.domain.schedule.slots import describe, next_slot, previous_slot

_REMEMBERED = 64
"""Fire times whose slot a jittered trigger remembers (APScheduler asks a few at a time)."""
_TICK = timedelta(microseconds=1)


class SlotTrigger(BaseTrigger):  # type: ignore[misc]  # APScheduler 3 is untyped
    """An APScheduler 3 trigger that fires exactly at a schedule's slots.

    APScheduler never parses a user's expression: it only asks this trigger for
    the next fire time, which `next_slot` computes. With a `jitter`, the fire
    time of a slot is the slot plus its delay (`tuisched.domain.schedule.jitter`),
    always before the next slot; `slot_of` turns a fire time back into its slot.
    """

    __slots__ = ("_slots", "jitter", "name", "schedule")

    def __init__(self, schedule: Schedule, name: str = "", jitter: timedelta | None = None) -> None:
        self.schedule = schedule
        self.name = name
        self.jitter = jitter or timedelta(0)
        self._slots: dict[datetime, datetime] | None = None
        """Fire time -> slot, kept only for a jittered job (100,000 plain jobs: no dicts)."""

    def get_next_fire_time(
        self, previous_fire_time: datetime | None, now: datetime
    ) -> datetime | None:
        """The fire time of the next slot strictly after `previous_fire_time` if given,
        else after `now` (a jittered fire time always comes before the next slot, so
        the next slot after it is the one that follows)."""
        if previous_fire_time is not None and isinstance(self.schedule, AtSchedule):
            return None  # its one slot has fired (10,000 of them at once: no need to ask)
        after = now if previous_fire_time is None else previous_fire_time
        slot = next_slot(self.schedule, after)
        return None if slot is None else self.fire_at(slot)

    def fire_at(self, slot: datetime) -> datetime:
        """When the run for `slot` starts (the slot itself without jitter)."""
        if not self.jitter:
            return slot
        fire = fire_time(self.schedule, self.name, self.jitter, slot)
        if self._slots is None:
            self._slots = {}
        self._slots[fire] = slot
        while len(self._slots) > _REMEMBERED:  # dicts keep insertion order: drop the oldest
            del self._slots[next(iter(self._slots))]
        return fire

    def slot_of(self, fire: datetime) -> datetime:
        """The slot whose run starts at `fire` (a fire time this trigger gave)."""
        if not self.jitter:
            return fire
        slot = self._slots.get(fire) if self._slots is not None else None
        if slot is None:  # forgotten: the last slot at or before it (jitter stays before the next)
            slot = previous_slot(self.schedule, fire + _TICK) or fire
        return slot

    def __str__(self) -> str:
        return f"slots: {describe(self.schedule)}"

    def __repr__(self) -> str:
        return f"<SlotTrigger ({describe(self.schedule)}, tz={self.schedule.tz.key})>"
