"""The main screen's keys that act: on jobs and runs (through the operator), and those
that open another screen over the panes.

`JobKeys` runs, pauses, resumes, stops, adds, edits and deletes jobs, marks rows, undoes
and reloads; each asks first, through the operator. `ScreenKeys` opens the views of
what the panes only sum up: the diff, the notices, the nodes, the groups, a job's
detail, a run's output, the missed-slots ledger.
"""

from __future__ import annotations

from textual import on

from tuisched.domain.views import ConfigEdit
from tuisched.frontends.tui.keyrules import runs_of
from tuisched.frontends.tui.screens.diff import DiffScreen
from tuisched.frontends.tui.screens.groups import GroupPickerScreen
from tuisched.frontends.tui.screens.ledger import LedgerScreen, missed_banner
from tuisched.frontends.tui.screens.mainview import MainView
from tuisched.frontends.tui.screens.nodes import NodesScreen
from tuisched.frontends.tui.screens.output import OutputScreen, open_latest_output
from tuisched.frontends.tui.widgets.banner import Banner
from tuisched.frontends.tui.widgets.filter import FilterBox
from tuisched.frontends.tui.widgets.jobs import JobsTable
from tuisched.frontends.tui.widgets.running import RunningTable

SINGLE_NODE = "nodes: this scheduler is not in a cluster"
"""What `4` and `N` say on a single node, where there are no nodes to list."""


class JobKeys(MainView):
    """The keys that act on jobs and runs: each asks first, through the operator."""

    def action_run_jobs(self) -> None:
        """`r`: run the marked jobs (one question), or the cursor's job."""
        jobs = self.targets()
        if len(jobs) == 1 and not self.query_one(JobsTable).marked:
            self.host.operator.run(jobs[0])
        else:
            self.host.operator.run_jobs(jobs, on_yes=self._clear_marks)

    def action_pause_jobs(self) -> None:
        """`p` on jobs not all paused: pause those that are not."""
        states = self.host.state.jobs
        jobs = [job for job in self.targets() if job in states and not states[job].paused]
        self._pause(jobs, paused=False)

    def action_resume_jobs(self) -> None:
        """`p` on paused jobs: resume those paused by their own pause."""
        self._pause(self._own_paused(self.targets()), paused=True)

    def _pause(self, jobs: list[str], *, paused: bool) -> None:
        if len(jobs) == 1 and not self.query_one(JobsTable).marked:
            self.host.operator.pause_job(jobs[0])  # the one job: asked by its name
        else:
            self.host.operator.pause_jobs(jobs, paused=paused, on_yes=self._clear_marks)

    def action_add_job(self) -> None:
        self.run_worker(self.host.open_form(None), group="job-form", exclusive=True)

    def action_edit_job(self) -> None:
        job = self.selected_job()
        if job is not None:
            self.run_worker(self.host.open_form(job), group="job-form", exclusive=True)

    def action_delete_job(self) -> None:
        job = self.selected_job()
        if job is not None and self.host.state.status is not None:
            file = self.host.state.status.config_path.name
            self.host.operator.edit(
                f"Delete {job} from {file}?", ConfigEdit.delete_job(job), done=f"{job} deleted",
                removes=job,
            )  # fmt: skip

    def action_stop_run(self, kill: bool) -> None:
        """`s` stops the selected run, or the marked jobs' runs (SIGTERM, then SIGKILL);
        `ctrl+k` kills at once."""
        if self._focused_pane() == "running" or not self.query_one(JobsTable).marked:
            run = self.selected_run()
            if run is not None:
                self.host.operator.stop(run, kill=kill)
            return
        runs = runs_of(self.targets(), self.host.state)
        self.host.operator.stop_runs(runs, kill=kill, on_yes=self._clear_marks)

    def action_mark(self) -> None:
        """`space`: mark the cursor's job (or unmark it) and go to the next row."""
        self.query_one(JobsTable).toggle_mark()
        self.panes.show_marks()
        self.refresh_legend()

    def action_toggle_pause_all(self) -> None:
        status = self.host.state.status
        self.host.operator.pause_all(paused=status is not None and status.all_paused)

    def action_undo(self) -> None:
        self.host.operator.undo()

    def action_reload(self) -> None:
        self.host.operator.reload()


class ScreenKeys(MainView):
    """The keys that open another screen over the panes."""

    def action_show_diff(self) -> None:
        def closed(reload: bool | None) -> None:
            if reload and not self.host.read_only:
                self.host.operator.reload()

        self.app.push_screen(DiffScreen(self.host.control, read_only=self.host.read_only), closed)

    def action_messages(self) -> None:
        """`M`: every notice the console gave (see `screens.messages`)."""
        self.host.action_messages()

    def action_nodes(self) -> None:
        """The cluster's nodes (`4`, or `N`), refreshed each second; on a single node, a
        notice that says so (no empty pane)."""
        status = self.host.state.status
        if status is not None and not status.cluster:
            self.notify(SINGLE_NODE, markup=False)
            return
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
