"""Keys typed ahead: read apart, and each applied where the keys before it left the focus.

A slow SSH link delivers what was typed in bursts, and Textual's input path
then gets two things wrong.

Reading: an Esc followed at once by another key reads as one Alt chord (or,
for `Esc /`, the Esc is dropped). `KeyParser` reads an Esc followed by a plain
key as Esc, then that key. The console binds no Alt chord, so nothing is lost;
Alt+Backspace (delete a word) and the sequences that start with `Esc [` and
`Esc O` (arrows, function keys) read as before.

Delivery: Textual hands each key to the widget focused when the key is taken
from the app's queue, while the key before it may still be on its way up the
widgets, its action (a Tab's focus move, a screen opening or closing) not yet
done. `KeyQueue` delivers one key (or paste) at a time: the next waits until
the one before has been handled along its whole way up, the focus and the
screens have settled (a screen opened is mounted and focused, a closed one's
callback done) and the workers started meanwhile have ended or opened a
screen (`e` reads the job before the form opens; the ledger reads its rows
once open), but for an action carried out in the background once confirmed.
Keys that come one at a time meet an idle queue and go at once; mouse
events, timers and everything else never wait. Once the key before has been
handled, no key waits longer than `SETTLE_LIMIT` for the focus to settle.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeGuard

from textual import events
from textual._xterm_parser import BRACKETED_PASTE_END, BRACKETED_PASTE_START, XTermParser
from textual.app import App
from textual.dom import DOMNode
from textual.message import Message
from textual.message_pump import MessagePump
from textual.messages import Layout, Prompt, Update
from textual.worker import Worker, WorkerError

ESC = "\x1b"
_SEQUENCE_STARTS = frozenset("[O\x1b\x7f")
"""What may follow an Esc and still be one key: CSI and SS3 sequences, Esc Esc, and
Alt+Backspace (delete a word in a field)."""
SETTLE_LIMIT = 5.0
"""The longest a key typed ahead waits for the focus to settle once the key before it
has been handled (seconds): for the workers that key started, the screens it opened."""
_STOPPED_POLL = 0.5
"""How often a wait on a widget looks whether the widget has stopped (seconds)."""
_ROUNDS = 20
"""At most this many rounds of looking for the focus to settle, per key."""
IN_BACKGROUND = "in-background"
"""The group of workers that carry out an action in the background once the operator
has said yes (it may wait for the scheduler to start): keys typed after never wait for
them."""
_UNSEEN = (Prompt, Update, Layout)
"""Messages that only repaint: not signs that a key is still being handled."""

Typed = events.Key | events.Paste


class KeyParser(XTermParser):
    """Textual's terminal parser, with an Esc followed at once by a plain key read as two
    keys."""

    def __init__(self, debug: bool = False) -> None:
        super().__init__(debug)
        self._escape_open = False
        """The last character fed was an Esc, still waiting for what follows it."""
        self._pasting = False

    def feed(self, data: str) -> Iterable[Message]:
        if not data:  # the end of the input
            yield from super().feed(data)
            return
        start = 0
        for index in self._escape_ends(data):
            if index > start:  # ("" would tell the parser the input has ended)
                yield from super().feed(data[start:index])
            yield from self._end_escape()
            start = index
        if start < len(data):
            yield from super().feed(data[start:])

    def _escape_ends(self, data: str) -> Iterable[int]:
        """Where in `data` an Esc waiting for the next character must end as a key."""
        if self._escape_open and data and not self._pasting and data[0] not in _SEQUENCE_STARTS:
            yield 0
        self._escape_open = False
        at = data.find(ESC)
        while at != -1:
            if data.startswith(BRACKETED_PASTE_START, at):
                self._pasting = True
            elif data.startswith(BRACKETED_PASTE_END, at):
                self._pasting = False
            following = data[at + 1 : at + 2]
            if not following:
                self._escape_open = not self._pasting
            elif following not in _SEQUENCE_STARTS and not self._pasting:
                yield at + 1
            at = data.find(ESC, at + 1)

    def _end_escape(self) -> Iterable[Message]:
        """The waiting Esc is a key: what `tick` does once Textual's Esc delay has passed."""
        if self._timeout_time is not None:  # (None: the delay passed, the Esc was read)
            self._timeout_time = float("-inf")
            yield from self.tick()


class _Probe:
    """A callback put in a widget's queue: once it runs, what was queued before it has
    been handled."""

    def __init__(self) -> None:
        self.ran = asyncio.Event()

    def __call__(self) -> None:
        self.ran.set()


class KeyQueue:
    """Delivers typed keys and pastes one at a time, each once the one before has settled."""

    def __init__(self, app: App[Any], deliver: Callable[[events.Event], Awaitable[None]]) -> None:
        """`deliver` is Textual's own handling of a key from the terminal (`App.on_event`)."""
        self._app = app
        self._deliver = deliver
        self._held: deque[Typed] = deque()
        self._settling: asyncio.Task[None] | None = None
        self._endings: set[asyncio.Future[object]] = set()
        self._closed = False

    @staticmethod
    def takes(event: events.Event) -> TypeGuard[Typed]:
        """Whether `event` is typed input the queue orders (not yet handed to a widget)."""
        return isinstance(event, events.Key | events.Paste) and not event.is_forwarded

    async def receive(self, event: Typed) -> None:
        """Deliver `event` now when nothing typed before it is still being handled."""
        if self._closed:
            return
        if self._settling is not None or self._held:
            self._held.append(event)
            return
        await self._send(event)

    def close(self) -> None:
        """The app is closing: what is held is dropped, nothing more is awaited."""
        self._closed = True
        self._held.clear()
        if self._settling is not None:
            self._settling.cancel()

    async def _send(self, event: Typed) -> None:
        app = self._app
        target: DOMNode = app.focused or app.screen
        workers = set(app.workers)
        await self._deliver(event)
        path = [target, *target.ancestors] if event.is_forwarded else []
        self._settling = asyncio.create_task(self._settle(path, workers))
        self._settling.add_done_callback(self._settled)

    def _settled(self, task: asyncio.Task[None]) -> None:
        self._settling = None
        if not task.cancelled() and task.exception() is not None:  # the app was closing
            self._app.log.error(f"typed keys: waiting for a key to settle: {task.exception()!r}")
        if self._held and not self._closed:
            self._app.call_later(self._next)

    async def _next(self) -> None:
        if self._held and self._settling is None and not self._closed:
            await self._send(self._held.popleft())

    async def _settle(self, path: list[DOMNode], workers: set[Worker[Any]]) -> None:
        """Until the event has gone its whole way up (however long its action takes: the
        app handles nothing else meanwhile), then the focus is still."""
        for node in path:  # one widget after the other, as the event bubbles
            await _probe(node)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(SETTLE_LIMIT):
                for _ in range(_ROUNDS):
                    before = self._where()
                    waited = await self._workers_since(workers)
                    busy = await self._round()
                    if not waited and not busy and self._where() == before:
                        return

    def _where(self) -> tuple[object, ...]:
        """What decides where the next key goes: the screens, and the focus."""
        return (*self._app.screen_stack, self._app.focused)

    async def _round(self) -> bool:
        """Probe the focused widget, its ancestors, then the app; True if any of them
        handled something else meanwhile (the key's consequences are still going)."""
        app = self._app
        leaf: DOMNode = app.focused or app.screen
        nodes: list[MessagePump] = [leaf, *leaf.ancestors]
        seen = 0

        def handled(message: Message) -> None:
            nonlocal seen
            callback = getattr(message, "callback", None)
            if not isinstance(message, _UNSEEN) and not isinstance(
                getattr(callback, "func", None), _Probe
            ):
                seen += 1

        for node in nodes:
            if node.is_running:
                node.message_signal.subscribe(app, handled, immediate=True)
        try:
            for node in nodes:
                await _probe(node)
        finally:
            for node in nodes:
                node.message_signal.unsubscribe(app)
        return seen > 0

    def _ending(self, worker: Worker[Any]) -> asyncio.Future[object]:
        """Done when `worker` has ended (however), kept until then."""
        ending: asyncio.Future[object] = asyncio.ensure_future(_ended(worker))
        self._endings.add(ending)
        ending.add_done_callback(self._endings.discard)
        return ending

    async def _workers_since(self, before: set[Worker[Any]]) -> bool:
        """Wait for the workers started since the key came to end (`e` reads the job
        before the form opens; the ledger reads its rows once open), or for the screens
        to change (one of them opened a screen). True if there were any."""
        app = self._app
        started = [
            worker
            for worker in app.workers
            if worker not in before and not worker.is_finished and worker.group != IN_BACKGROUND
        ]
        if not started:
            return False
        stack = tuple(app.screen_stack)
        changed = asyncio.Event()

        def screen_changed(_screen: object) -> None:
            changed.set()

        app.screen_change_signal.subscribe(app, screen_changed, immediate=True)
        waits = [self._ending(worker) for worker in started]
        moved: asyncio.Future[object] = asyncio.ensure_future(changed.wait())
        try:
            pending = set(waits)
            while pending and not changed.is_set() and tuple(app.screen_stack) == stack:
                _done, pending = await asyncio.wait(
                    {*pending, moved}, return_when=asyncio.FIRST_COMPLETED
                )
                pending.discard(moved)
        finally:
            app.screen_change_signal.unsubscribe(app)
            moved.cancel()  # (not the waits: cancelling a wait would cancel its worker)
        return True


async def _probe(node: MessagePump) -> None:
    """Once `node` has handled what was in its queue, or has stopped (a widget removed
    meanwhile drops what was queued for it)."""
    probe = _Probe()
    if not (node.is_running and node.call_later(probe)):
        return
    while not probe.ran.is_set() and node.is_running:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(probe.ran.wait(), _STOPPED_POLL)


async def _ended(worker: Worker[Any]) -> None:
    with contextlib.suppress(WorkerError):  # failed or cancelled: ended either way
        await worker.wait()
