"""What the console's tables share: rows keyed by name, fixed-width columns, vi keys."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widgets import DataTable

Columns = tuple[tuple[str, str, int], ...]
"""(field, heading, width): fixed widths keep in-place updates from cutting text off."""


class KeyedTable(DataTable[Text]):
    """A table whose rows are keyed by a name (a job, a run id); cells are plain text."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
        Binding("home", "scroll_top", "First row", show=False),
        Binding("end", "scroll_bottom", "Last row", show=False),
        Binding("g", "scroll_top", "First row", show=False),
        Binding("G", "scroll_bottom", "Last row", show=False),
    ]
    """Vi keys as in k9s and htop, besides the arrows; Home and End go to the first and
    last row (a DataTable's go to the first and last column, which a row cursor lacks)."""

    COLUMNS: ClassVar[Columns] = ()
    """The columns, set by each table."""

    def __init__(self, *, id: str | None = None, zebra_stripes: bool = False) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=zebra_stripes)

    def on_mount(self) -> None:
        for key, heading, width in self.COLUMNS:
            self.add_column(heading, key=key, width=width)

    def selected_key(self) -> str | None:
        """The key of the row under the cursor (None for an empty table)."""
        if not self.row_count:
            return None
        return self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value

    def cells(self, row: object) -> tuple[Text, ...]:
        """`row`'s fields in column order, as plain text (never markup)."""
        return tuple(Text(getattr(row, key)) for key, _, _ in self.COLUMNS)
