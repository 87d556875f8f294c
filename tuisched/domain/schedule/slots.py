"""Slots of every schedule form, computed from the configuration alone (R5, R6).

A *slot* is a scheduled instant. Every function here is pure: the current time
is always a parameter, inputs and outputs are time-zone aware, and results are
returned in the schedule's zone.

Next-run rule: the next slot is derived from `start` (or the cron expression)
and `after`, never from run history, in O(1) for `every` schedules however far
`after` is from `start`.

Steps: second, minute and hour steps are exact elapsed time (`start + k*step`
as absolute instants), so they stay regular through DST. Day, week, month and
year steps are calendar steps on the wall clock: slot k's wall time is
`start`'s plus k days/weeks, or plus k months/years with the day clamped to the
month's last day (Jan 31 + 1 month is Feb 28/29; always counted from `start`,
so March is back to the 31st).

DST policy (mirrors Vixie/Debian cron): a schedule is *fixed-time* when it names
wall-clock times (cron without a wildcard minute/hour/second field; calendar
steps). A fixed-time wall time in a gap runs once at the first instant after
the gap; one in a fold runs once, at its first occurrence. *Frequent* cron
(wildcard minute or hour) follows real time: gap times do not happen, fold
times happen in both passes. Slots are strictly increasing, so no instant ever
gets two runs.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Literal, overload
from zoneinfo import ZoneInfo

from tuisched.domain.errors import ScheduleError
from tuisched.domain.model import (
    AtSchedule,
    CronSchedule,
    EverySchedule,
    ManualSchedule,
    Schedule,
    Unit,
)
from tuisched.domain.schedule.duration import parse_duration

__all__ = [
    "describe",
    "first_slot_at_or_after",
    "has_future",
    "localize",
    "next_slot",
    "next_slots",
    "parse_every",
    "previous_slot",
    "slots_between",
]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SECOND = timedelta(seconds=1)
_TICK = timedelta(microseconds=1)
_PROBE = timedelta(days=1)
"""Offset probes while walking frequent cron slots. In the tz database no zone
has changed its offset twice within 6.9 days since 1970, so no transition can
hide between two probes a day apart."""
_EXACT_UNITS = {
    Unit.SECOND: timedelta(seconds=1),
    Unit.MINUTE: timedelta(minutes=1),
    Unit.HOUR: timedelta(hours=1),
}
_LOOKBACK_LIMIT = timedelta(days=366 * 60)
"""`previous_slot` gives up beyond this (cron matches recur within 50 years)."""
_EVERY_RE = re.compile(r"\s*(?P<step>[+-]?\S+?)\s+(?P<unit>[A-Za-z]+)\s*")


# --- wall clock to instants ------------------------------------------------------


@overload
def localize(wall: datetime, tz: ZoneInfo, *, fixed_time: Literal[True] = True) -> datetime: ...
@overload
def localize(wall: datetime, tz: ZoneInfo, *, fixed_time: bool) -> datetime | None: ...
def localize(wall: datetime, tz: ZoneInfo, *, fixed_time: bool = True) -> datetime | None:
    """The instant a naive wall-clock time stands for in `tz`, per the DST policy.

    Args:
        wall: A naive wall-clock date-time (an aware one is read by its fields).
        tz: The zone the wall clock belongs to.
        fixed_time: True for schedules that name wall-clock times.

    Returns:
        The first occurrence (fold=0) of a time that happens twice; for a time
        in a gap, the first instant after the gap when `fixed_time`, else None
        (the time does not happen).
    """
    first = wall.replace(tzinfo=tz, fold=0)
    if _is_real(first):
        return first
    if not fixed_time:
        return None
    # fold=1 reads a gap time with the offset after the gap: an instant before it.
    before = _utc(wall.replace(tzinfo=tz, fold=1))
    return _offset_change(tz, before, first, before.astimezone(tz).utcoffset()).astimezone(tz)


def _is_real(instant: datetime) -> bool:
    """Whether an aware date-time's wall time exists (survives a round trip)."""
    tz = instant.tzinfo
    back = instant.astimezone(UTC).astimezone(tz)
    return back.replace(tzinfo=None) == instant.replace(tzinfo=None)


def _instant(moment: datetime, tz: ZoneInfo) -> datetime:
    """`moment` in `tz` as a real instant (a wall time in a gap moves past the gap)."""
    if moment.tzinfo is tz and not _is_real(moment):
        return localize(moment.replace(tzinfo=None), tz)
    return moment.astimezone(tz)


def _utc(moment: datetime) -> datetime:
    """`moment` in UTC: aware date-times sharing a zone compare and subtract by their
    wall clocks (fold ignored), so every comparison and sum here happens in UTC."""
    return moment.astimezone(UTC)


def _wall(moment: datetime, tz: ZoneInfo) -> datetime:
    """The naive wall-clock time of `moment` in `tz` (as written, if already in `tz`)."""
    if moment.tzinfo is not tz:
        moment = moment.astimezone(tz)
    return moment.replace(tzinfo=None)


def _ceil_seconds(moment: datetime) -> int:
    return -(-(moment - _EPOCH) // _SECOND)


def _offset_at(tz: ZoneInfo, seconds: int) -> timedelta | None:
    return (_EPOCH + timedelta(seconds=seconds)).astimezone(tz).utcoffset()


def _offset_change(
    tz: ZoneInfo, low: datetime, high: datetime, offset: timedelta | None
) -> datetime:
    """The first whole second in [low, high] whose UTC offset is not `offset`, in UTC.

    Requires exactly one offset change in the range, with `high` past it; tz
    transitions fall on whole seconds, so a bisection over seconds finds it exactly.
    """
    lo, hi = _ceil_seconds(low) - 1, _ceil_seconds(high)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _offset_at(tz, mid) == offset:
            lo = mid
        else:
            hi = mid
    return _EPOCH + timedelta(seconds=hi)


# --- next slot per schedule form ---------------------------------------------------


def next_slot(schedule: Schedule, after: datetime) -> datetime | None:
    """The first slot strictly after `after` (aware, any zone), in the schedule's zone.

    Honours `start` (a slot equal to it runs) and `stop` (a slot equal to it runs;
    none after it). None for a manual schedule and when no slot remains.
    """
    after = _utc(after)
    slot: datetime | None
    try:
        match schedule:
            case EverySchedule():
                slot = _next_every(schedule, after)
            case CronSchedule():
                slot = _next_cron(schedule, after)
            case AtSchedule():
                at = _instant(schedule.at, schedule.tz)
                slot = at if at > after else None
            case ManualSchedule():
                slot = None
    except OverflowError:  # the next one would be past the year 9999: none remains
        return None
    stop = _stop(schedule)
    if slot is None or (stop is not None and _utc(slot) > stop):
        return None
    return slot.astimezone(schedule.tz)


def _stop(schedule: Schedule) -> datetime | None:
    """The schedule's `stop` as a UTC instant, if it has one."""
    if isinstance(schedule, EverySchedule | CronSchedule) and schedule.stop is not None:
        return _utc(_instant(schedule.stop, schedule.tz))
    return None


def _next_every(schedule: EverySchedule, after: datetime) -> datetime:
    start = _instant(schedule.start, schedule.tz)
    if after < start:
        return start
    if schedule.unit in _EXACT_UNITS:
        step = schedule.step * _EXACT_UNITS[schedule.unit]
        index = (after - _utc(start)) // step + 1
        return _utc(start) + index * step
    return _next_calendar(schedule, after)


def _next_calendar(schedule: EverySchedule, after: datetime) -> datetime:
    """Calendar steps: estimate the step index from the wall clocks, then settle it.

    The estimate is off by at most one step (offsets differ by hours, steps are
    at least a day), so the loop runs two or three times.
    """
    start_wall = _wall(schedule.start, schedule.tz)
    after_wall = _wall(after, schedule.tz)
    if schedule.unit in (Unit.MONTH, Unit.YEAR):
        span = _month_index(after_wall) - _month_index(start_wall)
    else:
        span = (after_wall - start_wall).days
    index = max(1, span // _calendar_step(schedule) - 1)
    slot = _calendar_slot(schedule, index)
    while slot <= after:
        index += 1
        slot = _calendar_slot(schedule, index)
    return slot


def _calendar_step(schedule: EverySchedule) -> int:
    """The step in days (day, week) or months (month, year)."""
    factor = {Unit.DAY: 1, Unit.WEEK: 7, Unit.MONTH: 1, Unit.YEAR: 12}[schedule.unit]
    return schedule.step * factor


def _calendar_slot(schedule: EverySchedule, index: int) -> datetime:
    """Slot `index` (>= 1) of a calendar-step schedule, localized as fixed-time.

    Counted from `start`'s wall time as written, even when that falls in a gap.
    """
    wall = _wall(schedule.start, schedule.tz)
    count = index * _calendar_step(schedule)
    if schedule.unit in (Unit.MONTH, Unit.YEAR):
        wall = _add_months(wall, count)
    else:
        wall += timedelta(days=count)
    return localize(wall, schedule.tz)


def _month_index(wall: datetime) -> int:
    return wall.year * 12 + wall.month - 1


def _add_months(wall: datetime, months: int) -> datetime:
    """`wall` plus `months` calendar months, the day clamped to the month's last day."""
    year, month0 = divmod(_month_index(wall) + months, 12)
    last = calendar.monthrange(year, month0 + 1)[1]
    return wall.replace(year=year, month=month0 + 1, day=min(wall.day, last))


def _next_cron(schedule: CronSchedule, after: datetime) -> datetime | None:
    if schedule.start is not None:
        # A slot equal to start runs, so search from just before it.
        after = max(after, _utc(_instant(schedule.start, schedule.tz)) - _TICK)
    if schedule.expr.fixed_time:
        return _next_fixed(schedule, after)
    return _next_frequent(schedule, after)


def _next_fixed(schedule: CronSchedule, after: datetime) -> datetime | None:
    """Fixed-time cron: each matching wall time once, at its fixed-time instant.

    Localization never decreases as the wall time grows, so the first match
    after `after`'s wall time whose instant is past `after` is the answer. Only
    inside a fold's second pass are a few matches skipped (their first
    occurrence is already past), as are gap times collapsed onto one instant.
    """
    wall: datetime | None = _wall(after, schedule.tz)
    while wall is not None:
        wall = schedule.expr.next_match(wall)
        if wall is None:
            return None
        slot = localize(wall, schedule.tz)
        if slot is not None and slot > after:
            return slot
    return None


def _next_frequent(schedule: CronSchedule, after: datetime) -> datetime | None:
    """Frequent cron: the first real instant after `after` whose wall time matches.

    Walks segments of constant UTC offset: within one, the wall clock moves with
    real time, so the next match is found on the wall clock; a candidate lying
    past an offset change is dropped and the search resumes at that change
    (which is how fold times get their second pass and gap times none).
    """
    tz = schedule.tz
    position, offset = after, after.astimezone(tz).utcoffset()
    while offset is not None:
        wall = schedule.expr.next_match((position + offset).replace(tzinfo=None))
        if wall is None:
            return None
        candidate = (wall - offset).replace(tzinfo=UTC)
        change = _first_change(tz, offset, position, candidate)
        if change is None:
            return candidate
        position, offset = change - _TICK, change.astimezone(tz).utcoffset()
    return None


def _first_change(
    tz: ZoneInfo, offset: timedelta, position: datetime, until: datetime
) -> datetime | None:
    """The first instant in (position, until] whose offset is not `offset`, or None.

    `offset` holds just after `position`; instants are UTC.
    """
    low = position + _TICK
    while low < until:
        probe = min(low + _PROBE, until)
        if probe.astimezone(tz).utcoffset() != offset:
            return _offset_change(tz, low, probe, offset)
        low = probe
    return None


# --- derived queries --------------------------------------------------------------


def next_slots(schedule: Schedule, after: datetime, n: int) -> list[datetime]:
    """The next `n` slots strictly after `after`, in the schedule's zone (fewer if they run out)."""
    slots: list[datetime] = []
    while len(slots) < n:
        slot = next_slot(schedule, slots[-1] if slots else after)
        if slot is None:
            break
        slots.append(slot)
    return slots


def first_slot_at_or_after(schedule: Schedule, instant: datetime) -> datetime | None:
    """The first slot at or after `instant` (a slot equal to it counts)."""
    return next_slot(schedule, _utc(instant) - _TICK)


def slots_between(schedule: Schedule, after: datetime, until: datetime) -> Iterator[datetime]:
    """Every slot with `after < slot <= until`, in order (for recording MISSED slots)."""
    until = _utc(until)
    slot = next_slot(schedule, after)
    while slot is not None and _utc(slot) <= until:
        yield slot
        slot = next_slot(schedule, slot)


def previous_slot(schedule: Schedule, before: datetime) -> datetime | None:
    """The last slot strictly before `before`, or None.

    Searches backwards in doubling windows for a point with a slot between it
    and `before`, then bisects for the latest such point: the slot right after
    it is the answer. Slots are at least a second apart, so bisecting down to a
    second leaves one candidate. O(log) calls to `next_slot`.
    """
    before = _utc(before)
    width = timedelta(minutes=1)
    while not _has_slot_between(schedule, before - width, before):
        if width > _LOOKBACK_LIMIT:
            return None
        width *= 2
    low, high = before - width, before
    while high - low > _SECOND:
        middle = low + (high - low) / 2
        if _has_slot_between(schedule, middle, before):
            low = middle
        else:
            high = middle
    return next_slot(schedule, low)


def _has_slot_between(schedule: Schedule, low: datetime, high: datetime) -> bool:
    slot = next_slot(schedule, low)
    return slot is not None and _utc(slot) < high


def has_future(schedule: Schedule, now: datetime) -> bool:
    """Whether the schedule has a slot after `now`; a job without one is not loaded.

    A manual schedule is always loadable (it runs by hand), so it answers True.
    """
    if isinstance(schedule, ManualSchedule):
        return True
    return next_slot(schedule, now) is not None


# --- words and parsing ----------------------------------------------------------------


def describe(schedule: Schedule) -> str:
    """The schedule in an operator's words, e.g. "every 2 hours from 2026-06-01 08:20".

    Other forms: "at 05:00 on Monday-Friday (cron 0 5 * * 1-5)",
    "once at 2026-07-01 09:00", "manual".
    """
    match schedule:
        case EverySchedule():
            unit = schedule.unit.value
            step = f"every {unit}" if schedule.step == 1 else f"every {schedule.step} {unit}s"
            return step + _window(schedule.start, schedule.stop)
        case CronSchedule():
            words = schedule.expr.describe()
            if not words.startswith("cron "):
                words = f"{words} (cron {schedule.expr.text})"
            return words + _window(schedule.start, schedule.stop)
        case AtSchedule():
            return f"once at {_clock(schedule.at)}"
        case ManualSchedule():
            return "manual"


def _window(start: datetime | None, stop: datetime | None) -> str:
    words = "" if start is None else f" from {_clock(start)}"
    return words if stop is None else f"{words} until {_clock(stop)}"


def _clock(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M" + (":%S" if moment.second else ""))


def parse_every(text: str) -> tuple[int, Unit]:
    """Read `"<n> <unit>"` (plurals accepted) or a compact duration (`5s`, `1h30m`, `1d`).

    A compact duration of whole days or weeks alone is a calendar step (`1d` is
    `1 day`); any other is an exact step in the largest of hours, minutes or
    seconds it divides into (`1h30m` is `90 minutes`).

    Raises:
        ScheduleError: the text is neither form, the step is not a positive
            whole number or is longer than a century, or the unit is unknown
            (the message lists the units).
    """
    compact = _compact_every(text)
    if compact is not None:
        return compact
    found = _EVERY_RE.fullmatch(text)
    if found is None:
        raise ScheduleError(f"every: expected '<n> <unit>' such as '2 hours' (or 2h), got '{text}'")
    step_text, unit_text = found["step"], found["unit"].lower()
    if not (step_text.isascii() and step_text.isdigit()) or int(step_text) == 0:
        raise ScheduleError(f"every: step must be a positive whole number, got '{step_text}'")
    unit_name = unit_text.removesuffix("s")
    if unit_name not in Unit.__members__.values():
        units = ", ".join(u.value for u in Unit)
        raise ScheduleError(
            f"every: unknown unit '{unit_text}' (use one of: {units}; plurals work)"
        )
    step, unit = int(step_text), Unit(unit_name)
    if step > _MAX_STEPS[unit]:
        raise ScheduleError(f"every: '{text}' is longer than a century")
    return step, unit


_MAX_STEPS = {
    Unit.SECOND: 100 * 366 * 86400, Unit.MINUTE: 100 * 366 * 1440, Unit.HOUR: 100 * 366 * 24,
    Unit.DAY: 100 * 366, Unit.WEEK: 100 * 53, Unit.MONTH: 1200, Unit.YEAR: 100,
}  # fmt: skip
"""The longest step of each unit: a century."""
_COMPACT_EVERY = re.compile(r"(?:\d+[wdhms])+")


def _compact_every(text: str) -> tuple[int, Unit] | None:
    """`5s`, `1h30m`, `1d`, `2w` as a step and a unit; None when `text` is not that form."""
    compact = text.strip().replace(" ", "")
    if not _COMPACT_EVERY.fullmatch(compact):
        return None
    try:
        seconds = int(parse_duration(compact).total_seconds())
    except ValueError as error:
        raise ScheduleError(f"every: {error}") from None
    if not seconds:
        raise ScheduleError(f"every: step must be longer than 0s, got '{text}'")
    if compact[-1] in "dw" and compact.count(compact[-1]) == 1 and compact[:-1].isdigit():
        unit = Unit.DAY if compact[-1] == "d" else Unit.WEEK
        return int(compact[:-1]), unit
    for unit, size in ((Unit.HOUR, 3600), (Unit.MINUTE, 60)):
        if seconds % size == 0:
            return seconds // size, unit
    return seconds, Unit.SECOND
