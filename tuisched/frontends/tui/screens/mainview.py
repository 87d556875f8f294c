"""The main screen's ground: its panes, where the operator is, and which keys apply.

`MainView` is what every part of the main screen stands on (`mainkeys` acts on the
jobs and runs; `main.MainScreen` lays the panes out and hands them to the terminal):
the live panes, the cursor (the focused pane, the job, the marks, the run), the jobs a
key acts on, and the legend of keys that apply there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import on
from textual.events import ScreenResume, ScreenSuspend
from textual.screen import Screen

from tuisched.domain.runs import RunRecord
from tuisched.frontends.tui.keyrules import Cursor, every_paused, own_paused, refusal
from tuisched.frontends.tui.panes import LivePanes
from tuisched.frontends.tui.widgets.jobs import JobsTable
from tuisched.frontends.tui.widgets.running import RunningTable

if TYPE_CHECKING:
    from tuisched.frontends.tui.host import ConsoleHost

_LEGEND_ACTIONS = (
    "run_jobs", "stop_run", "pause_jobs", "resume_jobs", "edit_job", "delete_job", "mark", "copy",
)  # fmt: skip
"""The actions whose keys come and go with the cursor (see `refresh_legend`)."""
PANE_TITLES = {"jobs": "1 Jobs", "running": "2 Running", "audit": "3 Audit log"}


class MainView(Screen[None]):
    """The main screen's panes and cursor; the keys that apply where the cursor is."""

    def __init__(self, host: ConsoleHost) -> None:
        super().__init__()
        self.host = host
        self.panes = LivePanes(
            self, host.control, host.state, clock=host.clock, read_only=host.read_only,
            on_lost=host.scheduler_lost, notices=host.notices, tell=host.notify,
        )  # fmt: skip
        self._legend: tuple[object, ...] = ()
        """What the footer's keys were last worked out from (see `refresh_legend`)."""

    @on(ScreenSuspend)
    @on(ScreenResume)
    def _covered_or_uncovered(self) -> None:
        self.refresh_bindings()  # under a dialog, the footer offers none of our keys

    @on(JobsTable.Highlighted, "#jobs")
    def _job_highlighted(self) -> None:
        self.refresh_legend()

    def refresh_legend(self) -> None:
        """Show again the keys that apply, if any key's state changed.

        The footer is rebuilt only then: not on each cursor move or refresh of
        the panes (a rebuild costs a key press tens of milliseconds).
        """
        legend = tuple(self.check_action(action, ()) for action in _LEGEND_ACTIONS)
        if legend != self._legend:
            self._legend = legend
            self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Offer only the keys that apply where the cursor is; a dialog on top, none.

        The footer stays in sight under a dialog: it must not offer keys that
        act on panes the dialog covers. A key whose action does not apply
        falls through to its `refuse` twin, which says why.
        """
        if self.app.screen is not self:
            return False
        if action == "refuse":
            return True
        if self.refusal(action) is None:
            return True
        wider = self._focused_pane() == "jobs" and not self.host.read_only
        if action == "resume_jobs" and wider and self._every_paused():
            return None  # held by a wider pause: Resume is shown, dimmed (p says why)
        return False

    def refusal(self, action: str) -> str | None:
        """Why `action` cannot apply now (None: it can), said before any dialog."""
        return refusal(action, self.cursor(), self.host.state)

    def cursor(self) -> Cursor:
        """Where the operator is: the focused pane, the job, the marks, the run."""
        focused, jobs = self.focused, self.query_one(JobsTable)
        return Cursor(
            pane=focused.id if focused is not None and focused.id in PANE_TITLES else None,
            job=jobs.selected_job(),
            marked=tuple(jobs.marked),
            run=self.query_one(RunningTable).selected_run(),
            read_only=self.host.read_only,
        )

    def _focused_pane(self) -> str | None:
        return self.cursor().pane

    def _every_paused(self) -> bool:
        """Whether every job a key acts on is paused (then `p` resumes)."""
        return every_paused(self.targets(), self.host.state)

    def _own_paused(self, jobs: list[str]) -> list[str]:
        return own_paused(jobs, self.host.state)

    # --- selection ------------------------------------------------------------------

    def targets(self) -> list[str]:
        """The jobs a key acts on: the marked ones, else the one under the cursor."""
        return self.cursor().targets

    def selected_job(self) -> str | None:
        """The job under the jobs pane's cursor (and a notice when there is none)."""
        job = self.query_one(JobsTable).selected_job()
        if job is None:
            self.notify("no job selected", severity="warning", markup=False)
        return job

    def selected_run(self) -> RunRecord | None:
        """The run under the running pane's cursor when it has the focus, else the
        selected job's run in progress."""
        state, running = self.host.state, self.query_one(RunningTable)
        if running.has_focus:
            chosen = state.run_of(running.selected_run() or "")
        else:
            chosen = state.run_of_job(self.query_one(JobsTable).selected_job() or "")
        if chosen is None:
            self.notify("no run of this job in progress (2: the running pane)", markup=False)
            return None
        return chosen.run

    def action_refuse(self, action: str) -> None:
        """A key whose action cannot apply: say why, ask nothing."""
        why = self.refusal(action)
        if action == "pause_jobs" and why is not None and self._every_paused():
            why = self.refusal("resume_jobs") or why  # `p` resumes these: say why it cannot
        self.notify(why or "that key does not apply here", severity="warning", markup=False)

    def _clear_marks(self) -> None:
        self.query_one(JobsTable).clear_marks()
        self.panes.show_marks()
        self.refresh_legend()
