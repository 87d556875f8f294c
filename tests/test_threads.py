"""Work that leaves the loop: in a thread, with its result or its exception back on the loop."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from collections.abc import Callable

import pytest

from tuisched.runtime.threads import (
    LANE_THREADS,
    Lane,
    LaneLoad,
    LanePool,
    in_thread,
    lane_loads,
)


async def test_work_runs_off_the_loop_thread_and_its_result_comes_back() -> None:
    loop_thread = threading.get_ident()
    ran_on = await in_thread(Lane.FILES, threading.get_ident)
    assert ran_on != loop_thread
    assert await in_thread(Lane.CONFIG, lambda a, *, b: a + b, 2, b=3) == 5


async def test_its_exception_is_raised_where_it_is_awaited() -> None:
    def fail() -> None:
        raise KeyError("gone")

    with pytest.raises(KeyError, match="gone"):
        await in_thread(Lane.SENSORS, fail)


def _load(lane: Lane) -> LaneLoad:
    (load,) = [load for load in lane_loads() if load.lane is lane]
    return load


async def _until(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(5):
        while not condition():  # noqa: ASYNC110  (a thread changes it, not a task)
            await asyncio.sleep(0.005)


async def test_a_lane_runs_at_most_its_threads_and_queues_the_rest() -> None:
    size = 3
    pool = LanePool(Lane.SENSORS, size)
    gate = threading.Event()
    running_now, most = [0], [0]
    lock = threading.Lock()

    def wait_at_the_gate() -> None:
        with lock:
            running_now[0] += 1
            most[0] = max(most[0], running_now[0])
        gate.wait(5)
        with lock:
            running_now[0] -= 1

    calls = [asyncio.ensure_future(pool.run(wait_at_the_gate)) for _ in range(size + 3)]
    try:
        await _until(lambda: pool.load().busy == size)
        assert pool.load().queued == 3
    finally:
        gate.set()
    await asyncio.gather(*calls)
    assert most[0] == size
    assert pool.load() == LaneLoad(Lane.SENSORS, busy=0, queued=0)


async def test_a_lane_with_every_thread_stuck_does_not_hold_another() -> None:
    gate = threading.Event()
    stuck = [
        asyncio.ensure_future(in_thread(Lane.MAIL, gate.wait, 5))
        for _ in range(LANE_THREADS[Lane.MAIL] + 2)
    ]
    try:
        await _until(lambda: _load(Lane.MAIL).busy == LANE_THREADS[Lane.MAIL])
        # The mail lane is full and has a queue; the configuration lane answers at once.
        assert await asyncio.wait_for(in_thread(Lane.CONFIG, lambda: "read"), 2) == "read"
    finally:
        gate.set()
    await asyncio.gather(*stuck)


async def test_work_given_up_before_it_started_never_runs() -> None:
    pool = LanePool(Lane.FILES, 2)
    gate = threading.Event()
    ran: list[int] = []
    blockers = [asyncio.ensure_future(pool.run(gate.wait, 5)) for _ in range(2)]
    await _until(lambda: pool.load().busy == 2)
    late = asyncio.ensure_future(pool.run(ran.append, 1))
    await asyncio.sleep(0)
    late.cancel()
    with pytest.raises(asyncio.CancelledError):
        await late  # its work is withdrawn from the queue by now
    gate.set()
    await asyncio.gather(*blockers)
    assert await pool.run(lambda: "after") == "after"  # the lane goes on
    assert ran == []
    assert late.cancelled()


def test_a_process_exits_without_waiting_for_a_stuck_lane_thread() -> None:
    program = (
        "import asyncio, time\n"
        "from tuisched.runtime.threads import Lane, in_thread\n"
        "async def main():\n"
        "    stuck = asyncio.ensure_future(in_thread(Lane.MAIL, time.sleep, 60))\n"
        "    await asyncio.sleep(0.1)\n"
        "    stuck.cancel()\n"
        "asyncio.run(main())\n"
        "print('done')\n"
    )
    # asyncio's default pool would hold the exit for the whole minute.
    finished = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=20, check=False
    )
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout == "done\n"
