"""The one way work leaves the event loop for a thread: `in_thread(lane, fn, *args)`.

Nothing may block the loop the scheduler and the console share: reading or
writing a file, parsing a big configuration, talking to a mail server or
checking a sensor's files happens in a thread, through this function. Every
call names its lane (what kind of neighbour it is), and each lane has a
bounded pool of threads of its own, so a slow neighbour (a mail server that
accepts and then says nothing) holds only its own lane's threads: a reload, a
sensor and the console's reads go on in theirs.

Lane threads are daemon threads that are never joined: a process that is
shutting down does not wait for a mail server to time out (asyncio's default
pool, which `asyncio.run` joins at exit, is not used). Python job threads and
the history's writer thread are the runtime's own and do not go through here.
"""

from __future__ import annotations

import asyncio
import contextvars
import enum
import functools
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


class Lane(enum.StrEnum):
    """What a piece of blocking work is, so each kind is bounded on its own."""

    AUDIT = "audit"
    """Appending to the audit log (one thread, so that lines keep their order)."""
    CONFIG = "config"
    """Reading, parsing, checking and writing the configuration file."""
    FILES = "files"
    """Reading run output, the audit log and the history for a front end."""
    MAIL = "mail"
    """Rendering and delivering alert mails."""
    SENSORS = "sensors"
    """Looking for the files `wait_for` jobs wait for."""
    PROCESSES = "processes"
    """Following the processes of runs in /proc, and signalling them."""
    SPAWN = "spawn"
    """Starting the processes of command runs (a spawn waits for the child's exec)."""
    WEBHOOK = "webhook"
    """Rendering webhook bodies, reading their secrets and resolving their host names."""


LANE_THREADS: dict[Lane, int] = {
    Lane.AUDIT: 1,
    Lane.CONFIG: 2,
    Lane.FILES: 4,
    Lane.MAIL: 4,
    Lane.SENSORS: 4,
    Lane.PROCESSES: 1,
    Lane.SPAWN: 2,
    Lane.WEBHOOK: 2,
}
"""Threads each lane may have at most; more work waits in the lane's queue."""


@dataclass(frozen=True, slots=True)
class LaneLoad:
    """How busy a lane is now."""

    lane: Lane
    busy: int
    """Threads running a piece of work."""
    queued: int
    """Pieces of work waiting for a thread."""


_Work = tuple["Future[Any]", Callable[[], Any]]


class LanePool:
    """Up to `size` daemon threads taking work from one queue; started as work comes."""

    def __init__(self, lane: Lane, size: int) -> None:
        self._lane = lane
        self._size = size
        self._queue: queue.SimpleQueue[_Work] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0
        """Threads waiting for work that no queued work has been promised to."""
        self._unserved = 0
        """Queued work no thread has been promised to (every thread was busy)."""
        self._busy = 0

    def submit(self, call: Callable[[], T]) -> Future[T]:
        """Queue `call`, promising it an idle thread, or a new one while under `size`.

        Each piece of work is matched to a thread when it is queued, so work never
        waits behind a busy thread while the lane has room (a thread counted idle
        has not taken anything yet).
        """
        future: Future[T] = Future()
        with self._lock:
            self._queue.put((future, call))
            if self._idle > 0:
                self._idle -= 1
            elif self._threads < self._size:
                self._threads += 1
                name = f"tuisched-{self._lane.value}-{self._threads}"
                threading.Thread(target=self._work, name=name, daemon=True).start()
            else:
                self._unserved += 1
        return future

    def load(self) -> LaneLoad:
        with self._lock:
            return LaneLoad(self._lane, busy=self._busy, queued=self._queue.qsize())

    def _work(self) -> None:
        # A new thread was promised the work that started it.
        while True:
            future, call = self._queue.get()
            with self._lock:
                if not future.set_running_or_notify_cancel():
                    self._free()
                    continue  # its awaiter gave up before a thread was free
                self._busy += 1
            try:
                result = call()
            except BaseException as error:  # handed to the awaiter, whatever it is
                self._done()
                future.set_exception(error)
            else:
                self._done()  # before the awaiter hears of it: its load is then right
                future.set_result(result)
            del future, call  # a result must not stay alive while the thread waits

    def _done(self) -> None:
        with self._lock:
            self._busy -= 1
            self._free()

    def _free(self) -> None:
        """This thread is free (lock held): it serves waiting work, or is counted idle."""
        if self._unserved > 0:
            self._unserved -= 1
        else:
            self._idle += 1

    async def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run `fn(*args, **kwargs)` in one of the pool's threads and await its result."""
        context = contextvars.copy_context()
        call = functools.partial(context.run, fn, *args, **kwargs)
        return await asyncio.wrap_future(self.submit(call))


_POOLS = {lane: LanePool(lane, size) for lane, size in LANE_THREADS.items()}


async def in_thread(lane: Lane, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run `fn(*args, **kwargs)` in a thread of `lane` and await its result (or exception).

    Cancelling the awaiting task drops work that has not started; work that
    has started runs to its end (a thread cannot be stopped), and its result
    is dropped. Bound such work itself (a socket timeout, a size limit).
    """
    return await _POOLS[lane].run(fn, *args, **kwargs)


def lane_loads() -> list[LaneLoad]:
    """How busy each lane is now."""
    return [pool.load() for pool in _POOLS.values()]
