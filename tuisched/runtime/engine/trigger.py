"""The APScheduler trigger that fires at our slots: APScheduler never parses a user's expression."""

from __future__ import annotations

from datetime import datetime

from apscheduler.triggers.base import BaseTrigger

from tuisched.domain.model import Schedule
from tuisched.domain.schedule.slots import describe, next_slot


class SlotTrigger(BaseTrigger):  # type: ignore[misc]  # APScheduler 3 is untyped
    """An APScheduler 3 trigger that fires exactly at a schedule's slots.

    APScheduler never parses a user's expression: it only asks this trigger for
    the next fire time, which `next_slot` computes.
    """

    __slots__ = ("schedule",)

    def __init__(self, schedule: Schedule) -> None:
        self.schedule = schedule

    def get_next_fire_time(
        self, previous_fire_time: datetime | None, now: datetime
    ) -> datetime | None:
        """The next slot strictly after `previous_fire_time` if given, else after `now`."""
        after = now if previous_fire_time is None else previous_fire_time
        return next_slot(self.schedule, after)

    def __str__(self) -> str:
        return f"slots: {describe(self.schedule)}"

    def __repr__(self) -> str:
        return f"<SlotTrigger ({describe(self.schedule)}, tz={self.schedule.tz.key})>"
