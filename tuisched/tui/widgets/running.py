"""The running pane: runs executing, queued or waiting now."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widgets import DataTable

from tuisched.tui.view import RunRow

COLUMNS: tuple[tuple[str, str, int | None], ...] = (
    ("job", "Job", 16),
    ("started", "Started", 8),
    ("elapsed", "Elapsed", 7),
    ("last_line", "Last output", 60),
    ("pid", "PID", 7),
    ("trigger", "Trigger", 10),
    ("run_id", "Run", 12),
)


class RunningTable(DataTable[Text]):
    """Runs in progress; rebuilt from a snapshot, the cursor kept on its run."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
    ]
    """Vi keys as in k9s and htop, besides the arrows."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row")
        self._rows: dict[str, RunRow] = {}

    def on_mount(self) -> None:
        for key, heading, width in COLUMNS:
            self.add_column(heading, key=key, width=width)

    def selected_run(self) -> str | None:
        """The id of the run under the cursor."""
        if not self.row_count:
            return None
        return self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value

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
                self.add_row(*(Text(getattr(row, key)) for key, _, _ in COLUMNS), key=run_id)
            elif old != row:
                for key, _, _ in COLUMNS:
                    if getattr(old, key) != getattr(row, key):
                        self.update_cell(run_id, key, Text(getattr(row, key)))
            self._rows[run_id] = row
        if keep is not None and keep in self._rows:
            self.move_cursor(row=self.get_row_index(keep))
