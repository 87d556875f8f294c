"""Text tables of the command line: columns that line up, whatever the cells hold."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TextIO


def table_lines(rows: Sequence[Sequence[str]]) -> list[str]:
    """`rows` (the first is the heading) as lines of columns two spaces apart.

    Each column is as wide as its widest cell; the last one is not padded, so
    no line ends in spaces and a long last cell (a schedule in words, a status)
    does not widen the others.
    """
    if not rows:
        return []
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    lines = []
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        lines.append("  ".join([*cells, row[-1]]).rstrip())
    return lines


def write_table(rows: Sequence[Sequence[str]], out: TextIO) -> None:
    """Write `rows` (the first is the heading) as `table_lines` lays them out."""
    for line in table_lines(rows):
        out.write(line + "\n")
