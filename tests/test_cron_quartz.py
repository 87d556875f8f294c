"""Quartz's L, W and # in cron, the nicknames, and per-job jitter (issue 16, item 5).

The day rules are checked form by form, through DST changes, and against
cronsim (which reads L, LW, NL and N#K the same way; it has no NW or L-N).
Jitter is checked as pure arithmetic, in the engine's trigger and firing, in a
running engine, in the configuration and in `tuisched next`.
"""

from __future__ import annotations

import subprocess
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from cronsim import CronSim
from hypothesis import given, settings
from hypothesis import strategies as st

from tuisched.domain.config.dependencies import Cycle, CycleUnit, cycle_of
from tuisched.domain.errors import ConfigError, CronError
from tuisched.domain.events import RunFinished, SlotMissed
from tuisched.domain.model import Job
from tuisched.domain.schedule.cron import CronExpr
from tuisched.domain.schedule.jitter import fire_time, jitter_delay
from tuisched.domain.schedule.slots import next_slot, next_slots
from tuisched.frontends.tui.widgets.why import WhyStrip
from tuisched.runtime.configfiles import parse_config
from tuisched.runtime.engine.trigger import SlotTrigger

from . import preloaded
from .console_fixtures import make_app, until
from .runtime_fixtures import running, write_config
from .schedule_builders import BERLIN, NEW_YORK, at, cron

# --- each form, on the wall clock --------------------------------------------------------------


def _days(text: str, start: date, count: int) -> list[date]:
    """The first `count` firing days of a daily-time expression after `start`."""
    expr = CronExpr.parse(text)
    wall = datetime.combine(start, datetime.min.time())
    found = []
    for _ in range(count):
        match = expr.next_match(wall)
        assert match is not None
        found.append(match.date())
        wall = match
    return found


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # L: the last day, 28/29/30/31 as the month has it
        ("0 5 L * *", ["2026-01-31", "2026-02-28", "2026-03-31", "2026-04-30"]),
        ("0 5 L 2 *", ["2026-02-28", "2027-02-28", "2028-02-29"]),
        # L-3: three days before the last day
        ("0 5 L-3 * *", ["2026-01-28", "2026-02-25", "2026-03-28", "2026-04-27"]),
        # 15W: Feb 15 2026 is a Sunday -> Monday 16th; Aug 15 a Saturday -> Friday 14th
        ("0 5 15W * *", ["2026-01-15", "2026-02-16", "2026-03-16", "2026-04-15"]),
        ("0 5 15W 8 *", ["2026-08-14", "2027-08-16", "2028-08-15"]),
        # 1W: Aug 1 2026 is a Saturday -> Monday 3rd (never back into July)
        ("0 5 1W 8 *", ["2026-08-03", "2027-08-02", "2028-08-01"]),
        # 31W: May 31 2026 is a Sunday -> Friday 29th (never into June); no 31st, no run
        ("0 5 31W 4,5 *", ["2026-05-29", "2027-05-31", "2028-05-31"]),
        # LW: the last weekday; Jan 31 2026 is a Saturday -> Friday 30th
        ("0 5 LW * *", ["2026-01-30", "2026-02-27", "2026-03-31", "2026-04-30"]),
        # 5L: the last Friday; FRI#3 / 5#3: the third Friday
        ("0 5 * * 5L", ["2026-01-30", "2026-02-27", "2026-03-27", "2026-04-24"]),
        ("0 5 * * FRIL", ["2026-01-30", "2026-02-27", "2026-03-27", "2026-04-24"]),
        ("0 5 * * 5#3", ["2026-01-16", "2026-02-20", "2026-03-20", "2026-04-17"]),
        ("0 5 ? * fri#3", ["2026-01-16", "2026-02-20", "2026-03-20", "2026-04-17"]),
        ("0 5 * * 0#5", ["2026-03-29", "2026-05-31", "2026-08-30", "2026-11-29"]),
        ("0 5 * * 7L", ["2026-01-25", "2026-02-22", "2026-03-29", "2026-04-26"]),
        # rules in lists beside plain values
        ("0 5 1,L * *", ["2026-01-01", "2026-01-31", "2026-02-01", "2026-02-28"]),
        ("0 5 * * 1#1,5L", ["2026-01-05", "2026-01-30", "2026-02-02", "2026-02-27"]),
        # both day fields restricted: crontab's OR (the last day, or any Monday)
        ("0 5 L * MON", ["2026-01-05", "2026-01-12", "2026-01-19", "2026-01-26"]),
        ("0 5 L * 1#1", ["2026-01-05", "2026-01-31", "2026-02-02", "2026-02-28"]),
        # a rule with a starred weekday field ANDs: 15W on Sun, Tue, Thu or Sat
        ("0 5 15W * */2", ["2026-01-15", "2026-09-15", "2026-10-15"]),
    ],
)
def test_each_day_rule_picks_the_days_quartz_picks(text: str, expected: list[str]) -> None:
    found = _days(text, date(2026, 1, 1), len(expected))
    assert [d.isoformat() for d in found] == expected


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("0 5 L * *", "at 05:00 on the last day of the month"),
        ("30 23 LW * *", "at 23:30 on the last weekday of the month"),
        ("0 5 15W * *", "at 05:00 on the weekday nearest day 15 of the month"),
        ("0 22 * * 5L", "at 22:00 on the last Friday of the month"),
        ("0 10 * * 2#1", "at 10:00 on the first Tuesday of the month"),
        ("0 10 ? * FRI#3", "at 10:00 on the third Friday of the month"),
        ("0 5 L-3 * *", "cron 0 5 L-3 * *"),
        ("0 5 L 1 *", "cron 0 5 L 1 *"),
        ("*/5 * L * *", "cron */5 * L * *"),
    ],
)
def test_day_rules_in_words(text: str, words: str) -> None:
    assert CronExpr.parse(text).describe() == words


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0 0 L/2 * *", "day-of-month field 'L/2': 'L/2' is not a day rule (a rule takes no step)"),
        ("0 0 * * L", "say which weekday, e.g. 5L for the last Friday"),
        ("0 0 32W * *", "'32W' is not a day rule (the number must be 1-31)"),
        ("0 0 0W * *", "the number must be 1-31"),
        ("0 0 L-31 * *", "the number must be 0-30"),
        ("0 0 L-x * *", "the number must be 0-30"),
        ("0 0 5L * *", "'5L' is not a day rule (use L, L-N, NW or LW)"),
        ("0 0 1-LW * *", "not a day rule"),
        ("0 0 * * 5#6", "'5#6' is not a day rule (the number must be 1-5)"),
        ("0 0 * * 5#0", "the number must be 1-5"),
        ("0 0 * * 8L", "value 8 out of range 0-7"),
        ("0 0 * * XYZ#1", "'XYZ' is not a value"),
        ("0 0 * * 5W", "'5W' is not a value"),
        ("0 0 30W 2 *", "never fires"),
        ("0 0 L-30 2 *", "never fires"),
        ("0 L * * *", "hour field 'L': 'L' is not a value"),
        ("@reboot", "@reboot is not supported"),
    ],
)
def test_malformed_day_rules_are_refused_naming_the_field(text: str, message: str) -> None:
    with pytest.raises(CronError, match=r"^cron: ") as raised:
        CronExpr.parse(text)
    assert message in str(raised.value)


def test_a_rule_a_month_cannot_meet_skips_that_month() -> None:
    # 31W in a 30-day month and the fifth Friday of a month without one: no run there.
    assert _days("0 0 31W * *", date(2026, 4, 1), 2) == [date(2026, 5, 29), date(2026, 7, 31)]
    assert _days("0 0 * 2 5#5", date(2026, 1, 1), 1) == [date(2036, 2, 29)]


@pytest.mark.parametrize(
    ("macro", "same_as"),
    [
        ("@hourly", "0 * * * *"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@weekly", "0 0 * * 0"),
        ("@monthly", "0 0 1 * *"),
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
        ("@Daily", "0 0 * * *"),
    ],
)
def test_nicknames_fire_like_their_expressions(macro: str, same_as: str) -> None:
    now = at(2026, 5, 7, 9, 10)
    assert next_slots(cron(macro), now, 5) == next_slots(cron(same_as), now, 5)


def test_a_day_rule_makes_the_requires_cycle_a_month() -> None:
    # R9: the third Friday repeats monthly, not weekly, though only the weekday is written.
    for text in ("0 5 * * 5#3", "0 5 * * 5L", "0 5 L * *", "0 5 15W * *", "0 5 LW * *"):
        assert cycle_of(cron(text)) == Cycle(CycleUnit.MONTH), text
    assert cycle_of(cron("0 5 * * 5")) == Cycle(CycleUnit.WEEK)


# --- daylight saving time ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "tz", "after", "expected"),
    [
        # Berlin springs forward on the last Sunday of March: 02:30 runs once at 03:00.
        ("30 2 * 3 0L", BERLIN, at(2026, 3, 1), ["2026-03-29T03:00:00+02:00"]),
        # ... and falls back on the last Sunday of October: 02:30 runs once, first pass.
        ("30 2 * 10 0L", BERLIN, at(2026, 10, 1), ["2026-10-25T02:30:00+02:00"]),
        # A frequent expression on that day runs in both passes of the fold.
        (
            "*/30 2 * 10 7L",
            BERLIN,
            at(2026, 10, 1),
            [
                "2026-10-25T02:00:00+02:00",
                "2026-10-25T02:30:00+02:00",
                "2026-10-25T02:00:00+01:00",
                "2026-10-25T02:30:00+01:00",
            ],
        ),
        # ... and in the gap not at all: 02:00 and 02:30 do not happen, 03:00 and 03:30 do.
        (
            "*/30 2,3 * 3 0L",
            BERLIN,
            at(2026, 3, 1),
            ["2026-03-29T03:00:00+02:00", "2026-03-29T03:30:00+02:00"],
        ),
        # New York changes on the second Sunday of March, which 0#2 names.
        ("30 2 * 3 0#2", NEW_YORK, at(2026, 3, 1, tz=NEW_YORK), ["2026-03-08T03:00:00-04:00"]),
        # and back on the first Sunday of November: 01:30 runs once, in the first pass.
        ("30 1 * 11 0#1", NEW_YORK, at(2026, 11, 1, tz=NEW_YORK), ["2026-11-01T01:30:00-04:00"]),
    ],
)
def test_day_rules_follow_the_dst_policy(
    text: str, tz: object, after: datetime, expected: list[str]
) -> None:
    schedule = cron(text, tz=tz)  # type: ignore[arg-type]
    slots = next_slots(schedule, after, len(expected))
    assert [slot.isoformat() for slot in slots] == expected
    # never two runs for one instant, and the next one is a month or a year later
    following = next_slot(schedule, slots[-1])
    assert following is not None
    assert following - slots[-1] > timedelta(days=20)


# --- against cronsim, where it reads the same rules -------------------------------------------

_RULES = st.sampled_from(["L", "LW", "1,L", "L,15", "LW,1"])
_DOW_RULES = st.builds(
    lambda day, count, last: f"{day}L" if last else f"{day}#{count}",
    st.integers(0, 7),
    st.integers(1, 5),
    st.booleans(),
)


@st.composite
def _quartz_expressions(draw: st.DrawFn) -> str:
    minute = draw(st.sampled_from(["0", "30", "*/20", "15,45"]))
    hour = draw(st.sampled_from(["0", "6", "23", "*/8", "*"]))
    month = draw(st.sampled_from(["*", "2", "1-6", "*/3", "2,11"]))
    dom = draw(st.one_of(_RULES, st.just("*"), st.sampled_from(["1", "10-20"])))
    dow = draw(st.one_of(_DOW_RULES, st.just("*"), st.sampled_from(["1-5", "SUN"])))
    if dom in ("*", "1", "10-20") and (dow == "*" or ("#" not in dow and "L" not in dow)):
        dom = draw(_RULES)  # always at least one rule
    return f"{minute} {hour} {dom} {month} {dow}"


@settings(max_examples=300, deadline=None)
@given(
    text=_quartz_expressions(),
    start=st.datetimes(min_value=datetime(2020, 1, 1), max_value=datetime(2040, 1, 1)),
)
def test_wall_clock_matches_agree_with_cronsim(text: str, start: datetime) -> None:
    try:
        expr = CronExpr.parse(text)
    except CronError:  # e.g. only fifth Mondays of February: cronsim would search forever
        return
    start = start.replace(second=0, microsecond=0)
    theirs = CronSim(text, start)
    wall = start
    for _ in range(6):
        ours = expr.next_match(wall)
        assert ours is not None
        assert ours == next(theirs), text
        wall = ours


@settings(max_examples=100, deadline=None)
@given(
    text=_quartz_expressions(),
    start=st.datetimes(min_value=datetime(2025, 1, 1), max_value=datetime(2030, 1, 1)),
)
def test_aware_slots_outside_dst_changes_agree_with_cronsim(text: str, start: datetime) -> None:
    # In UTC there are no DST corners, so cronsim's aware slots are the oracle too.
    try:
        schedule = cron(text, tz=UTC)  # type: ignore[arg-type]
    except CronError:
        return
    after = start.replace(second=0, microsecond=0, tzinfo=UTC)
    theirs = CronSim(text, after)
    for slot in next_slots(schedule, after, 4):
        assert slot == next(theirs)


# --- jitter: the arithmetic ---------------------------------------------------------------------

SLOT = datetime(2026, 5, 7, 0, 0, tzinfo=UTC)


def test_the_delay_is_reproducible_and_within_the_jitter() -> None:
    delays = {jitter_delay(f"job{i}", SLOT, timedelta(seconds=30), None) for i in range(200)}
    assert all(timedelta(0) <= d < timedelta(seconds=30) for d in delays)
    assert len(delays) > 150  # jobs sharing a slot are spread, not bunched
    again = {jitter_delay(f"job{i}", SLOT, timedelta(seconds=30), None) for i in range(200)}
    assert again == delays
    assert all(d % timedelta(milliseconds=1) == timedelta(0) for d in delays)


def test_the_delay_depends_on_the_slots_instant_not_its_zone() -> None:
    berlin = SLOT.astimezone(BERLIN)
    assert jitter_delay("a", berlin, timedelta(hours=1), None) == jitter_delay(
        "a", SLOT, timedelta(hours=1), None
    )
    slots = [SLOT + timedelta(days=k) for k in range(50)]
    assert len({jitter_delay("a", s, timedelta(hours=1), None) for s in slots}) > 45


def test_the_delay_never_reaches_the_next_slot() -> None:
    following = SLOT + timedelta(seconds=10)
    for i in range(300):
        delay = jitter_delay(f"j{i}", SLOT, timedelta(minutes=5), following)
        assert timedelta(0) <= delay < timedelta(seconds=10)
    assert jitter_delay("a", SLOT, timedelta(0), following) == timedelta(0)
    assert jitter_delay("a", SLOT, timedelta(microseconds=500), None) == timedelta(0)


def test_fire_times_keep_every_slot_in_order() -> None:
    schedule = cron("*/5 * * * *")
    slots = next_slots(schedule, at(2026, 5, 7), 50)
    fires = [fire_time(schedule, "busy", timedelta(hours=1), slot) for slot in slots]
    assert all(s <= f < n for s, f, n in zip(slots, fires, slots[1:], strict=False))
    assert fire_time(schedule, "busy", timedelta(0), slots[0]) == slots[0]


# --- jitter: the engine's trigger and firing ---------------------------------------------------


def test_the_trigger_fires_at_slot_plus_delay_and_maps_back_to_the_slot() -> None:
    schedule = cron("0 * * * *")
    trigger = SlotTrigger(schedule, "report", timedelta(minutes=10))
    now = at(2026, 5, 7, 9, 10)
    first = trigger.get_next_fire_time(None, now)
    slot = at(2026, 5, 7, 10)
    delay = jitter_delay("report", slot, timedelta(minutes=10), at(2026, 5, 7, 11))
    assert first == slot + delay
    assert trigger.slot_of(first) == slot
    second = trigger.get_next_fire_time(first, now)
    assert second is not None
    assert trigger.slot_of(second) == at(2026, 5, 7, 11)
    # a fire time it no longer remembers is still mapped back (the last slot before it)
    forgetful = SlotTrigger(schedule, "report", timedelta(minutes=10))
    assert forgetful.slot_of(second) == at(2026, 5, 7, 11)
    # without jitter, fire times are the slots
    plain = SlotTrigger(schedule)
    assert plain.get_next_fire_time(None, now) == slot
    assert plain.slot_of(slot) == slot


async def test_a_jittered_run_starts_after_its_delay_and_keeps_its_slot(tmp_path: Path) -> None:
    path = write_config(
        tmp_path,
        """
        spread:
          python: "tests.engine_jobs:noop"
          schedule: {every: 1 second, start: 2026-01-01T00:00}
          jitter: 1s
          overlap: allow
        """,
    )
    async with running(path) as (runtime, events):
        done = await events.wait_for(RunFinished, count=3, within=10)
        shown = runtime.engine.next_fire("spread")
    for event in done:
        run = event.run
        assert run.slot is not None
        assert run.started_at is not None
        assert run.slot.microsecond == 0  # the slot, not the fire time, is the run's
        delay = jitter_delay("spread", run.slot, timedelta(seconds=1), None)
        assert run.started_at >= run.slot + delay
    assert shown is None or shown.microsecond == 0  # the console shows the slot


async def test_lateness_is_counted_from_the_fire_time(tmp_path: Path) -> None:
    path = write_config(
        tmp_path,
        """
        late:
          python: "tests.engine_jobs:noop"
          schedule: {every: 1 hour, start: 2026-01-01T00:00}
          grace: 30s
          jitter: 10m
          overlap: allow
        """,
    )
    now = datetime.now(UTC)
    async with running(path) as (runtime, events):
        job = runtime.config.job("late")
        slots = [now - timedelta(minutes=9), now - timedelta(minutes=8)]
        # fired 5 s ago (in grace, though its slot is 9 minutes past) and 40 s ago (late)
        fires = [now - timedelta(seconds=5), now - timedelta(seconds=40)]
        due: list[tuple[Job, datetime]] = []
        runtime.engine._firing._fire(job, list(zip(slots, fires, strict=True)), now, due)
        runtime.engine._firing._submit_slots(due)
        (finished,) = await events.wait_for(RunFinished)
    assert finished.run.slot == slots[0]
    assert [e.run.slot for e in events.of(SlotMissed)] == [slots[1]]


# --- jitter: configuration and `tuisched next` -------------------------------------------------


def _config(tmp_path: Path, job: str) -> Path:
    path = tmp_path / "tuisched.yaml"
    path.write_text(f"settings: {{timezone: UTC, state_dir: state}}\njobs:\n{job}")
    return path


def test_jitter_is_read_as_a_duration(tmp_path: Path) -> None:
    path = _config(tmp_path, "  a: {command: 'true', schedule: {cron: '@daily'}, jitter: 1m30s}\n")
    config = parse_config(path.read_text(), path)
    assert config.jobs["a"].jitter == timedelta(seconds=90)
    path = _config(tmp_path, "  a: {command: 'true', schedule: {cron: '@daily'}}\n")
    assert parse_config(path.read_text(), path).jobs["a"].jitter == timedelta(0)


@pytest.mark.parametrize(
    ("job", "message"),
    [
        ("  a: {command: 'true', schedule: {cron: '@daily'}, jitter: soon}\n", "jitter: "),
        ("  a: {command: 'true', schedule: manual, jitter: 30s}\n", "jitter applies only"),
        (
            "  a: {command: 'true', schedule: manual}\n"
            "  b: {command: 'true', after: {job: a}, jitter: 30s}\n",
            "job 'b': jitter applies only to jobs with a schedule",
        ),
    ],
)
def test_bad_jitter_is_refused_with_its_line(tmp_path: Path, job: str, message: str) -> None:
    path = _config(tmp_path, job)
    with pytest.raises(ConfigError) as raised:
        parse_config(path.read_text(), path)
    assert any(message in str(problem) for problem in raised.value.problems)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return preloaded.run(args)


def test_next_shows_slots_and_says_the_job_has_jitter(tmp_path: Path) -> None:
    path = _config(
        tmp_path, "  a: {command: 'true', schedule: {cron: '0 5 * * 5#3'}, jitter: 30m}\n"
    )
    shown = _cli("-c", str(path), "next", "a", "-n", "2", "--now", "2026-01-01T00:00")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.split() == ["2026-01-16T05:00:00+00:00", "2026-02-20T05:00:00+00:00"]
    assert "has jitter 30m" in shown.stderr
    started = _cli("-c", str(path), "next", "a", "-n", "2", "--now", "2026-01-01T00:00", "--jitter")
    assert started.returncode == 0, started.stderr
    schedule = cron("0 5 * * 5#3", tz=UTC)  # type: ignore[arg-type]
    expected = [
        fire_time(schedule, "a", timedelta(minutes=30), slot).isoformat()
        for slot in next_slots(schedule, datetime(2026, 1, 1, tzinfo=UTC), 2)
    ]
    assert started.stdout.split() == expected
    assert started.stdout.split() != shown.stdout.split()
    assert "has jitter" not in started.stderr


async def test_the_console_shows_the_slot_and_says_runs_start_later(tmp_path: Path) -> None:
    path = write_config(
        tmp_path,
        """
        spread: {command: [/bin/true], schedule: {cron: "0 5 * * 5#3"}, jitter: 30m}
        """,
    )
    app, runtime = make_app(path)
    async with app.run_test(size=(80, 24)) as pilot:
        strip = app.screen.query_one(WhyStrip)
        await until(pilot, lambda: strip.text.startswith("spread: next slot at "))
        assert strip.text.endswith(" 05:00 +00:00, started up to 30m later (jitter)")
        shown = runtime.engine.next_fire("spread")
        assert shown is not None
        assert (shown.hour, shown.minute, shown.second, shown.microsecond) == (5, 0, 0, 0)
