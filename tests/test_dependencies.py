"""R9: cycles, required upstream slots, `requires: [self]`, and dependency cycles."""

from __future__ import annotations

import itertools

import pytest

from tuisched.domain.config.dependencies import (
    Cycle,
    CycleUnit,
    cycle_of,
    find_cycle,
    previous_own_slot,
    required_slot,
)
from tuisched.domain.errors import ScheduleError
from tuisched.domain.model import AtSchedule, ManualSchedule, Schedule, Unit

from .schedule_builders import BERLIN, NEW_YORK, at, cron, every

# --- cycles ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "cycle"),
    [
        ("* * * * *", Cycle(CycleUnit.MINUTE, 1)),
        ("*/10 * * * *", Cycle(CycleUnit.MINUTE, 10)),
        ("15,45 * * * *", Cycle(CycleUnit.MINUTE, 30)),
        ("0,20,40 * * * *", Cycle(CycleUnit.MINUTE, 20)),
        ("*/7 * * * *", Cycle(CycleUnit.HOUR, 1)),  # 0..56 step 7 does not repeat within the hour
        ("0 * * * *", Cycle(CycleUnit.HOUR, 1)),
        ("@hourly", Cycle(CycleUnit.HOUR, 1)),
        ("*/5 */2 * * *", Cycle(CycleUnit.HOUR, 2)),
        ("0 0,12 * * *", Cycle(CycleUnit.HOUR, 12)),
        ("0 */12 * * *", Cycle(CycleUnit.HOUR, 12)),
        ("0 1,9,17 * * *", Cycle(CycleUnit.HOUR, 8)),
        ("0 1,2 * * *", Cycle(CycleUnit.DAY, 1)),
        ("30 1 * * *", Cycle(CycleUnit.DAY, 1)),
        ("0 0 * * 0-7", Cycle(CycleUnit.DAY, 1)),  # every weekday is every day
        ("0 5 * * 1-5", Cycle(CycleUnit.WEEK, 1)),
        ("0 5 * * */2", Cycle(CycleUnit.WEEK, 1)),
        ("0 6 1 * *", Cycle(CycleUnit.MONTH, 1)),
        ("0 9 1 * MON", Cycle(CycleUnit.MONTH, 1)),
        ("0 0 1 1 *", Cycle(CycleUnit.YEAR, 1)),
        ("*/10 * * 6 *", Cycle(CycleUnit.YEAR, 1)),
        ("0 */10 * * * *", Cycle(CycleUnit.MINUTE, 10)),  # seconds never matter
    ],
)
def test_cron_cycle(text: str, cycle: Cycle) -> None:
    assert cycle_of(cron(text)) == cycle


@pytest.mark.parametrize(
    ("step", "unit", "cycle"),
    [
        (10, Unit.MINUTE, Cycle(CycleUnit.MINUTE, 10)),
        (120, Unit.SECOND, Cycle(CycleUnit.MINUTE, 2)),
        (60, Unit.MINUTE, Cycle(CycleUnit.HOUR, 1)),
        (12, Unit.HOUR, Cycle(CycleUnit.HOUR, 12)),
        (24, Unit.HOUR, Cycle(CycleUnit.DAY, 1)),
        (1, Unit.DAY, Cycle(CycleUnit.DAY, 1)),
        (7, Unit.DAY, Cycle(CycleUnit.WEEK, 1)),
        (1, Unit.WEEK, Cycle(CycleUnit.WEEK, 1)),
        (1, Unit.MONTH, Cycle(CycleUnit.MONTH, 1)),
        (12, Unit.MONTH, Cycle(CycleUnit.YEAR, 1)),
        (1, Unit.YEAR, Cycle(CycleUnit.YEAR, 1)),
        (7, Unit.MINUTE, None),
        (90, Unit.SECOND, None),
        (5, Unit.HOUR, None),
        (2, Unit.DAY, None),
        (2, Unit.WEEK, None),
        (3, Unit.MONTH, None),
        (2, Unit.YEAR, None),
    ],
)
def test_every_cycle(step: int, unit: Unit, cycle: Cycle | None) -> None:
    assert cycle_of(every(step, unit)) == cycle


def test_at_and_manual_have_no_cycle() -> None:
    assert cycle_of(AtSchedule(at=at(2026, 7, 1), tz=BERLIN)) is None
    assert cycle_of(ManualSchedule(tz=BERLIN)) is None


def test_cycles_order_by_length() -> None:
    ordered = [
        Cycle(CycleUnit.MINUTE, 1),
        Cycle(CycleUnit.MINUTE, 10),
        Cycle(CycleUnit.MINUTE, 30),
        Cycle(CycleUnit.HOUR, 1),
        Cycle(CycleUnit.HOUR, 12),
        Cycle(CycleUnit.DAY),
        Cycle(CycleUnit.WEEK),
        Cycle(CycleUnit.MONTH),
        Cycle(CycleUnit.YEAR),
    ]
    assert all(a < b for a, b in itertools.pairwise(ordered))
    assert max(ordered[3], ordered[1]) == Cycle(CycleUnit.HOUR, 1)
    assert [str(c) for c in ordered[2:6]] == ["30 minutes", "1 hour", "12 hours", "1 day"]


def test_cycle_outside_the_list_is_rejected() -> None:
    with pytest.raises(ScheduleError, match="7 minutes is not an R9 cycle"):
        Cycle(CycleUnit.MINUTE, 7)
    with pytest.raises(ScheduleError):
        Cycle(CycleUnit.WEEK, 2)


# --- required slots: the SPEC R9 examples -------------------------------------------------------


def test_r9_daily_child_needs_that_days_daily_run() -> None:
    assert required_slot(cron("10 4 * * *"), cron("30 1 * * *"), at(2026, 5, 5, 4, 10)) == at(
        2026, 5, 5, 1, 30
    )


def test_r9_hourly_child_waits_for_the_same_days_daily_run() -> None:
    assert required_slot(cron("0 * * * *"), cron("0 5 * * *"), at(2026, 5, 5, 2)) == at(
        2026, 5, 5, 5
    )


def test_r9_daily_child_needs_the_ten_minute_upstreams_first_run_of_the_day() -> None:
    child, upstream = cron("0 6 * * *"), cron("*/10 * * * *")
    assert required_slot(child, upstream, at(2026, 5, 5, 6)) == at(2026, 5, 5, 0, 0)
    # The same with an `every` upstream whose phase is not on the hour.
    upstream_every = every(10, Unit.MINUTE, at(2026, 1, 1, 0, 3))
    assert required_slot(child, upstream_every, at(2026, 5, 5, 6)) == at(2026, 5, 5, 0, 3)


# --- required slots: more cycles ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("child_at", "needed"),
    [
        ((2026, 5, 5, 14, 30), (2026, 5, 5, 12, 0)),
        ((2026, 5, 5, 11, 30), (2026, 5, 5, 0, 0)),
        ((2026, 5, 5, 12, 30), (2026, 5, 5, 12, 0)),
        ((2026, 5, 5, 0, 30), (2026, 5, 5, 0, 0)),
        ((2026, 5, 5, 23, 30), (2026, 5, 5, 12, 0)),
    ],
)
def test_twelve_hour_cycle(child_at: tuple[int, ...], needed: tuple[int, ...]) -> None:
    # Window: the child's hour truncated, minus 11 hours.
    child, upstream = cron("30 * * * *"), cron("0 */12 * * *")
    assert required_slot(child, upstream, at(*child_at)) == at(*needed)


def test_twelve_hour_child_at_the_upstream_slot_waits_for_it() -> None:
    assert required_slot(cron("0 */12 * * *"), cron("0 */12 * * *"), at(2026, 5, 5, 12)) == at(
        2026, 5, 5, 12
    )


@pytest.mark.parametrize(
    ("child_at", "needed"),
    [
        ((2026, 5, 5, 6, 10), (2026, 5, 5, 6, 5)),  # window from 06:01
        ((2026, 5, 5, 6, 20), (2026, 5, 5, 6, 15)),
        ((2026, 5, 5, 0, 0), (2026, 5, 4, 23, 55)),  # window from 23:51 the day before
    ],
)
def test_ten_minute_cycle(child_at: tuple[int, ...], needed: tuple[int, ...]) -> None:
    child, upstream = cron("*/10 * * * *"), cron("*/5 * * * *")
    assert required_slot(child, upstream, at(*child_at)) == at(*needed)


def test_ten_minute_cycles_on_both_sides_pair_equal_slots() -> None:
    child, upstream = every(10, Unit.MINUTE), cron("*/10 * * * *")
    assert required_slot(child, upstream, at(2026, 5, 5, 6, 20)) == at(2026, 5, 5, 6, 20)


@pytest.mark.parametrize(
    "child_at",
    [(2026, 5, 4, 9), (2026, 5, 8, 9), (2026, 5, 10, 9)],  # Monday, Friday, Sunday
)
def test_weekly_cycle_starts_on_monday(child_at: tuple[int, ...]) -> None:
    child, upstream = cron("0 9 * * *"), cron("0 1 * * MON")
    assert required_slot(child, upstream, at(*child_at)) == at(2026, 5, 4, 1)


def test_monthly_cycle_starts_on_the_first() -> None:
    child, upstream = cron("0 6 15 * *"), cron("0 1 * * *")
    assert required_slot(child, upstream, at(2026, 5, 15, 6)) == at(2026, 5, 1, 1)
    last_day = every(1, Unit.MONTH, at(2026, 1, 31, 6))
    assert required_slot(last_day, upstream, at(2026, 2, 28, 6)) == at(2026, 2, 1, 1)


def test_yearly_cycle_starts_on_january_first() -> None:
    child, upstream = cron("0 0 1 7 *"), cron("0 2 1 * *")
    assert required_slot(child, upstream, at(2026, 7, 1)) == at(2026, 1, 1, 2)


def test_upstream_in_another_zone() -> None:
    # Day cycle truncated in the child's zone: Berlin midnight is 18:00 in New York
    # the evening before, so the upstream's 20:00 New York run that evening counts.
    child, upstream = cron("0 6 * * *"), cron("0 20 * * *", tz=NEW_YORK)
    needed = required_slot(child, upstream, at(2026, 5, 5, 6))
    assert needed == at(2026, 5, 4, 20, tz=NEW_YORK)
    assert needed is not None
    assert needed.tzinfo is NEW_YORK


def test_upstream_without_cycle_uses_the_childs() -> None:
    child = cron("0 6 * * *")
    once = AtSchedule(at=at(2026, 5, 5, 3), tz=BERLIN)
    assert required_slot(child, once, at(2026, 5, 5, 6)) == at(2026, 5, 5, 3)
    assert required_slot(child, once, at(2026, 5, 6, 6)) is None
    assert required_slot(child, ManualSchedule(tz=BERLIN), at(2026, 5, 5, 6)) is None


def test_child_without_cycle_cannot_require() -> None:
    with pytest.raises(ScheduleError, match="cycle"):
        required_slot(every(7, Unit.MINUTE), cron("0 1 * * *"), at(2026, 5, 5))


def test_requires_self_is_the_previous_own_slot() -> None:
    schedule: Schedule = cron("0 * * * *")
    assert previous_own_slot(schedule, at(2026, 5, 5, 10)) == at(2026, 5, 5, 9)
    first = every(1, Unit.DAY, at(2026, 5, 5, 6))
    assert previous_own_slot(first, at(2026, 5, 5, 6)) is None


# --- dependency graph cycles --------------------------------------------------------------------


def test_no_cycle() -> None:
    assert find_cycle({"a": ["b", "c"], "b": ["c"], "c": []}) is None
    assert find_cycle({}) is None


def test_cycle_is_reported_as_a_closed_path() -> None:
    assert find_cycle({"a": ["b"], "b": ["c"], "c": ["a"]}) == ["a", "b", "c", "a"]


def test_self_loop() -> None:
    assert find_cycle({"a": ["a"]}) == ["a", "a"]


def test_cycle_path_starts_at_the_cycle_not_the_entry() -> None:
    assert find_cycle({"entry": ["x"], "x": ["y"], "y": ["x"]}) == ["x", "y", "x"]


def test_unknown_targets_are_leaves() -> None:
    assert find_cycle({"a": ["ghost"], "b": ["a"]}) is None


def test_cycle_is_deterministic() -> None:
    graph = {"d": ["c"], "c": ["d", "b"], "b": ["a"], "a": ["b"]}
    reordered = {k: list(reversed(v)) for k, v in reversed(graph.items())}
    assert find_cycle(graph) == find_cycle(reordered) == ["a", "b", "a"]


def test_long_chain_does_not_recurse() -> None:
    chain = {f"j{i}": [f"j{i + 1}"] for i in range(20_000)}
    assert find_cycle(chain) is None
    chain["j20000"] = ["j0"]
    cycle = find_cycle(chain)
    assert cycle is not None
    assert len(cycle) == 20_002
