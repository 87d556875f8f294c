"""What a schedule really does on the days the clocks change (SPEC R6, R25).

`clock_changes` finds a zone's offset changes in a window; `dst_warnings` says,
for each change ahead, which of a schedule's wall-clock times fall into the gap
(spring forward) or the fold (fall back), and what the product will do with
them, read from the slots it really computes (`slots.next_slot`), so a warning
can never disagree with the runs:

- fixed-time (cron naming its minutes and hours, day/week/month/year steps,
  `at`): gap times run once, at the first instant after the gap; fold times
  run once, at their first occurrence;
- frequent cron (a wildcard minute or hour): gap times do not happen; fold
  times happen in both passes.

Second, minute and hour steps follow elapsed time and name no wall time, so
no warning is given for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from tuisched.domain.model import AtSchedule, CronSchedule, EverySchedule, Schedule, Unit
from tuisched.domain.schedule.slots import first_slot_at_or_after, next_slot, slots_between
from tuisched.domain.views import DstWarning

HORIZON = timedelta(days=366)
"""How far ahead `dst_warnings` looks by default: every change of the coming year."""
_DAY = timedelta(days=1)
"""Probe step: no zone has changed its offset twice within a week since 1970."""
_TICK = timedelta(microseconds=1)
_SHOWN_TIMES = 3
"""Wall times listed one by one; more are written as a range."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ClockChange:
    """One change of a zone's UTC offset."""

    at: datetime
    """The first instant (UTC) on the new offset."""
    before: timedelta
    after: timedelta
    tz: ZoneInfo

    @property
    def forward(self) -> bool:
        """True for a gap (spring forward), False for a fold (fall back)."""
        return self.after > self.before

    @property
    def walls(self) -> tuple[datetime, datetime]:
        """The naive wall-clock range [low, high) that is skipped (gap) or repeated (fold)."""
        naive = self.at.replace(tzinfo=None)
        low, high = sorted((naive + self.before, naive + self.after))
        return low, high

    @property
    def length(self) -> timedelta:
        """How long the gap or the fold is."""
        return abs(self.after - self.before)


def clock_changes(tz: ZoneInfo, after: datetime, until: datetime) -> list[ClockChange]:
    """Every offset change of `tz` in (`after`, `until`], oldest first."""
    changes: list[ClockChange] = []
    low, end = after.astimezone(UTC), until.astimezone(UTC)
    offset = low.astimezone(tz).utcoffset()
    while low < end and offset is not None:
        probe = min(low + _DAY, end)
        new = probe.astimezone(tz).utcoffset()
        if new is None or new == offset:
            low = probe
            continue
        at = _first_second_on(tz, low, probe, offset)
        changes.append(ClockChange(at=at, before=offset, after=new, tz=tz))
        low, offset = at, new
    return changes


def _first_second_on(tz: ZoneInfo, low: datetime, high: datetime, old: timedelta) -> datetime:
    """The first whole second in (low, high] whose offset is not `old` (one change inside)."""
    lo, hi = int(low.timestamp()), int(high.timestamp()) + 1
    while hi - lo > 1:
        middle = (lo + hi) // 2
        if datetime.fromtimestamp(middle, UTC).astimezone(tz).utcoffset() == old:
            lo = middle
        else:
            hi = middle
    return datetime.fromtimestamp(hi, UTC)


def dst_warnings(
    schedule: Schedule, now: datetime, *, horizon: timedelta = HORIZON
) -> tuple[DstWarning, ...]:
    """A warning for each clock change within `horizon` of `now` that touches `schedule`."""
    if not _names_wall_times(schedule):
        return ()
    warnings = []
    for change in clock_changes(schedule.tz, now, now + horizon):
        warning = _warning(schedule, change)
        if warning is not None:
            warnings.append(warning)
    return tuple(warnings)


def _names_wall_times(schedule: Schedule) -> bool:
    """Whether the schedule's slots are wall-clock times (so a clock change can touch them)."""
    if isinstance(schedule, EverySchedule):
        return schedule.unit not in (Unit.SECOND, Unit.MINUTE, Unit.HOUR)
    return isinstance(schedule, CronSchedule | AtSchedule)


def _fixed_time(schedule: Schedule) -> bool:
    return not isinstance(schedule, CronSchedule) or schedule.expr.fixed_time


def _warning(schedule: Schedule, change: ClockChange) -> DstWarning | None:
    """What `schedule` does at `change`, or None when none of its wall times is touched."""
    low, high = change.walls
    named = _wall_times(schedule, low, high)
    if not named:
        return None
    if change.forward:
        return _gap_warning(schedule, change, named)
    return _fold_warning(schedule, change, named)


def _gap_warning(
    schedule: Schedule, change: ClockChange, named: list[datetime]
) -> DstWarning | None:
    head = _head(change, named)
    if _fixed_time(schedule):
        moved = first_slot_at_or_after(schedule, change.at)
        if moved is None or moved != change.at:
            return None  # outside the schedule's window: nothing runs there anyway
        verb = "does" if len(named) == 1 else "do"
        runs = "runs once" if len(named) == 1 else "they run as one run"
        text = f"{head} {verb} not exist; {runs} at {_clock(moment=moved)}"
        return DstWarning(text=text, slots=(moved,))
    if next_slot(schedule, change.at - _DAY) is None:
        return None
    count = "that slot is" if len(named) == 1 else f"those {len(named)} slots are"
    verb = "does" if len(named) == 1 else "do"
    return DstWarning(text=f"{head} {verb} not exist; {count} skipped")


def _fold_warning(
    schedule: Schedule, change: ClockChange, named: list[datetime]
) -> DstWarning | None:
    head = _head(change, named)
    low = change.at - change.length - _TICK  # the fold's first pass began `length` before
    runs = tuple(slots_between(schedule, low, change.at + change.length - _TICK))
    if not runs:
        return None
    verb = "happens" if len(named) == 1 else "happen"
    if _fixed_time(schedule):
        if len(runs) == 1:
            text = f"{head} {verb} twice; it runs once, at the first ({_clock(moment=runs[0])})"
        else:
            zone = runs[0].strftime("%Z")
            text = f"{head} {verb} twice; each runs once, at its first ({zone})"
    else:
        text = f"{head} {verb} twice; runs in both passes ({len(runs)} runs)"
    return DstWarning(text=text, slots=runs)


def _head(change: ClockChange, named: list[datetime]) -> str:
    """`Sun 2026-03-29, clocks go forward 02:00 -> 03:00: 02:30`."""
    low, high = change.walls
    day = low.strftime("%a %Y-%m-%d")
    if change.forward:
        how = f"clocks go forward {_hhmm(low)} -> {_hhmm(high)}"
    else:
        how = f"clocks go back {_hhmm(high)} -> {_hhmm(low)}"
    return f"{day}, {how}: {_times(named)}"


def _times(walls: list[datetime]) -> str:
    if len(walls) <= _SHOWN_TIMES:
        return ", ".join(_hhmm(wall) for wall in walls)
    return f"{_hhmm(walls[0])} to {_hhmm(walls[-1])} ({len(walls)} times)"


def _hhmm(wall: datetime) -> str:
    return wall.strftime("%H:%M:%S" if wall.second else "%H:%M")


def _clock(*, moment: datetime) -> str:
    """`03:00 CEST`: the wall time and the zone's abbreviation, which tells the passes apart."""
    return f"{_hhmm(moment)} {moment.strftime('%Z')}"


def _wall_times(schedule: Schedule, low: datetime, high: datetime) -> list[datetime]:
    """The naive wall times in [low, high) that `schedule` names."""
    if isinstance(schedule, CronSchedule):
        found: list[datetime] = []
        wall = schedule.expr.next_match(low - timedelta(seconds=1))
        while wall is not None and wall < high:
            found.append(wall)
            wall = schedule.expr.next_match(wall)
        return found
    if isinstance(schedule, AtSchedule):
        at = schedule.at.replace(tzinfo=None)
        return [at] if low <= at < high else []
    if isinstance(schedule, EverySchedule):
        return _calendar_wall(schedule, low, high)
    return []


def _calendar_wall(schedule: EverySchedule, low: datetime, high: datetime) -> list[datetime]:
    """A calendar step's wall time on `low`'s day, when that day has a slot in [low, high)."""
    wall = datetime.combine(low.date(), schedule.start.time())
    if not low <= wall < high:
        return []
    midnight = datetime.combine(low.date(), time()).replace(tzinfo=schedule.tz)
    slot = first_slot_at_or_after(schedule, midnight)
    return [wall] if slot is not None and _day(slot, schedule.tz) == low.date() else []


def _day(moment: datetime, tz: ZoneInfo) -> date:
    return moment.astimezone(tz).date()
