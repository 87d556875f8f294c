"""The history's journal: every run write, on disk before the database has it.

While the history takes no writes (a full disk, a file another process holds
locked, a server gone), the writer keeps them in memory and tries them again.
A kill -9 then would lose them, and the next start would take slots that ran
for missed ones and run them again. So each write is first appended to this
file and flushed to the disk, and only then tried in the database; a run's
start waits for its row to be in one of them. At the next start the journal's
writes land first (again, for those that had landed: each run takes its last
state written), before anything looks at slots. The journal is emptied once
every write in it has landed, before the writer runs anything else against
the database (which may write rows the older writes must not undo), or when
it is half full.

A full disk must not refuse the journal: the file is made at its full size
(`JOURNAL_BYTES` allocated on the disk, not a hole) when it is opened, and
an append only overwrites bytes the file holds already (it grows only when
full, which a full disk may refuse). The layout is text:

    {"journal": 1, "generation": 7}
    [7, "i", ...the run's fields in order...]
    [7, "u", ...]
    NUL NUL NUL ...

Emptying the journal writes a new header with the next generation followed by
a NUL: the lines of older generations that follow are never read. Reading
stops at the first NUL, at a line of another generation, and at a torn or
unreadable line (the append a crash cut short).
"""

from __future__ import annotations

import errno
import json
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

from tuisched.domain.runs import Result, RunRecord, RunState, Trigger
from tuisched.runtime.privatefiles import open_private

log = logging.getLogger(__name__)

JOURNAL_BYTES = 8 * 1024 * 1024
"""The journal's size on disk, written when it is opened: about 15,000 held writes."""
READ_LIMIT = 256 * 1024 * 1024
"""A journal bigger than this is not read (it is not one of ours)."""
_FORMAT = 1

Kind = Literal["insert", "update"]
_KINDS: dict[str, Kind] = {"i": "insert", "u": "update"}


@dataclass(frozen=True, slots=True)
class Kept:
    """One write the journal holds: an insert or an update of a run, in its state then."""

    kind: Kind
    run: RunRecord


class Journal:
    """An open journal file: append held writes, empty it once they have landed.

    Used by the history's writer thread only (blocking calls).
    """

    def __init__(self, path: Path, fd: int, *, generation: int, end: int, size: int) -> None:
        self.path = path
        self._fd = fd
        self._generation = generation
        self._end = end
        """Where the next line goes (the NUL after the last one)."""
        self._size = size
        self._empty = True

    @classmethod
    def open(cls, path: Path) -> tuple[Journal, list[Kept]]:
        """Open (or make) the journal at `path`; it and the writes it kept.

        Raises:
            StateError: `path` is a link or not a regular file.
            OSError: it cannot be read, or made at its size (a full disk).
        """
        fd = open_private(path, os.O_RDWR | os.O_CREAT)
        try:
            size = os.fstat(fd).st_size
            kept, generation, end = _read(fd, size, path) if size else ([], 0, 0)
            if size < JOURNAL_BYTES:
                _zeros(fd, size, JOURNAL_BYTES - size)
                size = JOURNAL_BYTES
            journal = cls(path, fd, generation=generation, end=end, size=size)
            if kept:
                journal._empty = False
            else:
                journal.clear()
        except BaseException:
            os.close(fd)
            raise
        return journal, kept

    @property
    def empty(self) -> bool:
        """Whether it holds no write (since it was opened or last emptied)."""
        return self._empty

    @property
    def half_full(self) -> bool:
        """Whether its writes take half of its size or more (time to empty it)."""
        return self._end * 2 >= self._size

    def append(self, writes: Sequence[Kept]) -> None:
        """Add `writes` in order and flush them to the disk; grows the file when full.

        Raises:
            OSError: the disk did not take them (they may be partly there: a torn last
                line is not read back).
        """
        lines = b"".join(self._line(write) for write in writes)
        if not lines:
            return
        needed = self._end + len(lines) + 1
        if needed > self._size:
            grow = max(needed - self._size, JOURNAL_BYTES)
            _zeros(self._fd, self._size, grow)
            self._size += grow
        os.pwrite(self._fd, lines + b"\0", self._end)
        os.fdatasync(self._fd)
        self._end += len(lines)
        self._empty = False

    def clear(self) -> None:
        """Forget every write: a new header of the next generation, flushed to the disk.

        Raises:
            OSError: the disk did not take it.
        """
        self._generation += 1
        header = json.dumps({"journal": _FORMAT, "generation": self._generation})
        data = header.encode() + b"\n"
        os.pwrite(self._fd, data + b"\0", 0)
        os.fdatasync(self._fd)
        self._end = len(data)
        self._empty = True

    def close(self) -> None:
        """Close the file (what it holds stays for the next start). Idempotent."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def _line(self, write: Kept) -> bytes:
        run = write.run
        record = [
            self._generation, write.kind[0], run.run_id, run.job, _time(run.slot),
            run.trigger.value, run.state.value, _time(run.queued_at),
            run.result.value if run.result is not None else None, run.status, run.exit_code,
            _time(run.started_at), _time(run.ended_at), run.pid, run.node, run.reason,
            run.output_tail, run.attempt, run.fence,
        ]  # fmt: skip
        return json.dumps(record, separators=(",", ":")).encode() + b"\n"


def _time(at: datetime | None) -> str | None:
    return at.isoformat() if at is not None else None


def _at(value: object) -> datetime | None:
    if value is None:
        return None
    at = datetime.fromisoformat(_str(value))
    if at.tzinfo is None:
        raise ValueError("a time without its zone")
    return at


def _str(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(value)
    return value


def _int(value: object) -> int | None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
        raise TypeError(value)
    return value


def _run_of(fields: list[object]) -> RunRecord:
    """The run a journal line's fields (after generation and kind) stand for."""
    (run_id, job, slot, trigger, state, queued_at, result, status, exit_code, started_at,
     ended_at, pid, node, reason, output_tail, attempt, fence) = fields  # fmt: skip
    queued, tries = _at(queued_at), _int(attempt)
    if queued is None or tries is None:
        raise TypeError("a run without its queue time or attempt")
    return RunRecord(
        run_id=_str(run_id), job=_str(job), slot=_at(slot), trigger=Trigger(_str(trigger)),
        state=RunState(_str(state)), queued_at=queued,
        result=Result(_str(result)) if result is not None else None, status=_str(status),
        exit_code=_int(exit_code), started_at=_at(started_at), ended_at=_at(ended_at),
        pid=_int(pid), node=_str(node), reason=_str(reason), output_tail=_str(output_tail),
        attempt=tries, fence=_int(fence),
    )  # fmt: skip


def _zeros(fd: int, at: int, count: int) -> None:
    """Give the file `count` zero bytes at `at` in real blocks (not a hole: a full disk
    must not refuse writing them later), flushed to the disk."""
    try:
        os.posix_fallocate(fd, at, count)
    except OSError as error:
        if error.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
            raise
    else:
        os.fsync(fd)
        return
    block = bytes(min(count, 1024 * 1024))
    done = 0
    while done < count:
        done += os.pwrite(fd, block[: count - done], at + done)
    os.fsync(fd)


def _text(fd: int, size: int) -> bytes:
    """The journal's bytes up to its first NUL."""
    data = os.pread(fd, min(size, READ_LIMIT), 0)
    stop = data.find(b"\0")
    return data if stop < 0 else data[:stop]


def _read(fd: int, size: int, path: Path) -> tuple[list[Kept], int, int]:
    """The writes a journal holds, its generation, and where the next line goes (after
    the last line read: a torn one is written over)."""
    if size > READ_LIMIT:
        log.error("history: %s is not a journal tuisched wrote (too big); it is ignored", path)
        return [], 0, 0
    lines = _text(fd, size).split(b"\n")
    try:
        header = json.loads(lines[0])
        generation = int(header["generation"])
        if header.get("journal") != _FORMAT:
            raise ValueError("not a journal of this version")  # noqa: TRY301
    except (ValueError, TypeError, KeyError, AttributeError):
        if lines[0]:
            log.error("history: %s is not a journal tuisched wrote; it is ignored", path)  # noqa: TRY400
        return [], 0, 0
    kept: list[Kept] = []
    end = len(lines[0]) + 1
    for line in lines[1:-1]:  # the last piece has no newline: empty, or a torn append
        write = _write_of(line, generation)
        if write is None:
            break
        kept.append(write)
        end += len(line) + 1
    return kept, generation, end


def _write_of(line: bytes, generation: int) -> Kept | None:
    """The write a journal line holds; None for one of another generation, or unreadable."""
    try:
        record = json.loads(line)
        if not isinstance(record, list) or record[:1] != [generation] or len(record) != 19:
            return None
        return Kept(_KINDS[record[1]], _run_of(record[2:]))
    except (ValueError, TypeError, KeyError):
        return None
