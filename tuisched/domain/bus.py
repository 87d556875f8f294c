"""The event bus: subscribe by type, publish from any thread, deliver on one thread, in order.

Threads are crossed here and only here: `publish` may be called from worker
threads; events are delivered in publication order on the thread of the
`Delivery` the bus is bound to (the runtime binds it to its event loop). A
subscriber that raises is logged and never silences the others.

Events are delivered a turn of that thread at a time (at most
EVENTS_PER_TURN). A subscriber either takes them one at a time, in order
(`subscribe`), or takes each turn's events of its types as one batch, in
order, after the one-at-a-time subscribers have seen them
(`subscribe_batch`): a burst of thousands of runs then costs such a
subscriber one call a turn (an audit write, a metrics update, a message to
a console), not one per event.

Every published event gets a sequence number (`Event.seq`), strictly
increasing from 1 in delivery order. The bus keeps the most recent events in
a journal, so a subscriber can start from a given number: it gets every event
after it and then every new one, with no gap and nothing twice.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from tuisched.domain.errors import EventsLostError
from tuisched.domain.events import Event
from tuisched.domain.text import counted

E = TypeVar("E", bound=Event)
Callback = Callable[[Any], object]
BatchCallback = Callable[[list[Any]], object]

log = logging.getLogger(__name__)

EVENTS_PER_TURN = 1000
"""Events delivered per turn of the delivering thread; the rest follow on the next turns."""
JOURNAL_SIZE = 10_000
"""Events kept for subscribers that start from a sequence number."""


class Delivery(Protocol):
    """Where events are delivered: an event loop's `call_soon_threadsafe` and `call_soon`."""

    def call_soon_threadsafe(self, callback: Callable[[], object], /) -> object:
        """Run `callback` soon on the delivering thread; callable from any thread."""
        ...

    def call_soon(self, callback: Callable[[], object], /) -> object:
        """Run `callback` soon; called on the delivering thread only (cheaper)."""
        ...

    def is_closed(self) -> bool:
        """Whether nothing can be delivered there any more."""
        ...


@dataclass(eq=False, slots=True)
class Subscription:
    """A handle on one subscription; `unsubscribe()` ends it."""

    bus: EventBus
    event_type: type[Event] | tuple[type[Event], ...]
    callback: Callback
    batch: bool = False
    """The callback takes a list of events (`subscribe_batch`)."""

    def unsubscribe(self) -> None:
        """Stop delivering to this callback. Idempotent."""
        self.bus._remove(self)


@dataclass(slots=True)
class EventBus:
    """Publish/subscribe by event type (subclasses match their bases), with sequence numbers."""

    journal_size: int = JOURNAL_SIZE
    _subscriptions: list[Subscription] = field(default_factory=list)
    _pending: deque[Event] = field(default_factory=deque)
    _journal: deque[Event] = field(default_factory=deque)
    _delivery: Delivery | None = None
    _drain_scheduled: bool = False
    _seq: int = 0
    _delivered: int = 0
    """The sequence number of the last event delivered."""
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _routes: dict[type[Event], _Route] = field(default_factory=dict)
    """The subscriptions each event type goes to, worked out at its first delivery."""

    def bind(self, delivery: Delivery | None) -> None:
        """Deliver through `delivery` from now on (None: at once, in the publisher's thread)."""
        self._delivery = delivery

    @property
    def last_seq(self) -> int:
        """The sequence number of the newest event published so far (0 before any)."""
        return self._seq

    def subscribe(
        self, event_type: type[E], callback: Callable[[E], object], *, after: int | None = None
    ) -> Subscription:
        """Call `callback(event)` for every `event_type` (or subclass) delivered from now on.

        With `after`, first call it with the journal's events after that
        sequence number, then with every new one. Call it on the delivering
        thread when `after` is given: replay and subscription are then one step.

        Raises:
            EventsLostError: some events after `after` are no longer in the journal.
        """
        subscription = Subscription(self, event_type, callback)
        if after is not None:
            for event in self.since(after):
                if isinstance(event, event_type):
                    self._call(callback, event)
        with self._lock:
            self._subscriptions = [*self._subscriptions, subscription]
            self._routes = {}
        return subscription

    def subscribe_batch(
        self,
        event_type: type[E] | tuple[type[E], ...],
        callback: Callable[[list[E]], object],
        *,
        after: int | None = None,
    ) -> Subscription:
        """Call `callback(events)` once a turn with the turn's `event_type` events (or
        subclasses, or any of a tuple of types), in order, never with an empty list.

        A batch comes after the turn's events were given to the one-at-a-time
        subscribers. `after` as in `subscribe` (the journal's events come as one batch).

        Raises:
            EventsLostError: some events after `after` are no longer in the journal.
        """
        subscription = Subscription(self, event_type, callback, batch=True)
        if after is not None:
            missed: list[Event] = [e for e in self.since(after) if isinstance(e, event_type)]
            if missed:
                self._call_batch(callback, missed)
        with self._lock:
            self._subscriptions = [*self._subscriptions, subscription]
            self._routes = {}
        return subscription

    def since(self, after: int) -> list[Event]:
        """The delivered events after sequence number `after`, oldest first.

        Raises:
            EventsLostError: some of them were already dropped from the journal.
        """
        journal = self._journal
        if after >= self._delivered:
            return []
        oldest = journal[0].seq if journal else self._delivered + 1
        if after + 1 < oldest:
            raise EventsLostError(after, oldest)
        return [event for event in journal if event.seq > after]

    def _remove(self, subscription: Subscription) -> None:
        with self._lock:
            self._subscriptions = [s for s in self._subscriptions if s is not subscription]
            self._routes = {}

    def publish(self, event: Event) -> None:
        """Number `event` and queue it for delivery; safe from any thread."""
        self.publish_many((event,))

    def publish_many(self, events: Sequence[Event]) -> None:
        """Number `events` and queue them for delivery, in order, with nothing between
        them; safe from any thread. `publish` of each, at the cost of one."""
        delivery = self._delivery
        direct = delivery is None or delivery.is_closed()
        with self._lock:
            seq = self._seq
            for event in events:
                seq += 1
                # Stamped once, before any subscriber can see the event: its one write.
                object.__setattr__(event, "seq", seq)
            self._seq = seq
            self._pending.extend(events)
            schedule = not direct and not self._drain_scheduled
            self._drain_scheduled = self._drain_scheduled or schedule
        if direct:
            self._drain(limit=None)
        elif schedule:
            assert delivery is not None  # noqa: S101  (not direct)
            try:
                delivery.call_soon_threadsafe(self._drain)
            except RuntimeError:  # the loop closed meanwhile: deliver here rather than drop
                self._drain(limit=None)

    def flush(self) -> None:
        """Deliver every queued event now. Call it on the delivering thread."""
        self._drain(limit=None)

    def _drain(self, limit: int | None = EVENTS_PER_TURN) -> None:
        with self._lock:
            count = len(self._pending) if limit is None else min(limit, len(self._pending))
            events = [self._pending.popleft() for _ in range(count)]
            more = bool(self._pending)
            self._drain_scheduled = more
        if events:
            self._record(events)
            self._deliver(events)
        delivery = self._delivery
        if more and delivery is not None:
            # A burst is delivered over several turns, so nothing waits behind it long.
            delivery.call_soon(self._drain)

    def _record(self, events: list[Event]) -> None:
        journal = self._journal
        journal.extend(events)
        while len(journal) > self.journal_size:
            journal.popleft()
        self._delivered = events[-1].seq

    def _route(self, kind: type[Event]) -> _Route:
        routes = self._routes  # replaced, never changed, by (un)subscribing
        route = routes.get(kind)
        if route is None:
            subscriptions = self._subscriptions
            matching = [s for s in subscriptions if issubclass(kind, s.event_type)]
            route = routes[kind] = (
                tuple(s.callback for s in matching if not s.batch),
                tuple(s for s in matching if s.batch),
            )
        return route

    def _deliver(self, events: list[Event]) -> None:
        """Each event to the one-at-a-time subscribers, in order; then each batch."""
        batches: dict[Subscription, list[Event]] = {}
        route = self._route
        call = self._call
        for event in events:
            one_by_one, batched = route(type(event))
            for callback in one_by_one:
                call(callback, event)
            for subscription in batched:
                found = batches.get(subscription)
                if found is None:
                    batches[subscription] = [event]
                else:
                    found.append(event)
        for subscription, batch in batches.items():
            self._call_batch(subscription.callback, batch)

    @staticmethod
    def _call(callback: Callback, event: Event) -> None:
        try:
            callback(event)
        except Exception:
            log.exception("event subscriber %r failed on %s", callback, type(event).__name__)

    @staticmethod
    def _call_batch(callback: BatchCallback, events: list[Event]) -> None:
        try:
            callback(events)
        except Exception:
            log.exception(
                "event subscriber %r failed on %s", callback, counted(len(events), "event")
            )


_Route = tuple[tuple[Callback, ...], tuple[Subscription, ...]]
"""For one event type: the callbacks that take it alone, and the batch subscriptions."""
