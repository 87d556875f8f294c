"""The main screen (SPEC R18): status line, banner, jobs, running and audit panes, and their keys.

Every key acts on what the panes show, through the operator (a confirmation,
then the control seam). The panes are kept in step by `LivePanes`.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from textual import on
from textual.app import ComposeResult, SuspendNotSupported
from textual.binding import Binding, BindingType
from textual.events import DescendantFocus, ScreenResume, ScreenSuspend
from textual.screen import Screen
from textual.widgets import Footer

from tuisched.domain.runs import RunRecord
from tuisched.domain.views import ConfigEdit
from tuisched.frontends.tui.keyrules import Cursor, every_paused, own_paused, refusal, runs_of
from tuisched.frontends.tui.panes import LivePanes
from tuisched.frontends.tui.screens.diff import DiffScreen
from tuisched.frontends.tui.screens.groups import GroupPickerScreen
from tuisched.frontends.tui.screens.ledger import LedgerScreen, missed_banner
from tuisched.frontends.tui.screens.nodes import NodesScreen
from tuisched.frontends.tui.screens.output import (
    OutputScreen,
    open_latest_output,
    run_on_terminal,
)
from tuisched.frontends.tui.widgets.audit import AuditPane
from tuisched.frontends.tui.widgets.banner import Banner
from tuisched.frontends.tui.widgets.filter import FilterBox
from tuisched.frontends.tui.widgets.jobs import JobsTable
from tuisched.frontends.tui.widgets.running import RunningTable
from tuisched.frontends.tui.widgets.status import StatusLine
from tuisched.frontends.tui.widgets.why import WhyStrip

if TYPE_CHECKING:
    from tuisched.frontends.tui.host import ConsoleHost

REFRESH_SECONDS = 0.25
"""How often the events heard are applied to the panes."""
_LEGEND_ACTIONS = (
    "run_jobs", "stop_run", "pause_jobs", "resume_jobs", "edit_job", "delete_job", "mark", "copy",
)  # fmt: skip
"""The actions whose keys come and go with the cursor (see `refresh_legend`)."""
FOCUS_MARK = "▶ "
"""Before the focused pane's title: focus shown by more than the border's colour."""
PANE_TITLES = {"jobs": "1 Jobs", "running": "2 Running", "audit": "3 Audit log"}
SINGLE_NODE = "nodes: this scheduler is not in a cluster"
"""What `4` and `N` say on a single node, where there are no nodes to list."""
HINTS = {
    "colon": "commands: ctrl+p (the palette); ? lists the keys",
    "A": "A acts in the missed-slots ledger (m); a adds a job",
}
"""What the keys other consoles use (k9s's `:`) or other screens have (the ledger's `A`)
say here, instead of nothing."""


def pane_title(pane: str, *, focused: bool = False) -> str:
    """A pane's title on its rule, a space either side (a rule has no corner to pad it)."""
    return f" {FOCUS_MARK if focused else ''}{PANE_TITLES[pane]} "


def _refusable(
    key: str, action: str, description: str, *, show: bool = True, key_display: str | None = None
) -> list[Binding]:
    """`key` for `action`, then a hidden twin on the same key that says why it cannot apply.

    The footer shows an action only while `check_action` allows it; a key whose action
    is not allowed falls through to the twin, which tells the operator why (no dialog).
    """
    name = action.split("(", maxsplit=1)[0]
    return [
        Binding(key, action, description, show=show, key_display=key_display),
        Binding(key, f"refuse('{name}')", description, show=False),
    ]


class MainScreen(Screen[None]):
    """The console's home: every job, the runs in progress, the audit log."""

    BINDINGS: ClassVar[list[BindingType]] = [
        # The app's own keys first, so the footer reads as on every screen.
        Binding("q", "app.quit_console", "Quit"),
        Binding("question_mark", "app.help", "Help"),
        *_refusable("r", "run_jobs", "Run"),
        *_refusable("s", "stop_run(False)", "Stop"),
        *_refusable("ctrl+k", "stop_run(True)", "Kill", show=False),
        Binding("p", "pause_jobs", "Pause"),
        Binding("p", "resume_jobs", "Resume"),
        Binding("p", "refuse('pause_jobs')", "Pause", show=False),
        *_refusable("e", "edit_job", "Edit"),
        *_refusable("y", "copy", "Copy"),
        Binding("slash", "filter", "Filter"),
        Binding("z", "zoom", "Zoom", show=False),  # in the help (?): the legend fits 80
        Binding("M", "messages", "Messages"),
        # As in file managers (mc, ranger, nnn), space marks and goes down a row: the
        # footer says so (␣, the sign for a space, keeps it within 80 columns).
        *_refusable("space", "mark", "Mark↓", key_display="␣"),
        *_refusable("P", "toggle_pause_all", "Pause all", show=False),
        *_refusable("a", "add_job", "Add", show=False),
        *_refusable("E", "edit_file", "Edit YAML", show=False),
        *_refusable("d", "delete_job", "Delete", show=False),
        *_refusable("u", "undo", "Undo", show=False),
        Binding("o", "sort", "Sort", show=False),
        Binding("O", "reverse_sort", "Reverse sort", show=False),
        *_refusable("R", "reload", "Reload", show=False),
        Binding("D", "show_diff", "Diff", show=False),
        Binding("v", "group_view", "Groups", show=False),
        Binding("escape", "clear", "Clear marks, dismiss", show=False),
        Binding("1", "focus_pane('jobs')", "Jobs", show=False),
        Binding("2", "focus_pane('running')", "Running", show=False),
        Binding("3", "focus_pane('audit')", "Audit", show=False),
        Binding("4", "nodes", "Nodes", show=False),
        Binding("N", "nodes", "Nodes", show=False),
        Binding("colon", "hint('colon')", "Commands: ctrl+p", show=False),
        Binding("A", "hint('A')", "A: in the missed slots (m)", show=False),
        Binding("l", "logs", "Logs", show=False),
        Binding("m", "missed", "Missed slots", show=False),
        Binding("S", "app.simulate", "Simulate", show=False),
    ]
    ALLOW_IN_MAXIMIZED_VIEW = "#status, #filter, Footer"
    """A zoomed pane (`z`) keeps the status line, the filter and the legend of keys."""

    def __init__(self, host: ConsoleHost) -> None:
        super().__init__()
        self.host = host
        self.panes = LivePanes(
            self, host.control, host.state, clock=host.clock, read_only=host.read_only,
            on_lost=host.scheduler_lost, notices=host.notices, tell=host.notify,
        )  # fmt: skip
        self._legend: tuple[object, ...] = ()
        """What the footer's keys were last worked out from (see `refresh_legend`)."""

    def compose(self) -> ComposeResult:
        yield StatusLine(id="status")
        banner = Banner(id="banner")
        banner.display = False
        yield banner
        jobs = JobsTable(id="jobs")
        jobs.border_title = pane_title("jobs")
        yield jobs
        yield WhyStrip(self.host.state, id="why")
        running = RunningTable(id="running")
        running.border_title = pane_title("running")
        running.add_class("-empty")
        yield running
        audit = AuditPane(id="audit")
        audit.border_title = pane_title("audit")
        yield audit
        yield FilterBox(id="filter")
        # The legend of keys fits 80 columns, `s Stop` and `␣ Mark↓` too: ctrl+p, the
        # palette, is on the help screen (?) and where `:` points, not on this line.
        yield Footer(compact=True, show_command_palette=False)

    async def preview(self) -> None:
        """While the hosted scheduler starts: its file's jobs, before their next runs are
        known."""
        await self.panes.preview()

    async def start(self) -> None:
        """Read the scheduler once, then keep the panes in step with it."""
        await self.panes.load()
        self.query_one(WhyStrip).follow()  # the preview's rows were the same: say it now
        self.run_worker(self._tell_missed(), group="ledger")
        self.set_interval(REFRESH_SECONDS, self.panes.refresh)
        self.set_interval(1.0, self.panes.tick)
        if self.focused is None:  # a filter or a pane chosen while it started keeps the focus
            self.query_one(JobsTable).focus()

    def on_unmount(self) -> None:
        self.panes.close()

    @on(ScreenSuspend)
    @on(ScreenResume)
    def _covered_or_uncovered(self) -> None:
        self.refresh_bindings()  # under a dialog, the footer offers none of our keys

    @on(DescendantFocus)
    def _focus_moved(self) -> None:
        """Mark the focused pane's title, and show the keys that apply there."""
        focused = self.focused
        for pane in PANE_TITLES:
            widget = self.query_one(f"#{pane}")
            widget.border_title = pane_title(pane, focused=widget is focused)
        self.refresh_legend()

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

    # --- actions --------------------------------------------------------------------

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
                f"Delete {job} from {file}?", ConfigEdit.delete_job(job), done=f"{job} deleted"
            )

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

    def action_copy(self) -> None:
        """`y`: copy the selected run's id, or the selected job's command or target."""
        if self._focused_pane() == "running":
            run_id = self.query_one(RunningTable).selected_run()
            if run_id is not None:
                self._copy(run_id, "run id")
            return
        job = self.query_one(JobsTable).selected_job()
        if job is not None:
            self.run_worker(self._copy_job(job), group="copy", exclusive=True)

    async def _copy_job(self, job: str) -> None:
        definition = await self.host.control.job_definition(job)
        what = job_target(definition or {})
        if what is None:
            self.notify(f"{job} has no command to copy", severity="warning", markup=False)
            return
        kind, text = what
        self._copy(text, f"{job}'s {kind}")

    def _copy(self, text: str, what: str) -> None:
        """To the terminal's clipboard (OSC 52: through tmux and SSH too), and say so."""
        self.app.copy_to_clipboard(text)
        shown = text if len(text) <= 40 else text[:39] + "…"
        self.notify(f"copied {what}: {shown}", markup=False)

    def action_zoom(self) -> None:
        """`z`: the focused pane fills the screen; again (or escape), back to every pane."""
        if self.maximized is not None:
            self.minimize()
        elif self.focused is not None:
            self.maximize(self.focused, container=False)

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
                status = await run_on_terminal([*editor, str(path)])
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

    def action_clear(self) -> None:
        """`escape`: clear the marks, put the banner away (its standing note too), close
        the filter."""
        self._clear_marks()
        self.query_one(Banner).clear_note()
        self.query_one(Banner).hide()
        self.query_one(FilterBox).close()

    def action_focus_pane(self, pane: str) -> None:
        if self.maximized is not None:
            self.minimize()
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
        """`o`: the next order; the arrow in the header shows the column sorted by."""
        self.notify(f"sorted by {self.panes.next_sort()}", markup=False)

    def action_reverse_sort(self) -> None:
        """`O`: the same order, backwards."""
        self.notify(f"sorted by {self.panes.reverse_sort()}", markup=False)

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

    def action_hint(self, key: str) -> None:
        """A key that does nothing here, pressed out of habit: what to press instead."""
        self.notify(HINTS[key], markup=False)

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


def job_target(definition: Mapping[str, object]) -> tuple[str, str] | None:
    """What `y` copies of a job: (`command`, its command line), or its python target, or
    its wait_for pattern; None when it has none of these."""
    for kind in ("command", "python", "wait_for"):
        value = definition.get(kind)
        if isinstance(value, list):
            return kind, shlex.join(str(part) for part in value)
        if isinstance(value, str | int | float) and str(value):
            return kind, str(value)
    return None
