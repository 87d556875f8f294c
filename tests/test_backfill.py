"""Backfill of a window (SPEC R24): the slots with no successful run are run in slot order,
with trigger `backfill`, honouring `requires`, `overlap` and `max_workers`; a dry run lists
them and why the others are left out; the command line goes through the control socket."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tuisched.domain import backfill
from tuisched.domain.errors import JobActionError, ScheduleError, SchedulerNotRunningError
from tuisched.domain.events import RunConcluded, RunStarted, RunWaiting
from tuisched.domain.runs import Result, RunRecord, RunState, Trigger, new_run_id
from tuisched.domain.views import HistoryQuery
from tuisched.frontends.eventlog import describe_event
from tuisched.runtime.clock import ManualClock
from tuisched.runtime.configfiles import load_config
from tuisched.runtime.control import LocalControl, OfflineControl
from tuisched.runtime.runtime import Runtime

from . import engine_jobs
from .recorder import Recorder
from .runtime_fixtures import listening, running, write_config
from .test_cli import run

NOW = datetime(2026, 5, 7, 9, 5, tzinfo=UTC)
EIGHT = datetime(2026, 5, 7, 8, 0, tzinfo=UTC)
NINE = datetime(2026, 5, 7, 9, 0, tzinfo=UTC)
TEN_MINUTES = "{every: 10 minutes, start: 2026-05-07T00:00}"
JOBS = f"""
ten: {{python: "tests.engine_jobs:noop", isolation: thread, schedule: {TEN_MINUTES}}}
held: {{python: "tests.engine_jobs:Blocker", isolation: thread, schedule: {TEN_MINUTES}}}
queue:
  python: "tests.engine_jobs:Blocker"
  isolation: thread
  overlap: queue
  schedule: {TEN_MINUTES}
wide:
  python: "tests.engine_jobs:Blocker"
  isolation: thread
  overlap: allow
  schedule: {TEN_MINUTES}
up: {{python: "tests.engine_jobs:noop", isolation: thread, schedule: {TEN_MINUTES}}}
down:
  python: "tests.engine_jobs:noop"
  isolation: thread
  schedule: {TEN_MINUTES}
  requires: [up]
minutely:
  python: "tests.engine_jobs:noop"
  schedule: {{every: 1 minute, start: 2026-01-01T00:00}}
late: {{python: "tests.engine_jobs:noop", schedule: {{every: 10 minutes, start: 2026-05-07T08:25}}}}
by-hand: {{python: "tests.engine_jobs:noop", schedule: manual}}
"""
ACTOR = "tester@test (console)"


@pytest.fixture(autouse=True)
def _closed_gates() -> Iterator[None]:
    engine_jobs.GATES.clear()
    yield
    engine_jobs.GATES["blocker"].set()  # a blocker left running ends with the test


@asynccontextmanager
async def scheduler(
    tmp_path: Path, clock: ManualClock | None = None
) -> AsyncIterator[tuple[Runtime, Recorder, LocalControl]]:
    """A scheduler at 09:05 on a fixed clock (no slot fires by itself), with a console."""
    path = write_config(tmp_path, JOBS, settings="max_workers: 2")
    async with running(path, clock=clock or ManualClock(NOW)) as (runtime, events):
        yield runtime, events, LocalControl(runtime, actor=ACTOR)


def slot_at(minute: int, hour: int = 8) -> datetime:
    return datetime(2026, 5, 7, hour, minute, tzinfo=UTC)


async def record(runtime: Runtime, job: str, slot: datetime, state: RunState) -> RunRecord:
    """A past run of `job` for `slot`, written to the history."""
    row = RunRecord(
        run_id=new_run_id(), job=job, slot=slot, trigger=Trigger.SCHEDULE, state=state,
        queued_at=slot, started_at=slot, ended_at=slot + timedelta(seconds=1),
        result=Result.COMPLETED,
    )  # fmt: skip
    await runtime.history.call(lambda store: store.insert(row))
    return row


def concluded(events: Recorder, job: str) -> list[RunConcluded]:
    return [e for e in events.of(RunConcluded) if e.run.job == job]


# --- the plan ------------------------------------------------------------------------------


async def test_a_dry_run_lists_the_unrun_slots_and_why_the_others_are_left_out(
    tmp_path: Path,
) -> None:
    async with scheduler(tmp_path) as (runtime, _, control):
        done = await record(runtime, "ten", slot_at(20), RunState.SUCCESS)
        await record(runtime, "ten", slot_at(30), RunState.FAILED)  # failed: run again
        plan = await control.backfill("ten", EIGHT, slot_at(30, hour=9), dry_run=True)
        queued = runtime.engine.queued() + runtime.engine.running()
        backfilled = await runtime.history.call(
            lambda store: store.page(HistoryQuery(triggers=(Trigger.BACKFILL,)))
        )
    assert plan.dry_run
    expected = [slot_at(m) for m in (0, 10, 30, 40, 50)] + [NINE]
    assert [slot.astimezone(UTC) for slot in plan.slots] == expected
    assert [(left.slot, left.reason) for left in plan.left_out] == [
        (slot_at(20), f"already succeeded (run {done.run_id})")
    ]
    assert plan.notes == ("slots from now (2026-05-07T09:05:00+00:00) on are left to the schedule",)
    assert plan.order == "in slot order, each after the one before has ended"
    assert (queued, backfilled) == ([], [])  # a dry run runs nothing
    assert not (tmp_path / "state" / "actions.log").exists()  # no action recorded


async def test_a_job_s_own_start_bounds_the_window(tmp_path: Path) -> None:
    async with scheduler(tmp_path) as (_, _, control):
        plan = await control.backfill("late", EIGHT, NINE, dry_run=True)
    assert [slot.astimezone(UTC) for slot in plan.slots] == [slot_at(25), slot_at(35), slot_at(45),
                                                            slot_at(55)]  # fmt: skip
    assert plan.notes == (
        "slots before the job's start (2026-05-07T08:25:00+00:00) are outside it",
    )


async def test_the_window_is_bounded_and_checked(tmp_path: Path) -> None:
    async with scheduler(tmp_path) as (_, _, control):
        with pytest.raises(ScheduleError, match="more than 10000 slots of minutely"):
            await control.backfill("minutely", datetime(2026, 4, 1, tzinfo=UTC), NINE)
        with pytest.raises(ScheduleError, match="the window is empty"):
            await control.backfill("ten", NINE, EIGHT, dry_run=True)
        with pytest.raises(JobActionError, match="no repeating schedule"):
            await control.backfill("by-hand", EIGHT, NINE)
        with pytest.raises(JobActionError, match="holds no past slot of the job"):
            await control.backfill("ten", NOW + timedelta(hours=1), NOW + timedelta(hours=2))
    assert len(backfill.window_slots(load_config(tmp_path / "tuisched.yaml").jobs["minutely"],
                                     NINE - timedelta(minutes=10_000), NINE)) == 10_000  # fmt: skip


# --- running it -------------------------------------------------------------------------


async def test_a_backfill_runs_each_unrun_slot_in_order_as_trigger_backfill(
    tmp_path: Path,
) -> None:
    async with scheduler(tmp_path) as (runtime, events, control):
        await record(runtime, "ten", slot_at(10), RunState.SUCCESS)
        plan = await control.backfill("ten", EIGHT, slot_at(40))
        done = await events.wait_for(RunConcluded, lambda e: e.run.job == "ten", count=3)
        rows = await runtime.history.call(
            lambda store: store.page(HistoryQuery(job="ten", triggers=(Trigger.BACKFILL,)))
        )
    assert not plan.dry_run
    assert [e.run.slot for e in done] == [slot_at(0), slot_at(20), slot_at(30)]
    assert all(e.run.state is RunState.SUCCESS for e in done)
    assert all(e.run.trigger is Trigger.BACKFILL for e in done)
    started = [e for e in events.of(RunStarted) if e.run.job == "ten"]
    for before, after in zip(done, started[1:], strict=False):
        assert before.seq < after.seq  # each started after the one before had concluded
    assert sorted(row.slot for row in rows if row.slot) == [slot_at(0), slot_at(20), slot_at(30)]
    log = (tmp_path / "state" / "actions.log").read_text()
    assert f"| {ACTOR} | backfill | job ten from 2026-05-07T08:00:00+00:00 to " in log
    assert ": 3 slots" in log


async def test_a_second_backfill_joins_the_one_under_way(tmp_path: Path) -> None:
    async with scheduler(tmp_path) as (runtime, events, control):
        first = await control.backfill("held", EIGHT, slot_at(20))
        await events.wait_for(RunStarted, lambda e: e.run.job == "held")
        second = await control.backfill("held", EIGHT, slot_at(40))
        with pytest.raises(JobActionError, match="already on the way"):
            await control.backfill("held", EIGHT, slot_at(40))
        on_the_way = [
            r for r in runtime.engine.running() + runtime.engine.queued() if r.job == "held"
        ]
        engine_jobs.GATES["blocker"].set()
        done = await events.wait_for(RunConcluded, lambda e: e.run.job == "held", count=4)
    assert len(first.slots) == 2
    assert [s.astimezone(UTC) for s in second.slots] == [slot_at(20), slot_at(30)]
    reasons = [left.reason for left in second.left_out]
    assert reasons[0].startswith("a run of this slot is in progress (run ")  # the history says
    assert reasons[1] == "on the way already (a backfill under way)"  # the backfill says
    assert len(on_the_way) == 1  # `overlap: skip`: one at a time, never dropped
    assert [e.run.slot for e in done] == [slot_at(m) for m in (0, 10, 20, 30)]
    assert all(e.run.state is RunState.SUCCESS for e in done)


async def test_requires_holds_a_backfill_run_until_its_upstream_slot_succeeded(
    tmp_path: Path,
) -> None:
    clock = ManualClock(NOW)
    async with scheduler(tmp_path, clock) as (_, events, control):
        # Its slot's next one passed long ago: it waits 10 minutes all the same, as the
        # scheduled run of its slot would have.
        deadline = clock.arming(600.0)
        await control.backfill("down", EIGHT, slot_at(10))
        (waiting,) = await events.wait_for(RunWaiting, lambda e: e.run.job == "down")
        await asyncio.wait_for(deadline, 10)
        early = concluded(events, "down")
        await control.backfill("up", EIGHT, slot_at(10))
        (ran,) = await events.wait_for(RunConcluded, lambda e: e.run.job == "down")
        (upstream,) = concluded(events, "up")
    assert waiting.run.trigger is Trigger.BACKFILL
    assert "up" in waiting.run.reason  # it names the upstream slot it waits for
    assert early == []  # not run, nor given up, before its upstream succeeded
    assert ran.run.state is RunState.SUCCESS
    assert upstream.seq < ran.seq


async def test_overlap_skip_records_a_slot_whose_job_is_busy_as_skipped(tmp_path: Path) -> None:
    async with scheduler(tmp_path) as (_, events, control):
        await control.run_now("held")
        await events.wait_for(RunStarted, lambda e: e.run.job == "held")
        await control.backfill("held", EIGHT, slot_at(20))
        skipped = await events.wait_for(
            RunConcluded, lambda e: e.run.trigger is Trigger.BACKFILL, count=2
        )
    assert [e.run.slot for e in skipped] == [slot_at(0), slot_at(10)]
    assert all(e.run.result is Result.SKIPPED for e in skipped)
    assert all("still running" in e.run.reason for e in skipped)


async def test_overlap_queue_waits_behind_the_running_run(tmp_path: Path) -> None:
    async with scheduler(tmp_path) as (runtime, events, control):
        await control.run_now("queue")
        await events.wait_for(RunStarted, lambda e: e.run.job == "queue")
        await control.backfill("queue", EIGHT, slot_at(30))
        backlog = [run.slot for run in runtime.engine.queued() if run.job == "queue"]
        engine_jobs.GATES["blocker"].set()
        done = await events.wait_for(
            RunConcluded, lambda e: e.run.trigger is Trigger.BACKFILL, count=3
        )
    assert backlog == [slot_at(0)]  # one queued behind the running run, not all three
    assert [e.run.slot for e in done] == [slot_at(0), slot_at(10), slot_at(20)]
    assert all(e.run.state is RunState.SUCCESS for e in done)


async def test_overlap_allow_runs_up_to_max_workers_at_once(tmp_path: Path) -> None:
    async with scheduler(tmp_path) as (runtime, events, control):
        plan = await control.backfill("wide", EIGHT, slot_at(40))
        await events.wait_for(RunStarted, lambda e: e.run.job == "wide", count=2)
        running_now = [run.slot for run in runtime.engine.running() if run.job == "wide"]
        queued = [run for run in runtime.engine.queued() if run.job == "wide"]
        engine_jobs.GATES["blocker"].set()
        done = await events.wait_for(RunConcluded, lambda e: e.run.job == "wide", count=4)
    assert plan.order == "in slot order, up to 2 at a time (overlap: allow)"
    assert sorted(s for s in running_now if s) == [slot_at(0), slot_at(10)]
    assert queued == []  # max_workers 2: the other two are not queued yet
    started = [e.run.slot for e in events.of(RunStarted) if e.run.job == "wide"]
    assert sorted(s for s in started[:2] if s) == [slot_at(0), slot_at(10)]
    assert all(e.run.state is RunState.SUCCESS for e in done)


async def test_without_a_scheduler_a_dry_run_reads_the_history_and_a_backfill_says_no(
    tmp_path: Path,
) -> None:
    path = write_config(tmp_path, JOBS)
    offline = OfflineControl(load_config(path), path.read_text(), clock=lambda: NOW)
    plan = await offline.backfill("ten", EIGHT, NINE, dry_run=True)
    assert len(plan.slots) == 6
    with pytest.raises(SchedulerNotRunningError, match="needs a running scheduler"):
        await offline.backfill("ten", EIGHT, NINE)


def test_the_headless_log_says_a_run_is_a_backfill() -> None:
    run_ = RunRecord(
        run_id="abc", job="ten", slot=EIGHT, trigger=Trigger.BACKFILL, state=RunState.RUNNING,
        queued_at=NOW, started_at=NOW,
    )  # fmt: skip
    said = describe_event(RunStarted(at=NOW, run=run_), UTC)
    assert said is not None
    assert "(backfill slot 2026-05-07T08:00:00+00:00" in said[1]


# --- the command line, through the control socket -----------------------------------------

CLI_JOBS = """
tick: {command: [/bin/true], schedule: {every: 1h, start: 2026-01-01T00:00}}
"""


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return write_config(tmp_path, CLI_JOBS)


@pytest.fixture
def headless(config: Path) -> Iterator[Path]:
    with listening(config):
        yield config


WINDOW = ("--from", "2026-01-01T00:00", "--to", "2026-01-01T03:00")


def backfilled(config: Path) -> list[dict[str, object]]:
    """The backfill runs `tuisched history --json` lists, once all three have ended."""
    deadline = time.monotonic() + 20
    while True:
        rows = json.loads(run("history", "tick", "--json", "-c", str(config))[1])
        found = [row for row in rows if row["trigger"] == "backfill"]
        if len(found) == 3 and all(row["state"] == "SUCCESS" for row in found):
            return found
        assert time.monotonic() < deadline, rows
        time.sleep(0.1)  # another process runs them: nothing to await here


def test_the_cli_backfills_through_the_running_scheduler(headless: Path) -> None:
    status, out, _ = run("backfill", "tick", *WINDOW, "--dry-run", "-c", str(headless))
    assert status == 0
    assert out.splitlines()[0].endswith("would run 3 slots, in slot order, each after the one "
                                        "before has ended:")  # fmt: skip
    assert "  run       2026-01-01T02:00:00+00:00" in out
    status, out, _ = run("backfill", "tick", *WINDOW, "-c", str(headless))
    assert status == 0
    assert ": 3 slots queued, in slot order" in out.splitlines()[0]
    rows = backfilled(headless)
    assert sorted(str(row["slot"]) for row in rows) == [
        "2026-01-01T00:00:00+00:00", "2026-01-01T01:00:00+00:00", "2026-01-01T02:00:00+00:00",
    ]  # fmt: skip
    status, out, _ = run("backfill", "tick", *WINDOW, "--dry-run", "--json", "-c", str(headless))
    listed = json.loads(out)
    assert (status, listed["slots"], len(listed["left_out"])) == (0, [], 3)
    assert listed["left_out"][0]["reason"].startswith("already succeeded (run ")
    status, _, err = run("backfill", "tick", *WINDOW, "-c", str(headless))
    assert status == 1
    assert err.startswith("tuisched: no slot of tick from ")
    assert "needs a run" in err
    actions = (headless.parent / "state" / "actions.log").read_text()
    assert "(command line) | backfill | job tick from 2026-01-01T00:00:00+00:00" in actions


def test_the_cli_says_what_is_wrong_in_one_line(config: Path) -> None:
    status, _, err = run("backfill", "tick", *WINDOW, "-c", str(config))
    assert (status, err.count("\n")) == (69, 1)
    assert "no scheduler is running" in err
    status, out, _ = run("backfill", "tick", *WINDOW, "--dry-run", "-c", str(config))
    assert (status, out.count("  run  ")) == (0, 3)  # a listing needs no scheduler
    status, _, err = run("backfill", "tick", "--from", "yesterday", "--to", "2026-01-02",
                         "--dry-run", "-c", str(config))  # fmt: skip
    assert (status, err) == (2, (
        "tuisched: backfill: --from: bad time 'yesterday'; write a date-time like "
        "2026-05-07T09:10 or a duration before now like 7d or 12h, or now\n"
    ))  # fmt: skip
    # Durations before now, and `now`: the last 2 hours of an every-minute job.
    status, out, err = run("backfill", "tick", "--from", "2h", "--to", "now", "--dry-run",
                           "--json", "-c", str(config))  # fmt: skip
    assert status == 0, err
    plan = json.loads(out)
    start, end = (datetime.fromisoformat(plan[key]) for key in ("from", "to"))
    assert end - start == timedelta(hours=2)
    assert abs(end - datetime.now(UTC)) < timedelta(minutes=1)
    status, _, err = run("backfill", "tick", "--from", "2026-01-02", "--to", "2026-01-01",
                         "--dry-run", "-c", str(config))  # fmt: skip
    assert (status, err.count("\n")) == (2, 1)
    assert "the window is empty" in err
    status, _, err = run("backfill", "nosuch", *WINDOW, "--dry-run", "-c", str(config))
    assert (status, err) == (1, "tuisched: no job named 'nosuch'\n")
    status, out, _ = run("backfill", "--help")
    assert status == 0
    assert "Example: tuisched backfill" in " ".join(out.split())


async def test_a_scheduler_shutting_down_leaves_the_rest_of_a_backfill_unrun(
    tmp_path: Path,
) -> None:
    async with scheduler(tmp_path) as (runtime, events, control):
        await control.backfill("held", EIGHT, slot_at(40))
        (started,) = await events.wait_for(RunStarted, lambda e: e.run.job == "held")
        runtime.engine.stop_firing()  # as a drain does: no new run starts
        runtime.engine.stop_run(started.run.run_id)
        await events.wait_for(RunConcluded, lambda e: e.run.job == "held", count=2)
        await runtime.history.flush()
        rows = await runtime.history.call(
            lambda store: store.page(HistoryQuery(job="held", triggers=(Trigger.BACKFILL,)))
        )
    assert sorted((row.slot, row.result) for row in rows if row.slot) == [
        (slot_at(0), Result.STOPPED),
        (slot_at(10), Result.SHUTDOWN),
    ]  # fmt: skip  (the two slots after it are not recorded one by one as shut down)
