"""The in-memory twin of a bus subscriber: records every event; tests await the ones they expect."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import TypeVar

from tuisched.domain.bus import EventBus
from tuisched.domain.events import Event

E = TypeVar("E", bound=Event)


class Recorder:
    """Records every event of a bus; tests await the ones they expect.

    The in-memory twin of a subscriber: `await recorder.wait_for(RunFinished,
    lambda e: e.run.job == "backup")` returns the first match, past or future.
    """

    def __init__(self, bus: EventBus) -> None:
        self.events: list[Event] = []
        self._changed = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self.subscription = bus.subscribe(Event, self._record)

    def _record(self, event: Event) -> None:
        """Keep `event`, on the test's loop: a hosted runtime delivers on its own lane."""
        if threading.get_ident() == self._thread:
            self._keep(event)
        else:
            self._loop.call_soon_threadsafe(self._keep, event)

    def _keep(self, event: Event) -> None:
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
