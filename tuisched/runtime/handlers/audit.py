"""The audit log (SPEC R15): one line per run that ended, for operators and their tools.

Each line has five fields separated by `" | "`::

    job name | launch time | stop time | scheduler result | job status

Times are ISO 8601 with the offset of the scheduler's zone, to the second, and
`-` where a run has none. Fields never contain a newline, a control character
or a `|` (replaced by spaces and `¦`), so a line always splits into five.

The file is appended to, private to the user (0600), and reopened when
logrotate (or anyone) moves it away.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import threading
import unicodedata
from datetime import datetime
from pathlib import Path
from typing import BinaryIO, TextIO
from zoneinfo import ZoneInfo

from tuisched.domain.bus import EventBus, Subscription
from tuisched.domain.events import RunAbandoned, RunEvent, RunFinished, RunNotStarted, SlotMissed
from tuisched.domain.runs import RunRecord, RunState

log = logging.getLogger(__name__)

SEPARATOR = " | "
ABSENT = "-"
"""A field with nothing to say."""
MAX_FIELD = 1000
"""Characters kept of a field (a job's last output line can be huge); the cut ends in `…`."""

_AUDITED = (RunFinished, RunNotStarted, RunAbandoned, SlotMissed)
_NO_LAUNCH = (RunState.NOT_STARTED, RunState.MISSED)
_BLANKED = frozenset({"Cc", "Zl", "Zp"})
"""Unicode categories that would break a line: control characters, line and paragraph separators."""
_READ_BLOCK = 8192


def _clean(text: str) -> str:
    """`text` made safe for one field: no line breaks or control characters, no `|`."""
    if not text.isprintable() or "|" in text:
        blanked = (" " if unicodedata.category(char) in _BLANKED else char for char in text)
        text = "".join(blanked).replace("|", "¦")
    text = text.strip() or ABSENT
    return text if len(text) <= MAX_FIELD else text[: MAX_FIELD - 1] + "…"


def _time(moment: datetime | None, tz: ZoneInfo) -> str:
    """`moment` in `tz`, ISO 8601 to the second, or `-`."""
    return ABSENT if moment is None else moment.astimezone(tz).isoformat(timespec="seconds")


def _status(run: RunRecord, tz: ZoneInfo) -> str:
    """What the job said: its status, else the scheduler's reason; a missed slot names itself."""
    if run.state is RunState.MISSED and run.slot is not None:
        return f"missed slot {_time(run.slot, tz)}"
    return run.status.strip() or run.reason.strip() or ABSENT


def audit_line(run: RunRecord, tz: ZoneInfo) -> str:
    """The audit line of `run`, without a line break.

    A run that never launched (NOT_STARTED, MISSED) has `-` as its launch time
    even if the engine noted one. The result is `run.result.value`, `-` if unset.
    """
    launched = None if run.state in _NO_LAUNCH else run.started_at
    fields = (
        run.job,
        _time(launched, tz),
        _time(run.ended_at, tz),
        ABSENT if run.result is None else run.result.value,
        _status(run, tz),
    )
    return SEPARATOR.join(_clean(field) for field in fields)


def _open_append(path: Path) -> TextIO:
    """`path` opened for appending, line-buffered, created 0600 (an existing file of ours too)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        info = os.fstat(fd)
        if info.st_uid == os.geteuid() and stat.S_IMODE(info.st_mode) != 0o600:
            os.fchmod(fd, 0o600)
        # An fd, not a path: it was created with our mode, which Path.open cannot do.
        return open(fd, "a", buffering=1, encoding="utf-8", errors="replace")  # noqa: PTH123
    except BaseException:
        os.close(fd)
        raise


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
        """Open (or create, 0600) `path` for appending; times are written in `tz`."""
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
