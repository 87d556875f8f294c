"""A run's output file read a page of whole lines at a time, and searched, by byte offset.

The output viewer shows files of any size (a gigabyte is nothing unusual for a
backup's log): it keeps a window of lines around what is on screen and asks
for the lines after or before a byte offset, or for the last lines; a search
scans a bounded number of bytes per step. Nothing here reads more than a few
MiB at once, whatever the file's size, and everything here blocks: call it
off the event loop (`in_thread(Lane.FILES, ...)`).

A line ends at `\\n` (a `\\r` before it is dropped). A lone `\\r` (a progress
bar redrawing) does not end a line: it is shown as `^M`, as `less` does, so
each line keeps one byte offset. Lines are shown as plain text
(`tuisched.domain.text.plain_text`); a line longer than `LINE_BYTES` is shown
cut there, with a note saying how many bytes were left out.
"""

from __future__ import annotations

import itertools
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from tuisched.domain.text import plain_text

LINE_BYTES = 64 * 1024
"""The most of one line a page shows (the rest is named in a note)."""
PAGE_BYTES = 1024 * 1024
"""The most a page reads, besides finding the ends of one very long line."""
SEARCH_BYTES = 128 * 1024 * 1024
"""The most one search step scans; the next step goes on where it stopped."""
_CHUNK = 4 * 1024 * 1024
"""What a search or a scan for a line's end reads at once."""


@dataclass(frozen=True, slots=True)
class FilePage:
    """Lines of a file as shown, where each begins, and where the next one begins."""

    lines: list[str]
    offsets: list[int]
    end: int
    size: int


@dataclass(frozen=True, slots=True)
class FileMatch:
    """One search step's answer (see `OutputMatch`, which carries it across the seam)."""

    found: bool
    offset: int
    end: int
    column: int
    length: int
    scanned_to: int
    size: int
    done: bool


def shown(raw: bytes, *, full_length: int | None = None) -> str:
    """One line's bytes (without its `\\n`) as shown: plain text, `\\r` as `^M`, a long
    line cut at `LINE_BYTES` with a note of the bytes left out (`full_length`: the
    whole line's length, when `raw` holds only its start)."""
    length = len(raw) if full_length is None else full_length
    if len(raw) == length and raw.endswith(b"\r"):  # a \r\n line ending
        raw, length = raw[:-1], length - 1
    text = plain_text(raw[:LINE_BYTES]).replace("\n", "^M")
    if length > LINE_BYTES:
        text += f" [... {length - LINE_BYTES:,} more bytes in this line: o opens the file]"
    return text


def page_after(path: Path, offset: int, lines: int, *, growing: bool) -> FilePage:
    """Up to `lines` whole lines beginning at byte `offset` (a line's start).

    With `growing` (the run still writes), a last line without its `\\n` is
    left for a later read.

    Raises:
        OSError: the file cannot be read (FileNotFoundError when there is none).
    """
    with path.open("rb") as file:
        size = file.seek(0, os.SEEK_END)
        start = min(max(0, offset), size)
        file.seek(start)
        data = file.read(PAGE_BYTES)
        found: list[str] = []
        offsets: list[int] = []
        pos = 0
        while len(found) < lines and pos < len(data):
            newline = data.find(b"\n", pos)
            if newline >= 0:
                found.append(shown(data[pos:newline]))
                offsets.append(start + pos)
                pos = newline + 1
            elif start + len(data) >= size:  # the file's last line has no \n
                if not growing:  # else it is still being written: left for later
                    found.append(shown(data[pos:]))
                    offsets.append(start + pos)
                    pos = len(data)
                break
            elif pos == 0:  # one line longer than a page: find where it ends
                line_end = _next_newline(file, start + len(data), size)
                found.append(shown(data[:LINE_BYTES], full_length=line_end - start))
                offsets.append(start)
                pos = min(line_end + 1, size) - start
                break
            else:
                break  # the next page begins with this line
        return FilePage(found, offsets, start + pos, size)


def page_before(path: Path, end: int | None, lines: int, *, growing: bool = False) -> FilePage:
    """Up to `lines` whole lines ending at byte `end` (a line's start), or the last lines
    of the file (`end` None; with `growing`, a last line without its `\\n` is left out).

    Raises:
        OSError: the file cannot be read (FileNotFoundError when there is none).
    """
    with path.open("rb") as file:
        size = file.seek(0, os.SEEK_END)
        if end is None:
            stop = _whole_lines_end(file, size) if growing else size
        else:
            stop = min(max(0, end), size)
        low = max(0, stop - PAGE_BYTES)
        file.seek(low)
        data = file.read(stop - low)
        if not data:
            return FilePage([], [], stop, size)
        starts = _line_starts(data, low)
        if not starts:  # one line longer than a page ends here: find where it begins
            begin = _line_start(file, low)
            length = stop - begin - (1 if data.endswith(b"\n") else 0)
            file.seek(begin)
            head = file.read(min(length, LINE_BYTES))
            return FilePage([shown(head, full_length=length)], [begin], stop, size)
        starts = starts[-lines:]
        bounds = [*starts, stop]
        found = [
            shown(data[a - low : b - low].removesuffix(b"\n"))
            for a, b in itertools.pairwise(bounds)
        ]
        return FilePage(found, starts, stop, size)


def _whole_lines_end(file: BinaryIO, size: int) -> int:
    """Where the file's whole lines end: after its last `\\n`."""
    if size == 0:
        return 0
    file.seek(size - 1)
    if file.read(1) == b"\n":
        return size
    return _line_start(file, size)


def _line_starts(data: bytes, low: int) -> list[int]:
    """The offsets of the whole lines in `data` (read from byte `low`): a first line cut
    by the window is left out, unless the window begins at the file's start."""
    starts = [low] if low == 0 and data else []
    pos = data.find(b"\n")
    while pos >= 0:
        if pos + 1 < len(data):
            starts.append(low + pos + 1)
        pos = data.find(b"\n", pos + 1)
    return starts


def _next_newline(file: BinaryIO, start: int, size: int) -> int:
    """Where the first `\\n` at or after `start` is (`size` when none is)."""
    pos = start
    while pos < size:
        file.seek(pos)
        data = file.read(_CHUNK)
        newline = data.find(b"\n")
        if newline >= 0:
            return pos + newline
        pos += len(data)
    return size


def _line_start(file: BinaryIO, before: int) -> int:
    """Where the line that holds byte `before - 1` begins."""
    pos = before
    while pos > 0:
        low = max(0, pos - _CHUNK)
        file.seek(low)
        newline = file.read(pos - low).rfind(b"\n")
        if newline >= 0:
            return low + newline + 1
        pos = low
    return 0


# --- search ------------------------------------------------------------------------------


def find_text(
    path: Path, text: str, offset: int, *, backward: bool = False, budget: int = SEARCH_BYTES
) -> FileMatch:
    """One step of a search for `text` in the lines as shown, scanning at most `budget` bytes.

    Forward, lines beginning at or after byte `offset` are searched; backward,
    lines beginning before it, nearest first. The match is case-insensitive
    when `text` has no capital letter (as `less -i`). Bytes are scanned as
    they are; a candidate counts only when the line as shown holds `text`
    (not when it was inside an escape sequence).

    Raises:
        OSError: the file cannot be read (FileNotFoundError when there is none).
    """
    needle = _Needle(text)
    with path.open("rb") as file:
        size = file.seek(0, os.SEEK_END)
        offset = min(max(0, offset), size)
        scan = _scan_backward if backward else _scan_forward
        return scan(file, needle, offset, size, budget)


class _Needle:
    """What a search looks for, in the bytes and in the lines as shown."""

    def __init__(self, text: str) -> None:
        self.fold = text == text.lower()
        self.text = text.lower() if self.fold else text
        self.raw = self.text.encode()

    def in_bytes(self, data: bytes, *, last: bool = False) -> int:
        """Where the needle is in `data` (the last one with `last`), or -1."""
        hay = data.lower() if self.fold else data
        return hay.rfind(self.raw) if last else hay.find(self.raw)

    def in_line(self, line: str) -> int:
        """Where the needle is in a line as shown, or -1."""
        return (line.lower() if self.fold else line).find(self.text)


def _scan_forward(
    file: BinaryIO, needle: _Needle, origin: int, size: int, budget: int
) -> FileMatch:
    pos = origin
    while pos < size:
        file.seek(pos)
        data = file.read(_CHUNK)
        hit = needle.in_bytes(data)
        if hit >= 0:
            match = _match_at(file, pos + hit, needle, size)
            if match is not None:
                return match
            pos = _next_newline(file, pos + hit, size) + 1  # shown, the line does not hold it
        elif pos + len(data) >= size:
            pos = size
        else:  # the next chunk overlaps this one: a match across the seam is found
            pos += max(1, len(data) - len(needle.raw) + 1)
        if pos - origin >= budget:
            break
    return FileMatch(False, 0, 0, 0, 0, min(pos, size), size, done=pos >= size)


def _scan_backward(
    file: BinaryIO, needle: _Needle, origin: int, size: int, budget: int
) -> FileMatch:
    pos = origin
    while pos > 0:
        low = max(0, pos - _CHUNK)
        file.seek(low)
        hit = needle.in_bytes(file.read(pos - low), last=True)
        if hit >= 0:
            match = _match_at(file, low + hit, needle, size)
            if match is not None:
                return match
            # the lines before this one; before the hit at least (a needle that begins
            # with a newline is found at the end of a line: that line's start is after it)
            pos = min(_line_start(file, low + hit + 1), low + hit)
        elif low == 0:
            pos = 0
        else:  # the next chunk overlaps this one: a match across the seam is found
            pos = min(pos - 1, low + len(needle.raw) - 1)
        if origin - pos >= budget:
            break
    return FileMatch(False, 0, 0, 0, 0, max(pos, 0), size, done=pos <= 0)


def _match_at(file: BinaryIO, at: int, needle: _Needle, size: int) -> FileMatch | None:
    """The match of the line holding byte `at`, if the line as shown holds the needle."""
    begin = _line_start(file, at + 1)
    newline = _next_newline(file, at, size)
    file.seek(begin)
    line = shown(file.read(min(newline - begin, LINE_BYTES)), full_length=newline - begin)
    column = needle.in_line(line)
    if column < 0:
        return None
    end = min(newline + 1, size)
    return FileMatch(True, begin, end, column, len(needle.text), end, size, done=False)


# --- line numbers --------------------------------------------------------------------------

LINE_INDEX_STEP = 4 * 1024 * 1024
"""The line index keeps how many lines begin before each multiple of this many bytes."""
COUNT_BYTES = 256 * 1024 * 1024
"""The most one `line_number` call reads to extend an index; the next call goes on."""
_INDEXES_KEPT = 16
"""How many files' line indexes are kept (the newest used)."""


class _LineIndex:
    """How many `\\n` come before each multiple of `LINE_INDEX_STEP` bytes of one file,
    as far as anyone asked: a file that only grows keeps its index."""

    def __init__(self, identity: tuple[int, int]) -> None:
        self.identity = identity
        self.counts = [0]
        self.lock = threading.Lock()

    def fits(self, identity: tuple[int, int], size: int) -> bool:
        """Whether the index is of this file as it is (the same inode, not shrunk)."""
        return identity == self.identity and (len(self.counts) - 1) * LINE_INDEX_STEP <= size


_INDEXES: dict[Path, _LineIndex] = {}
_INDEXES_LOCK = threading.Lock()


def _index_of(path: Path, identity: tuple[int, int], size: int) -> _LineIndex:
    """The file's index: a new one for a new file (another inode, or one that shrank)."""
    with _INDEXES_LOCK:
        index = _INDEXES.pop(path, None)
        if index is None or not index.fits(identity, size):
            index = _LineIndex(identity)
        _INDEXES[path] = index  # the newest used last
        while len(_INDEXES) > _INDEXES_KEPT:
            del _INDEXES[next(iter(_INDEXES))]
        return index


def line_number(path: Path, offset: int, *, budget: int = COUNT_BYTES) -> int | None:
    """The number (from 1) of the line beginning at byte `offset`; None when counting
    there needs more than `budget` bytes more of reading (ask again: it goes on).

    Raises:
        OSError: the file cannot be read (FileNotFoundError when there is none).
    """
    with path.open("rb") as file:
        info = os.fstat(file.fileno())
        offset = min(max(0, offset), info.st_size)
        index = _index_of(path, (info.st_dev, info.st_ino), info.st_size)
        with index.lock:
            wanted, spent = offset // LINE_INDEX_STEP, 0
            while len(index.counts) <= wanted:
                if spent >= budget:
                    return None
                file.seek((len(index.counts) - 1) * LINE_INDEX_STEP)
                data = file.read(LINE_INDEX_STEP)
                index.counts.append(index.counts[-1] + data.count(b"\n"))
                spent += len(data)
            base = wanted * LINE_INDEX_STEP
            file.seek(base)
            return index.counts[wanted] + file.read(offset - base).count(b"\n") + 1
