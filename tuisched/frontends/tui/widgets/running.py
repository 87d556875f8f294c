"""The running pane: runs executing, queued or waiting now."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from tuisched.frontends.tui.view import RunRow
from tuisched.frontends.tui.widgets.table import Column, KeyedTable

COLUMNS = (
    Column("job", "Job", 12, 24),
    Column("run_id", "Run", 12, 12),
    Column("pid", "PID", 7, 7),
    Column("started", "Started", 8, 8),
    Column("elapsed", "Elapsed", 7, 7),
    Column("node", "Node", 18, 40),
    Column("last_line", "Last output", 12, 200),
    Column("trigger", "Trigger", 10, 10),
)
"""Run id and PID come early: at 80 columns an operator reads them without scrolling."""


class RunningTable(KeyedTable):
    """Runs in progress; rebuilt from a snapshot, the cursor kept on its run."""

    COLUMNS = COLUMNS
    DROPPED_FIRST: ClassVar[tuple[str, ...]] = ("trigger", "started", "node", "pid", "run_id")
    GROWN_FIRST: ClassVar[tuple[tuple[str, int | None], ...]] = (
        ("job", 16), ("node", None), ("last_line", 40), ("trigger", None),
        ("job", None), ("last_line", None),
    )  # fmt: skip
    """The last output line takes the room left, once the job's name has some."""

    def selected_run(self) -> str | None:
        """The id of the run under the cursor."""
        return self.selected_key()

    def show(self, rows: Sequence[RunRow], *, nodes: bool = False) -> None:
        """Show exactly `rows`: new ones added, gone ones removed, changed cells updated;
        `nodes`: which node runs each (cluster mode; a single node has no such column)."""
        self.hide_columns(frozenset() if nodes else frozenset({"node"}))
        wanted = {row.run_id: row for row in rows}
        keep = self.selected_run()
        for gone in [run_id for run_id in self._objects if run_id not in wanted]:
            self.drop(gone)
        for run_id, row in wanted.items():
            self.put(run_id, row)
        if keep is not None and keep in self._objects:
            self.move_cursor(row=self.get_row_index(keep))
