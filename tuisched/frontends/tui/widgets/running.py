"""The running pane: runs executing, queued or waiting now."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text

from tuisched.frontends.tui.view import RunRow
from tuisched.frontends.tui.widgets.table import Columns, KeyedTable

COLUMNS: Columns = (
    ("job", "Job", 16),
    ("started", "Started", 8),
    ("elapsed", "Elapsed", 7),
    ("node", "Node", 18),
    ("last_line", "Last output", 60),
    ("pid", "PID", 7),
    ("trigger", "Trigger", 10),
    ("run_id", "Run", 12),
)


class RunningTable(KeyedTable):
    """Runs in progress; rebuilt from a snapshot, the cursor kept on its run."""

    COLUMNS = COLUMNS

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._rows: dict[str, RunRow] = {}

    def selected_run(self) -> str | None:
        """The id of the run under the cursor."""
        return self.selected_key()

    def show(self, rows: Sequence[RunRow]) -> None:
        """Show exactly `rows`: new ones added, gone ones removed, changed cells updated."""
        wanted = {row.run_id: row for row in rows}
        keep = self.selected_run()
        for gone in [run_id for run_id in self._rows if run_id not in wanted]:
            self.remove_row(gone)
            del self._rows[gone]
        for run_id, row in wanted.items():
            old = self._rows.get(run_id)
            if old is None:
                self.add_row(*self.cells(row), key=run_id)
            elif old != row:
                for key, _, _ in COLUMNS:
                    if getattr(old, key) != getattr(row, key):
                        self.update_cell(run_id, key, Text(getattr(row, key)))
            self._rows[run_id] = row
        if keep is not None and keep in self._rows:
            self.move_cursor(row=self.get_row_index(keep))
