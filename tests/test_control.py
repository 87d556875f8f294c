"""The control seam over a real runtime (LocalControl) and over its files (OfflineControl)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tuisched.domain.errors import (
    ConfigError,
    JobActionError,
    RunRefusedError,
    UnknownJobError,
    UnknownRunError,
)
from tuisched.domain.events import Event, RunFinished, RunStarted, RunWaiting
from tuisched.domain.runs import Result, RunState, Trigger
from tuisched.domain.views import (
    ConfigEdit,
    HistoryQuery,
    JobState,
    Pause,
    PauseKind,
    SchedulerState,
)
from tuisched.runtime.control import (
    LocalControl,
    LocalScheduler,
    OfflineControl,
    SchedulerNotRunningError,
    read_config,
)

from . import engine_jobs
from .runtime_fixtures import running, write_config

ACTOR = "tester@test (control)"
JOBS = """
blocker:
  {python: "tests.engine_jobs:Blocker", isolation: thread, schedule: manual,
   description: waits for its gate}
echo: {command: "printf 'one\\ntwo\\nthree\\n'", schedule: manual}
hourly: {command: [/bin/true], schedule: {every: 1 hour, start: 2026-01-01T00:00}}
after-echo: {command: [/bin/true], after: echo}
"""
GROUPS = "groups:\n  night: {jobs: [echo, hourly]}\n"


@pytest.fixture(autouse=True)
def _reset_gates() -> None:
    engine_jobs.GATES.clear()


def _config(tmp_path: Path, jobs: str = JOBS) -> Path:
    path = write_config(tmp_path, jobs)
    path.write_text(path.read_text() + GROUPS)
    return path


async def test_status_jobs_and_groups_describe_the_running_scheduler(tmp_path: Path) -> None:
    async with running(_config(tmp_path)) as (runtime, _):
        control = LocalControl(runtime, actor=ACTOR)
        status = await control.status()
        assert (status.state, status.jobs, status.groups) == (SchedulerState.RUNNING, 4, 1)
        assert status.timezone == "UTC"
        assert not status.pauses
        jobs = {job.name: job for job in await control.jobs()}
        assert list(jobs) == ["blocker", "echo", "hourly", "after-echo"]  # the file's order
        assert jobs["blocker"].state is JobState.MANUAL
        assert jobs["blocker"].description == "waits for its gate"
        assert jobs["hourly"].state is JobState.ACTIVE
        assert jobs["hourly"].next_fire is not None
        assert jobs["hourly"].groups == ("night",)
        assert jobs["after-echo"].trigger == "after 'echo' succeeds"
        assert [job.name for job in await control.jobs(["echo", "nope"])] == ["echo"]
        groups = await control.groups()
        assert [(g.name, g.jobs, g.paused) for g in groups] == [
            ("night", ("echo", "hourly"), False)
        ]


async def test_pausing_a_group_shows_what_holds_each_job(tmp_path: Path) -> None:
    async with running(_config(tmp_path)) as (runtime, _):
        control = LocalControl(runtime, actor=ACTOR)
        night = Pause(kind=PauseKind.GROUP, name="night")
        await control.set_paused(night, paused=True)
        hourly = (await control.jobs(["hourly"]))[0]
        assert hourly.state is JobState.PAUSED
        assert hourly.paused_by == (night,)
        assert hourly.next_fire is None
        assert (await control.status()).pauses == (night,)
        everything = Pause(kind=PauseKind.ALL)
        await control.set_paused(everything, paused=True)
        assert (await control.status()).all_paused
        held = (await control.jobs(["hourly"]))[0].paused_by
        assert held == (everything, night)  # the widest first
        with pytest.raises(JobActionError, match="everything is paused"):
            await control.set_paused(night, paused=False)
    actions = (tmp_path / "state" / "actions.log").read_text().splitlines()
    assert actions[0].endswith(f"| {ACTOR} | pause | group night")


async def test_run_now_with_the_same_key_makes_one_run(tmp_path: Path) -> None:
    async with running(_config(tmp_path)) as (runtime, events):
        control = LocalControl(runtime, actor=ACTOR)
        first = await control.run_now("blocker", key="k1")
        again = await control.run_now("blocker", key="k1")
        assert again == first
        await events.wait_for(RunStarted)
        runs = await control.runs()
        assert [status.run.run_id for status in runs] == [first.run_id]
        assert runs[0].live_status == "blocking"  # a python job's status
        with pytest.raises(RunRefusedError) as refused:  # a new key: a new run, refused
            await control.run_now("blocker", key="k2")
        assert refused.value.refusal.run_id == first.run_id  # blocker is `overlap: skip`
        again = await control.run_now("blocker", key="k2", queue=True)  # the key was not used
        assert again.run_id != first.run_id
        await control.stop_run(again.run_id)
        await control.stop_run(first.run_id)
        done = await events.wait_for(RunFinished, lambda e: e.run.run_id == first.run_id)
        assert done[0].run.result is Result.STOPPED
        assert (await control.jobs(["blocker"]))[0].last == done[0].run
        with pytest.raises(UnknownJobError):
            await control.run_now("nope")


async def test_history_pages_and_filters(tmp_path: Path) -> None:
    async with running(_config(tmp_path)) as (runtime, events):
        control = LocalControl(runtime, actor=ACTOR)
        for _ in range(3):
            await control.run_now("echo")
            await events.wait_for(RunFinished, lambda e: e.run.job == "echo")
            events.events.clear()
        await events.wait_for(RunFinished, lambda e: e.run.job == "after-echo", count=1)
        newest = await control.history(HistoryQuery(job="echo", limit=2))
        older = await control.history(HistoryQuery(job="echo", limit=2, offset=2))
        assert len(newest) == 2
        assert len(older) == 1
        assert newest[0].queued_at >= newest[1].queued_at >= older[0].queued_at
        by_hand = await control.history(HistoryQuery(triggers=(Trigger.MANUAL,), limit=10))
        assert {run.job for run in by_hand} == {"echo"}
        dependants = await control.history(HistoryQuery(triggers=(Trigger.DEPENDENCY,)))
        assert {run.job for run in dependants} == {"after-echo"}
        failed = await control.history(HistoryQuery(states=(RunState.FAILED,)))
        assert failed == ()
        future = datetime.now(UTC) + timedelta(hours=1)
        assert await control.history(HistoryQuery(since=future)) == ()
        assert len(await control.history(HistoryQuery(until=future, limit=100))) >= 4


async def test_output_of_a_past_run_from_the_end_and_from_an_offset(tmp_path: Path) -> None:
    async with running(_config(tmp_path)) as (runtime, events):
        control = LocalControl(runtime, actor=ACTOR)
        run = await control.run_now("echo")
        await events.wait_for(RunFinished, lambda e: e.run.run_id == run.run_id)
        whole = await control.output(run.run_id)
        assert (whole.lines, whole.source, whole.running) == (
            ("one", "two", "three"),
            "file",
            False,
        )
        rest = await control.output(run.run_id, offset=len("one\n"))
        assert rest.lines == ("two", "three")
        assert rest.next_offset == whole.next_offset
        assert (await control.output(run.run_id, offset=whole.next_offset)).lines == ()
        with pytest.raises(UnknownRunError, match="no run with id nope"):
            await control.output("nope")


async def test_the_audit_log_from_the_end_and_from_an_offset(tmp_path: Path) -> None:
    async with running(_config(tmp_path)) as (runtime, events):
        control = LocalControl(runtime, actor=ACTOR)
        start = await control.audit()
        assert start.lines == ()
        await control.run_now("echo")
        await events.wait_for(RunFinished, lambda e: e.run.job == "after-echo")
        later = await control.audit(offset=start.next_offset)
        assert [line.split(" | ")[0] for line in later.lines] == ["echo", "after-echo"]
        assert (await control.audit(offset=later.next_offset)).lines == ()
        assert (await control.audit(lines=1)).lines == later.lines[-1:]


async def test_edits_are_previewed_written_and_undone(tmp_path: Path) -> None:
    path = _config(tmp_path)
    async with running(path) as (runtime, _):
        control = LocalControl(runtime, actor=ACTOR)
        definition = {"command": ["/bin/true"], "schedule": "manual"}
        assert await control.preview(ConfigEdit.add_job("tidy", definition)) == ()
        problems = await control.preview(ConfigEdit.add_job("tidy", {"command": ["x"]}))
        assert any("schedule" in problem for problem in problems)
        duplicate = await control.preview(ConfigEdit.add_job("echo", definition))
        assert duplicate
        assert "echo" in duplicate[0]
        await control.edit(ConfigEdit.add_job("tidy", definition))
        assert "tidy:" in path.read_text()
        assert (await control.job_definition("tidy")) == {
            "command": ["/bin/true"],
            "schedule": "manual",
        }
        assert "tidy" in await control.config_text()
        assert (await control.status()).can_undo
        with pytest.raises(ConfigError):
            await control.edit(ConfigEdit.replace_job("tidy", {"command": ["x"]}))
        await control.undo()
        assert "tidy:" not in path.read_text()
        assert await control.job_definition("tidy") is None


async def test_an_offline_edit_is_pending_until_reloaded(tmp_path: Path) -> None:
    path = _config(tmp_path)
    async with running(path) as (runtime, _):
        control = LocalControl(runtime, actor=ACTOR)
        assert not (await control.pending_edit()).present
        path.write_text(path.read_text().replace("every: 1 hour", "every: 2 hours"))
        assert runtime.source is not None
        await runtime.source.look()  # what the watcher does on a save
        pending = await control.pending_edit()
        assert pending.present
        assert pending.valid
        assert pending.summary == "+0 -0 ~1 jobs"
        assert (await control.status()).offline_edit
        assert await control.reload()
        assert not (await control.pending_edit()).present
        path.write_text("jobs: [")
        await runtime.source.look()
        broken = await control.pending_edit()
        assert broken.present
        assert not broken.valid
        assert "does not validate" in broken.lines[0]
        assert not await control.reload()


async def test_a_save_the_watcher_has_not_looked_at_yet_is_pending_all_the_same(
    tmp_path: Path,
) -> None:
    # `edit the file; tuisched reload` in a script asks before the watcher's debounce is
    # over: "nothing to reload" would be false then.
    path = _config(tmp_path)
    async with running(path) as (runtime, _):
        control = LocalControl(runtime, actor=ACTOR)
        path.write_text(path.read_text().replace("every: 1 hour", "every: 2 hours"))
        pending = await control.pending_edit()  # no look() first: the watcher has not run
        assert (pending.present, pending.valid, pending.summary) == (True, True, "+0 -0 ~1 jobs")
        assert pending.details[0] == "~ hourly"
        assert pending.lines[0] == "reloading would apply: +0 -0 ~1 jobs"  # the banner's words
        assert "reloading" not in " ".join(pending.details)  # a report's own words go above
        path.write_text("jobs: [")
        broken = await control.pending_edit()
        assert (broken.present, broken.valid) == (True, False)
        assert broken.details == tuple(broken.lines[1:])  # the problems, without the heading
        assert broken.details[0].startswith(f"{path}:2: YAML syntax error")


async def test_the_plan_of_a_job_and_what_its_runs_wait_for(tmp_path: Path) -> None:
    jobs = """
    export: {command: [/bin/true], schedule: {cron: "30 1 * * *"}}
    report: {command: [/bin/true], schedule: {cron: "10 4 * * *"}, requires: [export]}
    """
    async with running(write_config(tmp_path, jobs)) as (runtime, events):
        control = LocalControl(runtime, actor=ACTOR)
        at = datetime(2026, 5, 7, 9, 10, tzinfo=UTC)
        plan = await control.plan("report", count=2, after=at)
        assert [slot.isoformat() for slot in plan.slots] == [
            "2026-05-08T04:10:00+00:00",
            "2026-05-09T04:10:00+00:00",
        ]
        assert plan.notes == ()
        assert plan.waits[0] == "no run is waiting; the slot 2026-05-08T04:10:00+00:00 will need:"
        slot = datetime(2026, 5, 7, 4, 10, tzinfo=UTC)
        runtime.engine.submit(runtime.config.job("report"), slot=slot, trigger=Trigger.SCHEDULE)
        waiting = (await events.wait_for(RunWaiting))[0].run
        runs = await control.runs()
        assert [(s.run.run_id, s.waits_for) for s in runs] == [
            (waiting.run_id, ("export slot 2026-05-07T01:30:00+00:00",))
        ]
        plan = await control.plan("report", after=at)
        assert plan.waits[0].startswith(f"run {waiting.run_id} (slot 2026-05-07T04:10:00")
        assert (await control.jobs(["report"]))[0].state is JobState.WAITING
        manual = await control.plan("export", after=at)
        assert manual.waits == ()


async def test_events_reach_a_subscriber_until_it_unsubscribes(tmp_path: Path) -> None:
    async with running(_config(tmp_path)) as (runtime, events):
        control = LocalControl(runtime, actor=ACTOR)
        heard: list[Event] = []
        subscription = control.subscribe(heard.append)
        run = await control.run_now("echo")
        await events.wait_for(RunFinished, lambda e: e.run.run_id == run.run_id)
        runtime.bus.flush()
        assert any(isinstance(e, RunFinished) and e.run.run_id == run.run_id for e in heard)
        subscription.unsubscribe()
        count = len(heard)
        await control.run_now("echo")
        await events.wait_for(RunFinished, lambda e: e.run.job == "echo", count=2)
        assert len(heard) == count


async def test_a_stopped_scheduler_refuses_commands(tmp_path: Path) -> None:
    scheduler = LocalScheduler.from_file(_config(tmp_path))
    control = scheduler.control(ACTOR)
    assert (await control.status()).state is SchedulerState.STARTING
    with pytest.raises(SchedulerNotRunningError, match="starting"):
        await control.run_now("echo")
    await scheduler.start()
    await control.shutdown(grace=0)
    assert scheduler.state is SchedulerState.STOPPED
    with pytest.raises(SchedulerNotRunningError, match="stopped"):
        await control.jobs()


async def test_offline_reads_what_a_stopped_scheduler_left(tmp_path: Path) -> None:
    path = _config(tmp_path)
    now = datetime(2026, 5, 7, 9, 10, tzinfo=UTC)
    text, config = read_config(path)
    offline = OfflineControl(config, text, clock=lambda: now)
    assert await offline.history(HistoryQuery()) == ()  # no history yet: none created
    assert not (tmp_path / "state" / "history.db").exists()
    async with running(path) as (runtime, events):
        control = LocalControl(runtime, actor=ACTOR)
        run = await control.run_now("echo")
        await events.wait_for(RunFinished, lambda e: e.run.job == "after-echo")
        await control.set_paused(Pause(kind=PauseKind.JOB, name="hourly"), paused=True)
    jobs = {job.name: job for job in await offline.jobs()}
    assert jobs["hourly"].state is JobState.PAUSED
    assert jobs["hourly"].next_fire is None
    assert jobs["echo"].last is not None
    assert jobs["echo"].last.run_id == run.run_id
    assert jobs["blocker"].state is JobState.MANUAL
    status = await offline.status()
    assert status.state is SchedulerState.STOPPED
    assert status.pauses == (Pause(kind=PauseKind.JOB, name="hourly"),)
    assert (await offline.output(run.run_id)).lines == ("one", "two", "three")
    assert [r.run_id for r in await offline.history(HistoryQuery(job="echo"))] == [run.run_id]
    assert len((await offline.audit()).lines) == 2
    plan = await offline.plan("hourly", count=1)
    assert plan.notes == ("paused: these slots will not run until resumed",)
    assert plan.slots == (datetime(2026, 5, 7, 10, 0, tzinfo=UTC),)
    assert await offline.runs() == ()
    with pytest.raises(SchedulerNotRunningError):
        await offline.run_now("echo")
    with pytest.raises(SchedulerNotRunningError):
        await offline.set_paused(Pause(kind=PauseKind.ALL), paused=True)


async def test_a_subscriber_that_comes_back_gets_what_it_missed_once(tmp_path: Path) -> None:
    async with running(_config(tmp_path)) as (runtime, events):
        control = LocalControl(runtime, actor=ACTOR)
        first: list[Event] = []
        subscription = control.subscribe(first.append)
        run = await control.run_now("echo")
        await events.wait_for(RunFinished, lambda e: e.run.run_id == run.run_id)
        runtime.bus.flush()
        subscription.unsubscribe()  # the client goes away after the first events
        seen = first[2].seq  # it saw up to here, say
        await control.run_now("echo")
        await events.wait_for(RunFinished, lambda e: e.run.job == "echo", count=2)
        runtime.bus.flush()
        again: list[Event] = []
        control.subscribe(again.append, after=seen)
        numbers = [event.seq for event in again]
        assert numbers == list(range(seen + 1, runtime.bus.last_seq + 1))  # no gap, no repeat
        assert all(a.seq > seen for a in again)
