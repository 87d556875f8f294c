"""The status line at the top of the console."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget


class StatusLine(Widget):
    """One line of plain text, repainted in place.

    A `Static.update` would ask for a new layout of the whole screen each
    second (with 10,000 jobs, the jobs table's is the costly part); this
    line's size never changes, so a repaint is enough.
    """

    DEFAULT_CSS = """
    StatusLine {
        height: 1;
        width: 1fr;
    }
    """

    text: reactive[str] = reactive("", layout=False)
    """What the line says."""

    def render(self) -> Text:
        """The text, never read as markup."""
        return Text(self.text, no_wrap=True, overflow="ellipsis")
