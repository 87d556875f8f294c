"""The runtime's one source of time and timers, injected so that tests can advance it.

Everything below the front ends that needs the time or a timer takes a
`Clock`: run timeouts, retry delays, `after` delays, `wait_timeout`
deadlines, grace periods, alert retries, the heartbeat. `SystemClock` is the
real one. `ManualClock` is its in-memory twin for tests: time stands still
until the test advances it, and the timers due meanwhile fire in order.

APScheduler's own thread keeps real time: it is what fires the slots, and a
slot fires when the wall clock reaches it. Tests that advance a ManualClock
drive runs by hand (run now, `after`, retries, deadlines), not by slots.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Awaitable, Callable, Collection
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, TypeVar

T = TypeVar("T")
Waitable = asyncio.Future[Any]
"""A future or a task (tasks are futures)."""


class Timer(Protocol):
    """A callback scheduled for later; `cancel()` stops it if it has not run."""

    def cancel(self) -> None:
        """Do not run the callback (nothing happens if it ran already)."""
        ...


class Clock(Protocol):
    """Time and timers for the runtime. Timer callbacks run on the event loop's thread."""

    def now(self) -> datetime:
        """The current instant, aware (UTC)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back, whatever the wall clock does (durations)."""
        ...

    def call_later(self, delay: float, callback: Callable[..., object], *args: Any) -> Timer:
        """Run `callback(*args)` after `delay` seconds (at once for 0 or less)."""
        ...

    async def sleep(self, delay: float) -> None:
        """Return after `delay` seconds."""
        ...

    async def wait(
        self, waitables: Collection[Waitable], within: float | None
    ) -> tuple[set[Waitable], set[Waitable]]:
        """Wait until every one is done or `within` seconds passed: (done, pending).

        Like `asyncio.wait(..., timeout=)`: nothing is cancelled.
        """
        ...


class SystemClock:
    """Real time: the system's clock and the event loop's timers."""

    def now(self) -> datetime:
        """The current instant (UTC)."""
        return datetime.now(UTC)

    def monotonic(self) -> float:
        """`time.monotonic()`."""
        return time.monotonic()

    def call_later(self, delay: float, callback: Callable[..., object], *args: Any) -> Timer:
        """A timer of the running loop."""
        return asyncio.get_running_loop().call_later(delay, callback, *args)

    async def sleep(self, delay: float) -> None:
        """`asyncio.sleep`."""
        await asyncio.sleep(delay)

    async def wait(
        self, waitables: Collection[Waitable], within: float | None
    ) -> tuple[set[Waitable], set[Waitable]]:
        """`asyncio.wait` with a timeout."""
        if not waitables:
            return set(), set()
        return await asyncio.wait(set(waitables), timeout=within)


class _Due:
    """A timer of a ManualClock."""

    __slots__ = ("args", "callback", "cancelled")

    def __init__(self, callback: Callable[..., object], args: tuple[Any, ...]) -> None:
        self.callback = callback
        self.args = args
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    """Time that moves only when a test says so; timers fire as it passes them.

    `await clock.advance(seconds)` moves the clock forward. Every timer due
    on the way runs in due order, with `now()` at its due instant; after each
    one the loop gets a few turns, so that what a timer woke (a task awaiting
    `sleep`, a retry that arms the next timer) can run and arm timers due
    within the same span, which then fire too. Work that waits on other
    threads (a process, the history writer) is not waited for: tests await
    the events they expect, as always.
    """

    TURNS = 5
    """Loop turns given after each timer (and at the end of an advance)."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 5, 7, 9, 10, tzinfo=UTC)
        self._start = self._now
        self._jumped = 0.0
        self._due: list[tuple[datetime, int, _Due]] = []
        self._order = itertools.count()
        self._arming: list[tuple[float | None, asyncio.Future[None]]] = []

    def now(self) -> datetime:
        """The instant the clock shows."""
        return self._now

    def monotonic(self) -> float:
        """Seconds advanced so far; a `jump` of the wall clock does not change it."""
        return (self._now - self._start).total_seconds() - self._jumped

    def jump(self, seconds: float) -> None:
        """Set the wall clock forward (or back, for a negative `seconds`) without time
        passing: what an operator or NTP does to the system clock. No timer fires."""
        self._now += timedelta(seconds=seconds)
        self._jumped += seconds

    def call_later(self, delay: float, callback: Callable[..., object], *args: Any) -> Timer:
        """A timer that fires when the clock is advanced past `delay` seconds from now."""
        due = _Due(callback, args)
        at = self._now + timedelta(seconds=max(0.0, delay))
        heapq.heappush(self._due, (at, next(self._order), due))
        for wanted, waiter in self._arming:
            if wanted is None or wanted == delay:
                _resolve(waiter)
        self._arming = [(wanted, waiter) for wanted, waiter in self._arming if not waiter.done()]
        return due

    def arming(self, delay: float | None = None) -> asyncio.Future[None]:
        """A future done once a timer (of `delay` seconds, if given) is armed.

        Create it before the action: for a test that must not advance before
        the code under test armed its timer (a run's timeout is armed after
        its row is written by another thread).
        """
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._arming.append((delay, waiter))
        return waiter

    async def sleep(self, delay: float) -> None:
        """Return once the clock has been advanced by `delay` seconds."""
        woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        timer = self.call_later(delay, _resolve, woken)
        try:
            await woken
        finally:
            timer.cancel()

    async def wait(
        self, waitables: Collection[Waitable], within: float | None
    ) -> tuple[set[Waitable], set[Waitable]]:
        """Wait until all are done, or the clock was advanced `within` seconds."""
        waiting = set(waitables)
        if not waiting:
            return set(), set()
        if within is None:
            return await asyncio.wait(waiting)
        expired: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        timer = self.call_later(within, _resolve, expired)
        try:
            pending = waiting
            while pending and not expired.done():
                _, pending = await asyncio.wait(
                    {*pending, expired}, return_when=asyncio.FIRST_COMPLETED
                )
                pending.discard(expired)
        finally:
            timer.cancel()
            expired.cancel()
        return {w for w in waiting if w.done()}, {w for w in waiting if not w.done()}

    @property
    def pending_timers(self) -> int:
        """Timers armed and not yet fired or cancelled."""
        return sum(1 for _, _, due in self._due if not due.cancelled)

    async def advance(self, seconds: float) -> None:
        """Move the clock forward by `seconds`, firing every timer due on the way."""
        target = self._now + timedelta(seconds=seconds)
        await self._turns()
        while self._due and self._due[0][0] <= target:
            at, _, due = heapq.heappop(self._due)
            if due.cancelled:
                continue
            self._now = max(self._now, at)
            due.callback(*due.args)
            await self._turns()
        self._now = target
        await self._turns()

    async def _turns(self) -> None:
        for _ in range(self.TURNS):
            await asyncio.sleep(0)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


RENDER_SECONDS = 2.0
"""The time one alert template may take to render (a sample one in `validate` too)."""


class Deadline:
    """An interrupt for work in a thread: out of time `seconds` after it is first
    asked (when the work starts, not while it waits for a thread), or cancelled.

    The work asks it at each step (a template render does, see
    `tuisched.domain.templates.render`); `cancel()` may be called from any
    thread, and the work stops at its next step. Timed on the monotonic
    clock, so a wall clock that jumps neither ends nor extends it.
    """

    def __init__(self, seconds: float = RENDER_SECONDS) -> None:
        self._seconds = seconds
        self._ends: float | None = None
        self._cancelled: str | None = None

    def cancel(self, reason: str) -> None:
        """Make the work stop at its next step, giving `reason`."""
        self._cancelled = reason

    def __call__(self) -> str | None:
        """Why the work must stop now, or None."""
        if self._cancelled is not None:
            return self._cancelled
        now = time.monotonic()
        if self._ends is None:
            self._ends = now + self._seconds
        elif now > self._ends:
            return f"took longer than {self._seconds:g} s"
        return None


async def within(clock: Clock, seconds: float, work: Awaitable[T]) -> T:
    """What `work` returns, if it is done within `seconds` on `clock`; else it is cancelled.

    `asyncio.timeout` on the injected clock: a database call, a connection, a leave.

    Raises:
        TimeoutError: `work` took longer (it was cancelled, and has ended).
    """
    task = asyncio.ensure_future(work)
    try:
        done, _ = await clock.wait({task}, seconds)
    except asyncio.CancelledError:  # cancelled itself: the work ends first, as it would inside
        task.cancel()
        await asyncio.wait({task})
        raise
    if not done:
        task.cancel()
        await asyncio.wait({task})
        if not task.cancelled():
            return task.result()  # it was done meanwhile, or refused to end: as it said
        raise TimeoutError
    return task.result()
