"""The job detail view (SPEC R18): definition, next runs, history, output, requirements.

Everything a job's output contains is shown as plain text: the Log widget never
reads markup, and history cells are `Text`, never markup strings. The bus is
heard the way the main screen hears them: the callback only queues, a timer
applies the queue a few times a second, the output in one `write_lines` per
batch. Everything is read through the control seam.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, ClassVar
from zoneinfo import ZoneInfo

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Log, Static, TabbedContent, TabPane

from tuisched.domain.errors import TuischedError
from tuisched.domain.events import Event, RunEvent, RunOutputWritten
from tuisched.domain.runs import RunRecord, RunState
from tuisched.domain.schedule.duration import format_elapsed
from tuisched.domain.stats import DEFAULT_WINDOW
from tuisched.domain.text import counted, plain_text
from tuisched.domain.views import HistoryQuery, JobStats, StatsQuery
from tuisched.frontends.tui.screens.output import OutputScreen, open_latest_output
from tuisched.frontends.tui.screens.present import present
from tuisched.frontends.tui.widgets.table import Column, KeyedTable
from tuisched.frontends.tui.yamltext import block_text
from tuisched.runtime.control import Subscription

if TYPE_CHECKING:
    from tuisched.frontends.tui.host import ConsoleHost

NEXT_RUNS = 10
"""How many upcoming slots the Next runs tab lists."""
HISTORY_RUNS = 50
"""How many past runs the History tab lists."""
REFRESH_SECONDS = 0.25
"""How often queued output and run events are applied."""


def definition_yaml(definition: Mapping[str, object]) -> str:
    """A job's definition (plain text values) as block YAML, keys in file order, made
    safe to show: a description, a command or an environment value is the file's text,
    and a bidirectional control in it (U+202E) would reorder what the screen shows."""
    return plain_text(block_text(definition))


def _moment(moment: datetime | None, tz: ZoneInfo) -> str:
    return moment.astimezone(tz).strftime("%Y-%m-%d %H:%M:%S") if moment else "-"


@dataclass(frozen=True, slots=True)
class HistoryRow:
    """A line of the History tab: every cell plain text (a status is job output, never
    markup)."""

    run_id: str
    slot: str
    trigger: str
    state: str
    result: str
    started: str
    duration: str
    status: str


def history_row(run: RunRecord, tz: ZoneInfo) -> HistoryRow:
    """`run`'s line in the History tab."""
    duration = run.duration
    return HistoryRow(
        run_id=run.run_id, slot=_moment(run.slot, tz), trigger=run.trigger.value,
        state=run.state.value, result=run.result.value if run.result else "-",
        started=_moment(run.started_at, tz),
        duration=format_elapsed(duration) if duration is not None else "-",
        status=plain_text(run.status or run.reason).replace("\n", " ")[:200],
    )  # fmt: skip


class HistoryTable(KeyedTable):
    """The job's last runs, newest first: when, how long, how it ended and its last words
    first, so that 80 columns show them; the trigger, run id and slot as width allows."""

    COLUMNS: ClassVar[tuple[Column, ...]] = (
        Column("started", "Started", 19, 19),
        Column("duration", "Duration", 8, 8),
        Column("state", "State", 11, 11),
        Column("result", "Result", 13, 13),
        Column("status", "Status", 12, 200),
        Column("trigger", "Trigger", 10, 10),
        Column("run_id", "Run", 12, 12),
        Column("slot", "Slot", 19, 19),
    )
    DROPPED_FIRST: ClassVar[tuple[str, ...]] = ("slot", "run_id", "trigger", "result")
    GROWN_FIRST: ClassVar[tuple[tuple[str, int | None], ...]] = (("status", None),)


class JobDetailScreen(Screen[None]):
    """One job, in five tabs; `escape` or `q` goes back to the jobs."""

    BINDINGS: ClassVar[list[BindingType]] = [  # short words: the legend fits 60 columns
        Binding("escape", "close", "Back"),
        Binding("q", "close", "Back", show=False),
        Binding("r", "run", "Run"),
        Binding("p", "toggle_pause", "Pause/resume"),
        Binding("s", "stop_run(False)", "Stop"),
        Binding("ctrl+k", "stop_run(True)", "Kill its run", show=False),
        Binding("o", "show_tab('tab-output')", "Output"),
        Binding("h", "show_tab('tab-history')", "History", show=False),
        Binding("n", "show_tab('tab-next')", "Next runs", show=False),
        Binding("f", "show_tab('tab-definition')", "Definition", show=False),
        Binding("l", "logs", "Output viewer", show=False),
        Binding("enter", "open_output", "Output viewer", show=False),
        Binding("m", "mute", "Mute/unmute its notices", show=False),
    ]

    def __init__(self, host: ConsoleHost, job_name: str) -> None:
        super().__init__()
        self.host = host
        self.control = host.control
        self.job_name = job_name
        self._status = host.state.jobs.get(job_name)
        self._tz = ZoneInfo(self._status.timezone) if self._status else host.state.timezone
        self._live: str | None = None
        """The run whose output the Output tab follows, if one is running."""
        self._events: list[RunEvent] = []
        self._subscription: Subscription | None = None

    def compose(self) -> ComposeResult:
        status = self._status
        title = f" {self.job_name}" + (f"  {status.kind}  {status.trigger}" if status else "")
        yield Static(Text(title), id="detail-title")
        why = f" {status.why}" if status is not None and status.why else ""
        yield Static(Text(plain_text(why), no_wrap=True, overflow="ellipsis"), id="detail-why")
        with TabbedContent(id="detail-tabs"):
            with TabPane("Definition", id="tab-definition"), VerticalScroll():
                yield Static(id="detail-definition")
            with TabPane("Next runs", id="tab-next"), VerticalScroll():
                yield Static(id="detail-next")
            with TabPane("History", id="tab-history"):
                yield Static(id="detail-stats")
                yield HistoryTable(id="detail-history", zebra_stripes=True)
            with TabPane("Output", id="tab-output"):
                yield Static(id="detail-output-source")
                yield Log(id="detail-output", highlight=False, max_lines=20_000)
            if status is not None and status.requires:
                with TabPane("Waits for", id="tab-waits"), VerticalScroll():
                    yield Static(id="detail-waits")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self._show_definition()
        self._refresh_plan()
        self._subscription = self.control.subscribe(self._on_event)
        self._start_output()
        self.set_interval(REFRESH_SECONDS, self._apply_output)
        self.set_interval(1.0, self._refresh_plan)
        self.set_interval(1.0, self._refresh_why)

    def on_unmount(self) -> None:
        if self._subscription is not None:
            self._subscription.unsubscribe()

    def action_close(self) -> None:
        self.dismiss(None)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """`--read-only` hides running, pausing and stopping."""
        return not (action in ("run", "toggle_pause", "stop_run") and self.host.read_only)

    def action_run(self) -> None:
        self.host.operator.run(self.job_name)

    def action_show_tab(self, tab: str) -> None:
        """`o` output, `h` history, `n` next runs, `f` definition."""
        self.query_one(TabbedContent).active = tab

    def action_toggle_pause(self) -> None:
        self.host.operator.pause_job(self.job_name)

    def action_mute(self) -> None:
        """`m`: this job's notices stay off the notice line (still in the messages view,
        `M`), or come back."""
        muted = self.host.notices.toggle_mute(self.job_name)
        said = "muted: logged in M only" if muted else "shown again"
        self.notify(f"{self.job_name}'s notices {said}", markup=False)

    def action_stop_run(self, kill: bool) -> None:
        """`s` stops the run whose output is shown (else the job's run in progress);
        `ctrl+k` kills it at once."""
        state = self.host.state
        shown = state.run_of(self._live) if self._live else None
        status = shown or state.run_of_job(self.job_name)
        if status is None:
            self.notify(f"no run of {self.job_name} in progress", markup=False)
            return
        self.host.operator.stop(status.run, kill=kill)

    # --- tabs -------------------------------------------------------------------------

    @work(exclusive=True, group="detail-definition")
    async def _show_definition(self) -> None:
        """The job as the file says it."""
        definition = await self.control.job_definition(self.job_name)
        shown = definition_yaml(definition) if definition else f"no job named '{self.job_name}'"
        if (pane := present(self, "#detail-definition", Static)) is not None:
            pane.update(Text(shown))

    @work(exclusive=True, group="detail-plan")
    async def _refresh_plan(self) -> None:
        """Next runs and what the job waits for: cheap, redone every second."""
        try:
            plan = await self.control.plan(self.job_name, count=NEXT_RUNS, after=self.host.clock())
        except TuischedError:  # the job was deleted, or the scheduler is stopping
            return
        lines = [*plan.notes, *(slot.isoformat() for slot in plan.slots)]
        if (pane := present(self, "#detail-next", Static)) is not None:
            pane.update(Text("\n".join(lines)))
        if plan.waits and (waits := present(self, "#detail-waits", Static)) is not None:
            waits.update(Text("\n".join(plan.waits)))

    @work(exclusive=True, group="detail-why")
    async def _refresh_why(self) -> None:
        """The top line: why the job is not running now, as the scheduler says it."""
        try:
            found = await self.control.jobs([self.job_name])
        except TuischedError:  # the scheduler is stopping
            return
        why = f" {found[0].why}" if found and found[0].why else ""
        text = Text(plain_text(why), no_wrap=True, overflow="ellipsis")
        if (line := present(self, "#detail-why", Static)) is not None:
            line.update(text)

    @work(exclusive=True, group="detail-history")
    async def _load_history(self) -> None:
        """The last runs; then, when nothing runs, the newest one's output."""
        query = HistoryQuery(job=self.job_name, limit=HISTORY_RUNS)
        runs = await self.control.history(query)
        table = next(self.query("#detail-history").results(HistoryTable), None)
        if table is None:  # the screen went (or the app is closing) meanwhile
            return
        table.set_rows({run.run_id: history_row(run, self._tz) for run in runs})
        if self._live is None:
            await self._show_last_output(runs)
        self._load_stats()

    # --- output -----------------------------------------------------------------------

    @work(exclusive=True, group="detail-output")
    async def _start_output(self) -> None:
        """Show a running run's output so far, then follow it live; else the last run's."""
        runs = [s.run for s in await self.control.runs() if s.run.job == self.job_name]
        running = [run for run in runs if run.state is RunState.RUNNING]
        if running:
            run = running[-1]
            self._live = run.run_id
            self._events = []  # what the file holds now is read below: no line twice
            chunk = await self.control.output(run.run_id)
            if (tabs := present(self, "TabbedContent", TabbedContent)) is None:
                return  # the screen went meanwhile
            pid = f", pid {run.pid}" if run.pid else ""
            self._show_source(f"live output of run {run.run_id} (running{pid})")
            tabs.active = "tab-output"  # what a running job is about
            self._write(list(chunk.lines))
        self._load_history()

    async def _show_last_output(self, runs: Sequence[RunRecord]) -> None:
        for run in runs:
            if not run.state.terminal:
                continue
            chunk = await self.control.output(run.run_id)
            if chunk.source == "file":
                self._show_source(f"output of the last run, {run.run_id} ({run.state.value})")
            elif chunk.source == "tail":
                self._show_source(f"output of the last run, {run.run_id} (tail only)")
            else:
                continue
            self._write(list(chunk.lines), replace=True)
            return
        self._show_source("no output recorded")

    def _show_source(self, text: str) -> None:
        if (line := present(self, "#detail-output-source", Static)) is not None:
            line.update(Text(text))

    def _write(self, lines: list[str], *, replace: bool = False) -> None:
        log = present(self, "#detail-output", Log)
        if log is None:
            return
        if replace:
            log.clear()
        if lines:
            log.auto_scroll = log.is_vertical_scroll_end or replace
            log.write_lines(lines)

    def _on_event(self, event: Event) -> None:
        """Event callback: only queue this job's run events (applied by `_apply_output`)."""
        if isinstance(event, RunEvent) and event.run.job == self.job_name:
            self._events.append(event)

    def _apply_output(self) -> None:
        events, self._events = self._events, []
        lines: list[str] = []
        finished = False
        for event in events:
            if isinstance(event, RunOutputWritten):
                if self._live is None:  # a run started while the tab was open
                    self._live = event.run.run_id
                    self._show_source(f"live output of run {self._live} (running)")
                    self._write([], replace=True)
                if event.run.run_id == self._live:
                    lines.extend(event.lines)
            elif event.run.state.terminal:
                finished = True
        self._write(lines)
        if finished:
            self._conclude_live()

    def _conclude_live(self) -> None:
        """A run of the job ended: the history changed, and maybe the followed run."""
        if self._live is not None and self._live not in self._running_ids():
            self._show_source(f"output of run {self._live} (finished)")
            self._live = None
        self._load_history()

    def _running_ids(self) -> set[str]:
        return {
            status.run.run_id
            for status in self.host.state.runs
            if status.run.state is RunState.RUNNING
        }

    # --- the output viewer ------------------------------------------------------------

    def action_logs(self) -> None:
        """`l`: the viewer on the run the output tab follows, else on the job's newest run."""
        if self._live is not None:
            self.app.push_screen(OutputScreen(self.host, self._live))
        else:
            self.run_worker(open_latest_output(self.host, self.job_name), group="output-viewer")

    def action_open_output(self) -> None:
        """Enter: on the history tab, the viewer on the run under the cursor; on the
        output tab, as `l`."""
        active = self.query_one(TabbedContent).active
        if active == "tab-output":
            self.action_logs()
        elif active == "tab-history":
            table = self.query_one("#detail-history", DataTable)
            if table.row_count:
                row = table.coordinate_to_cell_key(table.cursor_coordinate).row_key
                if row.value is not None:
                    self.app.push_screen(OutputScreen(self.host, row.value))

    @on(DataTable.RowSelected, "#detail-history")
    def _history_run_chosen(self, event: DataTable.RowSelected) -> None:
        """Enter on a past run: the viewer on its output."""
        if event.row_key.value is not None:
            self.app.push_screen(OutputScreen(self.host, event.row_key.value))

    # --- history stats (issue 16) -------------------------------------------------------

    @work(exclusive=True, group="detail-stats")
    async def _load_stats(self) -> None:
        """The job's stats over the last STATS_WINDOW, above its history."""
        query = StatsQuery(job=self.job_name, since=self.host.clock() - STATS_WINDOW)
        try:
            found = await self.control.stats(query)
        except TuischedError:  # the scheduler is stopping
            return
        mine = next((stats for stats in found.jobs if stats.job == self.job_name), None)
        for shown in self.query("#detail-stats").results(Static):  # none once the screen goes
            shown.update(Text(stats_block(mine, self._tz)))


STATS_WINDOW = DEFAULT_WINDOW
"""The window of the stats block on the History tab (as `tuisched stats`)."""


def stats_block(stats: JobStats | None, tz: ZoneInfo) -> str:
    """The History tab's stats block: two lines of plain text (job output never enters)."""
    days = STATS_WINDOW.days
    if stats is None or not stats.runs:
        return f"last {counted(days, 'day')}: no finished runs"
    rate = f"{stats.success_rate:.0%}" if stats.success_rate is not None else "-"
    took = [f"{name} {format_elapsed(value)}" for name, value in
            (("p50", stats.p50), ("p95", stats.p95)) if value is not None]  # fmt: skip
    head = (f"last {counted(days, 'day')}: {counted(stats.runs, 'run')}, {stats.successes} ok, "
            f"{stats.failures} failed ({rate})  " + "  ".join(took))  # fmt: skip
    tail = []
    if stats.slowest is not None:
        tail.append(f"slowest {format_elapsed(stats.slowest)} ({stats.slowest_run})")
    if stats.last_failure_at is not None:
        when = stats.last_failure_at.astimezone(tz).strftime("%m-%d %H:%M")
        tail.append(f"last failure {when} {stats.last_failure}")
    return head.rstrip() + "\n" + "  ".join(tail)
