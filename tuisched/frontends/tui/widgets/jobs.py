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
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from typing import ClassVar

from rich.cells import set_cell_size
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets.data_table import RowKey

from tuisched.domain.views import JobStatus
from tuisched.frontends.tui.jobindex import JobIndex
from tuisched.frontends.tui.view import (
    JobRow,
    fit,
    fit_name,
    group_forms,
    lead_forms,
    schedule_forms,
    whole_forms,
)
from tuisched.frontends.tui.widgets.table import Column, Fitted, fit_columns

NAME = Column("name", "Job", 5, 32, whole_forms)
"""The name column: frozen at the left, wide enough for the longest name (up to `most`)."""
COLUMNS = (
    NAME,
    Column("state", "State", 8, 11, lead_forms),
    Column("next_run", "Next run", 16, 20, lead_forms),
    Column("last", "Last", 13, 13),
    Column("schedule", "Schedule", 19, 60, schedule_forms),
    Column("kind", "Kind", 8, 8),
    Column("groups", "Groups", 10, 40, group_forms),
)
"""Every column, in the order shown; their widths are worked out for the pane's width."""
DROPPED_FIRST = ("kind", "groups", "schedule", "last", "next_run", "state")
"""As the pane narrows, the least used columns go first (they stay a sideways scroll away)."""
GROWN_FIRST: tuple[tuple[str, int | None], ...] = (
    ("name", None), ("schedule", 24), ("state", None), ("next_run", None),
    ("schedule", None), ("groups", None),
)  # fmt: skip
"""How the room left widens the columns shown: whole names first, then the schedule in
more words, a count of runs in the state, the next run's day."""
NAME_LEAST = 16
"""The name column is this narrow at most before other columns are dropped."""
SORTED_COLUMNS = {"name": "name", "state": "state", "next run": "next_run", "last result": "last"}
"""The column each order of the index sorts by (file order has none)."""
MARK = "*"
"""Drawn in the left margin of a marked job's row: plain ASCII, readable without colour."""
LEFT_MORE, RIGHT_MORE = "<", ">"
"""In the header line (plain ASCII): columns are scrolled away to the left (after the
name), or wait to the right (at the end)."""

RowMaker = Callable[[JobStatus], JobRow]
"""How a job's status becomes the row shown (the pane's clock and zone)."""


def layout(width: int, widest: Mapping[str, int], first: int = 0) -> Fitted:
    """The columns shown in a pane `width` cells wide, the name first, then the columns
    from the `first` after it; `widest`: the longest name, trigger and groups."""
    name = widest.get("name", NAME.least)
    columns = [
        replace(NAME, least=max(NAME.least, min(name, NAME_LEAST)), most=min(name, NAME.most)),
        *COLUMNS[1:][first:],
    ]
    columns = [_widest(column, widest) for column in columns]
    room = width - 1  # the left margin, for the mark
    return fit_columns(columns, room, gap=1, dropped_first=DROPPED_FIRST, grown_first=GROWN_FIRST)


def _widest(column: Column, widest: Mapping[str, int]) -> Column:
    found = widest.get({"schedule": "trigger"}.get(column.key, column.key))
    if found is None or column.key == "name":
        return column
    return replace(column, most=max(column.least, min(found, column.most)))


def _line(cells: Iterator[str], fitted: Fitted) -> str:
    """One line of cells, after a margin: each padded to its column's width, a space after
    (the header's last space may take a `>`)."""
    return " " + "".join(
        set_cell_size(text, width) + " " for text, (_, width) in zip(cells, fitted, strict=True)
    )


def header_line(order: str, reverse: bool, fitted: Fitted | None = None) -> str:
    """The header: each column's heading, an arrow on the one sorted by (down: reversed)."""
    fitted = layout(200, {}) if fitted is None else fitted
    column = SORTED_COLUMNS.get(order)
    arrow = " ▼" if reverse else " ▲"
    return _line(
        (shown.heading + (arrow if shown.key == column else "") for shown, _ in fitted), fitted
    )


def row_cells(row: JobRow, fitted: Fitted) -> Iterator[str]:
    """`row`'s cells as shown: each whole, or in a short form that fits its column."""
    for column, width in fitted:
        value = str(getattr(row, column.key))
        yield fit_name(value, width) if column is fitted[0][0] else fit(column.forms(value), width)


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


class JobsTable(ScrollView, can_focus=True):
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

    # --- marks -----------------------------------------------------------------------

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

    def visible_jobs(self) -> list[str]:
        """The jobs in view now (the ones a tick reads again)."""
        first = int(self.scroll_y)
        return self.index.shown()[first : first + self.size.height]

    # --- drawing ---------------------------------------------------------------------

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
            text = _line(row_cells(self._row(shown[row]), fitted), fitted)
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

    def _row(self, name: str) -> JobRow:
        made = self._made.get(name)
        if made is None:
            status = self.index.status(name)
            if status is None or self._make_row is None:
                raise KeyError(name)
            made = self._made[name] = self._make_row(status)
        return made

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
