"""The banner that says the configuration changed on disk (or that missed slots wait)."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static


class Banner(Static):
    """Hidden until the file holds an edit not applied yet (or a reload failed).

    A standing note (missed slots wait for a decision) shows whenever no
    other message does, until it is cleared: putting a message away brings
    the note back.
    """

    note: str | None = None
    """The standing note, or None."""
    _showing_note: bool = False

    def show_message(self, text: str, *, error: bool = False) -> None:
        """Show `text` (plain, never markup)."""
        self.update(Text(text))  # plain text: a path or a job name is never markup
        self.set_class(error, "-error")
        self.display = True
        self._showing_note = False

    def hide(self) -> None:
        """Put the message away (the standing note, if any, shows again)."""
        if self.note is None:
            self.display = False
        elif not self._showing_note:
            self.show_message(self.note)
            self._showing_note = True

    # --- the standing note (the downtime ledger) ---

    def show_note(self, text: str) -> None:
        """Show `text` now, and whenever no other message is shown, until `clear_note`."""
        self.note = text
        self.show_message(text)
        self._showing_note = True

    def clear_note(self) -> None:
        """Forget the standing note (and put it away if it shows)."""
        if self._showing_note:
            self.display = False
            self._showing_note = False
        self.note = None
