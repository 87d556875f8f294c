"""Small modal dialogs: a confirmation whose default is Cancel, and the quit questions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from tuisched.frontends.tui.screens.present import present

STILL_SECONDS = 0.25
"""How often the quit question looks whether runs are still in progress."""


def _focus(screen: ModalScreen[Any], selector: str) -> None:
    """Focus the default button; none if the dialog was closed before it was mounted (a
    burst of keys, or the console closing, can take it away that fast)."""
    if (button := present(screen, selector, Button)) is not None:
        button.focus()


class ConfirmScreen(ModalScreen[bool]):
    """Yes or no; Cancel has the focus, so a stray Enter changes nothing."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel"),
        Binding("y", "confirm", "Yes", show=False),
        Binding("n", "cancel", "No", show=False),
        Binding("left,right,tab", "app.focus_next", show=False),
    ]

    def __init__(self, question: str, *, yes: str = "Yes") -> None:
        super().__init__()
        self.question = question
        self.yes = yes

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(Text(self.question), classes="question")
            with Horizontal(classes="buttons"):
                yield Button("Cancel (n)", id="cancel", variant="primary")
                yield Button(f"{self.yes} (y)", id="confirm", variant="warning")

    def on_mount(self) -> None:
        _focus(self, "#cancel")

    @on(Button.Pressed, "#confirm")
    def action_confirm(self) -> None:
        self.dismiss(True)

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(False)


class _ChoiceScreen(ModalScreen[str]):
    """A question, a choice per button, and Stay (the default, with the focus and Esc)."""

    def __init__(self, question: str, choices: list[tuple[str, str]]) -> None:
        """`choices`: (id, label) after Stay; the last one is the dangerous one."""
        super().__init__()
        self.question = question
        self.choices = choices

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(Text(self.question), classes="question")
            with Horizontal(classes="buttons"):
                yield Button("Stay (esc)", id="stay", variant="primary")
                for number, (choice, label) in enumerate(self.choices, start=1):
                    last = number == len(self.choices)
                    yield Button(label, id=choice, variant="error" if last else "default")

    def on_mount(self) -> None:
        _focus(self, "#stay")

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id or "stay")

    def action_choose(self, choice: str) -> None:
        self.dismiss(choice)


class QuitScreen(_ChoiceScreen):
    """Runs are in progress: wait for them, stop them, or stay."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "choose('stay')", "Stay"),
        Binding("w", "choose('wait')", "Wait", show=False),
        Binding("s", "choose('stop')", "Stop", show=False),
        Binding("ctrl+c", "app.interrupt", "Wait", show=False),
    ]
    """A modal screen keeps the app's keys from its own: ctrl+c is bound here again."""

    def __init__(self, running: int, still: Callable[[], int] | None = None) -> None:
        """`still`: how many runs are in progress now; once none is, the question is
        moot and the screen answers "idle" (the stop goes on at once)."""
        plural = "run is" if running == 1 else "runs are"
        super().__init__(
            f"{running} {plural} in progress. Quitting stops the scheduler.\n"
            "Wait for them to finish (no new runs start), stop them now, or stay?\n"
            "ctrl+c again: wait for them.",
            [("wait", "Wait (w)"), ("stop", "Stop them (s)")],
        )
        self.running = running
        self._still = still

    def on_mount(self) -> None:
        super().on_mount()
        if self._still is not None:
            self.set_interval(STILL_SECONDS, self._check)

    def _check(self) -> None:
        if self._still is not None and self._still() == 0 and self.is_current:
            self.dismiss("idle")


class LeaveScreen(_ChoiceScreen):
    """Leaving the console: detach (the scheduler runs on without it), stop it, or stay."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "choose('stay')", "Stay"),
        Binding("d", "choose('detach')", "Detach", show=False),
        Binding("s", "choose('stop')", "Stop", show=False),
        Binding("ctrl+c", "app.interrupt", "Leave at once", show=False),
    ]
    """A modal screen keeps the app's keys from its own: ctrl+c is bound here again."""

    def __init__(self, detach: str, again: str) -> None:
        """`detach` says what detaching does here (hosting, or attached); `again`, what
        a second ctrl+c does."""
        super().__init__(
            f"Leave the console. Detach: {detach}; `tuisched attach` comes back to it.\n"
            "Or stop the scheduler (runs in progress: wait or stop them), or stay?\n"
            f"ctrl+c again: {again}.",
            [("detach", "Detach (d)"), ("stop", "Stop the scheduler (s)")],
        )
