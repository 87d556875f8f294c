"""The scheduler's lane (SPEC R26): the runtime on a thread and event loop of its own.

A front end (the console's rendering, headless mode's signal handling) keeps
its own loop. Whatever holds that loop, slots still fire; queries and
commands are answered on the caller's loop; events reach a subscriber on the
loop it subscribed from; and once the lane has stopped, nothing handed to it
waits for ever.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tuisched.domain.errors import SchedulerNotRunningError, TuischedError
from tuisched.domain.events import Event, RunFinished
from tuisched.domain.views import HistoryQuery, SchedulerState
from tuisched.runtime.configfiles import load_config
from tuisched.runtime.control import LocalScheduler
from tuisched.runtime.loopthread import LoopThread
from tuisched.runtime.runtime import Runtime

from . import engine_jobs
from .runtime_fixtures import write_config

JOBS = """
tick:
  python: "tests.engine_jobs:tick"
  isolation: thread
  schedule: {every: 1s, start: 2026-01-01T00:00}
hello: {command: [/bin/true], schedule: manual}
"""


def _watchdogs() -> set[threading.Thread]:
    return {thread for thread in threading.enumerate() if thread.name == "tuisched-watchdog"}


def _hold_the_loop_until(condition: Callable[[], bool], within: float = 30) -> None:
    """Block the caller's event loop, as a long render would, until `condition` holds."""
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, "never happened while the loop was held"
        time.sleep(0.02)  # the point: nothing on this loop may run meanwhile


async def _set(event: threading.Event, within: float = 10) -> None:
    """Return once another thread has set `event` (the caller's loop stays free)."""
    assert await asyncio.to_thread(event.wait, within), "never set"


async def _held_lane() -> tuple[LoopThread, asyncio.Future[None]]:
    """A started lane running work that never ends, and the caller's wait for that work
    (returned once the work runs)."""
    lane = LoopThread()
    lane.start()
    started = threading.Event()

    async def forever() -> None:
        started.set()
        await asyncio.Event().wait()

    pending = asyncio.ensure_future(lane.run(forever()))
    await _set(started)
    return lane, pending


async def test_slots_fire_while_the_front_ends_loop_is_held(tmp_path: Path) -> None:
    scheduler = LocalScheduler(Runtime(load_config(write_config(tmp_path, JOBS)), kill_grace=0.5))
    await scheduler.start()
    try:
        before = len(engine_jobs.TICKS)
        _hold_the_loop_until(lambda: len(engine_jobs.TICKS) >= before + 2)
    finally:
        await scheduler.stop(grace=1)


async def test_answers_and_events_come_back_to_the_callers_loop(tmp_path: Path) -> None:
    scheduler = LocalScheduler(Runtime(load_config(write_config(tmp_path, JOBS)), kill_grace=0.5))
    control = scheduler.control("tester")
    heard_on: set[int] = set()
    finished = asyncio.Event()

    def hear(event: Event) -> None:
        heard_on.add(threading.get_ident())
        if isinstance(event, RunFinished) and event.run.job == "hello":
            finished.set()

    control.subscribe(hear)  # before the start, as headless mode does
    await scheduler.start()
    try:
        assert scheduler.lane.loop is not asyncio.get_running_loop()
        assert (await control.status()).state is SchedulerState.RUNNING
        run = await control.run_now("hello")
        async with asyncio.timeout(10):
            await finished.wait()
        assert heard_on == {threading.get_ident()}  # every event, on this loop's thread
        assert (await control.history(HistoryQuery(job="hello")))[0].run_id == run.run_id
    finally:
        await scheduler.stop(grace=1)
    with pytest.raises(SchedulerNotRunningError):
        await control.jobs()  # the lane has ended: an answer, not a wait


async def test_work_handed_to_a_lane_that_stops_fails_instead_of_waiting() -> None:
    lane, pending = await _held_lane()
    await lane.stop()
    with pytest.raises(SchedulerNotRunningError):
        await pending
    with pytest.raises(SchedulerNotRunningError):
        await lane.run(asyncio.sleep(0))


async def test_cancelling_the_caller_cancels_the_work_on_the_lane() -> None:
    lane = LoopThread()
    lane.start()
    started, cancelled = threading.Event(), threading.Event()

    async def forever() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    caller = asyncio.ensure_future(lane.run(forever()))
    await _set(started)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    await _set(cancelled)
    await lane.stop()


async def test_a_start_that_fails_closes_what_it_had_opened(tmp_path: Path) -> None:
    path = write_config(tmp_path, JOBS)
    history = tmp_path / "state" / "history.db"
    history.mkdir(parents=True)  # the history cannot be opened
    runtime = Runtime(load_config(path), kill_grace=0.5)
    before = _watchdogs()
    with pytest.raises(TuischedError, match=r"history\.db"):
        await runtime.start()
    ends = asyncio.get_running_loop().time() + 10
    while not _watchdogs() <= before:  # its own watchdog ends (at its next wake-up)
        assert asyncio.get_running_loop().time() < ends, "the watchdog of a failed start runs on"
        await asyncio.sleep(0.05)  # another thread's end: nothing to await here
    history.rmdir()
    again = Runtime(load_config(path), kill_grace=0.5)  # the lock was released
    await again.start()
    await again.stop(grace=1)


async def test_two_stops_at_once_end_the_lane_once() -> None:
    lane, pending = await _held_lane()
    await asyncio.gather(lane.stop(), lane.stop())  # a cancelled start and a console closing
    assert lane.loop is None
    with pytest.raises(SchedulerNotRunningError):
        await pending
