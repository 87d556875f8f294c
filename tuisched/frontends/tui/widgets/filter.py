"""The jobs pane's filter box (`/`): what is typed filters the jobs, after a pause in typing."""

from __future__ import annotations

from textual import on
from textual.message import Message
from textual.timer import Timer
from textual.widgets import Input

DEBOUNCE_SECONDS = 0.15
"""Refilling 10,000 rows per key stroke would lag: the filter waits for a pause in typing."""


class FilterBox(Input):
    """Hidden until `/`; `enter` keeps the filter, `esc` (on the screen) clears it."""

    class Applied(Message):
        """The filter to apply now (after a pause in typing)."""

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
        self._timer: Timer | None = None

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
        if self._timer is not None:
            self._timer.stop()
        value = event.value
        self._timer = self.set_timer(
            DEBOUNCE_SECONDS, lambda: self.post_message(self.Applied(value))
        )

    @on(Input.Submitted)
    def _kept(self, event: Input.Submitted) -> None:
        event.stop()
        self.post_message(self.Kept())
