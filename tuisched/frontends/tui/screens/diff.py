"""The offline-edit view (`D`): what reloading the file on disk would change, or why it cannot."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from tuisched.domain.config.config import parse_config
from tuisched.domain.config.diff import config_diff
from tuisched.domain.errors import ConfigError
from tuisched.runtime.runtime import Runtime


def pending_lines(runtime: Runtime, now: datetime) -> list[str]:
    """The diff of the file on disk against the live configuration, or its problems.

    Pure but for parsing (which may take a while on a big file: call it in a thread).
    """
    source = runtime.source
    pending = source.pending if source is not None else None
    if source is None or pending is None:
        return ["no offline edit: the file on disk is what is running"]
    try:
        candidate = parse_config(pending, source.path)
    except ConfigError as error:
        problems = [str(problem) for problem in error.problems] or [str(error)]
        return [
            f"the file on disk does not validate ({len(problems)} problems);"
            " reloading would change nothing:",
            *problems,
        ]
    diff = config_diff(runtime.config, candidate, now)
    if diff.empty:
        return ["the file on disk differs, but no job, group or setting changes"]
    return [f"reloading would apply: {diff.summary()}", "", *diff.lines()]


class DiffScreen(Screen[bool]):
    """What the offline edit changes; `R` reloads (after a confirmation), `escape` goes back.

    Dismissed with True when the operator chose to reload, so the app asks and reloads.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Back"),
        Binding("q", "close", "Back", show=False),
        Binding("R", "reload", "Reload"),
    ]

    def __init__(
        self, runtime: Runtime, clock: Callable[[], datetime], *, read_only: bool = False
    ) -> None:
        super().__init__()
        self.runtime = runtime
        self.clock = clock
        self.read_only = read_only

    def compose(self) -> ComposeResult:
        yield Static(Text(f" offline edit of {self.runtime.config.path}"), id="diff-title")
        with VerticalScroll(id="diff-body"):
            yield Static(Text("reading the file..."), id="diff-text")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#diff-body").focus()
        self._compute()

    @work(exclusive=True)
    async def _compute(self) -> None:
        lines = await asyncio.to_thread(pending_lines, self.runtime, self.clock())
        self.query_one("#diff-text", Static).update(Text("\n".join(lines)))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """`--read-only` hides the reload."""
        return not (self.read_only and action == "reload")

    def action_close(self) -> None:
        self.dismiss(False)

    def action_reload(self) -> None:
        self.dismiss(True)
