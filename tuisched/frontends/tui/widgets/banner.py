"""The banner that says the configuration changed on disk."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static


class Banner(Static):
    """Hidden until the file holds an edit not applied yet (or a reload failed)."""

    def show_message(self, text: str, *, error: bool = False) -> None:
        """Show `text` (plain, never markup)."""
        self.update(Text(text))  # plain text: a path or a job name is never markup
        self.set_class(error, "-error")
        self.display = True

    def hide(self) -> None:
        """Put the banner away."""
        self.display = False
