"""The scheduler's lane (SPEC R26): an event loop on a thread of its own.

The runtime runs on this loop whether a console hosts it or it runs
headless. The front end keeps its own loop on the main thread (the console's
rendering, headless mode's signal handling) and hands the runtime work with
`run`, awaiting the answer on its own loop: nothing the front end does can
delay a run by more than the interpreter's switch interval.

`run` is the one way across: a coroutine given to it runs on the lane, and
its result or error comes back to the caller's loop. Once the lane has
stopped, work handed to it fails with SchedulerNotRunningError instead of
waiting for ever.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from tuisched.domain.errors import SchedulerNotRunningError

T = TypeVar("T")

log = logging.getLogger(__name__)

STOPPED = "the scheduler has stopped"


class LoopThread:
    """An event loop running on a thread of its own, until `stop`."""

    def __init__(self, name: str = "tuisched-scheduler") -> None:
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ended: list[Callable[[], object]] = []
        """What to call once the loop has closed (from the lane's thread)."""
        self._handed: set[concurrent.futures.Future[Any]] = set()
        """Work handed over and not answered yet: failed if the loop closes first."""
        self._stopping = False
        self._lock = threading.Lock()

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The lane's loop, while it runs (None before `start` and after it closed)."""
        loop = self._loop
        return loop if loop is not None and not loop.is_closed() else None

    def on_lane(self) -> bool:
        """Whether the caller runs on the lane's thread."""
        return self._thread is not None and threading.current_thread() is self._thread

    def start(self) -> None:
        """Start the thread and its loop (once); return when the loop accepts work."""
        if self._thread is not None:
            return
        ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, args=(ready,), name=self._name)
        self._thread.daemon = True  # a front end that dies must not be kept alive by it
        self._thread.start()
        ready.wait()  # the new thread creates its loop first: microseconds

    def _serve(self, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._loop = loop
        ready.set()
        try:
            loop.run_forever()
            _cancel_remaining(loop)
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            with self._lock:
                loop.close()
                ended, self._ended = self._ended, []
                unanswered, self._handed = self._handed, set()
            for handed in unanswered:  # handed over as the loop stopped: never to run
                if not handed.done():
                    handed.set_exception(SchedulerNotRunningError(STOPPED))
            for tell in ended:
                tell()

    async def run(self, work: Coroutine[Any, Any, T]) -> T:
        """Run `work` on the lane and return its result on the caller's loop.

        On the lane itself it is simply awaited. Cancelling the caller cancels
        `work` on the lane.

        Raises:
            SchedulerNotRunningError: the lane has stopped (before or during `work`).
        """
        if self.on_lane() or self._thread is None:
            return await work
        loop = self.loop
        if loop is None:
            work.close()
            raise SchedulerNotRunningError(STOPPED)
        with self._lock:
            if loop.is_closed():
                work.close()
                raise SchedulerNotRunningError(STOPPED)
            handed = asyncio.run_coroutine_threadsafe(work, loop)
            self._handed.add(handed)
        handed.add_done_callback(self._answered)
        return await _answer(handed)

    def _answered(self, handed: concurrent.futures.Future[Any]) -> None:
        with self._lock:
            self._handed.discard(handed)

    def call_soon(self, callback: Callable[..., object], *args: object) -> None:
        """Run `callback(*args)` on the lane soon (at once when called on the lane)."""
        loop = self.loop
        if self.on_lane() or loop is None:
            callback(*args)
            return
        try:
            loop.call_soon_threadsafe(callback, *args)
        except RuntimeError:  # closed meanwhile: nothing to do it on
            log.debug("not run on a stopped lane: %r", callback)

    async def stop(self) -> None:
        """Stop the loop (what still runs on it is cancelled) and wait until it closed."""
        thread, loop = self._thread, self._loop
        if thread is None or loop is None or self.on_lane():
            return
        closed = asyncio.get_running_loop().create_future()
        caller = asyncio.get_running_loop()

        def tell() -> None:
            caller.call_soon_threadsafe(_settle, closed)

        with self._lock:
            if loop.is_closed():
                return
            self._ended.append(tell)
            if not self._stopping:  # once: a second stop waits for the first
                self._stopping = True
                loop.call_soon_threadsafe(loop.stop)
        await closed
        thread.join()  # it returns once `tell` has run: at once


async def _answer(handed: concurrent.futures.Future[T]) -> T:
    """The result of work handed to the lane, awaited on the caller's loop."""
    try:
        return await asyncio.wrap_future(handed)
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise  # the caller was cancelled (and so was the work)
        raise SchedulerNotRunningError(STOPPED) from None  # the lane stopped under it


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _cancel_remaining(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what still runs on a stopped loop and let it unwind (as `asyncio.run` does)."""
    remaining = asyncio.all_tasks(loop)
    for task in remaining:
        task.cancel()
    if remaining:
        loop.run_until_complete(asyncio.gather(*remaining, return_exceptions=True))
