"""The main screen (SPEC R18): status line, banner, jobs, running and audit panes, and their keys.

Every key acts on what the panes show, through the operator (a confirmation,
then the control seam). The panes are kept in step by `LivePanes`.

The screen is built of parts with one job each: `mainview.MainView` (the panes, the
cursor, the keys that apply), `mainkeys.JobKeys` (acting on jobs and runs) and
`mainkeys.ScreenKeys` (opening other screens); `MainScreen` adds the layout, the
focus, the filter and sort, and what it hands to the terminal (the clipboard, the
editor).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

from textual import on
from textual.app import ComposeResult, SuspendNotSupported
from textual.binding import Binding, BindingType
from textual.events import DescendantFocus
from textual.widgets import Footer

from tuisched.frontends.tui.screens.mainkeys import JobKeys, ScreenKeys
from tuisched.frontends.tui.screens.mainview import PANE_TITLES
from tuisched.frontends.tui.screens.output import (
    run_on_terminal,
)
from tuisched.frontends.tui.widgets.audit import AuditPane
from tuisched.frontends.tui.widgets.banner import Banner
from tuisched.frontends.tui.widgets.filter import FilterBox
from tuisched.frontends.tui.widgets.jobs import JobsTable
from tuisched.frontends.tui.widgets.running import RunningTable
from tuisched.frontends.tui.widgets.status import StatusLine
from tuisched.frontends.tui.widgets.why import WhyStrip

REFRESH_SECONDS = 0.25
"""How often the events heard are applied to the panes."""
FOCUS_MARK = "▶ "
"""Before the focused pane's title: focus shown by more than the border's colour."""
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


class MainScreen(JobKeys, ScreenKeys):
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

    @on(DescendantFocus)
    def _focus_moved(self) -> None:
        """Mark the focused pane's title, and show the keys that apply there."""
        focused = self.focused
        for pane in PANE_TITLES:
            widget = self.query_one(f"#{pane}")
            widget.border_title = pane_title(pane, focused=widget is focused)
        self.refresh_legend()

    # --- actions ----------------------------------------------------------------------

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

    def action_hint(self, key: str) -> None:
        """A key that does nothing here, pressed out of habit: what to press instead."""
        self.notify(HINTS[key], markup=False)


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
