"""Dependencies between jobs: the R9 cross-cycle rule and cycle detection.

R9: a job's schedule has a *cycle*, the period under which its slots repeat,
one of 1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30 minutes, 1, 2, 3, 4, 6, 8, 12
hours, 1 day, 1 week, 1 month or 1 year. A child run at T that `requires` an
upstream job needs the upstream slot found by `required_slot`: take the larger
of the two cycles, truncate T (on the child's wall clock) to that cycle's unit
(weeks start on Monday, months on the 1st), go back (k - 1) units for a cycle of
k units, and take the first upstream slot at or after that instant.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from tuisched.domain.errors import ScheduleError
from tuisched.domain.model import CronSchedule, EverySchedule, Schedule, Unit
from tuisched.domain.schedule.cron import CronExpr
from tuisched.domain.schedule.slots import first_slot_at_or_after, localize, previous_slot

__all__ = [
    "Cycle",
    "CycleUnit",
    "cycle_of",
    "find_cycle",
    "previous_own_slot",
    "required_slot",
]


class CycleUnit(enum.IntEnum):
    """Unit of a cycle, ordered by length."""

    MINUTE = 1
    HOUR = 2
    DAY = 3
    WEEK = 4
    MONTH = 5
    YEAR = 6

    def __str__(self) -> str:
        return self.name.lower()


_MINUTE_COUNTS = (1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30)
_HOUR_COUNTS = (1, 2, 3, 4, 6, 8, 12)


@dataclass(frozen=True, slots=True, order=True)
class Cycle:
    """A period of the R9 list, e.g. ``Cycle(CycleUnit.HOUR, 12)``.

    Cycles order by length: every allowed count stays below the next unit
    (30 minutes < 1 hour, 12 hours < 1 day), so (unit, count) order is length order.
    """

    unit: CycleUnit
    count: int = 1

    def __post_init__(self) -> None:
        allowed = {CycleUnit.MINUTE: _MINUTE_COUNTS, CycleUnit.HOUR: _HOUR_COUNTS}
        if self.count not in allowed.get(self.unit, (1,)):
            raise ScheduleError(f"{self.count} {self.unit}s is not an R9 cycle")

    def __str__(self) -> str:
        return f"1 {self.unit}" if self.count == 1 else f"{self.count} {self.unit}s"

    def window_start(self, wall: datetime) -> datetime:
        """Truncate the naive `wall` to the unit, then go back (count - 1) units."""
        back = timedelta(**{f"{self.unit}s": self.count - 1}) if self.count > 1 else timedelta()
        return _truncate(wall, self.unit) - back


def _truncate(wall: datetime, unit: CycleUnit) -> datetime:
    """`wall` cut down to the start of its minute, hour, day, week (Monday), month or year."""
    wall = wall.replace(second=0, microsecond=0)
    if unit >= CycleUnit.HOUR:
        wall = wall.replace(minute=0)
    if unit >= CycleUnit.DAY:
        wall = wall.replace(hour=0)
    if unit == CycleUnit.WEEK:
        wall -= timedelta(days=wall.weekday())
    if unit >= CycleUnit.MONTH:
        wall = wall.replace(day=1)
    if unit == CycleUnit.YEAR:
        wall = wall.replace(month=1)
    return wall


# --- cycles -----------------------------------------------------------------------------


def cycle_of(schedule: Schedule) -> Cycle | None:
    """The schedule's R9 cycle, or None when it has none (`at`, manual, or an
    `every` step that is not one of the periods, such as every 7 minutes)."""
    match schedule:
        case CronSchedule():
            return _cron_cycle(schedule.expr)
        case EverySchedule():
            return _every_cycle(schedule.step, schedule.unit)
        case _:
            return None


def _every_cycle(step: int, unit: Unit) -> Cycle | None:
    """The step as a cycle, after writing it in its largest whole unit (60 minutes is 1 hour)."""
    for smaller, factor, larger in _UNIT_LADDER:
        if unit is smaller and step % factor == 0:
            step, unit = step // factor, larger
    try:
        return Cycle(CycleUnit[unit.name], step)
    except (KeyError, ScheduleError):
        return None


_UNIT_LADDER = (
    (Unit.SECOND, 60, Unit.MINUTE),
    (Unit.MINUTE, 60, Unit.HOUR),
    (Unit.HOUR, 24, Unit.DAY),
    (Unit.DAY, 7, Unit.WEEK),
    (Unit.MONTH, 12, Unit.YEAR),
)


def _cron_cycle(expr: CronExpr) -> Cycle:
    """R9's rule: months restricted -> year; day-of-month -> month; weekday -> week;
    then the smallest hour or minute period the fields are invariant under."""
    if expr.months != frozenset(range(1, 13)):
        return Cycle(CycleUnit.YEAR)
    every_day = _every_day(expr)
    if not every_day and (expr.days != frozenset(range(1, 32)) or expr.calendar_days):
        return Cycle(CycleUnit.MONTH)  # L, W and # pick days by the month's calendar
    if not every_day:
        return Cycle(CycleUnit.WEEK)
    if expr.hours != frozenset(range(24)):
        hours = _shift_period(expr.hours, 24, _HOUR_COUNTS)
        return Cycle(CycleUnit.DAY) if hours is None else Cycle(CycleUnit.HOUR, hours)
    minutes = _shift_period(expr.minutes, 60, _MINUTE_COUNTS)
    return Cycle(CycleUnit.HOUR) if minutes is None else Cycle(CycleUnit.MINUTE, minutes)


def _every_day(expr: CronExpr) -> bool:
    """Whether the day fields let every day of the month and week through."""
    all_dom = expr.days == frozenset(range(1, 32))
    all_dow = expr.weekdays == frozenset(range(7))
    if expr.dom_restricted and expr.dow_restricted:
        return all_dom or all_dow
    return all_dom and all_dow


def _shift_period(values: frozenset[int], modulus: int, counts: tuple[int, ...]) -> int | None:
    """The smallest count under whose shift (mod `modulus`) `values` maps onto itself."""
    for count in counts:
        if frozenset((v + count) % modulus for v in values) == values:
            return count
    return None


# --- required slots --------------------------------------------------------------------


def required_slot(child: Schedule, upstream: Schedule, at: datetime) -> datetime | None:
    """The upstream slot a child run at `at` needs to have succeeded (R9).

    An upstream without a cycle contributes none: the child's cycle is used.

    Returns:
        The upstream slot, in the upstream's zone; None when the upstream has no
        slot at or after the window's start.

    Raises:
        ScheduleError: the child's schedule has no cycle, so `requires` does not apply.
    """
    child_cycle = cycle_of(child)
    if child_cycle is None:
        raise ScheduleError(f"requires needs a schedule with a cycle; {child} has none")
    upstream_cycle = cycle_of(upstream)
    cycle = child_cycle if upstream_cycle is None else max(child_cycle, upstream_cycle)
    wall = at.astimezone(child.tz).replace(tzinfo=None)
    return first_slot_at_or_after(upstream, localize(cycle.window_start(wall), child.tz))


def previous_own_slot(schedule: Schedule, at: datetime) -> datetime | None:
    """For `requires: [self]`: the job's own slot right before `at`, or None."""
    return previous_slot(schedule, at)


# --- dependency graph ------------------------------------------------------------------


def find_cycle(graph: Mapping[str, Iterable[str]]) -> list[str] | None:
    """A dependency cycle as a path ``[a, b, c, a]``, or None.

    `graph` maps each job to the jobs it depends on; names missing from the
    keys are leaves. Deterministic: nodes and edges are visited in sorted order,
    so the same graph always reports the same cycle. Iterative, so a chain of
    10,000 jobs does not hit the recursion limit.
    """
    edges = {node: sorted(set(targets)) for node, targets in graph.items()}
    done: set[str] = set()
    for root in sorted(edges):
        if root not in done:
            cycle = _cycle_from(root, edges, done)
            if cycle is not None:
                return cycle
    return None


def _cycle_from(root: str, edges: Mapping[str, list[str]], done: set[str]) -> list[str] | None:
    """Depth-first search from `root`; marks finished nodes in `done`."""
    path = [root]
    on_path = {root}
    pending = [iter(edges.get(root, ()))]
    while pending:
        target = next(pending[-1], None)
        if target is None:
            finished = path.pop()
            on_path.discard(finished)
            done.add(finished)
            pending.pop()
        elif target in on_path:
            return [*path[path.index(target) :], target]
        elif target not in done:
            path.append(target)
            on_path.add(target)
            pending.append(iter(edges.get(target, ())))
    return None
