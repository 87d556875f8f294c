"""The jobs pane's filter box (`/`): what is typed filters the jobs as it is typed.

Filtering is one pass over the job index (a few ms for 10,000 jobs), and only
the rows in view are drawn, so each key stroke applies at once; no pause in
typing is awaited.
"""

from __future__ import annotations

from textual import on
from textual.message import Message
from textual.widgets import Input


class FilterBox(Input):
    """Hidden until `/`; `enter` keeps the filter, `esc` (on the screen) clears it."""

    class Applied(Message):
        """The filter to apply now."""

        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    class Kept(Message):
        """The operator pressed enter: the filter stays, the jobs get the focus."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(
            placeholder="filter by name, group or state; enter keeps, esc clears", id=id
        )
        self.display = False

    def open(self, text: str | None = None) -> None:
        """Show the box (with `text` applied at once, when given) and focus it."""
        self.display = True
        if text is not None:
            self.value = text
            self.post_message(self.Applied(text))
        else:
            self.focus()

    def close(self) -> bool:
        """Clear and hide the box; True when it was open (the jobs then show unfiltered)."""
        if not self.display:
            return False
        self.value = ""
        self.display = False
        self.post_message(self.Applied(""))
        return True

    @on(Input.Changed)
    def _typed(self, event: Input.Changed) -> None:
        event.stop()
        self.post_message(self.Applied(event.value))

    @on(Input.Submitted)
    def _kept(self, event: Input.Submitted) -> None:
        event.stop()
        self.post_message(self.Kept())
