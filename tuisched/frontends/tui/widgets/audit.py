"""The audit pane: the audit log, newest last, following only while read at the bottom."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.widgets import Log


class AuditPane(Log):
    """Audit lines as plain text (a Log never interprets markup)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("g", "scroll_home", "First line", show=False),
        Binding("G", "scroll_end", "Last line", show=False),
    ]
    """Vi's top and bottom, as on the other panes (Home and End are the Log's own)."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, highlight=False, max_lines=5000)

    def on_mount(self) -> None:
        self.add_class("-empty")

    def add(self, lines: Sequence[str]) -> None:
        """Append `lines` in one write; scroll along only if the reader is at the bottom."""
        if lines:
            self.auto_scroll = self.is_vertical_scroll_end
            self.write_lines(lines)
            self.remove_class("-empty")  # an empty pane is one line high (see tuisched.tcss)
