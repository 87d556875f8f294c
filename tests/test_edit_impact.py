"""The edit form's impact preview (SPEC R25, R6): DST warnings, slots before and after an
edit, the dependencies it touches, through every side of the control seam; and one
problem per cause when a job's own definition is refused."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from tuisched.domain.config.impact import NEW_JOB, edit_impact
from tuisched.domain.errors import ConfigError, JobActionError, SchedulerNotRunningError
from tuisched.domain.model import CronSchedule, EverySchedule, Schedule, Unit
from tuisched.domain.schedule.cron import CronExpr
from tuisched.domain.schedule.dst import clock_changes, dst_warnings
from tuisched.domain.schedule.slots import slots_between
from tuisched.domain.views import ConfigEdit, DstWarning, EditImpact
from tuisched.domain.wire import decode, encode
from tuisched.runtime import configedits
from tuisched.runtime.clock import ManualClock
from tuisched.runtime.configfiles import load_config, parse_config
from tuisched.runtime.control import LocalScheduler, OfflineControl, RemoteControl, socket_path
from tuisched.runtime.runtime import Runtime

from .runtime_fixtures import write_config

PARIS = ZoneInfo("Europe/Paris")
SPRING = datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
"""Paris goes from 02:00 CET to 03:00 CEST."""
FALL = datetime(2026, 10, 25, 1, 0, tzinfo=UTC)
"""Paris goes from 03:00 CEST back to 02:00 CET."""
NOW = datetime(2026, 3, 1, tzinfo=UTC)


def _cron(expr: str, tz: ZoneInfo = PARIS) -> CronSchedule:
    return CronSchedule(expr=CronExpr.parse(expr), start=None, stop=None, tz=tz)


def _walls(slots: tuple[datetime, ...] | list[datetime]) -> list[str]:
    return [slot.astimezone(PARIS).strftime("%H:%M %Z") for slot in slots]


def _night(schedule: Schedule, change: datetime) -> list[datetime]:
    """The slots the product computes from 00:00 to 05:00 local around `change`."""
    return list(slots_between(schedule, change - timedelta(hours=2), change + timedelta(hours=3)))


# --- clock changes and DST warnings (pure) -------------------------------------------


def test_the_clock_changes_of_a_year_are_found_to_the_second() -> None:
    changes = clock_changes(PARIS, NOW, NOW + timedelta(days=400))
    assert [change.at for change in changes] == [SPRING, FALL, datetime(2027, 3, 28, 1, tzinfo=UTC)]
    assert [change.forward for change in changes] == [True, False, True]
    assert changes[0].walls == (datetime(2026, 3, 29, 2), datetime(2026, 3, 29, 3))
    assert clock_changes(ZoneInfo("UTC"), NOW, NOW + timedelta(days=366)) == []


def test_a_daily_0230_job_is_moved_in_spring_and_runs_once_in_autumn() -> None:
    schedule = _cron("30 2 * * *")
    spring, fall = dst_warnings(schedule, NOW, horizon=timedelta(days=300))
    assert spring.text == (
        "Sun 2026-03-29, clocks go forward 02:00 -> 03:00: 02:30 does not exist; "
        "runs once at 03:00 CEST"
    )
    assert _walls(spring.slots) == ["03:00 CEST"]
    assert [s for s in _night(schedule, SPRING) if s.date() == SPRING.date()] == list(spring.slots)
    assert fall.text == (
        "Sun 2026-10-25, clocks go back 03:00 -> 02:00: 02:30 happens twice; "
        "it runs once, at the first (02:30 CEST)"
    )
    assert _walls(fall.slots) == ["02:30 CEST"]
    assert _walls(_night(schedule, FALL)) == ["02:30 CEST"]  # what the scheduler will do


def test_a_daily_0230_every_schedule_is_warned_like_its_cron() -> None:
    start = datetime(2026, 1, 1, 2, 30, tzinfo=PARIS)
    schedule = EverySchedule(step=1, unit=Unit.DAY, start=start, stop=None, tz=PARIS)
    assert dst_warnings(schedule, NOW, horizon=timedelta(days=300)) == dst_warnings(
        _cron("30 2 * * *"), NOW, horizon=timedelta(days=300)
    )


def test_a_quarter_hourly_night_job_loses_its_gap_slots_and_repeats_its_fold_slots() -> None:
    schedule = _cron("*/15 1-3 * * *")
    spring, fall = dst_warnings(schedule, NOW, horizon=timedelta(days=300))
    assert spring == DstWarning(
        text="Sun 2026-03-29, clocks go forward 02:00 -> 03:00: 02:00 to 02:45 (4 times) "
        "do not exist; those 4 slots are skipped"
    )
    night = _walls(_night(schedule, SPRING))
    assert not [wall for wall in night if wall.startswith("02:")]
    assert len(night) == 8  # 01:00-01:45 CET, 03:00-03:45 CEST
    assert fall.text == (
        "Sun 2026-10-25, clocks go back 03:00 -> 02:00: 02:00 to 02:45 (4 times) "
        "happen twice; runs in both passes (8 runs)"
    )
    assert _walls(fall.slots) == [
        *(f"02:{m:02d} CEST" for m in (0, 15, 30, 45)),
        *(f"02:{m:02d} CET" for m in (0, 15, 30, 45)),
    ]
    assert [s for s in _night(schedule, FALL) if s.astimezone(PARIS).hour == 2] == list(fall.slots)


def test_schedules_that_follow_elapsed_time_or_miss_the_changes_get_no_warning() -> None:
    start = datetime(2026, 1, 1, tzinfo=PARIS)
    hourly = EverySchedule(step=1, unit=Unit.HOUR, start=start, stop=None, tz=PARIS)
    assert dst_warnings(hourly, NOW) == ()
    assert dst_warnings(_cron("30 4 * * *"), NOW) == ()  # 04:30 is never in a gap or fold
    assert dst_warnings(_cron("30 2 * * *", ZoneInfo("UTC")), NOW) == ()
    stopped = CronSchedule(
        expr=CronExpr.parse("30 2 * * *"), start=None, stop=datetime(2026, 3, 1, tzinfo=PARIS),
        tz=PARIS,
    )  # fmt: skip
    assert dst_warnings(stopped, datetime(2026, 2, 1, tzinfo=UTC)) == ()


# --- the impact of an edit (pure) ------------------------------------------------------

JOBS = """
export:
  command: [/bin/echo, exported]
  schedule: {cron: "30 1 * * *"}
report:
  command: [/bin/true]
  schedule: {cron: "10 4 * * *"}
  requires: [export]
chained:
  command: [/bin/true]
  after: export
"""
SETTINGS = "timezone: Europe/Paris"
EDIT_NOW = datetime(2026, 3, 27, 12, 0, tzinfo=UTC)


def _configs(tmp_path: Path, old: str, new: str) -> tuple[Path, str, str]:
    path = write_config(tmp_path, JOBS, settings=SETTINGS)
    text = path.read_text()
    return path, text, text.replace(old, new)


def test_an_edit_shows_slots_before_and_after_in_the_jobs_zone(tmp_path: Path) -> None:
    path, text, edited = _configs(tmp_path, '"30 1 * * *"', '"30 2 * * *"')
    live, new = parse_config(text, path), parse_config(edited, path)
    impact = edit_impact(live, "export", new, now=EDIT_NOW, count=3)
    assert impact.timezone == "Europe/Paris"
    assert _walls(impact.before) == ["01:30 CET", "01:30 CET", "01:30 CEST"]
    assert _walls(impact.after) == ["02:30 CET", "03:00 CEST", "02:30 CEST"]  # the 29th moved
    assert [slot.date().day for slot in impact.after] == [28, 29, 30]
    assert impact.dst[0].slots == (impact.after[1],)
    assert impact.before_note == impact.after_note == ""
    assert impact.dependencies == (
        "report requires export: its run at 2026-03-28 04:10 CET will need export's slot "
        "2026-03-28 02:30 CET (was 2026-03-28 01:30 CET)",
        "chained runs after 'export' succeeds",
    )


def test_a_new_job_and_an_invalid_edit_say_why_a_side_is_empty(tmp_path: Path) -> None:
    path, text, _ = _configs(tmp_path, "", "")
    live = parse_config(text, path)
    added = text + '  tidy:\n    command: "true"\n    after: report\n'
    impact = edit_impact(live, "tidy", parse_config(added, path), now=EDIT_NOW)
    assert (impact.before, impact.before_note) == ((), NEW_JOB)
    assert impact.after == ()
    assert impact.after_note == "no slots: runs after 'report' succeeds"
    assert impact.dependencies == ("tidy will run after 'report' succeeds",)
    problem = f"{path}:8: job 'export': schedule.cron: minute field '61': value 61 out of range"
    refused = edit_impact(live, "export", None, now=EDIT_NOW, problems=[problem, "another"])
    assert refused.after == ()
    assert refused.after_note == (
        "not valid yet: schedule.cron: minute field '61': value 61 out of range (and 1 more)"
    )
    assert len(refused.before) == 5
    assert refused.dependencies[0] == (
        "report requires export: its run at 2026-03-28 04:10 CET needs export's slot "
        "2026-03-28 01:30 CET"
    )


def test_changing_what_a_job_requires_says_what_it_will_wait_for(tmp_path: Path) -> None:
    path, text, edited = _configs(tmp_path, "requires: [export]", "requires: [self, export]")
    edited = edited.replace('"10 4 * * *"', '"10 0 * * *"')
    impact = edit_impact(
        parse_config(text, path), "report", parse_config(edited, path), now=EDIT_NOW
    )
    assert impact.dependencies == (
        "report's run at 2026-03-28 00:10 CET will wait for its own previous slot",
        # R9: the day's cycle starts at 00:00, so the 00:10 run waits for the 01:30 slot
        "report's run at 2026-03-28 00:10 CET will wait for export's slot 2026-03-28 01:30 CET",
    )


# --- one problem per cause ----------------------------------------------------------


def test_a_refused_job_is_not_reported_again_by_the_jobs_and_groups_naming_it(
    tmp_path: Path,
) -> None:
    path, text, edited = _configs(tmp_path, '"30 1 * * *"', '"61 1 * * *"')
    edited += "groups:\n  nightly:\n    jobs: [export, report]\n"
    text += "groups:\n  nightly:\n    jobs: [export, report]\n"
    with pytest.raises(ConfigError) as whole:
        parse_config(edited, path)
    expected = [
        f"{path}:8: job 'export': schedule.cron: minute field '61': value 61 out of range 0-59"
    ]
    assert [str(problem) for problem in whole.value.problems] == expected
    config = parse_config(text, path)
    blocks = configedits.blocks_of(text, config)
    definition = {"command": ["/bin/echo"], "schedule": {"cron": "61 1 * * *"}}
    with pytest.raises(ConfigError) as by_block:
        configedits.replace_job(blocks, config, "export", definition, EDIT_NOW)
    assert [str(problem) for problem in by_block.value.problems] == expected


def test_an_unknown_job_is_still_named_unknown(tmp_path: Path) -> None:
    path, _, edited = _configs(tmp_path, "after: export", "after: exprt")
    with pytest.raises(ConfigError, match="after names unknown job 'exprt'; did you mean"):
        parse_config(edited, path)


# --- through the control seam --------------------------------------------------------


@asynccontextmanager
async def _serving(path: Path) -> AsyncIterator[tuple[LocalScheduler, RemoteControl]]:
    clock = ManualClock(EDIT_NOW)
    scheduler = LocalScheduler(Runtime(load_config(path), kill_grace=0.5, clock=clock))
    await scheduler.start()
    remote = RemoteControl(socket_path(path.parent / "state"), client="test")
    try:
        await remote.connect()
        yield scheduler, remote
    finally:
        await remote.close()
        await scheduler.stop(grace=1)


async def test_the_seam_answers_the_same_in_process_and_over_the_socket(tmp_path: Path) -> None:
    path = write_config(tmp_path, JOBS, settings=SETTINGS)
    definition = {"command": ["/bin/echo", "exported"], "schedule": {"cron": "30 2 * * *"}}
    edit = ConfigEdit.replace_job("export", definition)
    text = path.read_text()
    async with _serving(path) as (scheduler, remote):
        local = await scheduler.control("test").impact(edit)
        assert _walls(local.after[:3]) == ["02:30 CET", "03:00 CEST", "02:30 CEST"]
        assert local.dst[0].text.endswith("02:30 does not exist; runs once at 03:00 CEST")
        assert local.problems == ()
        over_socket = await remote.impact(edit)
        # by their instants: a fold's wall time in another zone never compares equal (PEP 495)
        assert encode(over_socket) == encode(local)
        bad = await remote.impact(ConfigEdit.replace_job("export", {"command": "x"}))
        assert bad.after == ()
        assert len(bad.problems) == 1
        assert "needs a trigger source" in bad.problems[0]
        with pytest.raises(JobActionError, match="only adding or replacing a job"):
            await remote.impact(ConfigEdit.delete_job("export"))
        assert path.read_text() == text  # nothing written


async def test_without_a_scheduler_there_is_no_preview(tmp_path: Path) -> None:
    path = write_config(tmp_path, JOBS)
    config = load_config(path)
    offline = OfflineControl(config, path.read_text(), clock=lambda: EDIT_NOW)
    with pytest.raises(SchedulerNotRunningError):
        await offline.impact(ConfigEdit.replace_job("export", {}))


def test_an_impact_crosses_the_wire_unchanged() -> None:
    slot = datetime(2026, 3, 29, 3, 0, tzinfo=PARIS)
    impact = EditImpact(
        job="export", timezone="Europe/Paris", before=(slot,), after=(slot,),
        dst=(DstWarning(text="moved", slots=(slot,)),), dependencies=("x",), problems=("p",),
    )  # fmt: skip
    back = decode(EditImpact, encode(impact))
    assert back == impact
