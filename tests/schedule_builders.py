"""Short builders for the schedule forms, shared by the schedule-math tests."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

from tuisched.domain.model import CronSchedule, EverySchedule, Unit
from tuisched.domain.schedule.cron import CronExpr

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")


def at(*parts: int, tz: ZoneInfo = BERLIN) -> datetime:
    """`at(2026, 5, 4, 2, 30)` is 2026-05-04 02:30 on `tz`'s wall clock."""
    year, month, day, *clock = parts
    hour, minute, second = [*clock, 0, 0, 0][:3]
    return datetime(year, month, day, hour, minute, second, tzinfo=tz)


def every(
    step: int,
    unit: Unit,
    start: datetime | None = None,
    stop: datetime | None = None,
    tz: ZoneInfo = BERLIN,
) -> EverySchedule:
    """`every <step> <unit>`, starting at `start` (2026-01-01 00:00 when not given)."""
    return EverySchedule(step=step, unit=unit, start=start or at(2026, 1, 1), stop=stop, tz=tz)


def cron(
    text: str,
    start: datetime | None = None,
    stop: datetime | None = None,
    tz: ZoneInfo = BERLIN,
) -> CronSchedule:
    return CronSchedule(expr=CronExpr.parse(text), start=start, stop=stop, tz=tz)
