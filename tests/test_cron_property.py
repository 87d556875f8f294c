"""Property tests: our cron against cronsim and against a brute-force reference of the DST policy.

cronsim (an independent crontab implementation of Debian cron's semantics) is
the oracle for wall-clock matching and, for 5-field expressions, for aware slots.
In two corners its DST handling differs from our documented policy, and there
the expected slots come from `_reference`, a deliberately naive minute-by-minute
implementation of the policy, instead:

- Lord Howe's 30-minute shift with a *frequent* expression: cronsim steps whole
  hours in UTC from a replaced wall time, so after the October change it lands
  on :30 (`* 18 * * *` gives 18:30 instead of 18:00).
- A *fixed-time* expression with `after` in the second pass of a fold: cronsim
  restarts from the naive wall clock and returns slots before `after`.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from cronsim import CronSim, CronSimError
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tuisched.domain.errors import CronError
from tuisched.domain.model import CronSchedule
from tuisched.domain.schedule.cron import CronExpr
from tuisched.domain.schedule.slots import (
    first_slot_at_or_after,
    next_slots,
    previous_slot,
    slots_between,
)

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")
LORD_HOWE = ZoneInfo("Australia/Lord_Howe")
ZONES = (BERLIN, NEW_YORK, LORD_HOWE)
TRANSITIONS = {
    BERLIN: (datetime(2026, 3, 29, 1, tzinfo=UTC), datetime(2026, 10, 25, 1, tzinfo=UTC)),
    NEW_YORK: (datetime(2026, 3, 8, 7, tzinfo=UTC), datetime(2026, 11, 1, 6, tzinfo=UTC)),
    LORD_HOWE: (
        datetime(2026, 4, 4, 15, tzinfo=UTC),
        datetime(2026, 10, 3, 15, 30, tzinfo=UTC),
    ),
}
MINUTE = timedelta(minutes=1)
WINDOW = timedelta(hours=4)
MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
DAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")


# --- expressions -------------------------------------------------------------------------------


@st.composite
def _value(draw: st.DrawFn, low: int, high: int, names: tuple[str, ...], base: int) -> str:
    number = draw(st.integers(low, high))
    index = number - base
    if names and 0 <= index < len(names) and draw(st.booleans()):
        return draw(st.sampled_from([names[index], names[index].lower(), names[index].title()]))
    return str(number)


@st.composite
def _item(draw: st.DrawFn, low: int, high: int, names: tuple[str, ...], base: int) -> str:
    kind = draw(st.sampled_from(["value", "range", "range-step", "start-step", "star-step"]))
    step = draw(st.integers(1, max(2, (high - low) // 2)))
    if kind == "star-step":
        return f"*/{step}"
    a, b = sorted(draw(st.lists(st.integers(low, high), min_size=2, max_size=2, unique=True)))
    first = draw(_value(a, a, names, base))
    if kind == "value":
        return first
    if kind == "start-step":
        return f"{first}/{step}"
    span = f"{first}-{draw(_value(b, b, names, base))}"
    # `a-a/step` is left out: cronsim reads it as `a/step` (`13-13/4` as 13,17,21).
    return span if kind == "range" else f"{span}/{step}"


def _field(
    low: int, high: int, names: tuple[str, ...] = (), base: int = 0
) -> st.SearchStrategy[str]:
    items = st.lists(_item(low, high, names, base), min_size=1, max_size=3).map(",".join)
    return st.one_of(st.just("*"), items)


def _day_field(
    low: int, high: int, names: tuple[str, ...] = (), base: int = 0
) -> st.SearchStrategy[str]:
    return st.one_of(st.just("*"), st.just("*"), st.just("?"), _field(low, high, names, base))


@st.composite
def expressions(draw: st.DrawFn, *, six: bool | None = None) -> str:
    fields = [
        draw(_field(0, 59)),
        draw(_field(0, 23)),
        draw(_day_field(1, 31)),
        draw(st.one_of(st.just("*"), _field(1, 12, MONTHS, 1))),
        draw(_day_field(0, 7, DAYS, 0)),
    ]
    if six if six is not None else draw(st.booleans()):
        fields.insert(0, draw(st.one_of(st.just("0"), _field(0, 59))))
    return " ".join(fields)


def _parsed(text: str) -> CronExpr:
    try:
        return CronExpr.parse(text)
    except CronError:
        # Only "never fires" is ever rejected here; cronsim must reject it too.
        try:
            CronSim(_for_cronsim(text), datetime(2026, 1, 1))
        except CronSimError:
            assume(False)
        raise


def _for_cronsim(text: str) -> str:
    return text.replace("?", "*")


# --- instants ---------------------------------------------------------------------------------


@st.composite
def afters(draw: st.DrawFn, tz: ZoneInfo) -> datetime:
    """An aware instant, usually close to one of the zone's 2026 transitions (a third of
    the time inside the 90 minutes around one, where the folds are)."""
    shift = draw(st.sampled_from([None, 360, 90, 90]))
    if shift is None:
        moment = datetime(2026, 1, 1, tzinfo=UTC) + draw(st.integers(0, 365 * 24 * 60)) * MINUTE
    else:
        moment = draw(st.sampled_from(TRANSITIONS[tz])) + draw(st.integers(-shift, shift)) * MINUTE
    return (moment + timedelta(seconds=draw(st.sampled_from([0, 0, 30, 59])))).astimezone(tz)


def _utc(slots: list[datetime]) -> list[datetime]:
    return [s.astimezone(UTC) for s in slots]


def _second_pass(moment: datetime) -> bool:
    """Whether `moment` is the later of two instants sharing its wall-clock time."""
    first = moment.replace(fold=0)
    return first.astimezone(UTC) != moment.astimezone(UTC)


# --- brute-force reference of the DST policy ---------------------------------------------------


def _reference(expr: CronExpr, tz: ZoneInfo, after: datetime, until: datetime) -> list[datetime]:
    """Slots in (after, until], the slow and obvious way (UTC instants)."""
    if expr.fixed_time:
        return _reference_fixed(expr, tz, after, until)
    return _reference_frequent(expr, tz, after, until)


def _reference_frequent(
    expr: CronExpr, tz: ZoneInfo, after: datetime, until: datetime
) -> list[datetime]:
    """Every real instant whose wall clock matches; offsets here are whole minutes."""
    found = []
    minute = after.astimezone(UTC).replace(second=0, microsecond=0)
    while minute <= until:
        wall = minute.astimezone(tz).replace(tzinfo=None)
        for second in sorted(expr.seconds):
            instant = minute + timedelta(seconds=second)
            if after < instant <= until and expr.matches(wall.replace(second=second)):
                found.append(instant)
        minute += MINUTE
    return found


def _reference_fixed(
    expr: CronExpr, tz: ZoneInfo, after: datetime, until: datetime
) -> list[datetime]:
    """Each matching wall time once: its first occurrence, or the first real minute after it."""
    found: set[datetime] = set()
    wall = after.astimezone(tz).replace(tzinfo=None, second=0, microsecond=0) - timedelta(hours=3)
    end = until.astimezone(tz).replace(tzinfo=None) + timedelta(hours=3)
    while wall <= end:
        for second in sorted(expr.seconds):
            if expr.matches(wall.replace(second=second)):
                instant = _first_real(wall.replace(second=second), tz).astimezone(UTC)
                if after < instant <= until:
                    found.add(instant)
        wall += MINUTE
    return sorted(found)


def _first_real(wall: datetime, tz: ZoneInfo) -> datetime:
    probe = wall
    while True:
        candidate = probe.replace(tzinfo=tz, fold=0)
        if candidate.astimezone(UTC).astimezone(tz).replace(tzinfo=None) == probe:
            return candidate
        probe = probe.replace(second=0) + MINUTE


# --- properties ---------------------------------------------------------------------------------


def test_transitions_are_real() -> None:
    for tz, instants in TRANSITIONS.items():
        for instant in instants:
            assert (instant - MINUTE).astimezone(tz).utcoffset() != instant.astimezone(
                tz
            ).utcoffset()


@settings(max_examples=150, deadline=None)
@given(text=expressions(), start=st.datetimes(datetime(2020, 1, 1), datetime(2040, 12, 31)))
def test_naive_matches_agree_with_cronsim(text: str, start: datetime) -> None:
    expr = _parsed(text)
    start = start.replace(microsecond=0)
    ours = _walk(expr, start, 5)
    theirs = list(itertools.islice(CronSim(_for_cronsim(text), start), 5))
    assert ours == theirs
    assert all(expr.matches(m) for m in ours)
    assert expr.matches(start) == (
        next(CronSim(_for_cronsim(text), start - timedelta(seconds=1))) == start
    )


def _walk(expr: CronExpr, wall: datetime, n: int) -> list[datetime]:
    found: list[datetime] = []
    for _ in range(n):
        match = expr.next_match(wall)
        assert match is not None
        found.append(match)
        wall = match
    return found


@settings(max_examples=150, deadline=None)
@given(data=st.data(), text=expressions(six=False), tz=st.sampled_from(ZONES))
def test_aware_slots_agree_with_cronsim(data: st.DataObject, text: str, tz: ZoneInfo) -> None:
    expr = _parsed(text)
    after = data.draw(afters(tz))
    schedule = CronSchedule(expr=expr, start=None, stop=None, tz=tz)
    corner = (tz is LORD_HOWE and not expr.fixed_time) or (expr.fixed_time and _second_pass(after))
    if corner:
        ours = _utc(list(slots_between(schedule, after, after + WINDOW)))
        assert ours == _reference(expr, tz, after, after + WINDOW)
    else:
        ours = _utc(next_slots(schedule, after, 5))
        theirs = list(itertools.islice(CronSim(text.replace("?", "*"), after), 5))
        assert ours == _utc(theirs)


@settings(max_examples=120, deadline=None)
@given(data=st.data(), text=expressions(), tz=st.sampled_from(ZONES))
def test_aware_slots_agree_with_the_reference(data: st.DataObject, text: str, tz: ZoneInfo) -> None:
    expr = _parsed(text)
    after = data.draw(afters(tz))
    schedule = CronSchedule(expr=expr, start=None, stop=None, tz=tz)
    ours = _utc(list(slots_between(schedule, after, after + WINDOW)))
    assert ours == _reference(expr, tz, after, after + WINDOW)


@settings(max_examples=60, deadline=None)
@given(
    data=st.data(),
    text=expressions(),
    tz=st.sampled_from(ZONES),
    start_shift=st.integers(-600, 600),
    length=st.integers(0, 3000),
)
def test_slots_increase_and_stay_in_the_window(
    data: st.DataObject, text: str, tz: ZoneInfo, start_shift: int, length: int
) -> None:
    expr = _parsed(text)
    after = data.draw(afters(tz))
    # In UTC: arithmetic and comparisons on two datetimes sharing a zone use the wall clock.
    start = after.astimezone(UTC) + start_shift * MINUTE
    stop = start + length * MINUTE
    schedule = CronSchedule(expr=expr, start=start.astimezone(tz), stop=stop.astimezone(tz), tz=tz)
    slots = next_slots(schedule, after, 6)
    assert all(a < b for a, b in itertools.pairwise(_utc(slots)))
    assert all(s.tzinfo is tz for s in slots)
    assert all(after < s and start <= s <= stop for s in _utc(slots))
    for earlier, later in itertools.pairwise(slots):
        assert _utc([previous_slot(schedule, later) or after]) == _utc([earlier])
    for slot in slots:
        assert _utc([first_slot_at_or_after(schedule, slot) or after]) == _utc([slot])
