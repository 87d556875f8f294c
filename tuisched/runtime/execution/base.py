"""What every runner shares: the contract, launch errors, the child watcher, and small
helpers for outcomes and stop requests."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Protocol

from tuisched.domain.runs import Outcome, Result, RunState

STATUS_MAX_CHARS = 200
"""Statuses are cut to this length: they go into one audit line."""

_EOF_GRACE = 0.5
"""After the job's own process exits, how long its pipe may stay open (a grandchild)."""
_KILLED_DRAIN = 0.2
"""After killing the group, how long to wait for the bytes still in the pipe."""
_WATCH_STEP_MS = 50
_RECHECK_MS = 5000
"""A wait_for sensor re-checks its glob this often even without events: it closes
the moment between the first check and the watch starting, and covers events
lost in directories created while being watched. It is a safety net, not a poll."""
_NO_PROPS: Mapping[str, object] = MappingProxyType({})


class Runner(Protocol):
    """One run of one job, driven by the engine from the event loop's thread."""

    async def start(self) -> int | None:
        """Launch the run; return the pid of a command, None otherwise.

        Raises:
            LaunchError: The run could not start; the message says why.
        """
        ...

    async def wait(self) -> Outcome:
        """Wait until the run has ended (after `start()`); close the output capture.

        Never raises for the job's own failures: they are in the `Outcome`.
        """
        ...

    def stop(self, result: Result, *, kill: bool = False) -> None:
        """Ask the run to stop; `result` becomes the outcome's result.

        Idempotent (the first result wins; a later `kill=True` still
        escalates) and safe before, during or after `wait()`. Once the run has
        ended by itself it does nothing.
        """
        ...

    @property
    def status(self) -> str:
        """A short live status: the last output line, or a python job's `status`."""
        ...

    @property
    def message_data(self) -> Mapping[str, object]:
        """A python class job's `message_data`, else an empty mapping."""
        ...


def install_child_watcher() -> None:
    """Reap child processes through pidfds on Python 3.11 Linux.

    Python 3.11's default child watcher waits in one thread per child; the
    pidfd watcher polls each child's pidfd from the loop, which reaps faster
    and spawns more runs per second. Call it once, from the main thread, in
    the loop that will run the jobs (or before that loop starts). It does
    nothing on Python 3.12+ (where the watchers are deprecated and the loop
    already uses pidfds), off the main thread, or without working pidfds.
    """
    if sys.version_info >= (3, 12) or not _pidfds_work():
        return
    if threading.current_thread() is not threading.main_thread():
        return
    policy = asyncio.get_event_loop_policy()
    watcher = policy.get_child_watcher()
    if not isinstance(watcher, asyncio.PidfdChildWatcher):
        watcher = asyncio.PidfdChildWatcher()
        policy.set_child_watcher(watcher)
    with contextlib.suppress(RuntimeError):
        watcher.attach_loop(asyncio.get_running_loop())


def _pidfds_work() -> bool:
    """True when this kernel (and sandbox) lets us open a pidfd."""
    if not hasattr(os, "pidfd_open"):
        return False
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError:
        return False
    return True


def _cut(text: str) -> str:
    return text if len(text) <= STATUS_MAX_CHARS else text[: STATUS_MAX_CHARS - 1] + "…"


def _not_started(result: Result) -> Outcome:
    """The outcome of a run stopped before it was launched."""
    return Outcome(
        state=RunState.NOT_STARTED,
        result=result,
        status="stopped before it started",
        reason="stopped before it started",
    )


async def _within(future: asyncio.Future[None], seconds: float) -> bool:
    """Wait up to `seconds` for `future`; True if it is done. Never cancels it."""
    if future.done():  # usually: a pipe's end comes with its process's exit
        return True
    done, _ = await asyncio.wait({future}, timeout=seconds)
    return bool(done)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


@dataclass(slots=True)
class _StopRequest:
    result: Result
    kill: bool


def _describe(exc: BaseException) -> str:
    """`ValueError: message`, robust against a broken `__str__`."""
    try:
        message = str(exc)
    except Exception:
        message = ""
    name = type(exc).__name__
    return f"{name}: {message}" if message else name
