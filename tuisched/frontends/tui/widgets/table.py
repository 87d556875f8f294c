"""What the console's tables share: rows keyed by name, columns fitted to the width, vi keys.

A table's columns are laid out for the width it has: the least used ones are
dropped first as the width shrinks, and the room left widens the most useful
ones. A column's text either fits it, in full or in a defined short form
(`view.fit`), or the column is not shown: a word is never cut.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widgets import DataTable

from tuisched.frontends.tui.view import fit, whole_forms


@dataclass(frozen=True, slots=True)
class Column:
    """A column that fits itself to the room it is given."""

    key: str
    """The row's field it shows."""
    heading: str
    least: int
    """The narrowest it is shown: every value has a form this wide (see `view.fit`)."""
    most: int
    """The widest it is of use."""
    forms: Callable[[str], list[str]] = whole_forms
    """A value, then its ever shorter forms."""


Fitted = list[tuple[Column, int]]
"""The columns shown, in order, each with its width."""


def fit_columns(
    columns: Sequence[Column],
    room: int,
    *,
    gap: int,
    dropped_first: Sequence[str],
    grown_first: Sequence[tuple[str, int | None]],
) -> Fitted:
    """The columns that fit `room` cells (`gap` cells beside each), and their widths.

    While the narrowest widths do not fit, the columns of `dropped_first` go, in
    that order; then the room left widens columns as `grown_first` says, each
    (key, up to) in turn (None: up to its `most`).
    """
    shown = list(columns)
    for key in dropped_first:
        if sum(column.least + gap for column in shown) <= room:
            break
        shown = [column for column in shown if column.key != key]
    widths = {column.key: column.least for column in shown}
    spare = room - sum(column.least + gap for column in shown)
    by_key = {column.key: column for column in shown}
    for key, upto in grown_first:
        column = by_key.get(key)
        if column is None or spare <= 0:
            continue
        target = column.most if upto is None else min(upto, column.most)
        wider = min(spare, max(0, target - widths[key]))
        widths[key] += wider
        spare -= wider
    return [(column, widths[column.key]) for column in shown]


class KeyedTable(DataTable[Text]):
    """A table whose rows are keyed by a name (a job, a run id); cells are plain text,
    its columns fitted to its width (see `fit_columns`)."""

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

    COLUMNS: ClassVar[tuple[Column, ...]] = ()
    """The columns, set by each table."""
    DROPPED_FIRST: ClassVar[tuple[str, ...]] = ()
    """The columns that go first as the table narrows."""
    GROWN_FIRST: ClassVar[tuple[tuple[str, int | None], ...]] = ()
    """How the room left widens the columns shown."""

    def __init__(self, *, id: str | None = None, zebra_stripes: bool = False) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=zebra_stripes)
        self._objects: dict[str, object] = {}
        """Each row's object (its fields are the columns' keys), in the order shown."""
        self._hidden: frozenset[str] = frozenset()
        self._fitted: Fitted = []

    @property
    def fitted(self) -> Fitted:
        """The columns shown now, each with its width."""
        return self._fitted

    def hide_columns(self, keys: frozenset[str]) -> None:
        """Never show these columns (a node's column on a single node)."""
        if keys != self._hidden:
            self._hidden = keys
            self._refit()

    def on_mount(self) -> None:
        self._refit()  # columns from the start (the never-dropped ones at least)

    def on_resize(self) -> None:
        self._refit()

    def _refit(self) -> None:
        room = self.scrollable_content_region.width
        columns = [column for column in self.COLUMNS if column.key not in self._hidden]
        fitted = fit_columns(
            columns, room, gap=2 * self.cell_padding,
            dropped_first=self.DROPPED_FIRST, grown_first=self.GROWN_FIRST,
        )  # fmt: skip
        if fitted == self._fitted:
            return
        keep = self.selected_key()
        self._fitted = fitted
        self.clear(columns=True)
        for column, width in fitted:
            self.add_column(column.heading, key=column.key, width=width)
        for key, row in self._objects.items():
            self.add_row(*self.cells(row), key=key)
        if keep is not None and keep in self._objects:
            self.move_cursor(row=self.get_row_index(keep))

    def selected_key(self) -> str | None:
        """The key of the row under the cursor (None for an empty table)."""
        if not self.row_count:
            return None
        return self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value

    def cells(self, row: object) -> tuple[Text, ...]:
        """`row`'s fields in column order, as plain text (never markup), each whole or in
        a short form that fits its column."""
        return tuple(self._cell(row, column, width) for column, width in self._fitted)

    @staticmethod
    def _cell(row: object, column: Column, width: int) -> Text:
        return Text(fit(column.forms(str(getattr(row, column.key))), width))

    def put(self, key: str, row: object) -> None:
        """Add `row` under `key`, or show its changed cells."""
        old = self._objects.get(key)
        self._objects[key] = row
        if old is None or key not in self.rows:
            self.add_row(*self.cells(row), key=key)
            return
        for column, width in self._fitted:
            if getattr(old, column.key) != getattr(row, column.key):
                self.update_cell(key, column.key, self._cell(row, column, width))

    def set_rows(self, rows: Mapping[str, object]) -> None:
        """Show exactly `rows` (by key), in their order."""
        self.clear()
        self._objects = dict(rows)
        for key, row in self._objects.items():
            self.add_row(*self.cells(row), key=key)

    def drop(self, key: str) -> None:
        """Remove `key`'s row."""
        if self._objects.pop(key, None) is not None and key in self.rows:
            self.remove_row(key)
