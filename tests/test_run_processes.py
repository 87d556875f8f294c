"""The processes of a runtime's runs, followed on the runtime's clock."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from tuisched.runtime.clock import ManualClock
from tuisched.runtime.processes import FOLLOW_GAP, FOLLOW_SECONDS, RunProcesses

START = datetime(2026, 5, 7, 9, 10, tzinfo=UTC)
WITHIN = 10.0


async def test_with_no_run_to_follow_no_timer_is_armed_and_a_run_arms_the_looks() -> None:
    clock = ManualClock(START)
    processes = RunProcesses(clock=clock, kill_grace=5.0)
    processes.begin(None)
    processes.start_following()
    sleeper = await asyncio.create_subprocess_exec("sleep", "30")
    try:
        await clock.advance(3600)  # an idle hour: nothing to look at, nothing armed
        assert clock.pending_timers == 0
        looking = clock.arming(FOLLOW_SECONDS - FOLLOW_GAP)
        gap = clock.arming(FOLLOW_GAP)
        processes.descendants.watch("run1", sleeper.pid)  # a run starts: a look at once
        await asyncio.wait_for(gap, WITHIN)  # the look was taken; the next in FOLLOW_GAP
        await clock.advance(FOLLOW_GAP)
        await asyncio.wait_for(looking, WITHIN)  # then one a second while it runs
    finally:
        sleeper.kill()
        await sleeper.wait()
        # Nothing left running: the stop waits for no grace (no timer to advance).
        await asyncio.wait_for(processes.stop_leftovers(), WITHIN)
