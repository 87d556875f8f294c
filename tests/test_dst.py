"""DST policy (R6) in Europe/Berlin, America/New_York and Australia/Lord_Howe.

2026 transitions used here (local wall clock):
- Berlin: 29 March 02:00 -> 03:00; 25 October 03:00 -> 02:00.
- New York: 8 March 02:00 -> 03:00; 1 November 02:00 -> 01:00.
- Lord Howe (30-minute shift): 5 April 02:00 -> 01:30; 4 October 02:00 -> 02:30.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from tuisched.domain.model import CronSchedule, EverySchedule, Schedule, Unit
from tuisched.domain.schedule.cron import CronExpr
from tuisched.domain.schedule.slots import (
    first_slot_at_or_after,
    localize,
    next_slot,
    next_slots,
    previous_slot,
)

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")
LORD_HOWE = ZoneInfo("Australia/Lord_Howe")
H = timedelta(hours=1)


def at(tz: ZoneInfo, *parts: int, fold: int = 0) -> datetime:
    """`at(BERLIN, 2026, 10, 25, 2, 30, fold=1)`: a wall-clock time, second pass."""
    year, month, day, *clock = parts
    hour, minute = [*clock, 0, 0][:2]
    return datetime(year, month, day, hour, minute, tzinfo=tz, fold=fold)


def cron(text: str, tz: ZoneInfo, **window: datetime | None) -> CronSchedule:
    start, stop = window.get("start"), window.get("stop")
    return CronSchedule(expr=CronExpr.parse(text), start=start, stop=stop, tz=tz)


def shown(slots: list[datetime]) -> list[str]:
    """Wall clock and offset, which together name an instant unambiguously."""
    return [s.strftime("%m-%d %H:%M%z") for s in slots]


def utc(slots: list[datetime]) -> list[datetime]:
    return [s.astimezone(UTC) for s in slots]


def one(slot: datetime | None) -> list[datetime]:
    assert slot is not None
    return [slot]


# --- localize ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tz", "wall", "expected"),
    [
        (BERLIN, datetime(2026, 3, 29, 2, 30), "03-29 03:00+0200"),
        (BERLIN, datetime(2026, 3, 29, 2, 0), "03-29 03:00+0200"),
        (NEW_YORK, datetime(2026, 3, 8, 2, 59, 59), "03-08 03:00-0400"),
        (LORD_HOWE, datetime(2026, 10, 4, 2, 15), "10-04 02:30+1100"),
        (BERLIN, datetime(2026, 10, 25, 2, 30), "10-25 02:30+0200"),
        (NEW_YORK, datetime(2026, 11, 1, 1, 30), "11-01 01:30-0400"),
        (LORD_HOWE, datetime(2026, 4, 5, 1, 45), "04-05 01:45+1100"),
        (BERLIN, datetime(2026, 7, 1, 12, 0), "07-01 12:00+0200"),
    ],
)
def test_localize_fixed_time(tz: ZoneInfo, wall: datetime, expected: str) -> None:
    slot = localize(wall, tz)
    assert slot is not None
    assert shown([slot]) == [expected]
    assert slot.fold == 0


def test_localize_frequent_gap_time_does_not_happen() -> None:
    assert localize(datetime(2026, 3, 29, 2, 30), BERLIN, fixed_time=False) is None
    assert localize(datetime(2026, 10, 4, 2, 10), LORD_HOWE, fixed_time=False) is None
    assert localize(datetime(2026, 10, 4, 2, 30), LORD_HOWE, fixed_time=False) is not None


# --- fixed-time cron -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tz", "text", "after", "expected"),
    [
        # Spring forward: the missing 02:30 runs once, when the clock reaches 03:00.
        (BERLIN, "30 2 * * *", (2026, 3, 28, 12), ["03-29 03:00+0200", "03-30 02:30+0200"]),
        (NEW_YORK, "30 2 * * *", (2026, 3, 7, 12), ["03-08 03:00-0400", "03-09 02:30-0400"]),
        (LORD_HOWE, "15 2 * * *", (2026, 10, 3, 12), ["10-04 02:30+1100", "10-05 02:15+1100"]),
        # Fall back: the repeated time runs once, at its first occurrence.
        (BERLIN, "30 2 * * *", (2026, 10, 24, 12), ["10-25 02:30+0200", "10-26 02:30+0100"]),
        (NEW_YORK, "30 1 * * *", (2026, 10, 31, 12), ["11-01 01:30-0400", "11-02 01:30-0500"]),
        (LORD_HOWE, "45 1 * * *", (2026, 4, 4, 12), ["04-05 01:45+1100", "04-06 01:45+1030"]),
    ],
)
def test_fixed_time_cron_through_transitions(
    tz: ZoneInfo, text: str, after: tuple[int, ...], expected: list[str]
) -> None:
    assert shown(next_slots(cron(text, tz), at(tz, *after), 2)) == expected


def test_gap_times_collapse_into_one_run() -> None:
    slots = next_slots(cron("0,30 2,3 * * *", BERLIN), at(BERLIN, 2026, 3, 29, 0), 3)
    assert shown(slots) == ["03-29 03:00+0200", "03-29 03:30+0200", "03-30 02:00+0200"]


def test_lord_howe_half_hour_gap_collapses() -> None:
    slots = next_slots(cron("0,20,40 2 * * *", LORD_HOWE), at(LORD_HOWE, 2026, 10, 4, 0), 3)
    assert shown(slots) == ["10-04 02:30+1100", "10-04 02:40+1100", "10-05 02:00+1100"]


def test_fixed_time_after_in_second_pass_does_not_go_back() -> None:
    # 02:45 CEST already happened before 02:30 CET (second pass): next is tomorrow's.
    after = at(BERLIN, 2026, 10, 25, 2, 30, fold=1)
    assert shown(one(next_slot(cron("45 2 * * *", BERLIN), after))) == ["10-26 02:45+0100"]
    # But 03:00 lies after the fold and is still ahead.
    assert shown(one(next_slot(cron("0 3 * * *", BERLIN), after))) == ["10-25 03:00+0100"]


def test_six_field_fixed_time_gap() -> None:
    slots = next_slots(cron("10 30 2 * * *", BERLIN), at(BERLIN, 2026, 3, 28, 12), 2)
    assert shown(slots) == ["03-29 03:00+0200", "03-30 02:30+0200"]


# --- frequent cron ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tz", "after"),
    [
        (BERLIN, (2026, 3, 29, 0)),
        (BERLIN, (2026, 10, 25, 0)),
        (NEW_YORK, (2026, 3, 8, 0)),
        (NEW_YORK, (2026, 11, 1, 0)),
        (LORD_HOWE, (2026, 4, 5, 0)),
        (LORD_HOWE, (2026, 10, 4, 0)),
    ],
)
def test_every_15_minutes_keeps_real_time(tz: ZoneInfo, after: tuple[int, ...]) -> None:
    slots = utc(next_slots(cron("*/15 * * * *", tz), at(tz, *after), 24))
    assert {b - a for a, b in itertools.pairwise(slots)} == {timedelta(minutes=15)}


def test_frequent_fold_times_happen_twice() -> None:
    slots = next_slots(cron("0 * * * *", BERLIN), at(BERLIN, 2026, 10, 25, 1), 3)
    assert shown(slots) == ["10-25 02:00+0200", "10-25 02:00+0100", "10-25 03:00+0100"]


def test_frequent_hour_field_in_new_york_fold() -> None:
    slots = next_slots(cron("*/30 1 * * *", NEW_YORK), at(NEW_YORK, 2026, 11, 1, 0), 5)
    assert shown(slots) == [
        "11-01 01:00-0400",
        "11-01 01:30-0400",
        "11-01 01:00-0500",
        "11-01 01:30-0500",
        "11-02 01:00-0500",
    ]


def test_frequent_gap_times_do_not_happen() -> None:
    slots = next_slots(cron("* 2 * * *", BERLIN), at(BERLIN, 2026, 3, 28, 23), 1)
    assert shown(slots) == ["03-30 02:00+0200"]
    lord_howe = next_slots(cron("*/10 2 * * *", LORD_HOWE), at(LORD_HOWE, 2026, 10, 4, 0), 3)
    assert shown(lord_howe) == ["10-04 02:30+1100", "10-04 02:40+1100", "10-04 02:50+1100"]


def test_lord_howe_fold_repeats_half_an_hour() -> None:
    slots = next_slots(cron("*/15 1 * * *", LORD_HOWE), at(LORD_HOWE, 2026, 4, 5, 1, 20), 5)
    assert shown(slots) == [
        "04-05 01:30+1100",
        "04-05 01:45+1100",
        "04-05 01:30+1030",
        "04-05 01:45+1030",
        "04-06 01:00+1030",
    ]


def test_previous_slot_in_second_pass() -> None:
    schedule = cron("*/15 * * * *", BERLIN)
    before = at(BERLIN, 2026, 10, 25, 2, 10, fold=1)
    assert shown(one(previous_slot(schedule, before))) == ["10-25 02:00+0100"]


# --- every ------------------------------------------------------------------------------------


def test_hour_steps_are_exact_elapsed_time() -> None:
    spring = EverySchedule(
        step=1, unit=Unit.HOUR, start=at(BERLIN, 2026, 3, 29, 0), stop=None, tz=BERLIN
    )
    assert shown(next_slots(spring, at(BERLIN, 2026, 3, 29, 0), 3)) == [
        "03-29 01:00+0100",
        "03-29 03:00+0200",
        "03-29 04:00+0200",
    ]
    fall = EverySchedule(
        step=1, unit=Unit.HOUR, start=at(BERLIN, 2026, 10, 25, 0), stop=None, tz=BERLIN
    )
    assert shown(next_slots(fall, at(BERLIN, 2026, 10, 25, 0), 4)) == [
        "10-25 01:00+0200",
        "10-25 02:00+0200",
        "10-25 02:00+0100",
        "10-25 03:00+0100",
    ]


def test_day_steps_are_fixed_time() -> None:
    daily = EverySchedule(
        step=1, unit=Unit.DAY, start=at(BERLIN, 2026, 3, 27, 2, 30), stop=None, tz=BERLIN
    )
    assert shown(next_slots(daily, at(BERLIN, 2026, 3, 27, 2, 30), 3)) == [
        "03-28 02:30+0100",
        "03-29 03:00+0200",
        "03-30 02:30+0200",
    ]
    assert shown(next_slots(daily, at(BERLIN, 2026, 10, 24, 3), 2)) == [
        "10-25 02:30+0200",
        "10-26 02:30+0100",
    ]


def test_start_in_a_gap_moves_past_it() -> None:
    start = at(BERLIN, 2026, 3, 29, 2, 30)  # does not exist
    daily = EverySchedule(step=1, unit=Unit.DAY, start=start, stop=None, tz=BERLIN)
    assert shown(next_slots(daily, at(BERLIN, 2026, 3, 29, 0), 2)) == [
        "03-29 03:00+0200",
        "03-30 02:30+0200",
    ]


def test_start_and_stop_in_the_fold_keep_their_fold() -> None:
    schedule = cron(
        "*/20 * * * *",
        BERLIN,
        start=at(BERLIN, 2026, 10, 25, 2, 20, fold=1),
        stop=at(BERLIN, 2026, 10, 25, 3, 0),
    )
    assert shown(next_slots(schedule, at(BERLIN, 2026, 10, 25, 0), 9)) == [
        "10-25 02:20+0100",
        "10-25 02:40+0100",
        "10-25 03:00+0100",
    ]


# --- never twice -------------------------------------------------------------------------------


@pytest.mark.parametrize("tz", [BERLIN, NEW_YORK, LORD_HOWE])
@pytest.mark.parametrize(
    "schedule_text",
    ["*/15 * * * *", "0 * * * *", "30 2 * * *", "0,30 1-3 * * *", "*/7 1-2 * * *", "0 */2 * * *"],
)
def test_slots_strictly_increase_across_a_year(tz: ZoneInfo, schedule_text: str) -> None:
    schedule: Schedule = cron(schedule_text, tz)
    slots = utc(next_slots(schedule, at(tz, 2026, 1, 1), 400))
    more = utc(next_slots(schedule, at(tz, 2026, 3, 7, 12), 200))
    fall = utc(next_slots(schedule, at(tz, 2026, 10, 24, 12), 200))
    for run in (slots, more, fall):
        assert all(a < b for a, b in itertools.pairwise(run))


@pytest.mark.parametrize(
    ("tz", "transition"),
    [
        (BERLIN, datetime(2026, 10, 25, 1, tzinfo=UTC)),
        (BERLIN, datetime(2026, 3, 29, 1, tzinfo=UTC)),
        (LORD_HOWE, datetime(2026, 10, 3, 15, 30, tzinfo=UTC)),
        (LORD_HOWE, datetime(2026, 4, 4, 15, tzinfo=UTC)),
    ],
)
def test_search_starting_a_microsecond_before_a_transition(
    tz: ZoneInfo, transition: datetime
) -> None:
    # Regression: the offset search used to read the new offset as the old one here.
    schedule = cron("* * * * *", tz)
    assert utc(one(first_slot_at_or_after(schedule, transition))) == [transition]
    assert utc(next_slots(schedule, transition - timedelta(microseconds=1), 1)) == [transition]
