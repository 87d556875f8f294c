"""The event bus: order, sequence numbers, threads, failing subscribers, the journal."""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime

import pytest

from tuisched.domain.bus import EVENTS_PER_TURN, EventBus
from tuisched.domain.errors import EventsLostError
from tuisched.domain.events import Event, PauseChanged, SchedulerStopped

AT = datetime(2026, 5, 7, 9, 10, tzinfo=UTC)


def stopped() -> SchedulerStopped:
    return SchedulerStopped(at=AT)


def paused(name: str) -> PauseChanged:
    return PauseChanged(at=AT, kind="job", name=name, paused=True)


def test_without_a_loop_events_are_delivered_at_once_and_numbered() -> None:
    bus = EventBus()
    heard: list[Event] = []
    bus.subscribe(Event, heard.append)
    first, second = stopped(), paused("a")
    bus.publish(first)
    bus.publish(second)
    assert heard == [first, second]
    assert [event.seq for event in heard] == [1, 2]
    assert bus.last_seq == 2


def test_subscribers_get_their_types_and_a_failing_one_silences_nobody() -> None:
    bus = EventBus()
    pauses: list[PauseChanged] = []
    everything: list[Event] = []

    def broken(_: Event) -> None:
        raise RuntimeError("subscriber bug")

    bus.subscribe(Event, broken)
    bus.subscribe(PauseChanged, pauses.append)
    subscription = bus.subscribe(Event, everything.append)
    bus.publish(stopped())
    bus.publish(paused("a"))
    assert [event.name for event in pauses] == ["a"]
    assert len(everything) == 2
    subscription.unsubscribe()
    subscription.unsubscribe()  # idempotent
    bus.publish(paused("b"))
    assert len(everything) == 2
    assert [event.name for event in pauses] == ["a", "b"]


async def test_events_from_threads_arrive_on_the_loop_in_publication_order() -> None:
    bus = EventBus()
    bus.bind(asyncio.get_running_loop())
    heard: list[tuple[int, bool]] = []
    done = asyncio.Event()
    total = 4 * 500

    def hear(event: Event) -> None:
        heard.append((event.seq, threading.current_thread() is threading.main_thread()))
        if len(heard) == total:
            done.set()

    bus.subscribe(Event, hear)

    def publisher(prefix: str) -> None:
        for index in range(500):
            bus.publish(paused(f"{prefix}{index}"))

    threads = [threading.Thread(target=publisher, args=(str(n),)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    async with asyncio.timeout(5):
        await done.wait()
    assert [seq for seq, _ in heard] == list(range(1, total + 1))
    assert all(on_loop for _, on_loop in heard)


async def test_a_burst_is_delivered_over_several_loop_turns() -> None:
    bus = EventBus()
    bus.bind(asyncio.get_running_loop())
    heard: list[Event] = []
    bus.subscribe(Event, heard.append)
    for index in range(EVENTS_PER_TURN * 3):
        bus.publish(paused(str(index)))
    await asyncio.sleep(0)  # one turn of the loop: the first batch only
    assert len(heard) == EVENTS_PER_TURN
    bus.flush()
    assert len(heard) == EVENTS_PER_TURN * 3


def test_a_subscriber_from_a_number_gets_the_rest_then_the_new_ones_once() -> None:
    bus = EventBus()
    for index in range(5):
        bus.publish(paused(str(index)))
    heard: list[int] = []
    bus.subscribe(Event, lambda event: heard.append(event.seq), after=3)
    bus.publish(paused("new"))
    assert heard == [4, 5, 6]
    assert [event.seq for event in bus.since(4)] == [5, 6]
    assert bus.since(6) == []


async def test_events_published_but_not_yet_delivered_are_not_replayed_twice() -> None:
    bus = EventBus()
    bus.bind(asyncio.get_running_loop())
    bus.publish(paused("delivered"))
    bus.flush()
    bus.publish(paused("pending"))  # numbered 2, delivered on the next loop turn
    heard: list[int] = []
    bus.subscribe(Event, lambda event: heard.append(event.seq), after=0)
    assert heard == [1]
    await asyncio.sleep(0)
    assert heard == [1, 2]


def test_a_number_older_than_the_journal_says_events_were_lost() -> None:
    bus = EventBus(journal_size=3)
    for index in range(6):
        bus.publish(paused(str(index)))
    assert [event.seq for event in bus.since(3)] == [4, 5, 6]
    with pytest.raises(EventsLostError, match="events 2-3 are no longer kept") as lost:
        bus.since(1)
    assert (lost.value.after, lost.value.oldest) == (1, 4)
    with pytest.raises(EventsLostError):
        bus.subscribe(Event, print, after=0)


# --- subscribers that take a turn's events at once (R26) ------------------------------------


async def test_a_batch_subscriber_gets_a_turns_events_in_one_call_after_the_others() -> None:
    bus = EventBus()
    bus.bind(asyncio.get_running_loop())
    calls: list[object] = []
    bus.subscribe(PauseChanged, lambda event: calls.append(("one", event.name)))
    bus.subscribe_batch(PauseChanged, lambda events: calls.append([e.name for e in events]))
    bus.subscribe_batch((SchedulerStopped,), lambda events: calls.append(len(events)))
    bus.publish_many([paused("a"), paused("b")])
    bus.publish(paused("c"))
    assert calls == []  # delivered on the loop's next turn
    await asyncio.sleep(0)
    assert calls == [("one", "a"), ("one", "b"), ("one", "c"), ["a", "b", "c"]]
    bus.publish(stopped())
    await asyncio.sleep(0)
    assert calls[-1] == 1  # only its types, and never an empty batch


def test_a_failing_batch_subscriber_silences_nobody_and_publish_many_numbers_in_order() -> None:
    bus = EventBus()
    heard: list[int] = []

    def broken(_: list[Event]) -> None:
        raise RuntimeError("subscriber bug")

    bus.subscribe_batch(Event, broken)
    bus.subscribe_batch(Event, lambda events: heard.extend(e.seq for e in events))
    bus.publish_many([paused("a"), stopped(), paused("b")])
    assert heard == [1, 2, 3]
    assert bus.last_seq == 3


def test_a_batch_subscriber_from_a_number_gets_the_rest_as_one_batch() -> None:
    bus = EventBus()
    for index in range(5):
        bus.publish(paused(str(index)))
    batches: list[list[int]] = []
    bus.subscribe_batch(Event, lambda events: batches.append([e.seq for e in events]), after=2)
    bus.publish(paused("new"))
    assert batches == [[3, 4, 5], [6]]
