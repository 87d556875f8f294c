"""The jobs pane's parts, each with one job: its state, its columns, its marks.

`JobsTable` (`widgets.jobs`) is built of them, as Textual's own widgets are of
mixins: `JobsState` holds what the pane knows (the index, the rows formatted, the
cursor's job, the marks, the columns scrolled away); `JobColumns` fits the columns
to the width, scrolls them sideways and draws the lines in view; `JobMarks` marks and
unmarks jobs. The cursor, the keys and the messages are `JobsTable`'s own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from rich.cells import set_cell_size
from rich.segment import Segment
from rich.style import Style
from textual.scroll_view import ScrollView
from textual.strip import Strip

from tuisched.domain.views import JobStatus
from tuisched.frontends.tui.jobindex import JobIndex
from tuisched.frontends.tui.view import JobRow
from tuisched.frontends.tui.widgets.jobcolumns import (
    COLUMNS,
    LEFT_MORE,
    MARK,
    RIGHT_MORE,
    header_line,
    layout,
    row_cells,
    row_line,
)
from tuisched.frontends.tui.widgets.table import Fitted

RowMaker = Callable[[JobStatus], JobRow]
"""How a job's status becomes the row shown (the pane's clock and zone)."""


class JobsState(ScrollView):
    """What the jobs pane knows, and a job's row as formatted (once per tick)."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.index = JobIndex()
        """What the pane shows; the pane's owner changes it, then calls `refresh_rows`."""
        self._make_row: RowMaker | None = None
        self._made: dict[str, JobRow] = {}
        """Rows formatted since the last tick (only ever the ones drawn)."""
        self._cursor = 0
        self._cursor_job: str | None = None
        self.filter_text = ""
        """The filter shown, as typed (set it with `filter`)."""
        self._marked: dict[str, None] = {}
        """The jobs marked with `space`, in the order they were marked."""
        self._first_column = 0
        """How many columns after the name are scrolled away to the left."""
        self._fitted: tuple[tuple[object, ...], Fitted] | None = None

    def _row(self, name: str) -> JobRow:
        made = self._made.get(name)
        if made is None:
            status = self.index.status(name)
            if status is None or self._make_row is None:
                raise KeyError(name)
            made = self._made[name] = self._make_row(status)
        return made


class JobColumns(JobsState):
    """The columns: fitted to the pane's width, scrolled sideways a column at a time (the
    name staying), and the lines in view drawn with them."""

    @property
    def fitted(self) -> Fitted:
        """The columns shown now, each with its width (the name first, always)."""
        width = self.scrollable_content_region.width or self.size.width
        key = (width, self._first_column, tuple(sorted(self.index.widest.items())))
        if self._fitted is None or self._fitted[0] != key:
            self._fitted = key, layout(width, self.index.widest, self._first_column)
        return self._fitted[1]

    def shown_cells(self, name: str) -> dict[str, str]:
        """The text `name`'s row shows in each column shown, by field (shortened as drawn)."""
        fitted = self.fitted
        return {
            column.key: text
            for (column, _), text in zip(fitted, row_cells(self._row(name), fitted), strict=True)
        }

    def _more_right(self) -> bool:
        """Whether columns wait to the right of those shown."""
        shown = {column.key for column, _ in self.fitted}
        return any(column.key not in shown for column in COLUMNS[1:][self._first_column :])

    def action_cursor_left(self) -> None:
        """Scroll a column back into view (the name stays)."""
        self._scroll_columns(self._first_column - 1)

    def action_cursor_right(self) -> None:
        """Scroll the column after the name away, to see one more at the right."""
        if self._more_right():
            self._scroll_columns(self._first_column + 1)

    def action_first_column(self) -> None:
        """`^`: the first columns again."""
        self._scroll_columns(0)

    def action_last_column(self) -> None:
        """`$`: scroll until the last column is in view."""
        while self._more_right():
            self._first_column += 1
        self.refresh()

    def _scroll_columns(self, first: int) -> None:
        self._first_column = max(0, min(first, len(COLUMNS) - 2))
        self.refresh()

    def render_line(self, y: int) -> Strip:
        """Line `y` of the pane: the header, then the rows from the scroll position."""
        scroll_y = int(self.scroll_offset.y)
        width = self.scrollable_content_region.width
        base = self.rich_style
        fitted = self.fitted
        if y == 0:
            style = base + self.get_component_rich_style("jobs-table--header")
            text = self._header(fitted, width)
        else:
            shown = self.index.shown()
            row = scroll_y + y - 1
            if row >= len(shown):
                return Strip.blank(width, base)
            style = base + self._row_style(row)
            text = row_line(row_cells(self._row(shown[row]), fitted), fitted)
            if shown[row] in self._marked:
                text = MARK + text[1:]
            style += Style.from_meta({"row": row})
        return Strip([Segment(set_cell_size(text, width), style)])

    def _header(self, fitted: Fitted, width: int) -> str:
        text = header_line(self.index.order, self.index.reverse, fitted)
        if self._first_column:  # in the space after the name: columns went to the left
            at = 1 + fitted[0][1]
            text = text[:at] + LEFT_MORE + text[at + 1 :]
        if self._more_right():
            text = set_cell_size(text, width - 1) + RIGHT_MORE
        return text

    def _row_style(self, row: int) -> Style:
        style = self.get_component_rich_style(
            "jobs-table--odd-row" if row % 2 else "jobs-table--even-row"
        )
        if row == self._cursor:
            style += self.get_component_rich_style("jobs-table--cursor")
        return style


class JobMarks(JobsState):
    """The marks: jobs marked with `space`, in the order they were marked."""

    if TYPE_CHECKING:

        def move_cursor(self, *, row: int) -> None:
            """Put the cursor on `row` (the table's own)."""

    @property
    def marked(self) -> list[str]:
        """The marked jobs that still exist, in the order they were marked."""
        return list(self._marked)

    def toggle_mark(self) -> str | None:
        """Mark the cursor's job (or unmark it), then move down a row; the job, if any."""
        job = self._cursor_job
        if job is None:
            return None
        if self._marked.pop(job, "absent") == "absent":
            self._marked[job] = None
        self.move_cursor(row=self._cursor + 1)
        return job

    def clear_marks(self) -> bool:
        """Unmark every job; whether any was marked."""
        had = bool(self._marked)
        self._marked.clear()
        self.refresh()
        return had

    def _forget_gone_marks(self) -> None:
        for job in [job for job in self._marked if self.index.status(job) is None]:
            del self._marked[job]
