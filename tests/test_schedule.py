"""Slots of every schedule form (R5), words, `every` parsing and the APScheduler trigger."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from tuisched.domain.errors import ScheduleError
from tuisched.domain.model import AtSchedule, ManualSchedule, Schedule, Unit
from tuisched.domain.schedule.slots import (
    describe,
    first_slot_at_or_after,
    has_future,
    next_slot,
    next_slots,
    parse_every,
    previous_slot,
    slots_between,
)
from tuisched.runtime.engine.trigger import SlotTrigger

from .schedule_builders import BERLIN, NEW_YORK, at, cron, every


def walls(slots: list[datetime]) -> list[str]:
    return [s.strftime("%Y-%m-%d %H:%M") for s in slots]


# --- R5 examples -------------------------------------------------------------------------


def test_r5_hourly_from_start() -> None:
    schedule = every(1, Unit.HOUR, at(2026, 5, 4, 2, 30))
    assert next_slot(schedule, at(2026, 5, 7, 9, 10)) == at(2026, 5, 7, 9, 30)


def test_r5_downtime_skips_slots_and_reports_them() -> None:
    schedule = every(1, Unit.HOUR, at(2026, 5, 4, 2, 30))
    missed = list(slots_between(schedule, at(2026, 5, 7, 11, 40), at(2026, 5, 7, 14, 5)))
    assert walls(missed) == ["2026-05-07 12:30", "2026-05-07 13:30"]
    assert next_slot(schedule, at(2026, 5, 7, 14, 5)) == at(2026, 5, 7, 14, 30)


def test_r5_step_changed_offline_is_recomputed_from_start() -> None:
    before = every(45, Unit.MINUTE, at(2026, 5, 4))
    after = every(2, Unit.HOUR, at(2026, 5, 4))
    now = at(2026, 5, 6, 5, 10)
    assert next_slot(before, now) == at(2026, 5, 6, 5, 15)
    assert next_slot(after, now) == at(2026, 5, 6, 6)


def test_r5_stop_ends_the_schedule() -> None:
    schedule = every(2, Unit.HOUR, at(2026, 6, 1, 8, 20), stop=at(2026, 6, 1, 15))
    slots = next_slots(schedule, at(2026, 6, 1, 0), 10)
    assert walls(slots) == [
        "2026-06-01 08:20",
        "2026-06-01 10:20",
        "2026-06-01 12:20",
        "2026-06-01 14:20",
    ]
    assert next_slot(schedule, at(2026, 6, 1, 14, 20)) is None


def test_slot_equal_to_stop_runs() -> None:
    schedule = every(2, Unit.HOUR, at(2026, 6, 1, 8), stop=at(2026, 6, 1, 12))
    assert walls(next_slots(schedule, at(2026, 6, 1, 9), 5)) == [
        "2026-06-01 10:00",
        "2026-06-01 12:00",
    ]


def test_monthly_from_january_31_clamps_and_returns() -> None:
    schedule = every(1, Unit.MONTH, at(2026, 1, 31, 6))
    assert walls(next_slots(schedule, at(2026, 1, 31, 6), 5)) == [
        "2026-02-28 06:00",
        "2026-03-31 06:00",
        "2026-04-30 06:00",
        "2026-05-31 06:00",
        "2026-06-30 06:00",
    ]


def test_monthly_from_january_31_in_a_leap_year() -> None:
    schedule = every(1, Unit.MONTH, at(2026, 1, 31, 6))
    assert walls(next_slots(schedule, at(2028, 1, 31, 6), 2)) == [
        "2028-02-29 06:00",
        "2028-03-31 06:00",
    ]


def test_yearly_from_leap_day() -> None:
    schedule = every(1, Unit.YEAR, at(2028, 2, 29, 12))
    assert walls(next_slots(schedule, at(2028, 2, 29, 12), 4)) == [
        "2029-02-28 12:00",
        "2030-02-28 12:00",
        "2031-02-28 12:00",
        "2032-02-29 12:00",
    ]


def test_every_3_months_from_the_30th() -> None:
    schedule = every(3, Unit.MONTH, at(2026, 11, 30, 0, 15))
    assert walls(next_slots(schedule, at(2026, 12, 1), 3)) == [
        "2027-02-28 00:15",
        "2027-05-30 00:15",
        "2027-08-30 00:15",
    ]


def test_weekly_and_daily_keep_the_wall_clock() -> None:
    weekly = every(2, Unit.WEEK, at(2026, 3, 2, 9))  # Mondays, across the March DST change
    assert walls(next_slots(weekly, at(2026, 3, 2, 9), 3)) == [
        "2026-03-16 09:00",
        "2026-03-30 09:00",
        "2026-04-13 09:00",
    ]
    assert next_slot(weekly, at(2026, 3, 20)) == at(2026, 3, 30, 9)
    daily = every(1, Unit.DAY, at(2026, 3, 28, 9))
    assert [s.utcoffset() for s in next_slots(daily, at(2026, 3, 28, 9), 2)] == [
        timedelta(hours=2),
        timedelta(hours=2),
    ]


def test_first_slot_is_start_and_nothing_before_it() -> None:
    schedule = every(90, Unit.SECOND, at(2026, 5, 4, 12))
    assert next_slot(schedule, at(2026, 1, 1)) == at(2026, 5, 4, 12)
    assert walls(next_slots(schedule, at(2026, 5, 4, 12), 2)) == [
        "2026-05-04 12:01",
        "2026-05-04 12:03",
    ]
    assert previous_slot(schedule, at(2026, 5, 4, 12)) is None


def test_far_away_after_is_computed_without_looping() -> None:
    seconds = every(1, Unit.SECOND, at(2000, 1, 1))
    months = every(1, Unit.MONTH, at(1900, 1, 31))
    began = time.perf_counter()
    assert next_slot(seconds, at(2090, 6, 1, 12, 0, 0)) == at(2090, 6, 1, 12, 0, 1)
    assert next_slot(months, at(2090, 2, 1)) == at(2090, 2, 28)
    assert time.perf_counter() - began < 0.1


def test_after_in_another_zone() -> None:
    schedule = every(1, Unit.HOUR, at(2026, 5, 4, 2, 30))
    slot = next_slot(schedule, datetime(2026, 5, 7, 3, 10, tzinfo=NEW_YORK))
    assert slot == at(2026, 5, 7, 9, 30)
    assert slot is not None
    assert slot.tzinfo is BERLIN


# --- cron schedules ----------------------------------------------------------------------


def test_cron_weekdays_in_the_job_zone() -> None:
    schedule = cron("0 5 * * 1-5", tz=NEW_YORK)
    slots = next_slots(schedule, at(2026, 5, 8, 12, tz=NEW_YORK), 2)
    assert walls(slots) == ["2026-05-11 05:00", "2026-05-12 05:00"]
    assert all(s.tzinfo is NEW_YORK for s in slots)


def test_cron_never_fires_before_start_or_after_stop() -> None:
    schedule = cron("0 * * * *", start=at(2026, 5, 4, 10), stop=at(2026, 5, 4, 12))
    assert walls(next_slots(schedule, at(2026, 5, 1), 10)) == [
        "2026-05-04 10:00",
        "2026-05-04 11:00",
        "2026-05-04 12:00",
    ]


def test_cron_start_between_slots() -> None:
    schedule = cron("*/15 * * * *", start=at(2026, 5, 4, 10, 5))
    assert next_slot(schedule, at(2026, 5, 1)) == at(2026, 5, 4, 10, 15)


def test_previous_slot_and_first_at_or_after() -> None:
    schedule = cron("0 6 * * MON")
    assert previous_slot(schedule, at(2026, 5, 4, 6)) == at(2026, 4, 27, 6)
    assert previous_slot(schedule, at(2026, 5, 4, 6, 0, 1)) == at(2026, 5, 4, 6)
    assert first_slot_at_or_after(schedule, at(2026, 5, 4, 6)) == at(2026, 5, 4, 6)
    assert first_slot_at_or_after(schedule, at(2026, 5, 4, 6, 0, 1)) == at(2026, 5, 11, 6)


def test_previous_slot_far_back() -> None:
    assert previous_slot(cron("0 0 29 2 *"), at(2026, 5, 4)) == at(2024, 2, 29)
    assert previous_slot(every(1, Unit.MONTH, at(2026, 1, 31)), at(2026, 3, 1)) == at(2026, 2, 28)


# --- at and manual -----------------------------------------------------------------------


def test_at_schedule_runs_once() -> None:
    schedule = AtSchedule(at=at(2026, 7, 1, 9), tz=BERLIN)
    assert next_slots(schedule, at(2026, 6, 1), 3) == [at(2026, 7, 1, 9)]
    assert next_slots(schedule, at(2026, 7, 1, 9), 3) == []
    assert has_future(schedule, at(2026, 6, 1))
    assert not has_future(schedule, at(2026, 7, 2))


def test_manual_schedule_has_no_slots_but_is_loaded() -> None:
    schedule = ManualSchedule(tz=BERLIN)
    assert next_slots(schedule, at(2026, 6, 1), 3) == []
    assert previous_slot(schedule, at(2026, 6, 1)) is None
    assert has_future(schedule, at(2026, 6, 1))


def test_has_future_false_once_stop_is_past() -> None:
    schedule = every(1, Unit.DAY, at(2026, 1, 1), stop=at(2026, 2, 1))
    assert has_future(schedule, at(2026, 1, 31, 12))
    assert not has_future(schedule, at(2026, 2, 1))


# --- words --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schedule", "words"),
    [
        (
            every(2, Unit.HOUR, at(2026, 6, 1, 8, 20), stop=at(2026, 6, 1, 15)),
            "every 2 hours from 2026-06-01 08:20 until 2026-06-01 15:00",
        ),
        (every(1, Unit.DAY, at(2026, 6, 1, 8)), "every day from 2026-06-01 08:00"),
        (cron("0 5 * * 1-5"), "at 05:00 on Monday-Friday (cron 0 5 * * 1-5)"),
        (cron("*/5 9-17 * * *"), "cron */5 9-17 * * *"),
        (
            cron("@hourly", start=at(2026, 6, 1)),
            "every hour (cron @hourly) from 2026-06-01 00:00",
        ),
        (AtSchedule(at=at(2026, 7, 1, 9), tz=BERLIN), "once at 2026-07-01 09:00"),
        (ManualSchedule(tz=BERLIN), "manual"),
    ],
)
def test_describe(schedule: Schedule, words: str) -> None:
    assert describe(schedule) == words


# --- every parsing --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("2 hours", (2, Unit.HOUR)),
        ("1 month", (1, Unit.MONTH)),
        ("90 seconds", (90, Unit.SECOND)),
        ("1 Week", (1, Unit.WEEK)),
        ("  10   minutes ", (10, Unit.MINUTE)),
        ("3 years", (3, Unit.YEAR)),
        ("1 day", (1, Unit.DAY)),
    ],
)
def test_parse_every(text: str, parsed: tuple[int, Unit]) -> None:
    assert parse_every(text) == parsed


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0 hours", "step must be a positive whole number, got '0'"),
        ("-2 hours", "step must be a positive whole number, got '-2'"),
        ("two hours", "step must be a positive whole number, got 'two'"),
        ("1.5 hours", "step must be a positive whole number, got '1.5'"),
        (
            "3 fortnights",
            "unknown unit 'fortnights' (use one of: second, minute, hour, day, week, month, year",
        ),
        ("hours", "expected '<n> <unit>'"),
        ("", "expected '<n> <unit>'"),
    ],
)
def test_parse_every_errors(text: str, message: str) -> None:
    with pytest.raises(ScheduleError, match=r"^every: ") as caught:
        parse_every(text)
    assert message in str(caught.value)


# --- APScheduler trigger --------------------------------------------------------------------


@pytest.mark.parametrize(
    "schedule",
    [
        every(45, Unit.MINUTE, at(2026, 5, 4)),
        every(1, Unit.MONTH, at(2026, 1, 31, 6)),
        cron("*/15 * * * *"),
        cron("30 2 * * *"),
        cron("0 9 1 * MON", stop=at(2026, 12, 1)),
        AtSchedule(at=at(2026, 10, 25, 2, 30), tz=BERLIN),
    ],
)
def test_trigger_fires_exactly_at_next_slots(schedule: Schedule) -> None:
    now = at(2026, 10, 24, 23, 55)
    trigger = SlotTrigger(schedule)
    fired: list[datetime] = []
    fire = trigger.get_next_fire_time(None, now)
    while fire is not None and len(fired) < 12:
        fired.append(fire)
        fire = trigger.get_next_fire_time(fire, now)
    expected = next_slots(schedule, now, 12)
    assert [f.astimezone(UTC) for f in fired] == [s.astimezone(UTC) for s in expected]
    assert [f.utcoffset() for f in fired] == [s.utcoffset() for s in expected]


def test_trigger_without_previous_starts_after_now() -> None:
    trigger = SlotTrigger(cron("0 * * * *"))
    assert trigger.get_next_fire_time(None, at(2026, 5, 4, 10)) == at(2026, 5, 4, 11)
    assert trigger.get_next_fire_time(at(2026, 5, 4, 7), at(2026, 5, 4, 10)) == at(2026, 5, 4, 8)


def test_trigger_str_and_repr() -> None:
    trigger = SlotTrigger(cron("0 5 * * 1-5"))
    assert str(trigger) == "slots: at 05:00 on Monday-Friday (cron 0 5 * * 1-5)"
    assert "Europe/Berlin" in repr(trigger)
