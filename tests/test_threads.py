"""Work that leaves the loop: in a thread, with its result or its exception back on the loop."""

from __future__ import annotations

import threading

import pytest

from tuisched.runtime.threads import Lane, in_thread


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
