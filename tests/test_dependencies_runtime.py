"""Dependencies at run time: `after` chains (R8), WAITING on `requires` (R9), pauses."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tuisched.domain.errors import JobActionError
from tuisched.domain.events import (
    PauseChanged,
    RunConcluded,
    RunFinished,
    RunNotStarted,
    RunQueued,
    RunStarted,
    RunWaiting,
    SchedulerStarted,
)
from tuisched.domain.runs import Result, RunState, Trigger
from tuisched.runtime.clock import ManualClock

from .runtime_fixtures import running, write_config

CHAIN = """
a: {python: "tests.engine_jobs:noop", schedule: manual}
b: {python: "tests.engine_jobs:noop", after: a}
c: {python: "tests.engine_jobs:noop", after: b}
fan: {python: "tests.engine_jobs:noop", after: {job: a, on: success}}
cleanup: {python: "tests.engine_jobs:noop", after: {job: a, on: failure}}
always: {python: "tests.engine_jobs:noop", after: {job: a, on: both}}
"""


async def test_a_chain_and_a_fan_out_run_in_order(tmp_path: Path) -> None:
    async with running(write_config(tmp_path, CHAIN)) as (runtime, events):
        slot = datetime(2026, 5, 7, 1, 30, tzinfo=UTC)
        first = runtime.engine.submit(runtime.config.job("a"), slot=slot, trigger=Trigger.SCHEDULE)
        done = await events.wait_for(RunFinished, lambda e: e.run.job == "c")
        (cleanup,) = await events.wait_for(RunNotStarted, lambda e: e.run.job == "cleanup")
    finished = {e.run.job: e.run for e in events.of(RunFinished)}
    assert set(finished) == {"a", "b", "c", "fan", "always"}
    for job in ("b", "c", "fan", "always"):
        assert finished[job].trigger is Trigger.DEPENDENCY
        assert finished[job].slot == slot  # dependants carry their upstream's slot
    assert finished["a"].ended_at <= finished["b"].queued_at  # type: ignore[operator]
    assert finished["b"].ended_at <= done[0].run.queued_at  # type: ignore[operator]
    assert cleanup.run.result is Result.DEPENDENCY
    assert cleanup.run.reason == f"a#{first.run_id} SUCCESS"


async def test_a_failure_cascades_not_started_down_the_chain(tmp_path: Path) -> None:
    path = write_config(
        tmp_path,
        CHAIN.replace(
            'a: {python: "tests.engine_jobs:noop"', 'a: {python: "tests.engine_jobs:fail"'
        ),
    )
    async with running(path) as (runtime, events):
        first = runtime.actions.run_now("a")
        await events.wait_for(RunNotStarted, lambda e: e.run.job == "c")
        await events.wait_for(RunFinished, lambda e: e.run.job in ("cleanup", "always"), count=2)
    not_started = {e.run.job: e.run for e in events.of(RunNotStarted)}
    assert set(not_started) == {"b", "c", "fan"}
    for job in ("b", "fan"):
        assert not_started[job].reason == f"a#{first.run_id} FAILED"
    assert not_started["c"].reason == f"b not started (a#{first.run_id} FAILED)"
    assert all(run.result is Result.DEPENDENCY for run in not_started.values())
    audit = (tmp_path / "state" / "audit.log").read_text()
    assert "c | - | " in audit
    assert f" | dependency | b not started (a#{first.run_id} FAILED)" in audit


async def test_a_delay_holds_the_dependant_back(tmp_path: Path) -> None:
    path = write_config(
        tmp_path,
        """
        a: {python: "tests.engine_jobs:noop", schedule: manual}
        b: {python: "tests.engine_jobs:noop", after: {job: a, delay: 10m}}
        """,
    )
    clock = ManualClock(datetime.now(UTC))
    async with running(path, clock=clock) as (runtime, events):
        runtime.actions.run_now("a")
        (a_done,) = await events.wait_for(RunConcluded, lambda e: e.run.job == "a")
        await clock.advance(599)
        runtime.bus.flush()
        assert [e for e in events.of(RunQueued) if e.run.job == "b"] == []
        await clock.advance(1)
        (b_started,) = await events.wait_for(RunStarted, lambda e: e.run.job == "b")
    assert b_started.run.started_at - a_done.run.ended_at == timedelta(minutes=10)  # type: ignore[operator]


async def test_dependants_wait_for_the_last_retry(tmp_path: Path) -> None:
    path = write_config(
        tmp_path,
        """
        a: {python: "tests.engine_jobs:fail", schedule: manual, retries: 1, retry_delay: 0s}
        b: {python: "tests.engine_jobs:noop", after: {job: a, on: failure}}
        """,
    )
    async with running(path) as (runtime, events):
        runtime.actions.run_now("a")
        (b_done,) = await events.wait_for(RunFinished, lambda e: e.run.job == "b")
    attempts = [e for e in events.of(RunFinished) if e.run.job == "a"]
    assert [(e.run.attempt, e.final) for e in attempts] == [(0, False), (1, True)]
    assert b_done.run.queued_at >= attempts[1].run.ended_at  # type: ignore[operator]


# The slots below are in the past, so every waiting run gets an explicit wait_timeout
# (the default, the job's next slot, would have passed already).
REQUIRES = """
export:
  python: "tests.engine_jobs:noop"
  schedule: {cron: "30 1 * * *"}
report:
  python: "tests.engine_jobs:noop"
  schedule: {cron: "10 4 * * *"}
  requires: [export]
  wait_timeout: WAIT
"""
SLOT = datetime(2026, 5, 7, 4, 10, tzinfo=UTC)
UPSTREAM = datetime(2026, 5, 7, 1, 30, tzinfo=UTC)


async def test_a_waiting_run_starts_when_its_upstream_slot_succeeds(tmp_path: Path) -> None:
    async with running(write_config(tmp_path, REQUIRES.replace("WAIT", "1h"))) as (runtime, events):
        engine = runtime.engine
        report = engine.submit(runtime.config.job("report"), slot=SLOT, trigger=Trigger.SCHEDULE)
        (waiting,) = await events.wait_for(RunWaiting)
        assert waiting.run.run_id == report.run_id
        assert waiting.run.state is RunState.WAITING
        assert waiting.run.reason == f"waiting for export slot {UPSTREAM.isoformat()}"
        assert [r.run_id for r in engine.waiting()] == [report.run_id]
        before = UPSTREAM - timedelta(days=1)
        engine.submit(runtime.config.job("export"), slot=before, trigger=Trigger.SCHEDULE)
        await events.wait_for(RunFinished, lambda e: e.run.slot == before)
        assert engine.waiting()  # yesterday's export does not count
        engine.submit(runtime.config.job("export"), slot=UPSTREAM, trigger=Trigger.SCHEDULE)
        (done,) = await events.wait_for(RunFinished, lambda e: e.run.job == "report")
    assert (done.run.run_id, done.run.state) == (report.run_id, RunState.SUCCESS)


async def test_a_requirement_already_met_does_not_wait(tmp_path: Path) -> None:
    async with running(write_config(tmp_path, REQUIRES.replace("WAIT", "1h"))) as (runtime, events):
        engine = runtime.engine
        engine.submit(runtime.config.job("export"), slot=UPSTREAM, trigger=Trigger.SCHEDULE)
        await events.wait_for(RunFinished)
        engine.submit(runtime.config.job("report"), slot=SLOT, trigger=Trigger.SCHEDULE)
        await events.wait_for(RunFinished, lambda e: e.run.job == "report")
    assert events.of(RunWaiting) == []


async def test_a_waiting_run_gives_up_at_its_wait_timeout(tmp_path: Path) -> None:
    path = write_config(tmp_path, REQUIRES.replace("WAIT", "2h"))
    clock = ManualClock(datetime.now(UTC))
    async with running(path, clock=clock) as (runtime, events):
        runtime.engine.submit(runtime.config.job("report"), slot=SLOT, trigger=Trigger.SCHEDULE)
        await events.wait_for(RunWaiting)
        await clock.advance(2 * 3600 - 1)
        runtime.bus.flush()
        assert events.of(RunNotStarted) == []  # still waiting, a second before its timeout
        await clock.advance(1)
        (gave_up,) = await events.wait_for(RunNotStarted)
    assert gave_up.run.result is Result.DEPENDENCY
    assert gave_up.run.reason.startswith("requirements not met in time: export slot")


async def test_a_waiting_run_survives_a_restart(tmp_path: Path) -> None:
    path = write_config(tmp_path, REQUIRES.replace("WAIT", "1h"))
    async with running(path) as (runtime, events):
        report = runtime.engine.submit(
            runtime.config.job("report"), slot=SLOT, trigger=Trigger.SCHEDULE
        )
        await events.wait_for(RunWaiting)
    async with running(path) as (runtime, events):
        await events.wait_for(SchedulerStarted)
        (again,) = await events.wait_for(RunWaiting)
        assert again.run.run_id == report.run_id
        runtime.engine.submit(runtime.config.job("export"), slot=UPSTREAM, trigger=Trigger.SCHEDULE)
        (done,) = await events.wait_for(RunFinished, lambda e: e.run.job == "report")
    assert done.run.run_id == report.run_id


async def test_requires_self_waits_for_the_previous_slot_but_not_on_the_first_run(
    tmp_path: Path,
) -> None:
    path = write_config(
        tmp_path,
        """
        roll:
          python: "tests.engine_jobs:fail"
          schedule: {every: 1 hour, start: 2026-01-01T00:05}
          requires: [self]
          wait_timeout: 1s
        """,
    )
    first_slot = datetime(2026, 5, 7, 9, 5, tzinfo=UTC)
    async with running(path) as (runtime, events):
        job = runtime.config.job("roll")
        runtime.engine.submit(job, slot=first_slot, trigger=Trigger.SCHEDULE)
        (first,) = await events.wait_for(RunFinished)  # no history: it does not wait
        assert first.run.state is RunState.FAILED
        runtime.engine.submit(job, slot=first_slot + timedelta(hours=1), trigger=Trigger.SCHEDULE)
        (waiting,) = await events.wait_for(RunWaiting)
    assert waiting.run.reason == f"waiting for roll slot {first_slot.isoformat()}"


async def test_pauses_hold_and_survive_a_restart(tmp_path: Path) -> None:
    path = write_config(
        tmp_path,
        """
        tick: {python: "tests.engine_jobs:noop", schedule: {every: 1 hour, start: 2026-01-01T00:00}}
        tock: {python: "tests.engine_jobs:noop", schedule: {every: 1 hour, start: 2026-01-01T00:00}}
        dep: {python: "tests.engine_jobs:noop", after: tick}
        """,
    )
    path.write_text(path.read_text() + "groups:\n  clocks: {jobs: [tick, tock]}\n")
    async with running(path) as (runtime, events):
        assert runtime.engine.next_fire("tick") is not None
        await runtime.actions.pause_group("clocks")
        await runtime.actions.pause_job("dep")
        (changed, _) = await events.wait_for(PauseChanged, count=2)
        assert (changed.kind, changed.name, changed.paused) == ("group", "clocks", True)
        assert runtime.engine.next_fire("tick") is None
        assert runtime.engine.next_fire("tock") is None
        runtime.actions.run_now("tick")  # a hand may still run a paused job
        (dep,) = await events.wait_for(RunNotStarted, lambda e: e.run.job == "dep")
        assert dep.run.reason == "the job is paused"
    async with running(path) as (runtime, _):
        assert runtime.engine.next_fire("tick") is None
        assert runtime.engine.pauses == {("group", "clocks"), ("job", "dep")}
        await runtime.actions.pause_group("clocks", paused=False)
        assert runtime.engine.next_fire("tick") is not None
        await runtime.actions.pause_all()
        assert runtime.engine.next_fire("tock") is None
        with pytest.raises(JobActionError, match="no group named 'nope'"):
            await runtime.actions.pause_group("nope")


async def test_without_wait_timeout_a_run_waits_until_its_jobs_next_slot(tmp_path: Path) -> None:
    # The next slot of a daily 04:10 report after SLOT has long passed: it gives up at once.
    async with running(write_config(tmp_path, REQUIRES.replace("  wait_timeout: WAIT\n", ""))) as (
        runtime,
        events,
    ):
        runtime.engine.submit(runtime.config.job("report"), slot=SLOT, trigger=Trigger.SCHEDULE)
        (gave_up,) = await events.wait_for(RunNotStarted)
    assert gave_up.run.reason.startswith("requirements not met in time")


async def test_a_success_landing_during_the_history_check_is_not_missed(tmp_path: Path) -> None:
    from dataclasses import replace

    from tuisched.domain.runs import RunRecord

    async with running(write_config(tmp_path, REQUIRES.replace("WAIT", "1h"))) as (runtime, events):
        engine = runtime.engine
        report = engine.submit(runtime.config.job("report"), slot=SLOT, trigger=Trigger.SCHEDULE)
        # The check of the history is now queued; the upstream succeeds before it answers.
        done = RunRecord(
            run_id="up", job="export", slot=UPSTREAM, trigger=Trigger.SCHEDULE,
            state=RunState.SUCCESS, queued_at=UPSTREAM, started_at=UPSTREAM, ended_at=UPSTREAM,
        )  # fmt: skip
        runtime.history.insert_soon(done)
        runtime.bus.publish(RunFinished(at=UPSTREAM, run=replace(done)))
        (finished,) = await events.wait_for(RunFinished, lambda e: e.run.job == "report")
    assert finished.run.run_id == report.run_id


async def test_a_waiting_run_of_a_paused_job_does_not_run(tmp_path: Path) -> None:
    async with running(write_config(tmp_path, REQUIRES.replace("WAIT", "1h"))) as (runtime, events):
        engine = runtime.engine
        engine.submit(runtime.config.job("report"), slot=SLOT, trigger=Trigger.SCHEDULE)
        await events.wait_for(RunWaiting)
        await runtime.actions.pause_job("report")
        engine.submit(runtime.config.job("export"), slot=UPSTREAM, trigger=Trigger.SCHEDULE)
        (held,) = await events.wait_for(RunNotStarted, lambda e: e.run.job == "report")
    assert held.run.reason == "the job is paused"
    assert not [e for e in events.of(RunStarted) if e.run.job == "report"]


async def test_a_reload_that_drops_requires_releases_the_waiting_run(tmp_path: Path) -> None:
    path = write_config(tmp_path, REQUIRES.replace("WAIT", "1h"))
    async with running(path) as (runtime, events):
        runtime.engine.submit(runtime.config.job("report"), slot=SLOT, trigger=Trigger.SCHEDULE)
        await events.wait_for(RunWaiting)
        path.write_text(path.read_text().replace("    requires: [export]\n", ""))
        assert await runtime.actions.reload()
        (done,) = await events.wait_for(RunFinished, lambda e: e.run.job == "report")
    assert done.run.state is RunState.SUCCESS


async def test_a_dropped_retry_still_concludes_the_run(tmp_path: Path) -> None:
    path = write_config(
        tmp_path,
        """
        a: {python: "tests.engine_jobs:fail", schedule: manual, retries: 3, retry_delay: 1h}
        b: {python: "tests.engine_jobs:noop", after: {job: a, on: failure}}
        """,
    )
    async with running(path) as (runtime, events):
        runtime.actions.run_now("a")
        (first,) = await events.wait_for(RunFinished, lambda e: e.run.job == "a")
        assert not first.final
    # The scheduler stopped before the retry came: the failure is the outcome.
    (concluded,) = [e for e in events.of(RunConcluded) if e.run.job == "a"]
    assert concluded.run.run_id == first.run.run_id
    assert concluded.run.state is RunState.FAILED  # alerts mail this failure


async def test_resuming_one_part_of_a_wider_pause_is_refused(tmp_path: Path) -> None:
    path = write_config(tmp_path, REQUIRES.replace("WAIT", "1h"))
    async with running(path) as (runtime, _):
        await runtime.actions.pause_all()
        with pytest.raises(JobActionError, match="everything is paused"):
            await runtime.actions.pause_job("report", paused=False)
        await runtime.actions.pause_all(paused=False)
        assert runtime.engine.next_fire("report") is not None


async def test_a_shutdown_during_a_delay_records_the_dependant(tmp_path: Path) -> None:
    path = write_config(
        tmp_path,
        """
        a: {python: "tests.engine_jobs:noop", schedule: manual}
        b: {python: "tests.engine_jobs:noop", after: {job: a, delay: 1h}}
        """,
    )
    async with running(path) as (runtime, events):
        runtime.actions.run_now("a")
        await events.wait_for(RunConcluded, lambda e: e.run.job == "a")
    (dropped,) = [e.run for e in events.of(RunNotStarted) if e.run.job == "b"]
    assert dropped.reason == "the scheduler shut down during the delay"


async def test_a_waiting_run_whose_deadline_passed_while_down_gives_up(tmp_path: Path) -> None:
    path = write_config(tmp_path, REQUIRES.replace("WAIT", "1s"))
    async with running(path) as (runtime, events):
        report = runtime.engine.submit(
            runtime.config.job("report"), slot=SLOT, trigger=Trigger.SCHEDULE
        )
        await events.wait_for(RunWaiting)
        runtime.engine.waiting_room.stop()  # as a crash would: the row stays WAITING
    later = datetime.now(UTC) + timedelta(minutes=5)  # the 1s wait_timeout passed while down
    async with running(path, clock=ManualClock(later)) as (_, events):
        (gave_up,) = await events.wait_for(RunNotStarted)
    assert gave_up.run.run_id == report.run_id
    assert "the scheduler was not running" in gave_up.run.reason
