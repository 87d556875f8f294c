"""The offline-edit view (`D`): what reloading the file on disk would change, or why it cannot."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from tuisched.frontends.tui.screens.present import present
from tuisched.runtime.control import SchedulerControl


class DiffScreen(Screen[bool]):
    """What the offline edit changes; `R` reloads (after a confirmation), `escape` goes back.

    Dismissed with True when the operator chose to reload, so the app asks and reloads.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Back"),
        Binding("q", "close", "Back", show=False),
        Binding("R", "reload", "Reload"),
    ]

    def __init__(self, control: SchedulerControl, *, read_only: bool = False) -> None:
        super().__init__()
        self.control = control
        self.read_only = read_only

    def compose(self) -> ComposeResult:
        yield Static(Text(" offline edit"), id="diff-title")
        with VerticalScroll(id="diff-body"):
            yield Static(Text("reading the file..."), id="diff-text")
        yield Footer()

    def on_mount(self) -> None:
        if (body := present(self, "#diff-body")) is not None:
            body.focus()
            self._compute()

    @work(exclusive=True)
    async def _compute(self) -> None:
        status = await self.control.status()
        if (title := present(self, "#diff-title", Static)) is not None:
            title.update(Text(f" offline edit of {status.config_path}"))
        pending = await self.control.pending_edit()
        if (text := present(self, "#diff-text", Static)) is not None:
            text.update(Text("\n".join(pending.lines)))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """`--read-only` hides the reload."""
        return not (self.read_only and action == "reload")

    def action_close(self) -> None:
        self.dismiss(False)

    def action_reload(self) -> None:
        self.dismiss(True)
