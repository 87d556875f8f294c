"""Why a job is not running now (R25): each reason made by a real runtime's state, worded
once in the domain, carried by the job's status through the seam (the socket too), and
shown on the main screen's strip and atop the detail view."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tuisched.domain.events import RunNotStarted, RunQueued, RunStarted, RunWaiting
from tuisched.domain.runs import Result, Trigger
from tuisched.domain.views import Pause, PauseKind
from tuisched.frontends.tui.screens.detail import JobDetailScreen
from tuisched.frontends.tui.widgets.jobs import JobsTable
from tuisched.frontends.tui.widgets.why import WhyStrip
from tuisched.runtime.configfiles import load_config
from tuisched.runtime.control import LocalControl, LocalScheduler, RemoteControl, socket_path
from tuisched.runtime.runtime import Runtime

from . import engine_jobs
from .console_fixtures import make_app, until
from .runtime_fixtures import running, write_config

BLOCKER = 'python: "tests.engine_jobs:Blocker", isolation: thread'


@pytest.fixture(autouse=True)
def _reset_gates() -> Iterator[None]:
    engine_jobs.GATES.clear()
    yield
    engine_jobs.GATES["blocker"].set()  # no blocker outlives its test


async def _why(runtime: Runtime, name: str) -> str:
    (status,) = await LocalControl(runtime, actor="tester").jobs([name])
    return status.why


async def test_paused_says_by_whom_and_when_and_through_what(tmp_path: Path) -> None:
    path = write_config(
        tmp_path,
        """
        tick: {command: [/bin/true], schedule: {every: 1 hour, start: 2026-01-01T00:00}}
        tock: {command: [/bin/true], schedule: {every: 1 hour, start: 2026-01-01T00:00}}
        """,
    )
    path.write_text(path.read_text() + "groups:\n  clocks: {jobs: [tock]}\n")
    async with running(path) as (runtime, _):
        await runtime.actions.pause_job("tick", actor="alice@db1 (console)")
        await runtime.actions.pause_group("clocks", actor="bob@db2 (command line)")
        tick, tock = await _why(runtime, "tick"), await _why(runtime, "tock")
        assert tick.startswith("paused by alice@db1 (console) at 20")
        assert tock.startswith("paused with its group 'clocks' by bob@db2 (command line) at ")
        await runtime.actions.pause_all(actor="carol@db3 (console)")
        assert (await _why(runtime, "tick")).startswith("paused with everything by carol@db3")
        await runtime.actions.pause_all(paused=False)
        await runtime.actions.pause_job("tick", paused=False)
        assert (await _why(runtime, "tick")).startswith("next slot at ")


async def test_running_says_which_run_and_what_overlap_does_meanwhile(tmp_path: Path) -> None:
    path = write_config(
        tmp_path,
        f"""
        blocker: {{{BLOCKER}, schedule: manual}}
        queued: {{{BLOCKER}, schedule: manual, overlap: queue}}
        """,
    )
    async with running(path) as (runtime, events):
        engine = runtime.engine
        run = engine.run_now("blocker")
        await events.wait_for(RunStarted)
        why = await _why(runtime, "blocker")
        assert why.startswith(f"running run {run.run_id} since ")
        assert why.endswith("; overlap skip: slots meanwhile are skipped")
        slot = datetime(2026, 1, 1, tzinfo=UTC)
        engine.submit(runtime.config.job("blocker"), slot=slot, trigger=Trigger.SCHEDULE)
        (skipped,) = await events.wait_for(RunNotStarted)
        assert skipped.run.result is Result.SKIPPED  # what the line said happens
        first = engine.run_now("queued")
        await events.wait_for(RunStarted, lambda e: e.run.job == "queued")
        engine.run_now("queued")
        assert (await _why(runtime, "queued")).startswith(f"running run {first.run_id} since ")
        assert (await _why(runtime, "queued")).endswith("; 1 more queued behind it (overlap queue)")


async def test_max_workers_full_says_how_many_are_queued_ahead(tmp_path: Path) -> None:
    path = write_config(
        tmp_path,
        f"""
        blocker: {{{BLOCKER}, schedule: manual}}
        early: {{command: [/bin/true], schedule: manual, priority: 5}}
        late: {{command: [/bin/true], schedule: manual, overlap: queue}}
        """,
        settings="max_workers: 1",
    )
    async with running(path) as (runtime, events):
        engine = runtime.engine
        engine.run_now("blocker")
        await events.wait_for(RunStarted)
        slot = datetime(2026, 1, 1, tzinfo=UTC)
        early = engine.submit(runtime.config.job("early"), slot=slot, trigger=Trigger.SCHEDULE)
        late = engine.submit(runtime.config.job("late"), slot=slot, trigger=Trigger.SCHEDULE)
        engine.submit(runtime.config.job("late"), slot=slot, trigger=Trigger.SCHEDULE)
        await events.wait_for(RunQueued, count=4)
        assert await _why(runtime, "early") == (
            f"queue full: max_workers reached (1 of 1 busy); run {early.run_id} waits"
        )
        assert await _why(runtime, "late") == (
            f"queue full: max_workers reached (1 of 1 busy); run {late.run_id} waits, "
            "1 queued ahead; 1 more behind it"
        )


async def test_a_waiting_run_says_which_upstream_slot_it_waits_for(tmp_path: Path) -> None:
    path = write_config(
        tmp_path,
        """
        export: {command: [/bin/true], schedule: {cron: "30 1 * * *"}}
        report:
          command: [/bin/true]
          schedule: {cron: "10 4 * * *"}
          requires: [export]
          wait_timeout: 1h
        """,
    )
    async with running(path) as (runtime, events):
        slot = datetime(2026, 5, 7, 4, 10, tzinfo=UTC)
        runtime.engine.submit(runtime.config.job("report"), slot=slot, trigger=Trigger.SCHEDULE)
        await events.wait_for(RunWaiting)
        assert await _why(runtime, "report") == (
            "waiting for export's slot 2026-05-07 01:30 +00:00 (requires)"
        )


async def test_the_definition_alone_says_window_disabled_manual_after_and_next(
    tmp_path: Path,
) -> None:
    path = write_config(
        tmp_path,
        """
        future: {command: [/bin/true], schedule: {every: 1 day, start: 2099-01-01T08:00}}
        off: {command: [/bin/true], enabled: false, schedule: {cron: "0 * * * *"}}
        byhand: {command: [/bin/true], schedule: manual}
        then: {command: [/bin/true], after: {job: byhand, on: failure}}
        hourly: {command: [/bin/true], schedule: {cron: "0 * * * *"}}
        """,
    )
    async with running(path) as (runtime, _):
        assert (
            await _why(runtime, "future") == "outside its window: starts at 2099-01-01 08:00 +00:00"
        )
        assert await _why(runtime, "off") == "disabled in the configuration (enabled: false)"
        assert await _why(runtime, "byhand") == "manual only: runs when started by hand"
        assert await _why(runtime, "then") == "runs only after 'byhand' fails: waits for byhand"
        upcoming = runtime.engine.next_fire("hourly")
        assert upcoming is not None
        assert await _why(runtime, "hourly") == (
            f"next slot at {upcoming.strftime('%Y-%m-%d %H:%M')} +00:00"
        )


def test_a_window_that_ended_says_when(tmp_path: Path) -> None:
    """A job past its `stop` is not loaded; `jobs --json` (no scheduler) still says why."""
    path = write_config(
        tmp_path,
        """
        ended:
          command: [/bin/true]
          schedule: {every: 1 hour, start: 2020-01-01T00:00, stop: 2020-06-01T00:00}
        once: {command: [/bin/true], schedule: {at: 2020-01-01T00:00}}
        """,
    )
    done = subprocess.run(
        [sys.executable, "-m", "tuisched", "jobs", "--json", "-c", str(path)],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    why = {row["name"]: row["why"] for row in json.loads(done.stdout)}
    assert why == {
        "ended": "outside its window: ended at 2020-06-01 00:00 +00:00",
        "once": "no slot to come: its one slot was at 2020-01-01 00:00 +00:00",
    }


async def test_an_attached_client_gets_the_same_line(tmp_path: Path) -> None:
    path = write_config(tmp_path, "tick: {command: [/bin/true], schedule: manual}")
    scheduler = LocalScheduler(Runtime(load_config(path), kill_grace=0.5))
    await scheduler.start()
    remote = RemoteControl(socket_path(tmp_path / "state"), client="test")
    try:
        await remote.connect()
        control = scheduler.control("alice@db1 (console)")
        await control.set_paused(Pause(kind=PauseKind.JOB, name="tick"), paused=True)
        (status,) = await remote.jobs(["tick"])
        assert status.why.startswith("paused by alice@db1 (console) at ")
    finally:
        await remote.close()
        await scheduler.stop(grace=1)


async def test_jobs_json_asks_the_scheduler_running_here(tmp_path: Path) -> None:
    """With a scheduler running on the state, `jobs --json` says what it knows (a run in
    progress); the files alone could not."""
    path = write_config(tmp_path, f"blocker: {{{BLOCKER}, schedule: manual}}")
    scheduler = LocalScheduler(Runtime(load_config(path), kill_grace=0.5))
    await scheduler.start()
    try:
        run = await scheduler.control("tester").run_now("blocker")
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tuisched", "jobs", "--json", "-c", str(path),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        async with asyncio.timeout(60):
            out, err = await child.communicate()
        assert child.returncode == 0, err
        (row,) = json.loads(out)
        assert row["why"].startswith(f"running run {run.run_id}")
    finally:
        engine_jobs.GATES["blocker"].set()
        await scheduler.stop(grace=5)


async def test_the_strip_follows_the_cursor_and_the_detail_view_says_it_on_top(
    tmp_path: Path,
) -> None:
    path = write_config(
        tmp_path,
        """
        byhand: {command: [/bin/true], schedule: manual}
        off: {command: [/bin/true], enabled: false, schedule: manual}
        """,
    )
    app, runtime = make_app(path)
    async with app.run_test(size=(80, 24)) as pilot:
        strip = app.screen.query_one(WhyStrip)
        await until(pilot, lambda: strip.text == "byhand: manual only: runs when started by hand")
        assert strip.region.y == app.screen.query_one(JobsTable).region.bottom  # right under it
        await pilot.press("down")
        await until(pilot, lambda: strip.text.startswith("off: disabled in the configuration"))
        await runtime.actions.pause_job("byhand", actor="alice@db1 (console)")
        await pilot.press("up")
        await until(pilot, lambda: strip.text.startswith("byhand: paused by alice@db1 (console)"))
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, JobDetailScreen))
        top = app.screen.query_one("#detail-why")
        await until(pilot, lambda: "paused by alice@db1 (console)" in str(top.content))
        await runtime.actions.pause_job("byhand", paused=False)
        await until(pilot, lambda: "manual only" in str(top.content))
