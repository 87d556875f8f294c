"""An append-only private file that never blocks the loop and never loses a line to a
full disk: the audit log and the actions log are written through it.

Lines are added on any thread (`add`); they are written in the one thread of
the log lane (`Lane.AUDIT`, so they keep their order), never on the event
loop. Lines the file does not take (a full disk, a file size limit, an I/O
error) are kept in memory, with one warning per episode, and written as soon
as the file takes them again: with the next line, every `RETRY_SECONDS`, and
at close. The file is opened private (0600) and never through a link, and is
reopened when logrotate (or anyone) moves it away; a new file that cannot be
opened then (a full disk, a link planted in its place) is one more write the
file does not take, its lines kept in memory like the others.

`logging.handlers.WatchedFileHandler` reopens a moved file the same way (a
`stat` per line, comparing device and inode), but it is not used here: it
opens through links and with the umask's mode, writes through a buffered text
stream (after a short write nobody knows which bytes reached the disk), and
hands a failed write to `handleError`, which prints a traceback and drops the
line. Its reopening is the ten lines of `_current`; the rest is what this
class is for.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from pathlib import Path

from tuisched.domain.errors import StateError
from tuisched.domain.text import counted
from tuisched.runtime.clock import Clock, SystemClock, Timer
from tuisched.runtime.privatefiles import WriteTrouble, open_private
from tuisched.runtime.threads import Lane, in_thread

log = logging.getLogger(__name__)

MAX_UNWRITTEN = 64 * 1024 * 1024
"""Bytes kept in memory while the file takes nothing; beyond it the oldest lines go."""
RETRY_SECONDS = 5.0
"""How often lines kept in memory are tried again when no new line comes."""


def _identity(path: Path) -> tuple[int, int] | None:
    """The (device, inode) of `path`, or None if nothing is there."""
    try:
        info = path.stat()
    except FileNotFoundError:
        return None
    return info.st_dev, info.st_ino


class AppendFile:
    """Appends lines to one file, off the loop, keeping what the disk does not take."""

    def __init__(self, path: Path, what: str, *, clock: Clock | None = None) -> None:
        """Open (or create, 0600) `path` for appending; `what` names it in warnings;
        `clock` times the tries again after a failed write (the system's by default).

        Raises:
            StateError: the file cannot be opened (a link, a folder...).
        """
        self.path = path
        self._what = what
        self._lock = threading.Lock()
        """Guards `_pending` only: `add` on the loop never waits for a write to the disk."""
        self._file_lock = threading.Lock()
        """Guards the file and `_unwritten` (held while writing)."""
        self._fd: int | None = open_private(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        self._opened = os.fstat(self._fd)
        self._pending: list[str] = []
        """Lines added and not yet handed to the writer."""
        self._unwritten = bytearray()
        """Bytes the file did not take yet, oldest first."""
        self._dropped = 0
        self._trouble = WriteTrouble(log, what)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._clock: Clock = clock or SystemClock()
        self._retry: Timer | None = None

    @property
    def unwritten(self) -> int:
        """Bytes kept in memory because the file did not take them."""
        return len(self._unwritten)

    def add(self, line: str) -> None:
        """Append `line` (a newline is added) soon, off the loop; never raises for the disk.

        On the loop, lines added in one turn are written together in the log
        lane; with no loop running, the line is written at once.
        """
        self.add_many([line])

    def add_many(self, lines: list[str]) -> None:
        """`add` each of `lines`, in order, at the cost of one."""
        if not lines:
            return
        with self._lock:
            first = not self._pending
            self._pending.append("\n".join(lines) + "\n")
        if not first:
            return
        try:
            self._loop = asyncio.get_running_loop()
        except RuntimeError:
            self.flush()
            return
        self._loop.call_soon(self._flush_soon)

    def _flush_soon(self) -> None:
        task = asyncio.ensure_future(in_thread(Lane.AUDIT, self.flush))
        task.add_done_callback(self._flushed)

    def _flushed(self, task: asyncio.Future[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.error("writing %s failed", self._what, exc_info=task.exception())
        if self._unwritten and self._retry is None and self._loop is not None:
            self._retry = self._clock.call_later(RETRY_SECONDS, self._retry_now)

    def _retry_now(self) -> None:
        self._retry = None
        self._flush_soon()

    def flush(self) -> None:
        """Write the lines added so far and any kept in memory (blocking: not on the loop)."""
        with self._file_lock:
            with self._lock:
                lines, self._pending = self._pending, []
            if self._fd is not None:
                self._append("".join(lines).encode())

    def close(self) -> None:
        """Write what is pending and close the file (blocking). Idempotent.

        What the file still does not take is lost now, and said so in one line.
        """
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        self.flush()
        with self._file_lock:
            if self._unwritten:
                log.error("%s did not take %s of lines before closing; they are lost",
                          self._what, counted(len(self._unwritten), "byte"))  # fmt: skip
                self._unwritten.clear()
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def _append(self, data: bytes) -> None:
        """Write what is kept, then `data`; keep what the file does not take (file lock held)."""
        self._unwritten += data
        if len(self._unwritten) > MAX_UNWRITTEN:
            self._drop_oldest()
        if not self._unwritten:
            return
        try:
            fd = self._current()
            while self._unwritten:
                written = os.write(fd, self._unwritten)
                del self._unwritten[:written]
        except (OSError, StateError) as error:  # StateError: the new file after a move
            self._trouble.failed(error)
            return
        self._trouble.succeeded()

    def _drop_oldest(self) -> None:
        cut = self._unwritten.find(b"\n", len(self._unwritten) - MAX_UNWRITTEN) + 1
        if self._dropped == 0:
            log.error("%s takes nothing; the oldest lines kept in memory are dropped", self._what)
        self._dropped += self._unwritten.count(b"\n", 0, cut)
        del self._unwritten[:cut]

    def _current(self) -> int:
        assert self._fd is not None  # noqa: S101  (checked by the callers)
        if _identity(self.path) != (self._opened.st_dev, self._opened.st_ino):
            log.info("%s was moved away: starting a new file", self._what)
            fd = open_private(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            os.close(self._fd)
            self._fd = fd
            self._opened = os.fstat(fd)
        return self._fd
