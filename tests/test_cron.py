"""CronExpr: parsing, error messages, crontab(5) matching and the next match."""

from __future__ import annotations

from datetime import datetime

import pytest

from tuisched.domain.errors import CronError, ScheduleError
from tuisched.domain.schedule.cron import CronExpr


def _matches(text: str, start: datetime, n: int) -> list[datetime]:
    expr = CronExpr.parse(text)
    found: list[datetime] = []
    wall: datetime | None = start
    while len(found) < n:
        wall = expr.next_match(wall) if wall is not None else None
        assert wall is not None
        found.append(wall)
    return found


# --- parsing ------------------------------------------------------------------------


def test_five_fields_have_second_zero() -> None:
    expr = CronExpr.parse("*/15 9-17 * * MON-FRI")
    assert not expr.has_seconds
    assert expr.seconds == {0}
    assert expr.minutes == {0, 15, 30, 45}
    assert expr.hours == set(range(9, 18))
    assert expr.weekdays == {1, 2, 3, 4, 5}
    assert expr.text == "*/15 9-17 * * MON-FRI"


def test_six_fields_put_seconds_first() -> None:
    expr = CronExpr.parse("30 0 12 * * ?")
    assert expr.has_seconds
    assert expr.seconds == {30}
    assert expr.minutes == {0}
    assert expr.hours == {12}
    assert not expr.dow_restricted


@pytest.mark.parametrize(
    ("text", "weekdays"),
    [
        ("0 0 * * 0", {0}),
        ("0 0 * * 7", {0}),
        ("0 0 * * 1", {1}),
        ("0 0 * * 5-7", {5, 6, 0}),
        ("0 0 * * sun", {0}),
        ("0 0 * * Mon-Fri", {1, 2, 3, 4, 5}),
        ("0 0 * * SAT,SUN", {6, 0}),
        ("0 0 0 * * 1", {1}),  # 6-field form reads weekdays as crontab does
        ("0 0 * * */2", {0, 2, 4, 6}),
        ("0 0 * * 1/2", {1, 3, 5, 0}),  # 1-7/2: 7 is Sunday
    ],
)
def test_weekdays_follow_crontab(text: str, weekdays: set[int]) -> None:
    assert CronExpr.parse(text).weekdays == weekdays


@pytest.mark.parametrize(
    ("text", "months"),
    [("0 0 1 jan *", {1}), ("0 0 1 JAN-MAR,dec *", {1, 2, 3, 12}), ("0 0 1 */4 *", {1, 5, 9})],
)
def test_month_names_and_steps(text: str, months: set[int]) -> None:
    assert CronExpr.parse(text).months == months


@pytest.mark.parametrize(
    ("text", "minutes"),
    [
        ("1-30/2 * * * *", set(range(1, 31, 2))),
        ("5/20 * * * *", {5, 25, 45}),
        ("0,10,20-22 * * * *", {0, 10, 20, 21, 22}),
        ("7-7/4 * * * *", {7}),
        ("*/100 * * * *", {0}),
    ],
)
def test_lists_ranges_steps(text: str, minutes: set[int]) -> None:
    assert CronExpr.parse(text).minutes == minutes


def test_a_question_mark_means_any_day_and_nothing_else() -> None:
    """As croniter and Quartz: `?` stands for "no value" in the two day fields only."""
    assert CronExpr.parse("0 0 ? * MON").weekdays == {1}
    assert len(CronExpr.parse("0 0 15 * ?").days) == 1
    for text in ("? * * * *", "0 ? * * *", "0 0 1 ? *", "? 0 0 1 * *"):
        with pytest.raises(CronError, match=r"'\?' is allowed only in the day-of-month"):
            CronExpr.parse(text)


@pytest.mark.parametrize("digit", ["\u00b9", "\u0663", "\uff11"])
def test_digits_are_ascii_digits_only(digit: str) -> None:
    """Superscript, Arabic-Indic and full-width digits are digits to Python (`int` reads
    some of them): a cron field refuses them all."""
    with pytest.raises(CronError, match="is not a value"):
        CronExpr.parse(f"{digit} * * * *")
    with pytest.raises(CronError, match="is not a number"):
        CronExpr.parse(f"*/{digit} * * * *")


@pytest.mark.parametrize(
    ("macro", "equivalent"),
    [
        ("@hourly", "0 * * * *"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@weekly", "0 0 * * 0"),
        ("@monthly", "0 0 1 * *"),
        ("@yearly", "0 0 1 1 *"),
        ("@ANNUALLY", "0 0 1 1 *"),
    ],
)
def test_macros(macro: str, equivalent: str) -> None:
    got, want = CronExpr.parse(macro), CronExpr.parse(equivalent)
    assert got.text == macro
    assert (got.minutes, got.hours, got.days, got.months, got.weekdays) == (
        want.minutes,
        want.hours,
        want.days,
        want.months,
        want.weekdays,
    )


@pytest.mark.parametrize(
    ("text", "dom", "dow", "fixed"),
    [
        ("0 5 * * *", False, False, True),
        ("0 5 1 * MON", True, True, True),
        ("0 5 ? * MON", False, True, True),
        ("0 5 1 * */2", True, False, True),
        ("*/15 * * * *", False, False, False),
        ("0 * * * *", False, False, False),
        ("* 5 * * *", False, False, False),
        ("0-59 0-23 * * *", False, False, True),
        ("* 0 5 * * *", False, False, False),
        ("0 0 5 * * *", False, False, True),
    ],
)
def test_restriction_and_fixed_time_flags(text: str, dom: bool, dow: bool, fixed: bool) -> None:
    expr = CronExpr.parse(text)
    assert (expr.dom_restricted, expr.dow_restricted, expr.fixed_time) == (dom, dow, fixed)


# --- errors -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "expected 5 fields"),
        ("* * * *", "got 4"),
        ("* * * * * * *", "got 7"),
        ("* * * * 8", "cron: day-of-week field '8': value 8 out of range 0-7"),
        ("60 * * * *", "minute field '60': value 60 out of range 0-59"),
        ("0 24 * * *", "hour field '24': value 24 out of range 0-23"),
        ("0 0 0 * *", "day-of-month field '0': value 0 out of range 1-31"),
        ("0 0 1 13 *", "month field '13': value 13 out of range 1-12"),
        ("60 * * * * *", "second field '60'"),
        ("5-1 * * * *", "minute field '5-1': range 5-1 is reversed"),
        ("0 0 * * FRI-SUN", "range FRI-SUN is reversed"),
        ("*/0 * * * *", "minute field '*/0': step must not be 0"),
        ("*/x * * * *", "step 'x' is not a number"),
        ("1,,2 * * * *", "empty list item"),
        ("x * * * *", "minute field 'x': 'x' is not a value"),
        ("0 0 * FOO *", "month field 'FOO'"),
        ("0 0 L/2 * *", "a rule takes no step"),
        ("0 0 30 2 *", "never fires"),
        ("0 0 31 4,6 *", "never fires"),
        ("0 0 30-31 FEB ?", "never fires"),
        ("@reboot", "@reboot is not supported"),
        ("@often", "unknown macro '@often'"),
    ],
)
def test_parse_errors_name_the_problem(text: str, message: str) -> None:
    with pytest.raises(CronError, match=r"^cron: ") as caught:
        CronExpr.parse(text)
    assert message in str(caught.value)
    assert isinstance(caught.value, ScheduleError)


def test_both_days_restricted_never_rejected() -> None:
    # With OR, `30 2 * MON` fires on every Monday in February.
    assert CronExpr.parse("0 0 30 2 MON").days == {30}


# --- matching -------------------------------------------------------------------------


def test_day_fields_or_when_both_restricted() -> None:
    # 1st of the month OR Monday (crontab(5)).
    expr = CronExpr.parse("0 9 1 * MON")
    assert expr.matches(datetime(2026, 5, 1, 9))  # a Friday, the 1st
    assert expr.matches(datetime(2026, 5, 4, 9))  # a Monday
    assert not expr.matches(datetime(2026, 5, 5, 9))


def test_star_step_weekday_ands() -> None:
    # `*/2` starts with `*`, so Vixie cron ANDs it with the day of month.
    expr = CronExpr.parse("0 9 1 * */2")
    assert not expr.matches(datetime(2026, 5, 1, 9))  # Friday: 5 is not in 0,2,4,6
    assert expr.matches(datetime(2026, 8, 1, 9))  # Saturday the 1st


def test_question_mark_is_a_star() -> None:
    expr = CronExpr.parse("0 0 12 1 * ?")
    assert expr.matches(datetime(2026, 5, 1, 12))
    assert not expr.matches(datetime(2026, 5, 2, 12))


def test_seconds_field_matters_in_six_field_form() -> None:
    expr = CronExpr.parse("*/20 * * * * *")
    assert _matches("*/20 * * * * *", datetime(2026, 1, 1, 0, 0, 5), 3) == [
        datetime(2026, 1, 1, 0, 0, 20),
        datetime(2026, 1, 1, 0, 0, 40),
        datetime(2026, 1, 1, 0, 1, 0),
    ]
    assert not expr.matches(datetime(2026, 1, 1, 0, 0, 5))


# --- next match -------------------------------------------------------------------------


def test_next_match_is_strictly_after() -> None:
    assert _matches("0 5 * * *", datetime(2026, 5, 4, 5), 2) == [
        datetime(2026, 5, 5, 5),
        datetime(2026, 5, 6, 5),
    ]


def test_next_match_ignores_microseconds_but_stays_after() -> None:
    expr = CronExpr.parse("* * * * * *")
    assert expr.next_match(datetime(2026, 1, 1, 0, 0, 0, 500)) == datetime(2026, 1, 1, 0, 0, 1)


def test_next_match_weekdays_and_month_rollover() -> None:
    assert _matches("30 8 * * MON-FRI", datetime(2026, 5, 8, 9), 3) == [
        datetime(2026, 5, 11, 8, 30),
        datetime(2026, 5, 12, 8, 30),
        datetime(2026, 5, 13, 8, 30),
    ]


def test_next_match_day_31_skips_short_months() -> None:
    assert _matches("0 0 31 * *", datetime(2026, 1, 31), 3) == [
        datetime(2026, 3, 31),
        datetime(2026, 5, 31),
        datetime(2026, 7, 31),
    ]


def test_next_match_february_29_waits_for_leap_year() -> None:
    assert _matches("0 0 29 2 *", datetime(2026, 1, 1), 2) == [
        datetime(2028, 2, 29),
        datetime(2032, 2, 29),
    ]


def test_next_match_year_rollover() -> None:
    assert _matches("59 23 31 12 *", datetime(2026, 12, 31, 23, 59), 1) == [
        datetime(2027, 12, 31, 23, 59)
    ]


def test_next_match_rare_weekday_and_leap_day() -> None:
    # February 29 that is a Sunday (AND: day-of-week starts with `*`).
    expr = CronExpr.parse("0 0 29 2 */7")
    assert expr.next_match(datetime(2026, 1, 1)) == datetime(2032, 2, 29)


# --- words ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("* * * * *", "every minute"),
        ("* * * * * *", "every second"),
        ("*/15 * * * *", "every 15 minutes"),
        ("0 * * * *", "every hour"),
        ("@hourly", "every hour"),
        ("0 */2 * * *", "every 2 hours"),
        ("0 5 * * *", "at 05:00 every day"),
        ("@daily", "at 00:00 every day"),
        ("0 5 * * 1-5", "at 05:00 on Monday-Friday"),
        ("0 5 * * MON-FRI", "at 05:00 on Monday-Friday"),
        ("0 9 * * SAT,SUN", "at 09:00 on Saturday and Sunday"),
        ("30 4 * * 1,3,5", "at 04:30 on Monday, Wednesday and Friday"),
        ("0 6 1 * *", "at 06:00 on day 1 of the month"),
        ("0 0 29 2 *", "at 00:00 on 29 February"),
        ("0 0,12 * * *", "at 00:00 and 12:00 every day"),
        ("15 30 6 * * *", "at 06:30:15 every day"),
        ("*/5 9-17 * * *", "cron */5 9-17 * * *"),
        ("0 9 1 * MON", "cron 0 9 1 * MON"),
    ],
)
def test_describe(text: str, words: str) -> None:
    assert CronExpr.parse(text).describe() == words
