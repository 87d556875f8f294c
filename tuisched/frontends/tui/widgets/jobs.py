"""The jobs pane: a window onto the job index, drawn a line at a time.

A `DataTable` holds a row object per job and fills them in one blocking pass
(~150 us a row: 1.5 s of frozen loop for 10,000 jobs, 15 s for 100,000), and
sorting or filtering refills it. This pane holds no rows: it draws the lines
in view from `JobIndex.shown()` (Textual's Line API, as Textualize/toolong
shows a huge log), formatting only those jobs, so its cost follows the
terminal's height, not the job count. The cursor is kept by job name: when
the order, the filter or a job changes, the cursor follows its job (or stays
at its row when its job left the view).

It keeps the look and keys of the `DataTable` it replaced: a header line,
zebra stripes, a row cursor, fixed column widths, and the same bindings.

`JobsTable` is the cursor, the keys and the messages; its other parts are in
`jobspane` (what it knows, its columns, its marks), the columns' fitting in
`jobcolumns`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.widgets.data_table import RowKey

from tuisched.frontends.tui.jobindex import JobIndex
from tuisched.frontends.tui.widgets.jobspane import JobColumns, JobMarks, RowMaker


class JobRows:
    """The rows shown, as a DataTable's `rows` reads: iterable keys, `name in rows`."""

    def __init__(self, index: JobIndex) -> None:
        self._index = index

    def __iter__(self) -> Iterator[RowKey]:
        return (RowKey(name) for name in self._index.shown())

    def __len__(self) -> int:
        return len(self._index.shown())

    def __contains__(self, name: object) -> bool:
        key = name.value if isinstance(name, RowKey) else name
        return isinstance(key, str) and self._index.row_of(key) is not None


class JobsTable(JobColumns, JobMarks, can_focus=True):
    """Every job (or the filtered ones), in the chosen order; only the lines in view
    are drawn."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select_cursor", "Select", show=False),
        Binding("up", "cursor_up", "Cursor up", show=False),
        Binding("down", "cursor_down", "Cursor down", show=False),
        Binding("right", "cursor_right", "Next column", show=False),
        Binding("left", "cursor_left", "Previous column", show=False),
        Binding("circumflex_accent,ctrl+a", "first_column", "First column", show=False),
        Binding("dollar_sign,ctrl+e", "last_column", "Last column", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("ctrl+home", "scroll_top", "First job", show=False),
        Binding("ctrl+end", "scroll_bottom", "Last job", show=False),
        Binding("home", "scroll_top", "First job", show=False),
        Binding("end", "scroll_bottom", "Last job", show=False),
        Binding("g", "scroll_top", "First job", show=False),
        Binding("G", "scroll_bottom", "Last job", show=False),
        Binding("j", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
    ]
    """The keys of Textual's DataTable, and vi keys as in k9s and htop. As in htop, Home
    and End go to the first and last job, left and right scroll sideways (a column at a
    time, the job's name staying), `^` and `$` go back to the first column and on to the
    last."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "jobs-table--header",
        "jobs-table--cursor",
        "jobs-table--even-row",
        "jobs-table--odd-row",
    }
    """The header line, the cursor's row, and the zebra stripes."""

    DEFAULT_CSS = """
    JobsTable {
        background: $surface;
        color: $foreground;
        &:focus {
            background-tint: $foreground 5%;
            & > .jobs-table--cursor {
                background: $block-cursor-background;
                color: $block-cursor-foreground;
                text-style: $block-cursor-text-style;
            }
            & > .jobs-table--header {
                background-tint: $foreground 5%;
            }
        }
        &:dark > .jobs-table--even-row {
            background: $surface-darken-1 40%;
        }
        & > .jobs-table--header {
            text-style: bold;
            background: $panel;
            color: $foreground;
        }
        &:ansi > .jobs-table--header {
            background: ansi_bright_blue;
            color: ansi_default;
        }
        & > .jobs-table--even-row {
            background: $surface-lighten-1 50%;
        }
        & > .jobs-table--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
    }
    """

    class Chosen(Message):
        """The operator chose a job (enter, or a click on the cursor's row)."""

        def __init__(self, table: JobsTable, job: str) -> None:
            super().__init__()
            self.table = table
            self.job = job

        @property
        def control(self) -> JobsTable:
            """The pane the job was chosen on (for `@on(..., "#jobs")`)."""
            return self.table

    class Highlighted(Message):
        """The cursor came to another job (or to none): the keys that apply may differ."""

        def __init__(self, table: JobsTable, job: str | None) -> None:
            super().__init__()
            self.table = table
            self.job = job

        @property
        def control(self) -> JobsTable:
            """The pane whose cursor moved."""
            return self.table

    # --- what the pane's owner calls ----------------------------------------------------

    def set_row_maker(self, make_row: RowMaker) -> None:
        """Format rows with `make_row` (the pane's clock and zone)."""
        self._make_row = make_row
        self._made.clear()
        self.refresh()

    def forget_rows(self, names: list[str] | None = None) -> None:
        """These jobs changed (None: the clock moved on): format their rows again when drawn."""
        if names is None:
            self._made.clear()
        for name in names or ():
            self._made.pop(name, None)

    def filter(self, text: str) -> None:
        """Show only the jobs whose name, groups, state or kind contain `text`."""
        self.filter_text = text
        self.index.set_filter(text)
        self.refresh_rows()

    def refresh_rows(self) -> None:
        """The index changed: keep the cursor on its job, size the view, redraw."""
        shown = self.index.shown()
        self._forget_gone_marks()
        # As wide as the pane: columns scroll sideways a whole column at a time (below).
        self.virtual_size = Size(self.scrollable_content_region.width, len(shown) + 1)
        if self.scroll_y > self.max_scroll_y:  # fewer rows: none below the last
            self.scroll_to(y=self.max_scroll_y, animate=False)
        job = self._cursor_job
        row = self.index.row_of(job) if job is not None else None
        if row is None:  # its job left the view (or none was shown): stay at the row
            self._set_cursor(self._cursor)
        elif row != self._cursor:  # its job moved: follow it
            self._set_cursor(row)
        # else it stays where it is, and so does a view the operator scrolled away
        self.refresh()

    # --- what a DataTable offered (and tests and the app use) ----------------------------

    @property
    def row_count(self) -> int:
        """How many jobs are shown."""
        return len(self.index.shown())

    @property
    def rows(self) -> JobRows:
        """The jobs shown, in order, as row keys."""
        return JobRows(self.index)

    @property
    def cursor_row(self) -> int:
        """The row under the cursor."""
        return self._cursor

    def selected_job(self) -> str | None:
        """The name of the job under the cursor."""
        return self._cursor_job

    def get_row_index(self, name: str) -> int:
        """The row showing `name`; KeyError when it is not shown."""
        row = self.index.row_of(name)
        if row is None:
            raise KeyError(name)
        return row

    def get_cell(self, name: str, column: str) -> str:
        """The text `name`'s row shows in `column`."""
        return str(getattr(self._row(name), column))

    def move_cursor(self, *, row: int) -> None:
        """Put the cursor on `row` and scroll it into view."""
        self._set_cursor(row)
        self.refresh()

    @property
    def formatted_rows(self) -> int:
        """How many rows are formatted now: only ever ones drawn since the clock moved."""
        return len(self._made)

    def visible_jobs(self) -> list[str]:
        """The jobs in view now (the ones a tick reads again)."""
        first = int(self.scroll_y)
        return self.index.shown()[first : first + self.size.height]

    # --- the cursor ------------------------------------------------------------------

    def _set_cursor(self, row: int) -> None:
        shown = self.index.shown()
        before = self._cursor_job
        self._cursor = max(0, min(row, len(shown) - 1))
        self._cursor_job = shown[self._cursor] if shown else None
        if self._cursor_job != before:
            self.post_message(self.Highlighted(self, self._cursor_job))
        self._scroll_to_cursor()

    def _scroll_to_cursor(self) -> None:
        lines = max(1, self.scrollable_content_region.height - 1)  # below the header
        top, row = int(self.scroll_y), self._cursor
        if row < top:
            self.scroll_to(y=row, animate=False)
        elif row >= top + lines:
            self.scroll_to(y=row - lines + 1, animate=False)

    def _page(self) -> int:
        return max(1, self.scrollable_content_region.height - 1)

    def action_cursor_up(self) -> None:
        self.move_cursor(row=self._cursor - 1)

    def action_cursor_down(self) -> None:
        self.move_cursor(row=self._cursor + 1)

    def action_page_up(self) -> None:
        self.scroll_relative(y=-self._page(), animate=False, immediate=True)
        self.move_cursor(row=self._cursor - self._page())

    def action_page_down(self) -> None:
        self.scroll_relative(y=self._page(), animate=False, immediate=True)
        self.move_cursor(row=self._cursor + self._page())

    def action_scroll_top(self) -> None:
        self.move_cursor(row=0)

    def action_scroll_bottom(self) -> None:
        self.move_cursor(row=self.row_count - 1)

    def action_select_cursor(self) -> None:
        if self._cursor_job is not None:
            self.post_message(self.Chosen(self, self._cursor_job))

    async def _on_click(self, event: events.Click) -> None:
        row = event.style.meta.get("row")
        if not isinstance(row, int):
            return
        event.stop()
        if row == self._cursor:
            self.action_select_cursor()
        else:
            self.move_cursor(row=row)

    def on_resize(self) -> None:
        self._scroll_to_cursor()
