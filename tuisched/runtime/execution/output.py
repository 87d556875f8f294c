"""A run's output: captured in bounded memory, shown only as plain text (SPEC R14).

`OutputCapture` takes the raw bytes of one run (stdout and stderr interleaved)
as they arrive and keeps three things: the first and the last few KiB in memory
(for the console and the run record), the whole stream in a private file up to
a cap, and a feed of finished lines for a live view. Every `write()` costs
O(len(chunk)), whatever was written before, so a job printing 50 MB on one line
costs neither quadratic time nor unbounded memory.

Lines reach the live view through `plain_text` (`tuisched.domain.text`).
"""

from __future__ import annotations

import codecs
import logging
import os
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from tuisched.domain.errors import TuischedError
from tuisched.domain.text import plain_text
from tuisched.runtime.privatefiles import WriteTrouble, open_private, private_folder

__all__ = ["LINE_MAX_CHARS", "OutputCapture", "plain_text"]

_log = logging.getLogger(__name__)
_TROUBLE = WriteTrouble(_log, "run output files")

LINE_MAX_CHARS = 1000
"""Longest line handed to `on_lines`; longer lines arrive in pieces of this size."""

_SEGMENT_BYTES = 4096
"""Small writes are merged into tail segments of about this size (few objects)."""


def _pieces(line: str) -> list[str]:
    """`line` cut into pieces of at most `LINE_MAX_CHARS` (an empty line stays one line)."""
    if len(line) <= LINE_MAX_CHARS:
        return [line]
    return [line[i : i + LINE_MAX_CHARS] for i in range(0, len(line), LINE_MAX_CHARS)]


class _LineSplitter:
    """Turns a byte stream into finished plain-text lines, holding at most one partial line.

    A line ends at `\\n`, `\\r\\n` or a lone `\\r` (progress bars redraw with
    `\\r`; each redraw is a line). A partial line longer than `LINE_MAX_CHARS`
    is released in pieces so it never grows without bound.
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = ""

    @property
    def pending(self) -> str:
        """The partial line not yet released, as plain text."""
        return plain_text(self._pending)

    def feed(self, chunk: bytes, *, final: bool = False) -> list[str]:
        """Consume `chunk`; return the lines it finished. `final` flushes everything."""
        text = self._pending + self._decoder.decode(chunk, final)
        held = ""
        if text.endswith("\r") and not final:
            # It may be the first half of a \r\n split across chunks.
            text, held = text[:-1], "\r"
        *complete, rest = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        lines = [piece for line in complete for piece in _pieces(plain_text(line))]
        while len(rest) > LINE_MAX_CHARS:
            lines.append(plain_text(rest[:LINE_MAX_CHARS]))
            rest = rest[LINE_MAX_CHARS:]
        if final and rest:
            lines.append(plain_text(rest))
            rest = ""
        self._pending = rest + held
        return lines


class _TailBuffer:
    """The last `size` bytes of a stream, in a deque of segments.

    Appending is O(len(chunk)): whole segments fall off the front, and the
    one segment that straddles the limit is only cut when the tail is read.
    """

    def __init__(self, size: int) -> None:
        self._size = size
        self._segments: deque[bytearray] = deque()
        self._held = 0

    def append(self, chunk: bytes) -> None:
        """Add `chunk` at the end, dropping what falls out of the window."""
        if len(chunk) >= self._size:
            self._segments.clear()
            self._segments.append(bytearray(chunk[-self._size :]))
            self._held = self._size
            return
        if self._segments and len(self._segments[-1]) < _SEGMENT_BYTES:
            self._segments[-1] += chunk
        else:
            self._segments.append(bytearray(chunk))
        self._held += len(chunk)
        while self._held - len(self._segments[0]) >= self._size:
            self._held -= len(self._segments.popleft())

    def data(self) -> bytes:
        """The last `size` bytes (fewer if less was written)."""
        joined = b"".join(self._segments)
        return joined[-self._size :] if self._size else b""


class _CappedFile:
    """The raw output file: private (0600), written up to `cap` bytes, then a marker line.

    Created (with its folder) on the first write: a run that prints nothing
    costs no file-system work at all.
    """

    def __init__(self, path: Path | str, cap: int, root: Path | None = None) -> None:
        self._path = path
        self._root = root
        self._file: BinaryIO | None = None
        self._cap = cap
        self._written = 0
        self._full = False

    def _open(self) -> BinaryIO:
        path = Path(self._path)  # made here: most runs print nothing, and a Path costs
        private_folder(path.parent, root=self._root)  # made only when there is output
        fd = open_private(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        # Unbuffered: each chunk from the pipe is one write, so a reader of a live run
        # (an attached console, `tuisched logs -f`) sees it at once.
        return os.fdopen(fd, "wb", buffering=0)

    def write(self, chunk: bytes) -> None:
        """Append `chunk`, or what still fits under the cap followed by the marker.

        When the file cannot be written (a full disk, a link planted in its
        place) the run goes on: its output is then kept in memory only, and
        one warning says so for the whole episode.
        """
        if self._full or not chunk:
            return
        try:
            self._append(chunk)
        except (OSError, TuischedError) as error:
            self._full = True  # nothing more is tried for this run
            _TROUBLE.failed(error)
        else:
            _TROUBLE.succeeded()

    def _append(self, chunk: bytes) -> None:
        if self._file is None:
            self._file = self._open()
        room = self._cap - self._written
        _write_all(self._file, chunk[:room])
        self._written += min(room, len(chunk))
        if len(chunk) > room:
            _write_all(self._file, f"\n[output truncated at {self._cap} bytes]\n".encode())
            self._full = True

    def close(self) -> None:
        """Flush and close the file, if there is one (a failing flush is only reported)."""
        if self._file is not None:
            try:
                self._file.close()
            except OSError as error:
                _TROUBLE.failed(error)


def _write_all(file: BinaryIO, data: bytes) -> None:
    """Write all of `data` to an unbuffered file (a raw write may take only part)."""
    view = memoryview(data)
    while view:
        written = file.write(view)
        view = view[written or len(view) :]


class OutputCapture:
    """Bounded capture of one run's combined stdout+stderr.

    Not thread-safe: call `write()` and `close()` from one thread (the event
    loop's, for the runners in `tuisched.runtime.execution`). The readers (`head`,
    `tail`, `last_line`, `total_bytes`, `truncated`) may be called at any
    time, before or after `close()`.
    """

    def __init__(
        self,
        path: Path | str | None,
        *,
        head_bytes: int = 64 * 1024,
        tail_bytes: int = 64 * 1024,
        file_cap: int = 64 * 1024 * 1024,
        on_lines: Callable[[tuple[str, ...]], None] | None = None,
        root: Path | None = None,
    ) -> None:
        """Start a capture.

        Args:
            path: File for the full raw output, created (or truncated) with mode
                0600; its folder must exist. None keeps no file.
            head_bytes: How many bytes from the start are kept in memory.
            tail_bytes: How many bytes from the end are kept in memory.
            file_cap: Bytes written to `path` at most; then one line
                `[output truncated at N bytes]` is appended and the rest dropped.
            on_lines: Called synchronously from `write()` and `close()` with the
                lines each finished, as plain text, each at most
                `LINE_MAX_CHARS` long. Its exceptions are logged, not raised.
            root: The folder of every run's output (`state_dir/output`): no link is
                followed from it down to the file's folder.

        Raises:
            OSError: `path` cannot be created.
        """
        self._head_bytes = head_bytes
        self._tail_bytes = tail_bytes
        self._head = bytearray()
        self._tail = _TailBuffer(tail_bytes)
        self._total = 0
        self._lines = _LineSplitter()
        self._last_line = ""
        self._on_lines = on_lines
        self._file = _CappedFile(path, file_cap, root) if path is not None else None
        self._closed = False

    @property
    def total_bytes(self) -> int:
        """Bytes written so far, including those no longer kept."""
        return self._total

    @property
    def truncated(self) -> bool:
        """True when the middle of the output was dropped from memory."""
        return self._total > self._head_bytes + self._tail_bytes

    @property
    def closed(self) -> bool:
        """True once `close()` was called; later writes are ignored."""
        return self._closed

    def write(self, chunk: bytes) -> None:
        """Take the next `chunk` of output. Ignored after `close()`."""
        if self._closed or not chunk:
            return
        self._total += len(chunk)
        if len(self._head) < self._head_bytes:
            self._head += chunk[: self._head_bytes - len(self._head)]
        self._tail.append(chunk)
        if self._file is not None:
            self._file.write(chunk)
        self._release(self._lines.feed(chunk))

    def close(self) -> None:
        """End the capture: release the last partial line and close the file. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._release(self._lines.feed(b"", final=True))
        if self._file is not None:
            self._file.close()

    def head(self) -> str:
        """The first `head_bytes` of the output, as plain text."""
        return plain_text(bytes(self._head))

    def tail(self, max_lines: int = 20) -> str:
        """The last `max_lines` lines kept in the tail buffer, as plain text.

        When the buffer starts inside a line (output longer than `tail_bytes`),
        that partial first line is left out, unless it is the only line.
        """
        data = self._tail.data()
        if self._total > len(data) and b"\n" in data:
            data = data[data.index(b"\n") + 1 :]
        lines = plain_text(data).split("\n")
        if lines and not lines[-1]:
            lines.pop()
        return "\n".join(lines[-max_lines:]) if max_lines > 0 else ""

    def last_line(self) -> str:
        """The last non-blank line (the partial one too), as plain text; "" if none."""
        pending = self._lines.pending.strip()
        return pending[:LINE_MAX_CHARS] if pending else self._last_line

    def _release(self, lines: list[str]) -> None:
        if not lines:
            return
        for line in reversed(lines):
            if line.strip():
                self._last_line = line.strip()
                break
        if self._on_lines is not None:
            try:
                self._on_lines(tuple(lines))
            except Exception:
                _log.exception("output line listener failed")


def read_output(
    path: Path, *, offset: int | None, limit: int, growing: bool = False
) -> tuple[list[str], int, int]:
    """Lines of an output file as plain text: from byte `offset`, or its last `limit` bytes.

    Blocking: call it off the event loop. Reads at most `limit` bytes. From the
    end, a line cut by the window is dropped. A last line without its newline
    is left for the next read when the window ends before the file does, or the
    file is still `growing` (its run is in progress); a line longer than
    `limit` comes in pieces.

    Returns:
        (lines, where they begin, where the next read should begin).

    Raises:
        OSError: the file cannot be read (FileNotFoundError when there is none).
    """
    with path.open("rb") as file:
        size = file.seek(0, os.SEEK_END)
        start = max(0, size - limit) if offset is None else min(max(0, offset), size)
        file.seek(start)
        data = file.read(limit)
    if offset is None and start > 0 and b"\n" in data:
        cut = data.index(b"\n") + 1
        data, start = data[cut:], start + cut
    more = start + len(data) < size  # the window ends before the file does
    if (growing or more) and not data.endswith(b"\n") and (b"\n" in data or not more):
        data = data[: data.rfind(b"\n") + 1]
    lines = plain_text(data).split("\n")
    if lines and not lines[-1]:
        lines.pop()
    return lines, start, start + len(data)
