"""Every run a window of time would hold (R25): `tuisched simulate` and the console's view.

Pure: the configuration and the window in, a `Simulation` out; no scheduler, no
history. The runs are the slots of every enabled scheduled job, and the runs
their `after` dependants would start, in time order. What cannot be known
ahead is assumed, and the assumptions travel with the answer (`assumptions`):

- every run ends with the same outcome, success unless told otherwise, so a
  dependant with `on: success` (or `failure`, or `both`) runs or not by it;
- runs take no time: a dependant starts `delay` after its upstream's run starts;
- nothing of the live state is modelled (overlap, `max_workers`, runs WAITING
  for `requires`, pauses to come); pauses in force now are noted on the runs.

Slots whose wall-clock time falls in a DST gap or repeats in a DST fold carry a
warning that says what the scheduler does with them (see `dst_note`).

Bounds: a window longer than `MAX_WINDOW` is refused; at most `limit` runs are
listed, and the runs past the limit are counted up to `COUNT_BUDGET` more (the
answer says "at least" beyond that), so no window costs unbounded time or memory.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Collection, Iterator
from datetime import UTC, datetime, timedelta

from tuisched.domain.config.config import SELF
from tuisched.domain.config.dependencies import previous_own_slot, required_slot
from tuisched.domain.errors import ScheduleError
from tuisched.domain.model import (
    AtSchedule,
    Config,
    CronSchedule,
    EverySchedule,
    Job,
    ManualSchedule,
    Outcome,
    Schedule,
    Unit,
)
from tuisched.domain.runs import Trigger
from tuisched.domain.schedule.bounds import DEFAULT_LIMIT, MAX_LIMIT, MAX_WINDOW
from tuisched.domain.schedule.describe import trigger_words
from tuisched.domain.schedule.slots import first_slot_at_or_after, next_slot
from tuisched.domain.views import SimulatedRun, Simulation

__all__ = [
    "COUNT_BUDGET",
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "MAX_WINDOW",
    "dst_note",
    "simulate",
]

COUNT_BUDGET = 50_000
"""Runs counted past the limit before counting stops (then "at least N more")."""
_SECOND = timedelta(seconds=1)


def simulate(
    config: Config,
    start: datetime,
    end: datetime,
    *,
    jobs: Collection[str] = (),
    outcome: Outcome = Outcome.SUCCESS,
    limit: int = DEFAULT_LIMIT,
    paused: Collection[str] = (),
) -> Simulation:
    """Every run with `start <= time < end`, in time order (ties in the file's order).

    Args:
        config: The configuration whose jobs are simulated.
        start: The window's first instant (aware).
        end: The instant the window ends, excluded (aware).
        jobs: Only these jobs' runs (their `after` upstreams are simulated too, so
            their dependency runs show); every job when empty.
        outcome: The outcome every run is assumed to have (`both` is not one).
        limit: The most runs listed (1 to `MAX_LIMIT`); the rest are counted.
        paused: Jobs paused now: their runs are listed with a note.

    Raises:
        ScheduleError: the window is empty, longer than `MAX_WINDOW`, or `limit`
            or `outcome` is out of range.
        UnknownJobError: a name in `jobs` is no job of `config`.
    """
    _check(start, end, limit, outcome)
    wanted = _selected(config, jobs)
    involved = _with_upstreams(config, wanted)
    dependants = _dependants(config, involved, outcome)
    walk = _Walk(config, dependants, paused=frozenset(paused))
    runs: list[SimulatedRun] = []
    left_out, counted_all = 0, True
    # In UTC: aware date-times sharing a zone subtract and compare by their wall clocks.
    first, last = start.astimezone(UTC), end.astimezone(UTC)
    for job, at, upstream, before in walk.runs(involved, first, last):
        if at < first or job.name not in wanted:
            continue
        if len(runs) < limit:
            runs.append(walk.describe(job, at, upstream, before))
            continue
        left_out += 1
        if left_out >= COUNT_BUDGET:
            counted_all = False
            break
    return Simulation(
        start=start, end=end, runs=tuple(runs), left_out=left_out,
        counted_all=counted_all, limit=limit, assumptions=assumptions(outcome),
    )  # fmt: skip


def assumptions(outcome: Outcome) -> tuple[str, ...]:
    """What a simulation assumes, in words (shown with every answer)."""
    words = "succeeds" if outcome is Outcome.SUCCESS else "fails"
    return (
        f"every run {words}",
        "runs take no time: a dependant starts its delay after its upstream's run starts",
        "not modelled: overlap, max_workers, waits for requires, pauses to come",
    )


def _check(start: datetime, end: datetime, limit: int, outcome: Outcome) -> None:
    if start.tzinfo is None or end.tzinfo is None:
        raise ScheduleError("the window's instants must carry a time zone")
    span = end.astimezone(UTC) - start.astimezone(UTC)
    if span <= timedelta(0):
        raise ScheduleError(f"the window ends ({end.isoformat()}) before it starts")
    if span > MAX_WINDOW:
        days = span / timedelta(days=1)
        raise ScheduleError(f"the window is {days:.0f} days long; at most {MAX_WINDOW.days}")
    if not 1 <= limit <= MAX_LIMIT:
        raise ScheduleError(f"the limit must be 1 to {MAX_LIMIT}, not {limit}")
    if outcome is Outcome.BOTH:
        raise ScheduleError("assume an outcome: success or failure")


def _selected(config: Config, jobs: Collection[str]) -> frozenset[str]:
    for name in jobs:
        config.job(name)  # UnknownJobError names it
    return frozenset(jobs) if jobs else frozenset(config.jobs)


def _with_upstreams(config: Config, names: frozenset[str]) -> frozenset[str]:
    """`names` and every job they run after, transitively (their runs start ours)."""
    found, pending = set(names), list(names)
    while pending:
        after = config.jobs[pending.pop()].after
        if after is not None and after.job not in found and after.job in config.jobs:
            found.add(after.job)
            pending.append(after.job)
    return frozenset(found)


def _dependants(config: Config, involved: frozenset[str], outcome: Outcome) -> dict[str, list[Job]]:
    """Upstream name to the enabled jobs its runs would start under `outcome`."""
    found: dict[str, list[Job]] = {}
    for job in config.jobs.values():
        after = job.after
        if after is None or not job.enabled or job.name not in involved:
            continue
        if after.on is Outcome.BOTH or after.on is outcome:
            found.setdefault(after.job, []).append(job)
    return found


def _lookbacks(dependants: dict[str, list[Job]]) -> dict[str, timedelta]:
    """Per upstream job, the largest sum of delays along its chains of dependants: how
    far before the window one of its runs may start a dependant's run inside it."""
    memo: dict[str, timedelta] = {}

    def longest(name: str) -> timedelta:
        if name not in memo:
            memo[name] = timedelta(0)  # the graph is acyclic (validation); this guards anyway
            memo[name] = max(
                (
                    job.after.delay + longest(job.name)
                    for job in dependants.get(name, ())
                    if job.after
                ),
                default=timedelta(0),
            )
        return memo[name]

    for name in dependants:
        longest(name)
    return memo


_Item = tuple[datetime, int, int, Job, str, "_Slots | None", datetime | None]
"""(UTC instant, the job's place in the file, sequence, job, upstream or "", the job's slot
stream or None, the slot before): runs at one instant leave in the file's order."""


class _Walk:
    """The runs of the window in time order: one slot stream per scheduled job, merged,
    and each run's dependants pushed as it is taken."""

    def __init__(
        self, config: Config, dependants: dict[str, list[Job]], *, paused: frozenset[str]
    ) -> None:
        self._config = config
        self._dependants = dependants
        self._paused = paused
        self._seq = itertools.count()
        self._place = {name: place for place, name in enumerate(config.jobs)}
        self._lookbacks = _lookbacks(dependants)

    def runs(
        self, names: frozenset[str], start: datetime, end: datetime
    ) -> Iterator[tuple[Job, datetime, str, datetime | None]]:
        """(job, instant in the job's zone, upstream or "", its slot before) for each run
        before `end`;
        from `start` on, and earlier for upstream jobs whose dependants may land after it."""
        end = end.astimezone(UTC)
        heap: list[_Item] = []
        for job in self._config.jobs.values():
            schedule = job.schedule
            if job.name in names and job.enabled and _has_slots(schedule):
                assert schedule is not None  # noqa: S101  (_has_slots says so)
                since = start - self._lookbacks.get(job.name, timedelta(0))
                self._push_slot(heap, job, _Slots(schedule, since))
        while heap:
            at, _, _, job, upstream, stream, before = heapq.heappop(heap)
            if at >= end:
                return
            if stream is not None:
                self._push_slot(heap, job, stream)
            for dependant in self._dependants.get(job.name, ()):
                delay = dependant.after.delay if dependant.after else timedelta(0)
                place = self._place[dependant.name]
                item = (at + delay, place, next(self._seq), dependant, job.name, None, None)
                heapq.heappush(heap, item)
            yield job, at.astimezone(job.timezone), upstream, before

    def _push_slot(self, heap: list[_Item], job: Job, stream: _Slots) -> None:
        slot = next(stream, None)
        if slot is not None:
            place, seq = self._place[job.name], next(self._seq)
            item = (slot.astimezone(UTC), place, seq, job, "", stream, stream.before)
            heapq.heappush(heap, item)

    def describe(
        self, job: Job, at: datetime, upstream: str, before: datetime | None
    ) -> SimulatedRun:
        """The run as listed: its trigger, what to know of it, its DST warning (worded only
        for the runs listed: the ones counted past the limit need none)."""
        notes, dst = [], ""
        if job.schedule is not None and not upstream:
            dst = dst_note(job.schedule, at, before)
        if upstream:
            notes.append(f"{trigger_words(job)}, assumed")
        if job.requires and job.schedule is not None and not upstream:
            notes += self._requirements(job, at)
        if job.name in self._paused:
            notes.append("paused now: will not run unless resumed")
        trigger = Trigger.DEPENDENCY if upstream else Trigger.SCHEDULE
        return SimulatedRun(
            at=at, job=job.name, trigger=trigger.value, upstream=upstream,
            note="; ".join(notes), dst=dst, timezone=job.timezone.key,
        )  # fmt: skip

    def _requirements(self, job: Job, at: datetime) -> list[str]:
        """`requires` slots the run needs, as `needs export's 01:30 run`."""
        assert job.schedule is not None  # noqa: S101  (only scheduled jobs come here)
        found = []
        for name in job.requires:
            own = name in (SELF, job.name)
            upstream = None if own else self._config.jobs.get(name)
            if own:
                slot = previous_own_slot(job.schedule, at)
            elif upstream is not None and upstream.schedule is not None:
                slot = required_slot(job.schedule, upstream.schedule, at)
            else:
                continue
            if slot is not None:
                found.append(f"needs {job.name if own else name}'s {slot.isoformat()} run")
        return found


def _has_slots(schedule: Schedule | None) -> bool:
    return schedule is not None and not isinstance(schedule, ManualSchedule)


class _Slots:
    """A schedule's slots from an instant on (`before`: the slot before the last one)."""

    def __init__(self, schedule: Schedule, start: datetime) -> None:
        self._schedule = schedule
        self._next = first_slot_at_or_after(schedule, start)
        self._previous: datetime | None = None
        self.before: datetime | None = None

    def __iter__(self) -> Iterator[datetime]:
        return self

    def __next__(self) -> datetime:
        slot = self._next
        if slot is None:
            raise StopIteration
        self.before = self._previous
        self._previous, self._next = slot, next_slot(self._schedule, slot)
        return slot


# --- DST warnings -------------------------------------------------------------------------


def dst_note(schedule: Schedule, slot: datetime, previous: datetime | None = None) -> str:
    """A warning for a slot touched by a DST change in the schedule's zone, or "".

    - A wall-clock time that happens twice (fall back): a fixed-time schedule
      runs it once, at the first; elapsed-time steps and frequent cron run in
      both passes, and the note says which one this is.
    - A wall-clock time that does not exist (spring forward): a fixed-time
      schedule runs it at the first instant after the gap (this slot); frequent
      cron has no slots in the gap, which the first slot after it says.

    `previous` is the schedule's slot before this one (None: a day before is
    looked at), so the gap a frequent schedule jumped over is found.
    """
    local = slot.astimezone(schedule.tz)
    fold = _fold_note(schedule, local)
    if fold:
        return fold
    return _gap_note(schedule, local, previous)


def _fold_note(schedule: Schedule, local: datetime) -> str:
    wall = local.replace(tzinfo=None)
    first = wall.replace(tzinfo=schedule.tz, fold=0).utcoffset()
    if first == wall.replace(tzinfo=schedule.tz, fold=1).utcoffset():
        return ""
    head = f"{_hhmm(wall)} happens twice on {wall.date()} (DST ends)"
    if _fixed_time(schedule):
        return f"{head}: runs once, at the first"
    return f"{head}: this is the {'second' if local.fold else 'first'}"


def _gap_note(schedule: Schedule, local: datetime, previous: datetime | None) -> str:
    before = previous if previous is not None else local - timedelta(days=1)
    tz = schedule.tz
    offset, earlier = local.utcoffset(), before.astimezone(tz).utcoffset()
    if offset is None or earlier is None or offset <= earlier:
        return ""
    change = _change_instant(before.astimezone(UTC), local.astimezone(UTC), tz, earlier)
    gap_end = change.astimezone(tz).replace(tzinfo=None)
    gap_start = gap_end - (offset - earlier)
    meant = _meant_in_gap(schedule, gap_start, gap_end, local)
    if meant is None:
        return ""
    day = gap_end.date()
    if _fixed_time(schedule) and local.astimezone(UTC) == change:
        return f"{_hhmm(meant)} does not exist on {day} (DST starts): runs at {_hhmm(gap_end)}"
    span = f"{_hhmm(gap_start)}-{_hhmm(gap_end)}"
    return f"no slots {span} on {day}: DST starts, those times do not exist"


def _change_instant(low: datetime, high: datetime, tz: object, offset: timedelta) -> datetime:
    """The first instant in (low, high] whose offset is not `offset` (to the second)."""
    while high - low > _SECOND:
        middle = low + (high - low) / 2
        if middle.astimezone(tz).utcoffset() == offset:  # type: ignore[arg-type]
            low = middle
        else:
            high = middle
    return high.replace(microsecond=0)


def _meant_in_gap(
    schedule: Schedule, gap_start: datetime, gap_end: datetime, local: datetime
) -> datetime | None:
    """A wall time in [gap_start, gap_end) the schedule names, or None."""
    match schedule:
        case CronSchedule():
            found = schedule.expr.next_match(gap_start - _SECOND)
            return found if found is not None and found < gap_end else None
        case EverySchedule() if schedule.unit not in (Unit.SECOND, Unit.MINUTE, Unit.HOUR):
            start = schedule.start.replace(tzinfo=None)
            meant = datetime.combine(local.date(), start.time())
            return meant if gap_start <= meant < gap_end else None
        case AtSchedule():
            at = schedule.at.replace(tzinfo=None)
            return at if gap_start <= at < gap_end else None
        case _:
            return None


def _fixed_time(schedule: Schedule) -> bool:
    """Whether the schedule names wall-clock times (the fixed-time DST policy)."""
    match schedule:
        case CronSchedule():
            return schedule.expr.fixed_time
        case EverySchedule():
            return schedule.unit not in (Unit.SECOND, Unit.MINUTE, Unit.HOUR)
        case _:
            return True


def _hhmm(wall: datetime) -> str:
    return wall.strftime("%H:%M:%S" if wall.second else "%H:%M")
