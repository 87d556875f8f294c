"""The help screen (`?`): every key of the console, hidden ones included."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.dom import DOMNode
from textual.keys import format_key
from textual.screen import Screen
from textual.widgets import Footer, Static

from tuisched.frontends.tui.screens.present import present

KEY_WIDTH = 14
"""Width of the key column."""
_BETTER_WORDS = {"enter": "Open the job's detail (on the jobs pane)"}
"""Descriptions that say more than the widget's own (DataTable's `enter` says "Select")."""
_LONGER_WORDS = {
    "mark": "Mark or unmark, then go down: r, p, s act on all marked jobs",
    "copy": "Copy the job's command or the run's id to the clipboard",
    "zoom": "Zoom the pane to the whole screen, and back",
    "clear": "Clear the marks; put the banner away; close the filter",
    "run_jobs": "Run the job (or the marked jobs) now",
    "stop_run(False)": "Stop the run (or the marked jobs' runs)",
    "pause_jobs": "Pause the job (or the marked jobs)",
    "resume_jobs": "Resume the job (or the marked jobs)",
    "messages": "Messages: every notice given, newest first; mute a job's",
}
"""The footer's one word, said in full on the help screen (by action)."""


def bindings_of(node_class: type[DOMNode]) -> list[Binding]:
    """Every binding `node_class` has, inherited ones included; a subclass's key wins.

    A key bound to several actions in one class (`p`: pause, or resume) is listed
    once per action; the hidden twins that only say why a key does not apply
    (`refuse`) are not listed.
    """
    merged: dict[str, list[Binding]] = {}
    for cls in reversed(node_class.__mro__):
        declared: Iterable[BindingType] = cls.__dict__.get("BINDINGS", ())
        own: dict[str, list[Binding]] = {}
        for binding in Binding.make_bindings(declared):
            if not binding.action.startswith("refuse("):
                own.setdefault(binding.key, []).append(binding)
        for key, bindings in own.items():
            merged.pop(key, None)  # re-bound keys move to their new place
            merged[key] = bindings
    return [binding for bindings in merged.values() for binding in bindings]


def own_bindings(node_class: type[DOMNode]) -> list[Binding]:
    """The bindings `node_class` declares itself, without the hidden `refuse` twins."""
    declared: Iterable[BindingType] = node_class.__dict__.get("BINDINGS", ())
    return [b for b in Binding.make_bindings(declared) if not b.action.startswith("refuse(")]


def help_lines(sections: Iterable[tuple[str, list[Binding]]]) -> list[str]:
    """`KEY  description` lines under a heading per section."""
    lines: list[str] = []
    for heading, bindings in sections:
        if lines:
            lines.append("")
        lines.append(heading)
        for binding in bindings:
            words = _BETTER_WORDS.get(binding.key) if heading.startswith("Jobs") else None
            words = words or _LONGER_WORDS.get(binding.action)
            words = words or binding.description or binding.action.replace("_", " ")
            lines.append(f"  {format_key(binding.key):<{KEY_WIDTH}}{words}")
    return lines


class HelpScreen(Screen[None]):
    """What each key does, on every pane; scroll with the arrows, `escape` goes back."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Back"),
        Binding("q", "close", "Back", show=False),
        Binding("question_mark", "close", "Back", show=False),
    ]

    def __init__(self, sections: Iterable[tuple[str, list[Binding]]]) -> None:
        super().__init__()
        self.sections = list(sections)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-body"):
            yield Static(Text("\n".join(help_lines(self.sections))), id="help-text")
        yield Footer()

    def on_mount(self) -> None:
        if (body := present(self, "#help-body")) is not None:
            body.focus()

    def action_close(self) -> None:
        self.dismiss(None)
