"""The console: a Textual app that hosts the runtime and steers it from the keyboard.

The runtime is the one `tuisched --no-ui` runs, unchanged. The app hears the
bus in one place (`_on_event`, which only queues), and applies what it heard
in batches, at most four times a second, by row key: a burst of thousands of
runs costs a few repaints, not thousands.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import subprocess
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import ClassVar

from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.command import Provider
from textual.timer import Timer
from textual.widgets import DataTable, Footer, Input

from tuisched.domain.errors import ConfigError, TuischedError
from tuisched.domain.events import (
    AlertFailed,
    ConfigChangedOnDisk,
    ConfigLoaded,
    ConfigRejected,
    Event,
    PauseChanged,
    RunAbandoned,
    RunEvent,
    RunFinished,
    RunNotStarted,
    RunOutputWritten,
    SlotMissed,
)
from tuisched.domain.runs import RunRecord
from tuisched.frontends.tui.commands import JobCommands
from tuisched.frontends.tui.screens.detail import JobDetailScreen
from tuisched.frontends.tui.screens.dialogs import ConfirmScreen, QuitScreen
from tuisched.frontends.tui.screens.diff import DiffScreen
from tuisched.frontends.tui.screens.form import JobFormScreen
from tuisched.frontends.tui.screens.groups import GroupPickerScreen
from tuisched.frontends.tui.screens.help import HelpScreen, bindings_of
from tuisched.frontends.tui.theme import TUISCHED_THEME
from tuisched.frontends.tui.view import JobRow, is_failure, job_row, run_row
from tuisched.frontends.tui.widgets.audit import AuditPane
from tuisched.frontends.tui.widgets.banner import Banner
from tuisched.frontends.tui.widgets.jobs import JobsTable
from tuisched.frontends.tui.widgets.running import RunningTable
from tuisched.frontends.tui.widgets.status import StatusLine
from tuisched.runtime.document import ConfigDocument
from tuisched.runtime.handlers.actions import who
from tuisched.runtime.handlers.audit import audit_line, read_tail
from tuisched.runtime.runtime import AlreadyRunningError, Runtime

REFRESH_SECONDS = 0.25
"""How often what the bus said is applied to the screen."""
MUTATING = frozenset(
    {
        "run_now", "stop_run", "kill_run", "toggle_pause", "toggle_pause_all", "add_job",
        "edit_job", "edit_file", "delete_job", "undo", "reload",
    }
)  # fmt: skip
"""Actions hidden by `--read-only`."""
MAIN_SCREEN_ONLY = MUTATING | {"filter", "sort", "focus_pane", "show_diff", "group_view"}
"""Actions on the main screen's panes, refused while another screen is on top."""
_AUDITED = (RunFinished, RunNotStarted, RunAbandoned, SlotMissed)


class TuischedApp(App[int]):
    """The operator console."""

    CSS_PATH = "tuisched.tcss"
    TITLE = "tuisched"
    COMMANDS: ClassVar[set[type[Provider] | Callable[[], type[Provider]]]] = App.COMMANDS | {
        JobCommands
    }
    """Textual's system commands, and run/pause/show for each job and group."""
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit_console", "Quit"),
        Binding("question_mark", "help", "Help"),
        Binding("r", "run_now", "Run"),
        Binding("s", "stop_run", "Stop"),
        Binding("ctrl+k", "kill_run", "Kill", show=False),
        Binding("p", "toggle_pause", "Pause"),
        Binding("P", "toggle_pause_all", "Pause all", show=False),
        Binding("a", "add_job", "Add", show=False),
        Binding("e", "edit_job", "Edit"),
        Binding("E", "edit_file", "Edit YAML", show=False),
        Binding("d", "delete_job", "Delete", show=False),
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
    ]

    def __init__(
        self,
        runtime: Runtime,
        *,
        read_only: bool = False,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        super().__init__()
        self.register_theme(TUISCHED_THEME)
        self.theme = TUISCHED_THEME.name
        self.runtime = runtime
        runtime.actor = who("console")
        self.read_only = read_only
        self.clock = clock or (lambda: datetime.now(UTC))
        self._pending: list[Event] = []
        self._last: dict[str, RunRecord] = {}
        self._last_lines: dict[str, str] = {}
        self._failures: list[datetime] = []
        self._sort = 0
        self._stopping = False
        self._filter_timer: Timer | None = None
        self.started = False

    # --- layout ---------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield StatusLine(id="status")
        banner = Banner(id="banner")
        banner.display = False
        yield banner
        jobs = JobsTable(id="jobs")
        jobs.border_title = "1 Jobs"
        yield jobs
        running = RunningTable(id="running")
        running.border_title = "2 Running"
        yield running
        audit = AuditPane(id="audit")
        audit.border_title = "3 Audit log"
        yield audit
        search = Input(
            placeholder="filter by name, group or state; enter keeps, esc clears", id="filter"
        )
        search.display = False
        yield search
        yield Footer()

    async def on_mount(self) -> None:
        try:
            await self.runtime.start()
        except AlreadyRunningError as error:
            self.exit(75, return_code=75, message=str(error))
            return
        except TuischedError as error:
            self.exit(1, return_code=1, message=str(error))
            return
        self.started = True
        self.runtime.bus.subscribe(Event, self._on_event)
        await self._load_history()
        self._show_all_jobs()
        self.query_one(AuditPane).add(_tail(self.runtime))
        self.set_interval(REFRESH_SECONDS, self._apply_events)
        self.set_interval(1.0, self._tick)
        self._tick()
        self.query_one(JobsTable).focus()

    async def _load_history(self) -> None:
        since = self.clock() - timedelta(hours=24)
        history = self.runtime.history
        self._last = await history.call(lambda store: store.last_runs())
        self._failures = await history.call(lambda store: store.failures_since(since))

    # --- what the bus says ------------------------------------------------------------

    def _on_event(self, event: Event) -> None:
        """The one place the bus is heard: queue it; `_apply_events` shows it."""
        self._pending.append(event)

    @property
    def _live(self) -> bool:
        """Whether the panes can be redrawn: the runtime is up and the app is not closing.

        Textual closes the screens before the app's unmount handler stops the
        runtime; a refresh timer firing in between would find no widgets.
        """
        return self.started and self.is_running

    def _apply_events(self) -> None:
        events, self._pending = self._pending, []
        if not events or not self._live:
            return
        touched: set[str] = set()
        audit: list[str] = []
        everything = False
        for event in events:
            everything |= self._note(event, touched, audit)
        if everything:
            self._show_all_jobs()
        else:
            self._update_jobs(touched)
        self._show_running()
        self.query_one(AuditPane).add(audit)
        self._show_status()

    def _note(self, event: Event, touched: set[str], audit: list[str]) -> bool:
        """Take one event into account; True when every job row must be redone."""
        tz = self.runtime.config.settings.timezone
        if isinstance(event, RunOutputWritten):
            if event.lines:
                self._last_lines[event.run.run_id] = event.lines[-1]
            return False
        if isinstance(event, RunEvent):
            touched.add(event.run.job)
            if event.run.state.terminal:
                self._last[event.run.job] = event.run
                self._last_lines.pop(event.run.run_id, None)
            if isinstance(event, _AUDITED):
                audit.append(audit_line(event.run, tz))
            if isinstance(event, RunFinished | RunNotStarted) and is_failure(event.run):
                self._failures.append(event.at)
                words = event.run.status or event.run.reason
                self.notify(f"{event.run.job} failed: {words}", severity="error", markup=False)
            return False
        return self._note_other(event)

    def _note_other(self, event: Event) -> bool:
        banner = self.query_one(Banner)
        match event:
            case ConfigChangedOnDisk(diff=diff, problems=problems):
                if problems:
                    more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
                    banner.show_message(
                        f"config changed on disk, not valid: {problems[0]}{more} - D details",
                        error=True,
                    )
                elif diff is not None and diff.empty:
                    banner.show_message(
                        "config file changed on disk (comments or layout only) - R takes it in"
                    )
                elif diff is not None:
                    banner.show_message(
                        f"config changed on disk: {diff.summary()} - R reload, D diff, esc dismiss"
                    )
                return False
            case ConfigRejected(problems=problems):
                banner.show_message(
                    f"reload refused, nothing changed: {problems[0]}"
                    + (f" (+{len(problems) - 1} more, D)" if len(problems) > 1 else ""),
                    error=True,
                )
                return False
            case ConfigLoaded():
                banner.hide()
                return True
            case PauseChanged():
                return True
            case AlertFailed(final=True, job=job, error=error):
                self.notify(
                    f"alert for {job} not delivered: {error}", severity="warning", markup=False
                )
        return False

    # --- panes ----------------------------------------------------------------------------

    def _rows(self, names: set[str] | None = None) -> list[JobRow]:
        runtime, now = self.runtime, self.clock()
        engine = runtime.engine
        tz = runtime.config.settings.timezone
        running: defaultdict[str, int] = defaultdict(int)
        for run in engine.running():
            running[run.job] += 1
        waiting: defaultdict[str, int] = defaultdict(int)
        for run in engine.waiting():
            waiting[run.job] += 1
        jobs = runtime.config.jobs
        selected = jobs.values() if names is None else (jobs[n] for n in names if n in jobs)
        return [
            job_row(
                job, now=now, tz=tz, next_fire=engine.next_fire(job.name),
                last=self._last.get(job.name), paused=engine.is_paused(job),
                running=running[job.name], waiting=waiting[job.name],
            )
            for job in selected
        ]  # fmt: skip

    def _show_all_jobs(self) -> None:
        table = self.query_one(JobsTable)
        rows = self._rows()
        table.show(self._sorted(rows))
        table.border_subtitle = f"{table.row_count} of {len(rows)} - sorted by {SORTS[self._sort]}"

    def _sorted(self, rows: list[JobRow]) -> list[JobRow]:
        order = SORTS[self._sort]
        if order == "name":
            return sorted(rows, key=lambda row: row.name)
        if order == "state":  # what needs a look first
            return sorted(
                rows, key=lambda row: (_STATE_ORDER.get(row.state.split()[0], 9), row.name)
            )
        if order == "last result":  # failures first
            return sorted(rows, key=lambda row: (not row.last.startswith("✘"), row.name))
        if order == "next run":
            never = datetime.max.replace(tzinfo=UTC)
            fire = self.runtime.engine.next_fire
            return sorted(rows, key=lambda row: (fire(row.name) or never, row.name))
        return rows

    def _update_jobs(self, names: set[str]) -> None:
        if names:
            self.query_one(JobsTable).update_rows(self._rows(names))

    def _show_running(self) -> None:
        engine, now = self.runtime.engine, self.clock()
        tz = self.runtime.config.settings.timezone
        runs = [*engine.running(), *engine.queued(), *engine.waiting()]
        rows = [
            run_row(
                run,
                now=now,
                tz=tz,
                last_line=self._last_lines.get(run.run_id) or engine.live_status(run.run_id),
            )
            for run in runs
        ]
        self.query_one(RunningTable).show(rows)

    def _tick(self) -> None:
        """Once a second: the clock, elapsed times, and the next-run texts in view."""
        if not self._live:
            return
        source = self.runtime.source
        if source is not None and source.pending is None:
            self.query_one(Banner).hide()  # the file is back to what runs
        self._show_status()
        self._show_running()
        table = self.query_one(JobsTable)
        first = int(table.scroll_y)
        visible = {
            key.value for key in list(table.rows)[first : first + table.size.height] if key.value
        }
        self._update_jobs(visible)

    def _show_status(self) -> None:
        runtime, now = self.runtime, self.clock()
        tz = runtime.config.settings.timezone
        day_ago = now - timedelta(hours=24)
        self._failures = [at for at in self._failures if at >= day_ago]
        engine = runtime.engine
        state = "running" if engine.accepting else "stopping"
        if ("all", "") in engine.pauses:
            state = "PAUSED"
        facts = (
            f"  {state}  {tz.key} {now.astimezone(tz).strftime('%H:%M:%S')}  "
            f"jobs {len(runtime.config.jobs)}  run {len(engine.running())}  "
            f"failed/24h {len(self._failures)}" + ("  read-only" if self.read_only else "")
        )
        room = max(8, self.size.width - len(facts) - 1)
        text = " " + _fit_path(runtime.config.path, room) + facts
        self.query_one(StatusLine).text = text

    # --- actions ----------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """`--read-only` hides every mutating action; the panes' keys act on the panes only.

        On the detail, help or diff screen the jobs table is out of sight: a key
        that acts on its selection would act on a job the operator cannot see.
        """
        if self.read_only and action in MUTATING:
            return False
        return action not in MAIN_SCREEN_ONLY or self.screen is self.screen_stack[0]

    def _selected_job(self) -> str | None:
        job = self.query_one(JobsTable).selected_job()
        if job is None:
            self.notify("no job selected", severity="warning", markup=False)
        return job

    def _selected_run(self) -> RunRecord | None:
        """The run under the running pane's cursor when it has the focus, else the
        selected job's run in progress."""
        engine = self.runtime.engine
        runs = {run.run_id: run for run in (*engine.running(), *engine.queued(), *engine.waiting())}
        running = self.query_one(RunningTable)
        if running.has_focus:
            chosen = runs.get(running.selected_run() or "")
        else:
            job = self.query_one(JobsTable).selected_job()
            chosen = next((run for run in runs.values() if run.job == job), None)
        if chosen is None:
            self.notify("no run of this job in progress (2: the running pane)", markup=False)
        return chosen

    def _confirm(self, question: str, then: Callable[[], object]) -> None:
        """Ask; do `then` only on yes. The default button is Cancel."""

        def answered(yes: bool | None) -> None:
            if yes:
                then()

        self.push_screen(ConfirmScreen(question), answered)

    def action_run_now(self) -> None:
        job = self._selected_job()
        if job is not None:
            self.ask_run(job)

    def action_stop_run(self) -> None:
        run = self._selected_run()
        if run is not None:
            self._confirm(
                f"Stop {run.job} (run {run.run_id})?",
                lambda: self._guarded(self.runtime.stop_run, run.run_id),
            )

    def action_kill_run(self) -> None:
        run = self._selected_run()
        if run is not None:
            self._confirm(
                f"Kill {run.job} (run {run.run_id}) at once with SIGKILL?",
                lambda: self._guarded(lambda: self.runtime.stop_run(run.run_id, kill=True)),
            )

    def action_toggle_pause(self) -> None:
        job = self._selected_job()
        if job is not None:
            self.ask_pause_job(job)

    def action_toggle_pause_all(self) -> None:
        paused = ("all", "") in self.runtime.engine.pauses
        verb = "Resume every job" if paused else "Pause every job"
        self._confirm(f"{verb}?", lambda: self._act(self.runtime.pause_all(paused=not paused)))

    def action_delete_job(self) -> None:
        job = self._selected_job()
        if job is not None:
            self._confirm(
                f"Delete {job} from {self.runtime.config.path.name}?",
                lambda: self._act(self.runtime.delete_job(job), done=f"{job} deleted"),
            )

    def action_undo(self) -> None:
        self._confirm(
            "Undo the last change?", lambda: self._act(self.runtime.undo(), done="undone")
        )

    def action_reload(self) -> None:
        self._confirm(
            "Reload the configuration from disk?", lambda: self._act(self.runtime.reload())
        )

    def action_dismiss_banner(self) -> None:
        self.query_one(Banner).hide()
        search = self.query_one("#filter", Input)
        if search.display:
            search.value = ""
            search.display = False
            self._apply_filter("")

    def action_focus_pane(self, pane: str) -> None:
        self.query_one(f"#{pane}").focus()

    def action_filter(self) -> None:
        search = self.query_one("#filter", Input)
        search.display = True
        search.focus()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        # Refilling 10,000 rows per key stroke would lag: wait for a pause in typing.
        if self._filter_timer is not None:
            self._filter_timer.stop()
        value = event.value
        self._filter_timer = self.set_timer(0.15, lambda: self._apply_filter(value))

    @on(Input.Submitted, "#filter")
    def _filter_kept(self) -> None:
        self.query_one(JobsTable).focus()

    def _apply_filter(self, text: str) -> None:
        self.query_one(JobsTable).filter_text = text
        self._show_all_jobs()

    def action_sort(self) -> None:
        self._sort = (self._sort + 1) % len(SORTS)
        self._show_all_jobs()
        self.notify(f"sorted by {SORTS[self._sort]}", markup=False)

    def action_edit_file(self) -> None:
        """Edit the YAML in $EDITOR; the change shows as an offline edit (R to reload)."""
        editor = shlex.split(os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi")
        with self.suspend():
            subprocess.run([*editor, str(self.runtime.config.path)], check=False)  # noqa: S603

    async def action_quit(self) -> None:
        """ctrl+q too asks what to do with runs in progress."""
        await self.action_quit_console()

    async def action_quit_console(self) -> None:
        if self._stopping:
            self.notify("stopping every run now", markup=False)
            self.runtime.hurry()
            return
        engine = self.runtime.engine
        busy = len(engine.running()) + len(engine.queued()) + len(engine.waiting())
        if not busy:
            self._shut_down(grace=None)
            return

        def answered(choice: str | None) -> None:
            if choice == "wait":
                self._shut_down(grace=24 * 3600.0)
            elif choice == "stop":
                self._shut_down(grace=0.0)

        self.push_screen(QuitScreen(busy), answered)

    @work(exclusive=True, group="quit")
    async def _shut_down(self, *, grace: float | None) -> None:
        """Drain in the background: the panes keep showing the runs finishing."""
        self._stopping = True
        if grace:
            self.notify("waiting for the runs in progress; q again stops them now", markup=False)
        await self.runtime.stop(grace=grace, reason="console quit")
        self.started = False
        self.exit(0)

    # --- screens: detail, form, help, diff, groups ------------------------------------------

    @on(DataTable.RowSelected, "#jobs")
    def _job_chosen(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None:
            self.show_job(event.row_key.value)

    def show_job(self, job: str) -> None:
        """Open the detail view of `job`."""
        if job not in self.runtime.config.jobs:
            return
        table = self.query_one(JobsTable)
        if job in table.rows:  # the keys of the console then act on this job too
            table.move_cursor(row=table.get_row_index(job))
        self.push_screen(JobDetailScreen(self.runtime, job, self.clock))

    def action_help(self) -> None:
        palette = Binding(self.COMMAND_PALETTE_BINDING, "command_palette", "Command palette")
        self.push_screen(
            HelpScreen(
                [
                    ("Console (every pane)", [*bindings_of(type(self)), palette]),
                    ("Jobs pane (1)", bindings_of(JobsTable)),
                    ("Running pane (2)", bindings_of(RunningTable)),
                    ("Job detail (enter on a job)", bindings_of(JobDetailScreen)),
                    ("Group picker (g)", bindings_of(GroupPickerScreen)),
                    ("Offline edit (D)", bindings_of(DiffScreen)),
                ]
            )
        )

    def action_add_job(self) -> None:
        def saved(result: tuple[str, dict[str, object]] | None) -> None:
            if result is not None:
                name, definition = result
                self._confirm(
                    f"Add job {name} to {self.runtime.config.path.name}?",
                    lambda: self._act(self.runtime.add_job(name, definition), done=f"{name} added"),
                )

        self.push_screen(JobFormScreen(self.runtime), saved)

    @work(exclusive=True, group="edit-job")
    async def action_edit_job(self) -> None:
        job, source = self._selected_job(), self.runtime.source
        if job is None or source is None:
            return
        text, path = source.text, source.path
        definition = await asyncio.to_thread(lambda: ConfigDocument(text, path).job(job))
        if definition is None:
            self.notify(f"{job} is not in {path.name}", severity="warning", markup=False)
            return

        def saved(result: tuple[str, dict[str, object]] | None) -> None:
            if result is not None:
                name, changed = result
                self._confirm(
                    f"Save the changes to {name} in {path.name}?",
                    lambda: self._act(
                        self.runtime.replace_job(name, changed), done=f"{name} saved"
                    ),
                )

        self.push_screen(JobFormScreen(self.runtime, job, definition), saved)

    def action_show_diff(self) -> None:
        def closed(reload: bool | None) -> None:
            if reload and not self.read_only:
                self.action_reload()

        self.push_screen(DiffScreen(self.runtime, self.clock, read_only=self.read_only), closed)

    def action_group_view(self) -> None:
        if not self.started:
            return
        engine, groups = self.runtime.engine, self.runtime.config.groups
        paused = {name for name in groups if ("group", name) in engine.pauses}

        def picked(choice: tuple[str, str] | None) -> None:
            if choice is None:
                return
            what, group = choice
            if what == "toggle":
                self.ask_pause_group(group)
                return
            search = self.query_one("#filter", Input)
            search.value = group  # shown, so that esc clears it as any filter
            search.display = True
            self._apply_filter(group)
            self.query_one(JobsTable).focus()

        self.push_screen(GroupPickerScreen(groups, paused, read_only=self.read_only), picked)

    # --- what the command palette does (through the same confirmations) ----------------------

    def ask_run(self, job: str) -> None:
        """Confirm, then run `job` now."""
        if not self.read_only:
            self._confirm(f"Run {job} now?", lambda: self._guarded(self.runtime.run_now, job))

    def ask_pause_job(self, job: str) -> None:
        """Confirm, then pause `job` (or resume it if it is paused)."""
        if self.read_only or job not in self.runtime.config.jobs:
            return
        engine = self.runtime.engine
        if engine.is_paused(self.runtime.config.jobs[job]) and ("job", job) not in engine.pauses:
            cause = "everything is paused (P resumes)"
            groups = [
                g for g in self.runtime.config.jobs[job].groups if ("group", g) in engine.pauses
            ]
            if ("all", "") not in engine.pauses and groups:
                cause = f"its group {groups[0]} is paused (g resumes it)"
            self.notify(f"{job} is paused because {cause}", markup=False)
            return
        paused = ("job", job) in engine.pauses
        verb = "Resume" if paused else "Pause"
        self._confirm(
            f"{verb} {job}?", lambda: self._act(self.runtime.pause_job(job, paused=not paused))
        )

    def ask_pause_group(self, group: str) -> None:
        """Confirm, then pause every job of `group` (or resume the group if it is paused)."""
        if self.read_only:
            return
        paused = ("group", group) in self.runtime.engine.pauses
        verb = "Resume" if paused else "Pause"
        self._confirm(
            f"{verb} group {group} (its {len(self.runtime.config.groups[group].jobs)} jobs)?",
            lambda: self._act(
                self.runtime.pause_group(group, paused=not paused),
                done=f"group {group} {verb.lower()}d",
            ),
        )

    # --- helpers -------------------------------------------------------------------------

    def _guarded(self, action: Callable[..., object], *args: object) -> None:
        try:
            result = action(*args)
        except TuischedError as error:
            self.notify(str(error), severity="error", markup=False)
            return
        if isinstance(result, RunRecord):
            word = {"QUEUED": "started", "WAITING": "waiting"}.get(result.state.value, "")
            self.notify(
                f"{result.job}#{result.run_id} {word or result.state.value.lower()}", markup=False
            )

    @work(exclusive=False)
    async def _act(self, coroutine: object, *, done: str = "") -> None:
        """Await a runtime change; show its problems instead of a traceback."""
        try:
            await coroutine  # type: ignore[misc]
        except ConfigError as error:
            self.notify(
                "\n".join(str(p) for p in error.problems[:5]),
                severity="error",
                timeout=10,
                markup=False,
            )
            return
        except TuischedError as error:
            self.notify(str(error), severity="error", markup=False)
            return
        if done:
            self.notify(done, markup=False)

    async def on_unmount(self) -> None:
        if self.started:  # ctrl+c or an error: never leave the runtime running
            self.started = False
            await self.runtime.stop(reason="console closed")


SORTS = ("file order", "name", "state", "next run", "last result")
_STATE_ORDER = {"running": 0, "waiting": 1, "paused": 2, "active": 3, "manual": 4, "finished": 5}
"""The jobs pane's orders, in the order `o` cycles through them."""


def _fit_path(path: Path, room: int) -> str:
    """`path` as short as it reads well: relative to here, `~` for home, cut on the left."""
    try:
        text = str(path.relative_to(Path.cwd()))
    except ValueError:
        home = str(Path.home())
        text = "~" + str(path)[len(home) :] if str(path).startswith(home + "/") else str(path)
    return text if len(text) <= room else "…" + text[len(text) - room + 1 :]


def _tail(runtime: Runtime) -> list[str]:
    path = runtime.config.settings.state_dir / "audit.log"
    return read_tail(path, 200) if path.exists() else []


def run_console(config_path: Path, *, read_only: bool = False) -> int:
    """Open the console on the configuration at `config_path`; return the exit status."""
    runtime = Runtime.from_file(config_path)
    app = TuischedApp(runtime, read_only=read_only)
    status = app.run()
    return status if isinstance(status, int) else app.return_code or 0
