"""The "why not running" strip under the jobs pane: one line for the job under the cursor."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from tuisched.domain.text import plain_text
from tuisched.frontends.tui.state import ConsoleState
from tuisched.frontends.tui.widgets.jobs import JobsTable

FOLLOW_SECONDS = 0.2
"""How often the strip looks at the cursor and the job's status."""


class WhyStrip(Widget):
    """Why the job under the jobs pane's cursor is not running now (`JobStatus.why`).

    It follows the cursor and the console's last reading of the jobs on a short
    timer, and at once when the pane's rows change (its virtual size does), rather
    than through messages, so the jobs pane and the main screen need not know of
    it; only a change of text repaints it (never a new layout).
    """

    DEFAULT_CSS = """
    WhyStrip {
        height: 1;
        width: 1fr;
        padding: 0 1;
    }
    """

    text: reactive[str] = reactive("", layout=False)
    """What the strip says: `backup: paused by ...`, or "" when no job is selected."""

    def __init__(self, state: ConsoleState, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._state = state

    def on_mount(self) -> None:
        self.set_interval(FOLLOW_SECONDS, self.follow)
        tables = self.screen.query(JobsTable)
        if tables:  # the pane's virtual size changes when its rows do (the first load too)
            self.watch(tables.first(), "virtual_size", self._rows_changed, init=False)

    def _rows_changed(self) -> None:
        self.call_later(self.follow)  # once the pane has put its cursor on a row

    def follow(self) -> None:
        """Say why of the job under the cursor, as the console last read it."""
        tables = self.screen.query(JobsTable)
        job = tables.first().selected_job() if tables else None
        status = self._state.jobs.get(job) if job is not None else None
        if status is None:
            self.text = ""
        elif status.why:
            self.text = f"{status.name}: {status.why}"
        else:
            self.text = f"{status.name}: {status.state.value}"

    def render(self) -> Text:
        """The line, as plain text (a job's name is never markup)."""
        return Text(plain_text(self.text), no_wrap=True, overflow="ellipsis")
