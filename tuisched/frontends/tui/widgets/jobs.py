"""The jobs pane: one row per job, updated in place by row key."""

from __future__ import annotations

from collections.abc import Iterable

from rich.text import Text

from tuisched.frontends.tui.view import JobRow
from tuisched.frontends.tui.widgets.table import Columns, KeyedTable

COLUMNS: Columns = (
    ("name", "Job", 18),
    ("state", "State", 9),
    ("next_run", "Next run", 20),
    ("last", "Last", 11),
    ("schedule", "Schedule", 40),
    ("kind", "Kind", 8),
    ("groups", "Groups", 14),
)
"""(field, heading, fixed width): fixed widths keep updates from cutting text off."""


class JobsTable(KeyedTable):
    """Every job (or the filtered ones); the cursor stays on its job across refreshes."""

    COLUMNS = COLUMNS

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, zebra_stripes=True)
        self._rows: dict[str, JobRow] = {}
        self._before: int | None = None
        self.filter_text = ""

    def selected_job(self) -> str | None:
        """The name of the job under the cursor."""
        return self.selected_key()

    def show(self, rows: Iterable[JobRow]) -> None:
        """Replace every row (at start, after a reload, or when the filter changes)."""
        self._rows = {row.name: row for row in rows}
        keep = self.selected_job()
        self._before = self.cursor_row if keep is not None else None
        self.clear()
        for row in self._rows.values():
            if self._matches(row):
                self.add_row(*self.cells(row), key=row.name)
        self._anchor(keep)

    def update_rows(self, rows: Iterable[JobRow]) -> None:
        """Refresh the given jobs' cells in place; only changed cells are touched."""
        refilter = False
        for row in rows:
            old = self._rows.get(row.name)
            self._rows[row.name] = row
            if self._matches(row) != (row.name in self.rows):
                refilter = True  # a filter on the state: the row comes in or goes out
                continue
            if old == row or row.name not in self.rows:
                continue
            for key, _, _ in COLUMNS:
                value = getattr(row, key)
                if old is None or getattr(old, key) != value:
                    self.update_cell(row.name, key, Text(value))
        if refilter:
            self.show(list(self._rows.values()))

    def _matches(self, row: JobRow) -> bool:
        needle = self.filter_text.lower()
        return not needle or any(
            needle in text.lower() for text in (row.name, row.groups, row.state, row.kind)
        )

    def _anchor(self, name: str | None) -> None:
        if name is not None and name in self.rows:
            self.move_cursor(row=self.get_row_index(name))
        elif name is not None and self._before is not None:  # it left: stay where it was
            self.move_cursor(row=min(self._before, max(0, self.row_count - 1)))
