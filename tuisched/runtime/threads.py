"""The one way work leaves the event loop for a thread: `in_thread(lane, fn, *args)`.

Nothing may block the loop the scheduler and the console share: reading or
writing a file, parsing a big configuration, talking to a mail server or
checking a sensor's files happens in a thread, through this function. Every
call names its lane (what kind of neighbour it is), so that each kind of
neighbour can get a bounded pool of its own and a slow one cannot hold the
threads the others need. Python job threads and the history's writer thread
are the runtime's own and do not go through here.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


class Lane(enum.StrEnum):
    """What a piece of blocking work is, so each kind can be bounded on its own."""

    CONFIG = "config"
    """Reading, parsing, checking and writing the configuration file."""
    FILES = "files"
    """Reading run output, the audit log and the history for a front end."""
    MAIL = "mail"
    """Rendering and delivering alert mails."""
    SENSORS = "sensors"
    """Looking for the files `wait_for` jobs wait for."""


async def in_thread(lane: Lane, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run `fn(*args, **kwargs)` in a thread of `lane` and await its result (or exception).

    Cancelling the awaiting task does not stop the thread: `fn` runs to its
    end, and its result is dropped.
    """
    del lane  # every lane shares asyncio's default pool for now
    return await asyncio.to_thread(fn, *args, **kwargs)
