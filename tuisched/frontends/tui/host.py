"""What the console's screens need of the app that shows them: `ConsoleHost`.

The screens (main, detail, ledger, output) and the command palette's provider take
a `ConsoleHost`, not the app class, so none of them imports `app.py` (which imports
every screen): each can be read, typed and tested alone. `TuischedApp` is the one
host; a test may pass any object with these members.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

from textual.notifications import SeverityLevel
from textual.screen import Screen

from tuisched.domain.errors import TuischedError
from tuisched.frontends.tui.notices import NoticeLog
from tuisched.frontends.tui.operator import Operator
from tuisched.frontends.tui.panes import LivePanes
from tuisched.frontends.tui.state import ConsoleState
from tuisched.runtime.control import SchedulerControl


class PanesScreen(Protocol):
    """The main screen, as another screen sees it: its live panes."""

    @property
    def panes(self) -> LivePanes:
        """The panes that apply the events heard (held while a pager has the terminal)."""


class ConsoleHost(Protocol):
    """The app, as its screens see it: the scheduler's seam, what the console knows of
    it, the operator's actions, notices, and the few screens one screen opens another by."""

    control: SchedulerControl
    """The scheduler, through the control seam."""
    state: ConsoleState
    """What the console knows of the scheduler (jobs, runs, status)."""
    read_only: bool
    """`--read-only`: every action is refused."""
    started: bool
    """True once the scheduler runs (the panes may still be reading it)."""
    clock: Callable[[], datetime]
    """The console's clock (what "today" is)."""
    notices: NoticeLog
    """Every notice given, for the messages view; the muted jobs."""
    operator: Operator
    """The operator's actions: asked first, then sent through the seam."""

    @property
    def main(self) -> PanesScreen:
        """The main screen (the bottom of the screen stack)."""

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
        job: str | None = None,
    ) -> None:
        """Log a notice and show it on the notice line (unless its `job` is muted)."""

    def push_screen(self, screen: Screen[Any]) -> object:
        """Show `screen` on top of the others."""

    def show_job(self, job: str) -> None:
        """Open the detail view of `job`."""

    async def open_form(self, job: str | None) -> None:
        """The job form: add a job (`job` None) or edit one."""

    def scheduler_lost(self, error: TuischedError) -> None:
        """The scheduler stopped, or stopped answering."""

    def action_messages(self) -> None:
        """Every notice given, newest first (`M`)."""
