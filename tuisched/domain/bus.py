"""The event bus: subscribe by type, publish from any thread, deliver on one loop.

Threads are crossed here and only here: `publish` may be called from worker
threads; events are delivered in publication order on the bound asyncio
loop's thread. A subscriber that raises is logged and never silences the
others.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tuisched.domain.events import Event

E = TypeVar("E", bound=Event)
Callback = Callable[[Any], object]

log = logging.getLogger(__name__)

EVENTS_PER_TURN = 200
"""Events delivered per loop turn; the rest follow on the next turns."""


@dataclass(eq=False, slots=True)
class Subscription:
    """A handle on one subscription; `unsubscribe()` ends it."""

    bus: EventBus
    event_type: type[Event]
    callback: Callback

    def unsubscribe(self) -> None:
        """Stop delivering to this callback. Idempotent."""
        self.bus._remove(self)


@dataclass(slots=True)
class EventBus:
    """Publish/subscribe by event type (subclasses match their bases)."""

    _subscriptions: list[Subscription] = field(default_factory=list)
    _pending: deque[Event] = field(default_factory=deque)
    _loop: asyncio.AbstractEventLoop | None = None
    _drain_scheduled: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _tasks: set[asyncio.Task[object]] = field(default_factory=set)

    def bind(self, loop: asyncio.AbstractEventLoop | None) -> None:
        """Deliver on `loop` from now on (None: deliver at once, in the publisher's thread)."""
        self._loop = loop

    def subscribe(self, event_type: type[E], callback: Callable[[E], object]) -> Subscription:
        """Call `callback(event)` for every published `event_type` (or subclass).

        A coroutine function is run as a task on the loop.
        """
        subscription = Subscription(self, event_type, callback)
        with self._lock:
            self._subscriptions = [*self._subscriptions, subscription]
        return subscription

    def _remove(self, subscription: Subscription) -> None:
        with self._lock:
            self._subscriptions = [s for s in self._subscriptions if s is not subscription]

    def publish(self, event: Event) -> None:
        """Queue `event` for delivery; safe from any thread."""
        loop = self._loop
        if loop is None or loop.is_closed():
            self._deliver(event)
            return
        with self._lock:
            self._pending.append(event)
            if self._drain_scheduled:
                return
            self._drain_scheduled = True
        try:
            loop.call_soon_threadsafe(self._drain)
        except RuntimeError:  # the loop closed meanwhile: deliver here rather than drop
            self._drain()

    def flush(self) -> None:
        """Deliver every queued event now. Call it on the loop's thread."""
        self._drain(limit=None)

    def _drain(self, limit: int | None = EVENTS_PER_TURN) -> None:
        with self._lock:
            count = len(self._pending) if limit is None else min(limit, len(self._pending))
            events = [self._pending.popleft() for _ in range(count)]
            more = bool(self._pending)
            self._drain_scheduled = more
        for event in events:
            self._deliver(event)
        if more and self._loop is not None:
            # A burst is delivered over several loop turns, so nothing waits behind it long.
            self._loop.call_soon(self._drain)

    def _deliver(self, event: Event) -> None:
        for subscription in self._subscriptions:
            if isinstance(event, subscription.event_type):
                self._call(subscription.callback, event)

    def _call(self, callback: Callback, event: Event) -> None:
        try:
            result = callback(event)
            if inspect.iscoroutine(result):
                self._spawn(result)
        except Exception:
            log.exception("event subscriber %r failed on %s", callback, type(event).__name__)

    def _spawn(self, coroutine: Coroutine[Any, Any, object]) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            coroutine.close()  # no loop to run it on: drop it cleanly, and say so
            log.error("event subscriber %r needs a running loop; event dropped", coroutine)  # noqa: TRY400
            return
        task = loop.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[object]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("event subscriber task failed", exc_info=task.exception())


class Recorder:
    """Records every event of a bus; tests await the ones they expect.

    The in-memory twin of a subscriber: `await recorder.wait_for(RunFinished,
    lambda e: e.run.job == "backup")` returns the first match, past or future.
    """

    def __init__(self, bus: EventBus) -> None:
        self.events: list[Event] = []
        self._changed = asyncio.Event()
        self.subscription = bus.subscribe(Event, self._record)

    def _record(self, event: Event) -> None:
        self.events.append(event)
        self._changed.set()

    def of(self, event_type: type[E]) -> list[E]:
        """Every recorded event of `event_type`."""
        return [e for e in self.events if isinstance(e, event_type)]

    async def wait_for(
        self,
        event_type: type[E],
        predicate: Callable[[E], bool] = lambda _: True,
        *,
        count: int = 1,
        within: float = 10,
    ) -> list[E]:
        """The first `count` matching events, waiting up to `within` seconds for them."""
        async with asyncio.timeout(within):
            while True:
                found = [e for e in self.of(event_type) if predicate(e)]
                if len(found) >= count:
                    return found[:count]
                self._changed.clear()
                await self._changed.wait()
