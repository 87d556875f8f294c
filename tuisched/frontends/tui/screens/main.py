"""The main screen (SPEC R18): status line, banner, jobs, running and audit panes, and their keys.

Every key acts on what the panes show, through the operator (a confirmation,
then the control seam). The panes are kept in step by `LivePanes`.
"""

from __future__ import annotations

import asyncio
import os
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from textual import on
from textual.app import ComposeResult, SuspendNotSupported
from textual.binding import Binding, BindingType
from textual.events import ScreenResume, ScreenSuspend
from textual.screen import Screen
from textual.widgets import Footer

from tuisched.domain.runs import RunRecord
from tuisched.domain.views import ConfigEdit
from tuisched.frontends.tui.panes import LivePanes
from tuisched.frontends.tui.screens.diff import DiffScreen
from tuisched.frontends.tui.screens.groups import GroupPickerScreen
from tuisched.frontends.tui.screens.ledger import LedgerScreen, missed_banner
from tuisched.frontends.tui.screens.nodes import NodesScreen
from tuisched.frontends.tui.screens.output import OutputScreen, open_latest_output
from tuisched.frontends.tui.widgets.audit import AuditPane
from tuisched.frontends.tui.widgets.banner import Banner
from tuisched.frontends.tui.widgets.filter import FilterBox
from tuisched.frontends.tui.widgets.jobs import JobsTable
from tuisched.frontends.tui.widgets.running import RunningTable
from tuisched.frontends.tui.widgets.status import StatusLine
from tuisched.frontends.tui.widgets.why import WhyStrip

if TYPE_CHECKING:
    from tuisched.frontends.tui.app import TuischedApp

REFRESH_SECONDS = 0.25
"""How often the events heard are applied to the panes."""
MUTATING = frozenset({"job", "stop_run", "toggle_pause_all", "edit_file", "undo", "reload"})
"""Actions hidden by `--read-only`."""


class MainScreen(Screen[None]):
    """The console's home: every job, the runs in progress, the audit log."""

    BINDINGS: ClassVar[list[BindingType]] = [
        # The app's own keys first, so the footer reads as on every screen.
        Binding("q", "app.quit_console", "Quit"),
        Binding("question_mark", "app.help", "Help"),
        Binding("r", "job('run')", "Run"),
        Binding("s", "stop_run(False)", "Stop"),
        Binding("ctrl+k", "stop_run(True)", "Kill", show=False),
        Binding("p", "job('pause')", "Pause"),
        Binding("P", "toggle_pause_all", "Pause all", show=False),
        Binding("a", "job('add')", "Add", show=False),
        Binding("e", "job('edit')", "Edit"),
        Binding("E", "edit_file", "Edit YAML", show=False),
        Binding("d", "job('delete')", "Delete", show=False),
        Binding("u", "undo", "Undo", show=False),
        Binding("slash", "filter", "Filter"),
        Binding("o", "sort", "Sort", show=False),
        Binding("R", "reload", "Reload", show=False),
        Binding("D", "show_diff", "Diff", show=False),
        Binding("g", "group_view", "Groups", show=False),
        Binding("escape", "dismiss_banner", "Dismiss", show=False),
        Binding("1", "focus_pane('jobs')", "Jobs", show=False),
        Binding("2", "focus_pane('running')", "Running", show=False),
        Binding("3", "focus_pane('audit')", "Audit", show=False),
        Binding("4", "nodes", "Nodes", show=False),
        Binding("l", "logs", "Logs", show=False),
        Binding("m", "missed", "Missed slots", show=False),
        Binding("S", "app.simulate", "Simulate", show=False),
    ]

    def __init__(self, host: TuischedApp) -> None:
        super().__init__()
        self.host = host
        self.panes = LivePanes(
            self, host.control, host.state, clock=host.clock, read_only=host.read_only,
            on_lost=host.scheduler_lost,
        )  # fmt: skip

    def compose(self) -> ComposeResult:
        yield StatusLine(id="status")
        banner = Banner(id="banner")
        banner.display = False
        yield banner
        jobs = JobsTable(id="jobs")
        jobs.border_title = "1 Jobs"
        yield jobs
        yield WhyStrip(self.host.state, id="why")
        running = RunningTable(id="running")
        running.border_title = "2 Running"
        yield running
        audit = AuditPane(id="audit")
        audit.border_title = "3 Audit log"
        yield audit
        yield FilterBox(id="filter")
        yield Footer()

    async def start(self) -> None:
        """Read the scheduler once, then keep the panes in step with it."""
        await self.panes.load()
        self.run_worker(self._tell_missed(), group="ledger")
        self.set_interval(REFRESH_SECONDS, self.panes.refresh)
        self.set_interval(1.0, self.panes.tick)
        self.query_one(JobsTable).focus()

    def on_unmount(self) -> None:
        self.panes.close()

    @on(ScreenSuspend)
    @on(ScreenResume)
    def _covered_or_uncovered(self) -> None:
        self.refresh_bindings()  # under a dialog, the footer offers none of our keys

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """`--read-only` hides every action that changes something; a dialog on top, all.

        The footer stays in sight under a dialog: it must not offer keys that
        act on panes the dialog covers.
        """
        if self.app.screen is not self:
            return False
        return not (self.host.read_only and action in MUTATING)

    # --- selection ------------------------------------------------------------------

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

    # --- actions --------------------------------------------------------------------

    def action_job(self, verb: str) -> None:
        """`r` run, `p` pause or resume, `e` edit, `d` delete the selected job; `a` add one."""
        if verb == "add":
            self.run_worker(self.host.open_form(None), group="job-form", exclusive=True)
            return
        job = self.selected_job()
        if job is None:
            return
        operator = self.host.operator
        if verb == "run":
            operator.run(job)
        elif verb == "pause":
            operator.pause_job(job)
        elif verb == "edit":
            self.run_worker(self.host.open_form(job), group="job-form", exclusive=True)
        elif verb == "delete" and self.host.state.status is not None:
            file = self.host.state.status.config_path.name
            operator.edit(
                f"Delete {job} from {file}?", ConfigEdit.delete_job(job), done=f"{job} deleted"
            )

    def action_stop_run(self, kill: bool) -> None:
        """`s` stops the selected run (SIGTERM, then SIGKILL); `ctrl+k` kills it at once."""
        run = self.selected_run()
        if run is not None:
            self.host.operator.stop(run, kill=kill)

    def action_toggle_pause_all(self) -> None:
        status = self.host.state.status
        self.host.operator.pause_all(paused=status is not None and status.all_paused)

    def action_undo(self) -> None:
        self.host.operator.undo()

    def action_reload(self) -> None:
        self.host.operator.reload()

    def action_edit_file(self) -> None:
        """Edit the YAML in $EDITOR; the change shows as an offline edit (R to reload).

        The scheduler keeps firing while the editor runs: the editor is a child
        process awaited on the loop, never a blocking call.
        """
        status = self.host.state.status
        if status is not None:
            self.run_worker(self._edit_file(status.config_path), group="editor", exclusive=True)

    async def _edit_file(self, path: Path) -> None:
        command = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
        try:
            editor = shlex.split(command)
        except ValueError as error:
            self.notify(f"cannot read $EDITOR '{command}': {error}", severity="error", markup=False)
            return
        self.panes.hold(True)  # no repaints over the editor's screen
        try:
            with self.app.suspend():
                status = await _run_editor([*editor, str(path)])
        except SuspendNotSupported:
            self.notify(
                f"this terminal cannot be handed to an editor; edit {path} elsewhere",
                severity="warning", markup=False,
            )  # fmt: skip
            return
        finally:
            self.panes.hold(False)
        if status is None:
            self.notify(f"cannot start the editor '{editor[0]}'", severity="error", markup=False)
        elif status:
            self.notify(f"the editor exited with status {status}", severity="warning", markup=False)

    def action_dismiss_banner(self) -> None:
        self.query_one(Banner).clear_note()
        self.query_one(Banner).hide()
        self.query_one(FilterBox).close()

    def action_focus_pane(self, pane: str) -> None:
        self.query_one(f"#{pane}").focus()

    def action_filter(self) -> None:
        self.query_one(FilterBox).open()

    @on(FilterBox.Applied)
    def _filtered(self, event: FilterBox.Applied) -> None:
        self.panes.filter(event.text)

    @on(FilterBox.Kept)
    def _filter_kept(self) -> None:
        self.query_one(JobsTable).focus()

    def action_sort(self) -> None:
        self.notify(f"sorted by {self.panes.next_sort()}", markup=False)

    def action_show_diff(self) -> None:
        def closed(reload: bool | None) -> None:
            if reload and not self.host.read_only:
                self.host.operator.reload()

        self.app.push_screen(DiffScreen(self.host.control, read_only=self.host.read_only), closed)

    def action_nodes(self) -> None:
        """The cluster's nodes (key 4), refreshed each second."""
        self.app.push_screen(NodesScreen(self.host.control.nodes))

    def action_group_view(self) -> None:
        self.run_worker(self._pick_group(), group="groups", exclusive=True)

    async def _pick_group(self) -> None:
        groups = await self.host.control.groups()

        def picked(choice: tuple[str, str] | None) -> None:
            if choice is None:
                return
            what, name = choice
            if what == "toggle":
                group = next(g for g in groups if g.name == name)
                self.host.operator.pause_group(name, len(group.jobs), paused=group.paused)
                return
            self.query_one(FilterBox).open(name)  # shown, so that esc clears it as any filter
            self.query_one(JobsTable).focus()

        self.app.push_screen(GroupPickerScreen(groups, read_only=self.host.read_only), picked)

    @on(JobsTable.Chosen, "#jobs")
    def _job_chosen(self, event: JobsTable.Chosen) -> None:
        self.host.show_job(event.job)

    # --- the output viewer ------------------------------------------------------------

    def action_logs(self) -> None:
        """`l`: the output of the run under the running pane's cursor (when it has the
        focus), else of the selected job's run in progress or newest run."""
        running = self.query_one(RunningTable)
        if running.has_focus and running.selected_run():
            self.app.push_screen(OutputScreen(self.host, running.selected_run() or ""))
            return
        job = self.selected_job()
        if job is not None:
            self.run_worker(open_latest_output(self.host, job), group="output-viewer")

    # --- the downtime ledger (SPEC R25) ---

    def action_missed(self) -> None:
        """The slots missed while the scheduler was down or jobs paused, and the choices (m)."""
        self.query_one(Banner).clear_note()  # seen: the ledger itself says what waits
        self.app.push_screen(LedgerScreen(self.host))

    async def _tell_missed(self) -> None:
        """At start (or attach), the banner says when missed slots wait for a decision."""
        text = await missed_banner(self.host.control)
        if text is not None:
            self.query_one(Banner).show_note(text)


async def _run_editor(argv: list[str]) -> int | None:
    """Run the editor on the terminal and wait for it on the loop; None if it cannot start."""
    try:
        process = await asyncio.create_subprocess_exec(*argv)
    except OSError:
        return None
    return await process.wait()
