"""The output viewer's text: the lines of an `OutputWindow`, wrapped or scrolled sideways.

It draws only the rows in view (the Line API), so a window of thousands of
lines, or one line of 64 KiB, costs a screenful a frame. Every line is job
output already made plain by `plain_text` and is drawn as a literal segment:
never markup, never an escape sequence. A line is never cut at the screen's
edge: with wrap on it continues on the next rows, with wrap off the view
scrolls sideways.
"""

from __future__ import annotations

from typing import ClassVar

from rich.cells import cell_len
from rich.segment import Segment
from textual.strip import Strip
from textual.widget import Widget

from tuisched.frontends.tui.outputwindow import OutputWindow

Mark = tuple[int, int, int]
"""A search match: (the byte offset of its line, its column, its length)."""


class OutputView(Widget, can_focus=True):
    """The rows of an output window from (`top`, `top_row`), `x` cells to the side."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"output-view--match"}
    """The style of a search match."""

    DEFAULT_CSS = """
    OutputView {
        height: 1fr;
    }
    OutputView > .output-view--match {
        background: $warning;
        color: $text;
        text-style: bold;
    }
    """

    def __init__(self, window: OutputWindow, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.window = window
        self.top = 0
        """The index of the line on the first row."""
        self.top_row = 0
        """With wrap on, which of the top line's rows is the first row."""
        self.x = 0
        """With wrap off, how many cells the view is scrolled to the right."""
        self.wrap = False
        self.mark: Mark | None = None
        self._pieces: dict[int, list[Strip]] = {}
        """Each line's rows at the current width (wrap on), for the lines drawn lately."""
        self._rows: dict[int, int] = {}
        """How many rows each line measured takes at the current width (wrap on)."""

    # --- what is shown ---------------------------------------------------------------

    def changed(self) -> None:
        """The lines, the mark, the wrap or the width changed: draw again."""
        self._pieces.clear()
        self._rows.clear()
        self.refresh()

    def on_resize(self) -> None:
        self.changed()

    def rows_of(self, index: int) -> int:
        """How many rows line `index` takes (1 with wrap off)."""
        if not self.wrap:
            return 1
        rows = self._rows.get(index)
        if rows is None:  # measured once a width: a frame asks for each line many times
            width = max(1, self.size.width)
            rows = self._rows[index] = max(1, -(-cell_len(self.window.lines[index]) // width))
        return rows

    def rows_below(self) -> int:
        """How many rows of the window are below the last row in view."""
        lines, rows = self.window.lines, -self.top_row
        index = self.top
        while index < len(lines) and rows < self.size.height + 200:
            rows += self.rows_of(index)
            index += 1
        return max(0, rows - self.size.height) + (len(lines) - index)

    def visible_lines(self) -> range:
        """The indexes of the lines in view (whole or in part)."""
        rows, index = -self.top_row, self.top
        while index < len(self.window.lines) and rows < self.size.height:
            rows += self.rows_of(index)
            index += 1
        return range(self.top, index)

    def render_line(self, y: int) -> Strip:
        index, row = self.top, self.top_row + y
        lines = self.window.lines
        while index < len(lines) and row >= self.rows_of(index):
            row -= self.rows_of(index)
            index += 1
        width = self.size.width
        if index >= len(lines):
            return Strip.blank(width, self.rich_style)
        if self.wrap:
            pieces = self._pieces.get(index)
            if pieces is None:
                pieces = self._pieces[index] = self._wrapped(index, width)
            strip = pieces[min(row, len(pieces) - 1)]
        else:
            strip = self._strip(index).crop(self.x, self.x + width)
        return strip.adjust_cell_length(width, self.rich_style)

    def _strip(self, index: int) -> Strip:
        """Line `index` as one strip, its match (if any) highlighted."""
        text, style = self.window.lines[index], self.rich_style
        mark = self.mark
        if mark is None or self.window.offsets[index] != mark[0]:
            return Strip([Segment(text, style)])
        _, column, length = mark
        found = self.get_component_rich_style("output-view--match")
        return Strip(
            [
                Segment(text[:column], style),
                Segment(text[column : column + length], style + found),
                Segment(text[column + length :], style),
            ]
        )

    def _wrapped(self, index: int, width: int) -> list[Strip]:
        strip = self._strip(index)
        length = strip.cell_length
        cuts = [*range(width, length, width), length]
        return list(strip.divide(cuts)) if length else [strip]

    # --- moving ----------------------------------------------------------------------

    def scroll_rows(self, delta: int) -> None:
        """Move the view `delta` rows down (up when negative), within the window."""
        while delta > 0 and self.rows_below() > 0:
            if self.top_row + 1 < self.rows_of(self.top):
                self.top_row += 1
            else:
                self.top, self.top_row = self.top + 1, 0
            delta -= 1
        while delta < 0 and (self.top > 0 or self.top_row > 0):
            if self.top_row > 0:
                self.top_row -= 1
            else:
                self.top -= 1
                self.top_row = self.rows_of(self.top) - 1
            delta += 1
        self.refresh()

    def to_top(self) -> None:
        """Show the window's first line on the first row."""
        self.top = self.top_row = 0
        self.refresh()

    def to_bottom(self) -> None:
        """Show the window's last line on the last row (the top when it all fits)."""
        rows, index = 0, len(self.window.lines)
        while index > 0 and rows + self.rows_of(index - 1) <= self.size.height:
            index -= 1
            rows += self.rows_of(index)
        self.top, self.top_row = index, 0
        if index > 0 and rows < self.size.height:  # part of the line above fills the rest
            self.top -= 1
            self.top_row = self.rows_of(self.top) - (self.size.height - rows)
        self.refresh()

    def show_line(self, index: int, column: int = 0) -> None:
        """Bring line `index` into view, a third of the way down, and `column` too."""
        self.top, self.top_row = index, 0
        self.scroll_rows(-(self.size.height // 3))
        if not self.wrap:
            width = max(1, self.size.width)
            text = self.window.lines[index]
            at = cell_len(text[:column])
            if not self.x <= at < self.x + width - 10:
                self.x = max(0, at - width // 3)
        self.changed()

    def scroll_sideways(self, cells: int) -> None:
        """With wrap off, move `cells` to the right (left when negative)."""
        if self.wrap:
            return
        widest = max((cell_len(self.window.lines[i]) for i in self.visible_lines()), default=0)
        self.x = max(0, min(self.x + cells, widest - self.size.width // 2))
        self.refresh()

    def shift(self, added_before: int, dropped: int) -> None:
        """Keep the same line on top after the window grew before it or let lines go."""
        self.top = max(0, self.top + added_before - dropped)
        if self.top >= len(self.window.lines):
            self.top, self.top_row = max(0, len(self.window.lines) - 1), 0
        self.changed()
