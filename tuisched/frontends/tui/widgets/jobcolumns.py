"""The jobs pane's columns: which are shown in a width, how wide, and their text.

Pure: a width and the longest name, trigger and groups in, the columns fitted out
(`layout`); a row in, its cells as drawn (`row_cells`). The pane (`widgets.jobs`)
draws them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace

from rich.cells import set_cell_size

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


def row_line(cells: Iterator[str], fitted: Fitted) -> str:
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
    return row_line(
        (shown.heading + (arrow if shown.key == column else "") for shown, _ in fitted), fitted
    )


def row_cells(row: JobRow, fitted: Fitted) -> Iterator[str]:
    """`row`'s cells as shown: each whole, or in a short form that fits its column."""
    for column, width in fitted:
        value = str(getattr(row, column.key))
        yield fit_name(value, width) if column is fitted[0][0] else fit(column.forms(value), width)
