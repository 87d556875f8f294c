"""The audit log (SPEC R15): one line per run that ended, for operators and their tools.

The line's format is `tuisched.domain.audit.audit_line`. The file is appended
to, private to the user (0600), and reopened when logrotate (or anyone) moves
it away. Lines are written off the loop, and lines the disk does not take are
kept in memory and written when it does (see `AppendFile`).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import BinaryIO
from zoneinfo import ZoneInfo

from tuisched.domain.audit import audit_line
from tuisched.domain.bus import EventBus, Subscription
from tuisched.domain.events import RunAbandoned, RunEvent, RunFinished, RunNotStarted, SlotMissed
from tuisched.domain.runs import RunRecord
from tuisched.runtime.handlers.appendfile import AppendFile

log = logging.getLogger(__name__)


_AUDITED = (RunFinished, RunNotStarted, RunAbandoned, SlotMissed)
_READ_BLOCK = 8192


class AuditLog:
    """Appends audit lines to one file (see `AppendFile`): off the loop, in order, and
    nothing lost to a full disk. Safe from any thread."""

    def __init__(self, path: Path, tz: ZoneInfo) -> None:
        """Open (or create, 0600) `path` for appending; times are written in `tz`.

        Raises:
            StateError: the file cannot be opened.
        """
        self.path = path
        self.tz = tz
        self._file = AppendFile(path, f"the audit log {path}")
        self._closed = False

    @property
    def unwritten(self) -> int:
        """Bytes of lines kept in memory because the file did not take them."""
        return self._file.unwritten

    def write(self, run: RunRecord) -> None:
        """Append the line of `run` (at once when no loop runs in this thread).

        Raises:
            ValueError: the log is closed.
        """
        if self._closed:
            raise ValueError(f"audit log {self.path} is closed")
        self._file.add(audit_line(run, self.tz))

    def subscribe(self, bus: EventBus) -> list[Subscription]:
        """Write a line for every run that finished, did not start, was abandoned or missed
        (a turn's lines at once)."""
        return [bus.subscribe_batch(_AUDITED, self._on_events)]

    def _on_events(self, events: list[RunEvent]) -> None:
        if not self._closed:  # a burst of thousands of runs costs one write, not thousands
            tz = self.tz
            self._file.add_many([audit_line(event.run, tz) for event in events])

    def flush(self) -> None:
        """Write the lines of events received so far (blocking: not on the loop)."""
        self._file.flush()

    def close(self) -> None:
        """Write what is pending and close the file (blocking). Idempotent."""
        self._closed = True
        self._file.close()


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
