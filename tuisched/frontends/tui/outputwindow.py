"""The lines of a run's output the viewer holds: a window on a file of any size.

The output viewer never holds a whole output file: `OutputWindow` keeps up
to `WINDOW_LINES` consecutive lines (each with the byte offset where it
begins) around what is on screen, grows at either end as pages arrive
through the control seam, and lets go of the far end as it grows. No
widgets here, and no I/O: the screen fetches pages, this decides where
they go.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

from tuisched.domain.views import OutputPage, OutputSource

WINDOW_LINES = 6000
"""The most lines the window holds."""


@dataclass(frozen=True, slots=True)
class Added:
    """What a page did to the window: lines added before the old first line, and lines
    let go at the front (so the screen keeps its place)."""

    before: int = 0
    dropped: int = 0


class OutputWindow:
    """Consecutive lines of one output file (or the tail a history row kept)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.offsets: list[int] = []
        self.end = 0
        """Where the line after the last one held begins (bytes)."""
        self.size = 0
        """The file's size at the last read."""
        self.first_number: int | None = None
        """The line number of the first line held, when known (the window reached it
        from the file's start)."""
        self.source = OutputSource.FILE
        self.generation = 0
        """Counts the jumps (`replace`): a page asked for before one no longer fits."""

    @property
    def at_start(self) -> bool:
        """Whether the first line held is the file's first."""
        return self.source is not OutputSource.FILE or not self.offsets or self.offsets[0] == 0

    @property
    def at_end(self) -> bool:
        """Whether the last line held is the last the file had at the last read."""
        return self.source is not OutputSource.FILE or self.end >= self.size

    def replace(self, page: OutputPage) -> None:
        """Hold `page` alone (a jump: the top, the bottom, a match far away)."""
        self.generation += 1
        self.source = page.source
        self.lines, self.offsets = list(page.lines), list(page.offsets)
        self.end = page.end
        self.size = page.size
        self.first_number = 1 if self.at_start else None

    def extend(self, page: OutputPage) -> Added:
        """Add `page` (read after `end`, or before the first line) where it belongs; a
        page that does not join the window replaces it."""
        self.size = max(self.size, page.size)
        if not page.lines:
            return Added()
        if not self.lines or page.source is not OutputSource.FILE:
            self.replace(page)
            return Added()
        if self.offsets and page.end == self.offsets[0] and page.offsets[-1] < self.offsets[0]:
            return self._prepend(page)
        if page.end == self.end and page.offsets[-1] < self.end:
            return Added()  # nothing new (a tail read while following)
        if page.offsets[0] <= self.end < page.end and self.end in page.offsets:
            at = page.offsets.index(self.end)  # a tail read while following overlaps
            return self._append(page.lines[at:], page.offsets[at:], page.end)
        self.replace(page)
        return Added()

    def _append(self, lines: Sequence[str], offsets: Sequence[int], end: int) -> Added:
        self.lines.extend(lines)
        self.offsets.extend(offsets)
        self.end = end
        dropped = max(0, len(self.lines) - WINDOW_LINES)
        if dropped:
            del self.lines[:dropped], self.offsets[:dropped]
            if self.first_number is not None:
                self.first_number += dropped
        return Added(dropped=dropped)

    def _prepend(self, page: OutputPage) -> Added:
        self.lines[:0] = page.lines
        self.offsets[:0] = page.offsets
        if self.first_number is not None:
            self.first_number -= len(page.lines)
        elif page.offsets[0] == 0:
            self.first_number = 1
        extra = len(self.lines) - WINDOW_LINES
        if extra > 0:
            self.end = self.offsets[-extra]
            del self.lines[-extra:], self.offsets[-extra:]
        return Added(before=len(page.lines))

    def index_of(self, offset: int) -> int | None:
        """The index of the line that begins at byte `offset`, if held."""
        at = bisect.bisect_left(self.offsets, offset)
        if at < len(self.offsets) and self.offsets[at] == offset:
            return at
        return None

    def number(self, index: int) -> int | None:
        """The line number (from 1) of the line at `index`, when known."""
        return None if self.first_number is None else self.first_number + index
