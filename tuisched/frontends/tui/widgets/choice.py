"""A one-line choice among a few words (`< cron >`): one widget where a `Select` is six.

The job form has four short choices (kind, trigger, outcome, overlap). A
`Select` composes a current-value widget, an overlay and an option list for
each; this draws the chosen word and steps through the others with the keys,
which keeps the form quick to open (SPEC R18: 10,000 jobs, 80x24, no mouse).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget


class Choice(Widget, can_focus=True):
    """One of `options`, stepped with left/right (space steps forward, wrapping)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("right,space", "step(1)", "Next", show=False),
        Binding("left", "step(-1)", "Previous", show=False),
    ]

    DEFAULT_CSS = """
    Choice {
        height: 1;
        width: 1fr;
    }
    Choice:focus {
        text-style: reverse;
    }
    """

    value: reactive[str] = reactive("", init=False)
    """The chosen option ("" is the blank one, when `blank` names it)."""

    class Changed(Message):
        """The choice changed."""

        def __init__(self, choice: Choice, value: str) -> None:
            super().__init__()
            self.choice = choice
            self.value = value

        @property
        def control(self) -> Choice:
            """The choice that changed (for `@on(Choice.Changed, "#id")`)."""
            return self.choice

    def __init__(
        self, options: Sequence[str], value: str, *, blank: str | None = None, id: str | None = None
    ) -> None:
        """`blank`: the words shown for "" (an option before the others), or None for none."""
        super().__init__(id=id)
        self.options = ("", *options) if blank is not None else tuple(options)
        self.blank = blank or ""
        self.set_reactive(Choice.value, value if value in self.options else self.options[0])

    def render(self) -> Text:
        shown = self.value or self.blank
        return Text.assemble(("< ", "dim"), shown, (" >", "dim"))

    def watch_value(self, value: str) -> None:
        self.post_message(self.Changed(self, value))

    def action_step(self, by: int) -> None:
        """Choose the option `by` places on (wrapping)."""
        index = self.options.index(self.value) if self.value in self.options else 0
        self.value = self.options[(index + by) % len(self.options)]

    def on_click(self, event: events.Click) -> None:
        self.action_step(1)
