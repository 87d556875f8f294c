"""The group picker (`g`, SPEC R10): show one group's jobs, or pause or resume the group."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from tuisched.domain.text import counted
from tuisched.domain.views import GroupStatus


class GroupPickerScreen(ModalScreen[tuple[str, str] | None]):
    """Groups to pick from; dismissed with ("filter" | "toggle", group) or None.

    `enter` filters the jobs pane to the group, `p` pauses or resumes it.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel"),
        Binding("p", "toggle_pause", "Pause/resume group"),
    ]

    def __init__(self, groups: Sequence[GroupStatus], *, read_only: bool = False) -> None:
        super().__init__()
        self.groups = list(groups)
        self.read_only = read_only

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="group-picker"):
            hint = "enter: show its jobs" + ("" if self.read_only else "   p: pause/resume")
            yield Static(Text(f"Groups - {hint}   esc: cancel"), classes="question")
            yield OptionList(*self._options(), id="group-list")

    def _options(self) -> list[Option]:
        if not self.groups:
            return [Option(Text("no groups in the configuration"), disabled=True)]
        return [
            Option(
                Text(f"{group.name}  ({counted(len(group.jobs), 'job')}){_state(group)}"),
                id=group.name,
            )
            for group in self.groups
        ]

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """`--read-only` hides pausing."""
        return not (self.read_only and action == "toggle_pause")

    def _highlighted(self) -> str | None:
        options = self.query_one("#group-list", OptionList)
        if options.highlighted is None:
            return None
        return options.get_option_at_index(options.highlighted).id

    @on(OptionList.OptionSelected, "#group-list")
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        if event.option.id is not None:
            self.dismiss(("filter", event.option.id))

    def action_toggle_pause(self) -> None:
        group = self._highlighted()
        if group is not None:
            self.dismiss(("toggle", group))

    def action_cancel(self) -> None:
        self.dismiss(None)


def _state(group: GroupStatus) -> str:
    return "  paused" if group.paused else ""
