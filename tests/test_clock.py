"""The runtime's clocks: real time, and the manual twin tests advance."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from tuisched.runtime.clock import ManualClock, SystemClock

START = datetime(2026, 5, 7, 9, 10, tzinfo=UTC)


async def test_timers_fire_in_due_order_with_the_time_they_were_due() -> None:
    clock = ManualClock(START)
    fired: list[tuple[str, datetime]] = []
    clock.call_later(2, lambda: fired.append(("two", clock.now())))
    clock.call_later(1, lambda name: fired.append((name, clock.now())), "one")
    cancelled = clock.call_later(1.5, lambda: fired.append(("never", clock.now())))
    cancelled.cancel()
    await clock.advance(1.9)
    assert fired == [("one", START + timedelta(seconds=1))]
    assert clock.now() == START + timedelta(seconds=1.9)
    await clock.advance(0.1)
    assert fired[-1] == ("two", START + timedelta(seconds=2))
    assert clock.pending_timers == 0


async def test_a_timer_armed_by_a_timer_fires_within_the_same_advance() -> None:
    clock = ManualClock(START)
    fired: list[float] = []

    def first() -> None:
        fired.append(1)
        clock.call_later(1, lambda: fired.append(2))

    clock.call_later(1, first)
    await clock.advance(5)
    assert fired == [1, 2]


async def test_sleep_returns_only_once_the_clock_is_advanced() -> None:
    clock = ManualClock(START)
    sleeper = asyncio.get_running_loop().create_task(clock.sleep(10))
    await clock.advance(9.99)
    assert not sleeper.done()
    await clock.advance(0.01)
    assert sleeper.done()


async def test_wait_ends_at_the_timeout_or_when_everything_is_done() -> None:
    clock = ManualClock(START)
    loop = asyncio.get_running_loop()
    never: asyncio.Future[None] = loop.create_future()
    soon: asyncio.Future[None] = loop.create_future()
    waiting = loop.create_task(clock.wait({never, soon}, 3))
    soon.set_result(None)
    await clock.advance(2)
    assert not waiting.done()
    await clock.advance(1)
    done, pending = await waiting
    assert (done, pending) == ({soon}, {never})
    assert not never.cancelled()  # nothing is cancelled
    finished = loop.create_task(clock.wait({soon}, 100))
    assert await finished == ({soon}, set())


async def test_arming_tells_when_the_next_timer_is_armed() -> None:
    clock = ManualClock(START)
    armed, five = clock.arming(), clock.arming(5)
    assert not armed.done()
    clock.call_later(1, print)
    assert armed.done()
    assert not five.done()
    clock.call_later(5, print)
    assert five.done()


async def test_the_system_clock_is_real_time() -> None:
    clock = SystemClock()
    before = datetime.now(UTC)
    assert before <= clock.now() <= datetime.now(UTC)
    fired = asyncio.Event()
    clock.call_later(0, fired.set)
    async with asyncio.timeout(1):
        await fired.wait()
    loop = asyncio.get_running_loop()
    never: asyncio.Future[None] = loop.create_future()
    done, pending = await clock.wait({never}, 0.01)
    assert (done, pending) == (set(), {never})
    assert await clock.wait(set(), 10) == (set(), set())
