"""The engine with a real runtime: queue order, overlap, stops, timeouts, launch failures."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from tuisched.domain.errors import JobActionError, Refusal, RunRefusedError, UnknownJobError
from tuisched.domain.events import (
    RunConcluded,
    RunFinished,
    RunNotStarted,
    RunOutputWritten,
    RunQueued,
    RunStarted,
    SchedulerStarted,
    SlotMissed,
)
from tuisched.domain.model import Job
from tuisched.domain.reasons import MAX_BACKLOG
from tuisched.domain.runs import Result, RunState, Trigger
from tuisched.runtime.clock import ManualClock

from . import engine_jobs
from .runtime_fixtures import running, write_config


@pytest.fixture(autouse=True)
def _reset_gates() -> None:
    engine_jobs.GATES.clear()
    engine_jobs.STARTED.clear()


async def test_queue_leaves_by_slot_then_priority_then_name(tmp_path: Path) -> None:
    path = write_config(
        tmp_path,
        """
        blocker: {python: "tests.engine_jobs:Blocker", isolation: thread, schedule: manual}
        c: {python: "tests.engine_jobs:record_c", isolation: thread, schedule: manual, priority: 5}
        b: {python: "tests.engine_jobs:record_b", isolation: thread, schedule: manual,
            overlap: allow}
        a: {python: "tests.engine_jobs:record_a", isolation: thread, schedule: manual}
        """,
        settings="max_workers: 1",
    )
    async with running(path) as (runtime, events):
        engine = runtime.engine
        engine.run_now("blocker")
        await events.wait_for(RunStarted)
        slot = datetime(2026, 1, 1, tzinfo=UTC)
        for name in ("b", "a", "c"):
            engine.submit(runtime.config.job(name), slot=slot, trigger=Trigger.SCHEDULE)
        early = slot - timedelta(minutes=1)
        engine.submit(runtime.config.job("b"), slot=early, trigger=Trigger.SCHEDULE)
        assert [run.job for run in engine.queued()] == ["b", "c", "a", "b"]
        engine_jobs.GATES["blocker"].set()
        await events.wait_for(RunFinished, lambda e: e.run.job != "blocker", count=4)
    assert engine_jobs.STARTED == ["b", "c", "a", "b"]


async def test_overlap_skip_records_a_slot_not_started_and_refuses_a_run_by_hand(
    tmp_path: Path,
) -> None:
    """A slot that comes while the job runs is recorded NOT_STARTED, with the run in the
    way; a run asked for by hand is refused at once (nothing recorded), saying why."""
    path = write_config(
        tmp_path,
        'blocker: {python: "tests.engine_jobs:Blocker", isolation: thread, schedule: manual,'
        " timezone: Asia/Kolkata}",
    )
    async with running(path) as (runtime, events):
        first = runtime.actions.run_now("blocker")
        (started,) = await events.wait_for(RunStarted)
        since = started.run.started_at
        assert since is not None
        clock = since.astimezone(ZoneInfo("Asia/Kolkata")).strftime("%H:%M:%S")  # the job's zone
        slot = runtime.engine.submit(
            runtime.config.job("blocker"), slot=datetime(2026, 1, 1, tzinfo=UTC),
            trigger=Trigger.SCHEDULE,
        )  # fmt: skip
        assert (slot.state, slot.result) == (RunState.NOT_STARTED, Result.SKIPPED)
        assert slot.reason == f"still running: run {first.run_id} since {clock}"
        with pytest.raises(RunRefusedError) as refused:
            runtime.actions.run_now("blocker")
        assert refused.value.refusal == Refusal(
            job="blocker", reason=f"still running: run {first.run_id} since {clock}",
            run_id=first.run_id, since=since, queueable=True,
        )  # fmt: skip
        assert str(refused.value) == f"trigger 'blocker': {refused.value.refusal.reason}"
        assert [run.run_id for run in runtime.engine.queued()] == []
        engine_jobs.GATES["blocker"].set()
        await events.wait_for(RunFinished)
    assert [e.run.run_id for e in events.of(RunNotStarted)] == [slot.run_id]  # the slot's only
    assert [e.run.run_id for e in events.of(RunQueued)] == [first.run_id]


async def test_a_run_by_hand_asked_to_queue_waits_behind_a_skip_job_s_run(
    tmp_path: Path,
) -> None:
    """`trigger --queue`: where `skip` would refuse it, the run waits behind the running
    one and starts once it has ended; a slot that comes meanwhile is still skipped."""
    path = write_config(
        tmp_path,
        'blocker: {python: "tests.engine_jobs:Blocker", isolation: thread, schedule: manual}',
    )
    async with running(path) as (runtime, events):
        first = runtime.actions.run_now("blocker")
        await events.wait_for(RunStarted)
        second = runtime.actions.run_now("blocker", queue=True)
        assert second.state is RunState.QUEUED
        slot = runtime.engine.submit(
            runtime.config.job("blocker"), slot=datetime(2026, 1, 1, tzinfo=UTC),
            trigger=Trigger.SCHEDULE,
        )  # fmt: skip
        assert slot.state is RunState.NOT_STARTED
        assert [run.run_id for run in runtime.engine.running()] == [first.run_id]
        engine_jobs.GATES["blocker"].set()
        done = await events.wait_for(RunFinished, count=2)
    assert [e.run.run_id for e in done] == [first.run_id, second.run_id]
    starts = events.of(RunStarted)
    assert starts[1].run.started_at >= done[0].run.ended_at  # type: ignore[operator]


async def test_a_skip_job_s_run_waiting_for_a_worker_refuses_another_as_already_queued(
    tmp_path: Path,
) -> None:
    path = write_config(
        tmp_path,
        """
        blocker: {python: "tests.engine_jobs:Blocker", isolation: thread, schedule: manual}
        waiting: {python: "tests.engine_jobs:noop", schedule: manual}
        """,
        settings="max_workers: 1",
    )
    async with running(path) as (runtime, events):
        runtime.actions.run_now("blocker")
        await events.wait_for(RunStarted)
        queued = runtime.actions.run_now("waiting")  # no worker free: it waits for one
        clock = queued.queued_at.strftime("%H:%M:%S")
        with pytest.raises(RunRefusedError) as refused:
            runtime.actions.run_now("waiting")
        assert refused.value.refusal.reason == f"already queued: run {queued.run_id} since {clock}"
        engine_jobs.GATES["blocker"].set()
        await events.wait_for(RunFinished, lambda e: e.run.job == "waiting")


async def test_a_run_by_hand_while_the_scheduler_drains_is_refused(tmp_path: Path) -> None:
    path = write_config(tmp_path, 'hello: {command: "echo hello", schedule: manual}')
    async with running(path) as (runtime, events):
        runtime.engine.stop_firing()  # what a shutdown does first
        with pytest.raises(RunRefusedError, match=r"^trigger 'hello': the scheduler is shutting"):
            runtime.actions.run_now("hello")
    assert events.of(RunNotStarted) == []  # refused, not recorded


async def test_overlap_queue_runs_after_the_previous(tmp_path: Path) -> None:
    path = write_config(
        tmp_path,
        'blocker: {python: "tests.engine_jobs:Blocker", isolation: thread, schedule: manual,'
        " overlap: queue}",
    )
    async with running(path) as (runtime, events):
        first = runtime.actions.run_now("blocker")
        await events.wait_for(RunStarted)
        second = runtime.actions.run_now("blocker")
        assert second.state is RunState.QUEUED
        assert len(runtime.engine.running()) == 1
        for _ in range(MAX_BACKLOG - 1):  # the backlog fills up...
            runtime.actions.run_now("blocker")
        with pytest.raises(RunRefusedError) as refused:  # ...and refuses one more
            runtime.actions.run_now("blocker", queue=True)
        assert refused.value.refusal.reason == (
            f"{MAX_BACKLOG} runs already waiting behind run {first.run_id}"
        )
        assert not refused.value.refusal.queueable
        for waiting in runtime.engine.queued()[1:]:
            await runtime.actions.stop_run(waiting.run_id)
        engine_jobs.GATES["blocker"].set()
        done = await events.wait_for(RunFinished, count=2)
    assert [e.run.run_id for e in done] == [first.run_id, second.run_id]
    starts = events.of(RunStarted)
    assert starts[1].run.started_at >= done[0].run.ended_at  # type: ignore[operator]


async def test_overlap_skip_lets_one_slot_wait_behind_a_catch_up(tmp_path: Path) -> None:
    """A start's catch-up (`misfire: once`) may begin late on a busy machine: the next
    slot then waits behind it, once, instead of being skipped for it."""
    path = write_config(
        tmp_path,
        'blocker: {python: "tests.engine_jobs:Blocker", isolation: thread, schedule: manual}',
    )
    async with running(path) as (runtime, events):
        engine, job = runtime.engine, runtime.config.job("blocker")
        slot = datetime(2026, 1, 1, tzinfo=UTC)
        catch_up = engine.submit(job, slot=slot, trigger=Trigger.CATCHUP)
        await events.wait_for(RunStarted)
        after = engine.submit(job, slot=slot + timedelta(seconds=1), trigger=Trigger.SCHEDULE)
        assert after.state is RunState.QUEUED  # behind the catch-up
        third = engine.submit(job, slot=slot + timedelta(seconds=2), trigger=Trigger.SCHEDULE)
        assert third.state is RunState.NOT_STARTED  # only one waits: the rule is `skip`
        assert catch_up.run_id in third.reason
        engine_jobs.GATES["blocker"].set()
        done = await events.wait_for(RunFinished, count=2)
    assert [e.run.run_id for e in done] == [catch_up.run_id, after.run_id]
    starts = events.of(RunStarted)
    assert starts[1].run.started_at >= done[0].run.ended_at  # type: ignore[operator]


async def test_overlap_allow_runs_side_by_side(tmp_path: Path) -> None:
    path = write_config(
        tmp_path,
        'blocker: {python: "tests.engine_jobs:Blocker", isolation: thread, schedule: manual,'
        " overlap: allow}",
    )
    async with running(path) as (runtime, events):
        runtime.actions.run_now("blocker")
        runtime.actions.run_now("blocker")
        await events.wait_for(RunStarted, count=2)
        assert len(runtime.engine.running()) == 2
        engine_jobs.GATES["blocker"].set()
        await events.wait_for(RunFinished, count=2)


async def test_timeout_stops_the_process_group_and_fails(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    path = write_config(
        tmp_path,
        f"""
        slow:
          command: "sleep 30 & echo $! > {pidfile}; echo started; wait"
          schedule: manual
          timeout: 1m
        """,
    )
    clock = ManualClock(datetime.now(UTC))
    async with running(path, clock=clock) as (runtime, events):
        runtime.actions.run_now("slow")
        await events.wait_for(RunOutputWritten, lambda e: "started" in e.lines)
        await clock.advance(59)
        runtime.bus.flush()
        assert events.of(RunFinished) == []  # not a second early
        await clock.advance(1)
        (finished,) = await events.wait_for(RunFinished)
    run = finished.run
    assert (run.state, run.result) == (RunState.FAILED, Result.TIMED_OUT)
    child = int(pidfile.read_text())
    assert _proc_state(child) in ("gone", "Z")


def _proc_state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return "gone"


async def test_operator_stop_of_running_and_queued_runs(tmp_path: Path) -> None:
    path = write_config(
        tmp_path,
        """
        blocker: {python: "tests.engine_jobs:Blocker", isolation: thread, schedule: manual}
        other: {python: "tests.engine_jobs:noop", schedule: manual}
        """,
        settings="max_workers: 1",
    )
    async with running(path) as (runtime, events):
        running_run = runtime.actions.run_now("blocker")
        await events.wait_for(RunStarted)
        queued_run = runtime.actions.run_now("other")
        await runtime.actions.stop_run(queued_run.run_id)
        (not_started,) = await events.wait_for(RunNotStarted)
        assert not_started.run.result is Result.STOPPED
        await runtime.actions.stop_run(running_run.run_id)
        (finished,) = await events.wait_for(RunFinished)
        assert finished.run.result is Result.STOPPED
        with pytest.raises(JobActionError):
            await runtime.actions.stop_run("nosuchrun")
        with pytest.raises(UnknownJobError):
            runtime.actions.run_now("nosuchjob")


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        ("command: [/nonexistent/program]", "/nonexistent/program"),
        ("command: [/bin/true]\n  cwd: /nonexistent/folder", "/nonexistent/folder"),
        ('python: "tests.no_such_module:run"', "tests.no_such_module"),
    ],
)
async def test_launch_failures_are_not_started_with_the_reason(
    tmp_path: Path, kind: str, reason: str
) -> None:
    path = write_config(tmp_path, f"broken:\n  {kind}\n  schedule: manual")
    async with running(path) as (runtime, events):
        runtime.actions.run_now("broken")
        (event,) = await events.wait_for(RunNotStarted)
    assert event.run.result is Result.LAUNCH_FAILED
    assert reason in event.run.reason
    audit = (tmp_path / "state" / "audit.log").read_text().splitlines()
    assert audit[-1].startswith("broken | - | ")
    assert " | launch_failed | " in audit[-1]


async def test_python_failure_and_retries(tmp_path: Path) -> None:
    path = write_config(
        tmp_path,
        'flaky: {python: "tests.engine_jobs:boom", schedule: manual, retries: 2, retry_delay: 0s}',
    )
    async with running(path) as (runtime, events):
        runtime.actions.run_now("flaky")
        done = await events.wait_for(RunFinished, count=3)
    assert [e.run.attempt for e in done] == [0, 1, 2]
    assert all(e.run.state is RunState.FAILED for e in done)
    assert done[0].run.status == "RuntimeError: boom"
    await asyncio.sleep(0)
    assert len(events.of(RunQueued)) == 3


async def test_every_second_job_fires_on_its_slots(tmp_path: Path) -> None:
    path = write_config(
        tmp_path,
        """
        tick:
          python: "tests.engine_jobs:noop"
          schedule: {every: 1 second, start: 2026-01-01T00:00}
        """,
    )
    async with running(path) as (_, events):
        done = await events.wait_for(RunFinished, count=2, within=5)
    for event in done:
        run = event.run
        assert run.trigger is Trigger.SCHEDULE
        assert run.slot is not None
        assert run.started_at is not None
        assert run.slot <= run.started_at  # never early; how late is a benchmark's business
    assert done[1].run.slot - done[0].run.slot == timedelta(seconds=1)  # type: ignore[operator]


async def test_slots_missed_while_down_are_recorded_and_misfire_once_catches_up(
    tmp_path: Path,
) -> None:
    path = write_config(
        tmp_path,
        """
        minutely:
          python: "tests.engine_jobs:noop"
          schedule: {every: 1 minute, start: 2026-01-01T00:00}
        catch-up:
          python: "tests.engine_jobs:noop"
          schedule: {every: 1 minute, start: 2026-01-01T00:00}
          misfire: once
        """,
    )
    async with running(path) as (runtime, _):
        node = runtime.node
    # Pretend the previous instance was last seen ten and a half minutes ago.
    from tuisched.runtime.store import HistoryStore

    down_since = datetime.now(UTC) - timedelta(minutes=10, seconds=30)
    with HistoryStore.open_sqlite(tmp_path / "state" / "history.db") as store:
        store.mark_alive(node, down_since, 1)
    async with running(path) as (_, events):
        await events.wait_for(SchedulerStarted)  # published after every SlotMissed
        missed = events.of(SlotMissed)
        (catch_up,) = await events.wait_for(RunFinished, lambda e: e.run.trigger is Trigger.CATCHUP)
    by_job = {
        name: [e.run for e in missed if e.run.job == name] for name in ("minutely", "catch-up")
    }
    assert 10 <= len(by_job["minutely"]) <= 11
    assert len(by_job["catch-up"]) == len(by_job["minutely"])
    for run in by_job["minutely"]:
        assert run.state is RunState.MISSED
        assert run.slot is not None
        assert down_since < run.slot <= datetime.now(UTC)
        assert run.reason == "the scheduler was not running at this slot"
    assert catch_up.run.slot == by_job["catch-up"][-1].slot


async def test_stopping_a_backlogged_run_keeps_the_queue_discipline(tmp_path: Path) -> None:
    path = write_config(
        tmp_path,
        """
        blocker: {python: "tests.engine_jobs:Blocker", isolation: thread, schedule: manual,
                  overlap: queue}
        other: {python: "tests.engine_jobs:noop", schedule: manual}
        """,
    )
    async with running(path) as (runtime, events):
        first = runtime.actions.run_now("blocker")
        await events.wait_for(RunStarted)
        second = runtime.actions.run_now("blocker")
        third = runtime.actions.run_now("blocker")
        await runtime.actions.stop_run(second.run_id)
        runtime.actions.run_now("other")
        await events.wait_for(RunFinished, lambda e: e.run.job == "other")
        running_now = [run.run_id for run in runtime.engine.running()]
        assert running_now == [first.run_id]  # the third waits behind the first
        assert [run.run_id for run in runtime.engine.queued()] == [third.run_id]
        engine_jobs.GATES["blocker"].set()
        done = await events.wait_for(RunFinished, lambda e: e.run.job == "blocker", count=2)
    assert [e.run.run_id for e in done] == [first.run_id, third.run_id]


async def test_drain_closes_queued_runs_as_shutdown(tmp_path: Path) -> None:
    path = write_config(
        tmp_path,
        """
        blocker: {python: "tests.engine_jobs:Blocker", isolation: thread, schedule: manual}
        waiting: {python: "tests.engine_jobs:noop", schedule: manual}
        """,
        settings="max_workers: 1",
    )
    async with running(path) as (runtime, events):
        runtime.actions.run_now("blocker")
        await events.wait_for(RunStarted)
        queued = runtime.actions.run_now("waiting")
    (not_started,) = events.of(RunNotStarted)
    assert not_started.run.run_id == queued.run_id
    assert not_started.run.result is Result.SHUTDOWN
    (stopped,) = events.of(RunFinished)
    assert (stopped.run.job, stopped.run.result) == ("blocker", Result.SHUTDOWN)


async def test_reload_cancels_queued_runs_of_a_deleted_job_and_drops_its_retry(
    tmp_path: Path,
) -> None:
    path = write_config(
        tmp_path,
        """
        blocker: {python: "tests.engine_jobs:Blocker", isolation: thread, schedule: manual}
        doomed: {python: "tests.engine_jobs:noop", schedule: manual}
        flaky: {python: "tests.engine_jobs:boom", schedule: manual, retries: 1, retry_delay: 1s}
        """,
        settings="max_workers: 1",
    )
    clock = ManualClock(datetime.now(UTC))
    async with running(path, clock=clock) as (runtime, events):
        runtime.actions.run_now("blocker")
        await events.wait_for(RunStarted)
        doomed = runtime.actions.run_now("doomed")
        runtime.engine.stop_run(runtime.engine.running()[0].run_id)
        runtime.actions.run_now("flaky")
        (failed,) = await events.wait_for(RunFinished, lambda e: e.run.job == "flaky")
        text = path.read_text().replace("  flaky:", "  flakier:")
        path.write_text(text.replace("  doomed:", "  spared:"))
        assert await runtime.actions.reload()
        await clock.advance(1)  # the retry's time: it finds its job gone
        (concluded,) = await events.wait_for(RunConcluded, lambda e: e.run.job == "flaky")
        flaky_runs = [e for e in events.of(RunQueued) if e.run.job == "flaky"]
    assert len(flaky_runs) == 1
    assert concluded.run == failed.run  # the failed attempt is the outcome
    doomed_events = [e.run for e in events.of(RunNotStarted) if e.run.job == "doomed"]
    assert doomed_events == [] or doomed_events[0].run_id == doomed.run_id


async def test_slots_less_than_grace_late_run_and_later_ones_are_missed(tmp_path: Path) -> None:
    path = write_config(
        tmp_path,
        """
        late:
          python: "tests.engine_jobs:noop"
          schedule: {every: 1 hour, start: 2026-01-01T00:00}
          grace: 30s
          overlap: allow
        """,
    )
    now = datetime.now(UTC)
    async with running(path) as (runtime, events):
        job = runtime.config.job("late")
        slots = [now - timedelta(seconds=s) for s in (200, 30, 29)]
        due: list[tuple[Job, datetime]] = []
        runtime.engine._firing._fire(job, [(slot, slot) for slot in slots], now, due)
        runtime.engine._firing._submit_slots(due)
        (finished,) = await events.wait_for(RunFinished)
    assert finished.run.slot == slots[2]
    missed = [e.run for e in events.of(SlotMissed)]
    assert [run.slot for run in missed] == slots[:2]
    assert missed[0].reason == "too late to run (3m20s late)"


def test_recent_slots_keeps_the_newest_and_counts_the_rest() -> None:
    from zoneinfo import ZoneInfo

    from tuisched.domain.model import EverySchedule, Unit
    from tuisched.runtime.engine.catchup import SCAN_LIMIT, recent_slots

    start = datetime(2026, 1, 1, tzinfo=ZoneInfo("UTC"))
    every_second = EverySchedule(step=1, unit=Unit.SECOND, start=start, stop=None, tz=start.tzinfo)  # type: ignore[arg-type]
    until = start + timedelta(days=30)
    newest, total = recent_slots(every_second, start, until, 20)
    assert newest == [until - timedelta(seconds=s) for s in range(19, -1, -1)]
    assert total == 30 * 86400
    assert total > SCAN_LIMIT
    newest, total = recent_slots(every_second, start, start + timedelta(seconds=5), 20)
    assert (len(newest), total) == (5, 5)


async def test_jobs_never_see_the_schedulers_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_SMTP_PASSWORD", "hunter2")
    monkeypatch.setenv("TEST_VISIBLE", "fine")
    (tmp_path / "t.txt").write_text("{{ job.name }}\n")
    path = write_config(
        tmp_path,
        """
        leak:
          command: 'echo "[$TEST_SMTP_PASSWORD] [$TEST_VISIBLE] [$TUISCHED_JOB] [$OWN]"'
          env: {OWN: mine}
          schedule: manual
        """,
    )
    path.write_text(
        path.read_text().replace(
            "jobs:",
            "email:\n  smtp: {host: localhost, password_env: TEST_SMTP_PASSWORD}\n"
            "  from: t@example.org\n  default_template: t.txt\njobs:",
        )
    )
    async with running(path) as (runtime, events):
        runtime.actions.run_now("leak")
        (finished,) = await events.wait_for(RunFinished)
    assert finished.run.status == "exit 0: [] [fine] [leak] [mine]"
    from .test_cli import run

    status, out, _ = run("run", "leak", "-c", str(path))
    assert (status, out) == (0, "[] [fine] [leak] [mine]\n")


async def test_a_python_job_that_exits_at_import_fails_to_launch(tmp_path: Path) -> None:
    (tmp_path / "exits_at_import.py").write_text("import sys\nsys.exit(3)\n")
    path = write_config(
        tmp_path,
        'bad: {python: "exits_at_import:run", schedule: manual, timeout: 5s}',
    )
    async with running(path) as (runtime, events):
        runtime.actions.run_now("bad")
        (event,) = await events.wait_for(RunNotStarted)
    assert event.run.result is Result.LAUNCH_FAILED
    assert "exits_at_import" in event.run.reason


async def test_a_hanging_import_is_stopped_by_the_timeout(tmp_path: Path) -> None:
    (tmp_path / "hangs_at_import.py").write_text("import time\ntime.sleep(3600)\n")
    path = write_config(
        tmp_path,
        'stuck: {python: "hangs_at_import:run", schedule: manual, timeout: 1h}',
    )
    clock = ManualClock(datetime.now(UTC))
    async with running(path, clock=clock) as (runtime, events):
        timeout_armed = clock.arming(3600)
        runtime.actions.run_now("stuck")
        await timeout_armed
        await clock.advance(3600)  # the timeout: stop() finds the import still running
        await clock.advance(0.5)  # the kill grace: the launch is given up on
        (event,) = await events.wait_for(RunFinished)
    assert (event.run.state, event.run.result) == (RunState.FAILED, Result.TIMED_OUT)


# --- python functions on threads: started at once, without a task -------------------------

PLAIN = '{python: "tests.engine_jobs:wait_for_gate", isolation: thread, schedule: manual'


async def test_a_function_started_at_once_succeeds_or_fails_with_its_traceback(
    tmp_path: Path,
) -> None:
    path = write_config(
        tmp_path,
        """
        fine: {python: "tests.engine_jobs:noop", isolation: thread, schedule: manual}
        broken: {python: "tests.engine_jobs:boom", isolation: thread, schedule: manual}
        """,
    )
    async with running(path) as (runtime, events):
        runtime.actions.run_now("fine")
        runtime.actions.run_now("broken")
        done = await events.wait_for(RunFinished, count=2)
        concluded = await events.wait_for(RunConcluded, count=2)
    ended = {event.run.job: event.run for event in done}
    assert ended["fine"].state is RunState.SUCCESS
    assert (ended["broken"].state, ended["broken"].status) == (
        RunState.FAILED,
        "RuntimeError: boom",
    )
    assert "Traceback" in ended["broken"].output_tail
    assert {event.run.job for event in concluded} == {"fine", "broken"}
    assert all(e.run.started_at is not None and e.run.pid is None for e in events.of(RunStarted))


async def test_a_function_started_at_once_times_out(tmp_path: Path) -> None:
    path = write_config(tmp_path, f"plain: {PLAIN}, timeout: 1m}}")
    clock = ManualClock(datetime.now(UTC))
    try:
        async with running(path, clock=clock) as (runtime, events):
            armed = clock.arming(60)
            runtime.actions.run_now("plain")
            await armed
            await clock.advance(60)  # the timeout: a plain function has no stop()
            await clock.advance(0.5)  # the kill grace: its thread is given up on
            (finished,) = await events.wait_for(RunFinished)
    finally:
        engine_jobs.GATES["plain"].set()  # let the abandoned thread end
    assert (finished.run.state, finished.run.result) == (RunState.FAILED, Result.TIMED_OUT)
    assert "left running" in finished.run.status


async def test_a_drain_waits_for_functions_started_at_once(tmp_path: Path) -> None:
    path = write_config(tmp_path, f"plain: {PLAIN}}}")
    async with running(path) as (runtime, events):
        runtime.actions.run_now("plain")
        await events.wait_for(RunStarted)
        stopping = asyncio.get_running_loop().create_task(runtime.stop(grace=30))
        await asyncio.sleep(0.05)
        assert not stopping.done()  # the run holds the drain
        engine_jobs.GATES["plain"].set()
        await stopping
        (finished,) = events.of(RunFinished)
    assert (finished.run.state, finished.run.result) == (RunState.SUCCESS, Result.COMPLETED)


async def test_a_runs_output_file_is_cut_at_settings_output_max(tmp_path: Path) -> None:
    """`settings.output_max` bounds each run's file; the cut is said in the file's last
    line and the run still succeeds."""
    big = "head -c 3000000 /dev/zero | tr '\\\\0' a"
    path = write_config(
        tmp_path,
        f'chatty: {{command: [sh, -c, "{big}"], schedule: manual}}',
        settings="output_max: 1MiB",
    )
    async with running(path) as (runtime, events):
        run = runtime.actions.run_now("chatty")
        (finished,) = await events.wait_for(RunFinished)
    assert finished.run.state is RunState.SUCCESS
    data = (tmp_path / "state" / "output" / "chatty" / f"{run.run_id}.log").read_bytes()
    marker = b"\n[output truncated at 1048576 bytes]\n"
    assert data.endswith(marker)
    assert data == b"a" * 1048576 + marker
