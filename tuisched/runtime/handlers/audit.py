"""The audit log (SPEC R15): one line per run that ended, for operators and their tools.

The line's format is `tuisched.domain.audit.audit_line`. The file is appended
to, private to the user (0600), and reopened when logrotate (or anyone) moves
it away.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from pathlib import Path
from typing import BinaryIO, TextIO
from zoneinfo import ZoneInfo

from tuisched.domain.audit import audit_line
from tuisched.domain.bus import EventBus, Subscription
from tuisched.domain.events import RunAbandoned, RunEvent, RunFinished, RunNotStarted, SlotMissed
from tuisched.domain.runs import RunRecord
from tuisched.runtime.privatefiles import open_private

log = logging.getLogger(__name__)


_AUDITED = (RunFinished, RunNotStarted, RunAbandoned, SlotMissed)
_READ_BLOCK = 8192


def _open_append(path: Path) -> TextIO:
    """`path` opened for appending, line-buffered, private (0600), never through a link."""
    fd = open_private(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    # An fd, not a path: it was created with our mode, which Path.open cannot do.
    return open(fd, "a", buffering=1, encoding="utf-8", errors="replace")  # noqa: PTH123


def _identity(path: Path) -> tuple[int, int] | None:
    """The (device, inode) of `path`, or None if nothing is there."""
    try:
        info = path.stat()
    except FileNotFoundError:
        return None
    return info.st_dev, info.st_ino


class AuditLog:
    """Appends audit lines to one file. Safe from any thread.

    Before each line it checks that the path still names the file it has open;
    if the file was renamed or deleted (log rotation), it opens a new one.
    """

    def __init__(self, path: Path, tz: ZoneInfo) -> None:
        """Open (or create, 0600) `path` for appending; times are written in `tz`.

        Raises:
            StateError: the file cannot be opened.
        """
        self.path = path
        self.tz = tz
        self._lock = threading.Lock()
        self._file: TextIO | None = _open_append(path)
        self._opened = os.fstat(self._file.fileno())
        self._pending: list[str] = []
        """Lines from bus events, written together once per loop turn."""

    def write(self, run: RunRecord) -> None:
        """Append the line of `run`, reopening the file first if it was rotated away.

        Raises:
            ValueError: the log is closed.
            OSError: the file cannot be written.
        """
        line = audit_line(run, self.tz) + "\n"
        with self._lock:
            self._current().write(line)

    def _current(self) -> TextIO:
        if self._file is None:
            raise ValueError(f"audit log {self.path} is closed")
        if _identity(self.path) != (self._opened.st_dev, self._opened.st_ino):
            log.info("audit log %s was moved away: starting a new file", self.path)
            self._file.close()
            self._file = _open_append(self.path)
            self._opened = os.fstat(self._file.fileno())
        return self._file

    def subscribe(self, bus: EventBus) -> list[Subscription]:
        """Write a line for every run that finished, did not start, was abandoned or missed."""
        return [bus.subscribe(kind, self._on_event) for kind in _AUDITED]

    def _on_event(self, event: RunEvent) -> None:
        # A burst of thousands of runs costs one write, not thousands.
        self._pending.append(audit_line(event.run, self.tz) + "\n")
        if len(self._pending) > 1:
            return
        try:
            asyncio.get_running_loop().call_soon(self.flush)
        except RuntimeError:  # no loop (a synchronous bus): write at once
            self.flush()

    def flush(self) -> None:
        """Write the lines of events received so far."""
        with self._lock:
            lines, self._pending = self._pending, []
            if lines and self._file is not None:
                self._current().write("".join(lines))

    def close(self) -> None:
        """Write what is pending and close the file. Idempotent."""
        self.flush()
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


def read_tail(path: Path, lines: int) -> list[str]:
    """The last `lines` lines of `path` (without line breaks), reading from the end.

    Only the blocks that hold those lines are read, so this is cheap on a large
    log. A missing file has no lines; undecodable bytes become U+FFFD.
    """
    if lines <= 0:
        return []
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        return []
    with handle:
        data = _read_back(handle, lines)
    parts = data.split(b"\n")
    if parts and parts[-1] == b"":
        parts.pop()
    return [part.decode("utf-8", errors="replace") for part in parts[-lines:]]


def _read_back(handle: BinaryIO, lines: int) -> bytes:
    """The end of `handle`: from its start, or from somewhere before its last `lines` lines."""
    position = handle.seek(0, os.SEEK_END)
    blocks: list[bytes] = []
    breaks = 0
    # One line break more than wanted: the last one may just end the file.
    while position > 0 and breaks <= lines:
        step = min(_READ_BLOCK, position)
        position -= step
        handle.seek(position)
        block = handle.read(step)
        blocks.append(block)
        breaks += block.count(b"\n")
    return b"".join(reversed(blocks))


def read_from(path: Path, offset: int, *, limit: int = 1024 * 1024) -> tuple[list[str], int]:
    """Whole lines of `path` from byte `offset` on (at most `limit` bytes), and the next offset.

    Blocking: call it off the event loop. A missing file has no lines. A log
    that was rotated (shorter than `offset`) is read from its start.
    """
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        return [], 0
    with handle:
        size = handle.seek(0, os.SEEK_END)
        start = offset if 0 <= offset <= size else 0
        handle.seek(start)
        data = handle.read(limit)
    whole = data.rfind(b"\n") + 1
    lines = data[:whole].decode("utf-8", errors="replace").split("\n")[:-1] if whole else []
    return lines, start + whole


def tail_and_end(path: Path, lines: int) -> tuple[list[str], int]:
    """The last `lines` lines of `path` and its size (where a follow-up read begins); blocking."""
    try:
        end = path.stat().st_size
    except FileNotFoundError:
        return [], 0
    return read_tail(path, lines), end
