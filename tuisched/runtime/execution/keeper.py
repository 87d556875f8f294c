"""The scheduler's side of the run keeper (`keeper_process`): start it, tell it, stop it.

Every run that starts a process group is held by the keeper until it ends, so
a scheduler that dies (`kill -9`), or that falls silent past its cluster fence
(SIGSTOP, a partition), does not leave its runs going beside their recovery on
another node. Telling costs one non-blocking write of a few bytes per start
and per end, on the loop; the keeper reads at once, and if its pipe is ever
full the lines wait here and go with the next write.

Linux only (it reads `/proc`); elsewhere `Keeper` does nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from tuisched.domain.errors import TuischedError
from tuisched.runtime.execution.descendants import helper_ended, helper_started
from tuisched.runtime.privatefiles import open_private
from tuisched.runtime.threads import Lane, in_thread

log = logging.getLogger(__name__)

_PROGRAM = Path(__file__).with_name("keeper_process.py")
_BACKLOG = 1 << 20
"""Bytes kept for a keeper that does not read; past that, lines are dropped (and said)."""


def _let_go(spawning: asyncio.Future[subprocess.Popen[bytes]]) -> None:
    """A keeper spawned for a start that was given up meanwhile: its pipe closes, so that
    it exits at once with nothing held, and it is waited for (not left to the collector,
    while it waits on a pipe nobody closes)."""
    if spawning.cancelled() or spawning.exception() is not None:
        return
    process = spawning.result()
    with contextlib.suppress(OSError):
        if process.stdin is not None:
            process.stdin.close()
    waiting = asyncio.ensure_future(in_thread(Lane.SPAWN, process.wait))
    _LETTING_GO.add(waiting)
    waiting.add_done_callback(_LETTING_GO.discard)


_LETTING_GO: set[asyncio.Future[int]] = set()
"""The waits for keepers let go (kept until done: the loop holds only weak references)."""


class Keeper:
    """A run keeper for this scheduler: `hold` and `free` runs, `fence` its claims."""

    def __init__(
        self, log_path: Path | None, *, grace: float, record: Path | None = None,
        journals: Path | None = None,
    ) -> None:  # fmt: skip
        """`log_path`: where the keeper says what it did (None: nowhere). `grace`: seconds
        between SIGTERM and SIGKILL when the scheduler dies. `record`: the scheduler's
        record of the processes that left their runs (`Descendants`), ended too then.
        `journals`: the fork servers' journals, whose python runs are ended then too
        (and at a fence), held or not yet."""
        self._log_path = log_path
        self._grace = grace
        self._record = record
        self._journals = journals
        self._process: subprocess.Popen[bytes] | None = None
        self._fd: int | None = None
        self._backlog = bytearray()
        self._lost = False
        self._sending = threading.Lock()
        """`hold` comes from the spawning thread too (as soon as a command's process exists)."""

    @property
    def running(self) -> bool:
        """Whether a keeper process listens."""
        return self._fd is not None

    async def start(self) -> None:
        """Start the keeper process (off the loop). Where it cannot start, runs go on
        without it, and one warning says so."""
        if not sys.platform.startswith("linux"):
            return
        spawning = asyncio.ensure_future(in_thread(Lane.SPAWN, self._spawn))
        try:
            self._process = await asyncio.shield(spawning)
        except asyncio.CancelledError:  # the start was given up: a keeper made meanwhile goes
            spawning.add_done_callback(_let_go)
            raise
        except OSError as error:
            log.warning("the run keeper could not start (%s): runs of a killed scheduler "
                        "are only stopped at its next start", error)  # fmt: skip
            return
        helper_started(self._process.pid)  # not an orphan of a run
        assert self._process.stdin is not None  # noqa: S101  (spawned with stdin=PIPE)
        self._fd = self._process.stdin.fileno()
        os.set_blocking(self._fd, False)

    def _spawn(self) -> subprocess.Popen[bytes]:
        log_fd = self._open_log()
        try:
            return subprocess.Popen(  # noqa: S603  (our own program)
                [sys.executable, "-I", str(_PROGRAM), repr(self._grace),
                 "" if self._record is None else str(self._record),
                 "" if self._journals is None else str(self._journals)],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL if log_fd is None else log_fd,
                start_new_session=True,  # not stopped with the scheduler's terminal group
            )  # fmt: skip
        finally:
            if log_fd is not None:
                os.close(log_fd)

    def _open_log(self) -> int | None:
        """The keeper's log, opened for appending (None: none, or it cannot be written)."""
        if self._log_path is None:
            return None
        try:
            return open_private(self._log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        except (OSError, TuischedError) as error:
            log.warning("the run keeper says what it does nowhere: %s", error)
            return None

    def hold(self, pid: int) -> None:
        """`pid` leads a run's process group: end it if this scheduler dies."""
        self._send(b"hold %d\n" % pid)

    def free(self, pid: int) -> None:
        """The run of `pid` ended."""
        self._send(b"free %d\n" % pid)

    def fence(self, seconds: float | None, grace: float = 0.0) -> None:
        """This node's claims hold `seconds` more (None: no limit): past that, without a
        newer word, the keeper ends every run held (SIGKILL `grace` after SIGTERM)."""
        if seconds is None:
            self._send(b"fence none\n")
        else:
            self._send(b"fence %r %r\n" % (time.monotonic() + seconds, grace))

    def _send(self, line: bytes) -> None:
        with self._sending:
            self._send_now(line)

    def _send_now(self, line: bytes) -> None:
        if self._fd is None:
            return
        if len(self._backlog) < _BACKLOG:
            self._backlog += line
        elif not self._lost:
            self._lost = True
            log.warning("the run keeper does not read: runs started now are not held")
        try:
            written = os.write(self._fd, self._backlog)
        except BlockingIOError:
            return
        except OSError as error:  # it died: runs go on without it
            log.warning("the run keeper is gone (%s): runs of a killed scheduler are only "
                        "stopped at its next start", error)  # fmt: skip
            self._close_pipe()
            return
        del self._backlog[:written]

    def _close_pipe(self) -> None:
        if self._process is not None and self._process.stdin is not None:
            with contextlib.suppress(OSError):
                self._process.stdin.close()
        self._fd = None
        self._backlog.clear()

    async def stop(self) -> None:
        """Let the keeper go: every run has ended, so it ends nothing and exits."""
        process = self._process
        if process is None:
            return
        with self._sending:  # not while a spawning thread writes
            self._send_now(b"fence none\n")
            self._close_pipe()
        self._process = None
        # A plain wait (waitpid), bounded here: Popen.wait's own timeout sleeps in steps,
        # which a preloaded libfaketime can make fail.
        waiting = asyncio.ensure_future(in_thread(Lane.SPAWN, process.wait))
        done, _ = await asyncio.wait({waiting}, timeout=self._grace + 5)
        if not done:
            process.kill()
            await waiting
        helper_ended(process.pid)
