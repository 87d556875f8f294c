"""Python jobs run in child processes of their own: whatever a job does to its
interpreter, the scheduler goes on; stopping and killing work as for commands; what a
job prints is captured; `isolation: thread` keeps the in-process way."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tuisched.domain.events import RunFinished, RunNotStarted, RunStarted
from tuisched.domain.runs import Result, RunState

from ..runtime_fixtures import running, write_config

JOBS = """
talk: {python: "tests.jobs_for_tests:talk", schedule: manual}
hard_exit: {python: "tests.jobs_for_tests:hard_exit", schedule: manual}
segfault: {python: "tests.jobs_for_tests:segfault", schedule: manual}
deaf: {python: "tests.jobs_for_tests:deaf", schedule: manual}
quick: {python: "tests.jobs_for_tests:quick", schedule: manual}
counting: {python: "tests.jobs_for_tests:Counting", schedule: manual}
missing: {python: "tests.jobs_for_tests:no_such_thing", schedule: manual}
in_thread: {python: "tests.jobs_for_tests:succeed", schedule: manual, isolation: thread}
"""


async def test_a_job_that_exits_or_crashes_its_interpreter_fails_alone(tmp_path: Path) -> None:
    async with running(write_config(tmp_path, JOBS)) as (runtime, events):
        runtime.actions.run_now("hard_exit")
        runtime.actions.run_now("segfault")
        finished = await events.wait_for(RunFinished, count=2)
        by_job = {e.run.job: e.run for e in finished}
        runtime.actions.run_now("talk")  # the scheduler goes on
        (talked,) = await events.wait_for(RunFinished, lambda e: e.run.job == "talk")
    assert by_job["hard_exit"].state is RunState.FAILED
    assert by_job["hard_exit"].status == "the job's process ended without returning: exit 3"
    assert by_job["segfault"].state is RunState.FAILED
    assert "killed by SIGSEGV" in by_job["segfault"].status
    assert talked.run.state is RunState.SUCCESS


async def test_what_a_job_prints_is_captured_like_a_commands_output(tmp_path: Path) -> None:
    async with running(write_config(tmp_path, JOBS)) as (runtime, events):
        run = runtime.actions.run_now("talk")
        await events.wait_for(RunFinished)
    output = (tmp_path / "state" / "output" / "talk" / f"{run.run_id}.log").read_text()
    assert f"hello from run {run.run_id}\n" in output  # its own environment, its run id
    assert "and a warning\n" in output


async def test_a_job_deaf_to_sigterm_is_killed_after_the_grace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deaf = tmp_path / "deaf"
    monkeypatch.setenv("TUISCHED_TEST_OUT", str(deaf))
    async with running(write_config(tmp_path, JOBS)) as (runtime, events):
        run = runtime.actions.run_now("deaf")
        (started,) = await events.wait_for(RunStarted)
        assert started.run.pid is not None  # a process of its own, like a command
        async with asyncio.timeout(10):
            while not deaf.exists():  # noqa: ASYNC110  (the job's process makes it)
                await asyncio.sleep(0.02)
        # SIGTERM does nothing; SIGKILL (0.5 s later) does
        await runtime.actions.stop_run(run.run_id)
        (finished,) = await events.wait_for(RunFinished)
    assert finished.run.state is RunState.FAILED
    assert finished.run.result is Result.STOPPED
    assert "killed by SIGKILL" in finished.run.status


async def test_a_class_job_reports_its_status_and_data_and_stops_on_request(
    tmp_path: Path,
) -> None:
    async with running(write_config(tmp_path, JOBS)) as (runtime, events):
        run = runtime.actions.run_now("counting")
        await events.wait_for(RunStarted)
        async with asyncio.timeout(10):  # its status comes over the pipe every 0.2 s
            while not runtime.engine.live_status(run.run_id).startswith("counted "):  # noqa: ASYNC110
                await asyncio.sleep(0.02)
        await runtime.actions.stop_run(run.run_id)  # its stop() makes run() return
        (finished,) = await events.wait_for(RunFinished)
    assert finished.run.result is Result.STOPPED
    assert finished.run.status.startswith("counted ")
    assert finished.message_data["unit"] == "sheep"
    assert isinstance(finished.message_data["count"], int)


async def test_a_job_that_finishes_during_shutdown_succeeds(tmp_path: Path) -> None:
    async with running(write_config(tmp_path, JOBS)) as (runtime, events):
        runtime.actions.run_now("quick")
        await events.wait_for(RunStarted)
        await runtime.stop(grace=5)  # it returns within the grace: it succeeded
        (finished,) = events.of(RunFinished)
    assert finished.run.state is RunState.SUCCESS
    assert finished.run.result is Result.COMPLETED


async def test_a_target_that_cannot_be_imported_does_not_start(tmp_path: Path) -> None:
    async with running(write_config(tmp_path, JOBS)) as (runtime, events):
        runtime.actions.run_now("missing")
        (refused,) = await events.wait_for(RunNotStarted)
    assert refused.run.result is Result.LAUNCH_FAILED
    assert refused.run.reason.startswith("cannot import 'tests.jobs_for_tests:no_such_thing'")


async def test_isolation_thread_runs_in_the_scheduler_without_a_process(tmp_path: Path) -> None:
    async with running(write_config(tmp_path, JOBS)) as (runtime, events):
        runtime.actions.run_now("in_thread")
        (started,) = await events.wait_for(RunStarted)
        (finished,) = await events.wait_for(RunFinished)
    assert started.run.pid is None
    assert finished.run.state is RunState.SUCCESS
