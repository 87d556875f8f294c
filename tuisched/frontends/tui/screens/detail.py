"""The job detail view (SPEC R18): definition, next runs, history, output, requirements.

Everything a job's output contains is shown as plain text: the Log widget never
reads markup, and history cells are `Text`, never markup strings. The bus is
heard the way the app hears it: the callback only queues, a timer applies the
queue a few times a second, the output in one `write_lines` per batch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import yaml
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Log, Static, TabbedContent, TabPane

from tuisched.domain.bus import Subscription
from tuisched.domain.errors import TuischedError
from tuisched.domain.events import RunEvent, RunOutputWritten
from tuisched.domain.model import Job, ManualSchedule
from tuisched.domain.runs import RunRecord
from tuisched.domain.schedule.describe import trigger_words
from tuisched.domain.schedule.duration import format_elapsed
from tuisched.domain.schedule.slots import next_slots
from tuisched.domain.text import plain_text
from tuisched.runtime.document import ConfigDocument
from tuisched.runtime.engine.waiting import requirements_of
from tuisched.runtime.runtime import Runtime

if TYPE_CHECKING:
    from tuisched.frontends.tui.app import TuischedApp

NEXT_RUNS = 10
"""How many upcoming slots the Next runs tab lists."""
HISTORY_RUNS = 50
"""How many past runs the History tab lists."""
OUTPUT_TAIL_BYTES = 200 * 1024
"""How much of an output file the Output tab reads (its end)."""
REFRESH_SECONDS = 0.25
"""How often queued output and run events are applied."""
HISTORY_COLUMNS = ("Run", "Slot", "Trigger", "State", "Result", "Started", "Duration", "Status")


class _TextDumper(yaml.SafeDumper):
    """Dumps the document's text values as written: `retries: 2`, not `retries: '2'`.

    With no implicit resolvers every scalar is text, so only values YAML's syntax
    needs quoted (`"*/5 * * * *"`, an empty string) get quotes.
    """

    yaml_implicit_resolvers: ClassVar[dict[str, list[tuple[str, object]]]] = {}  # type: ignore[misc]


def definition_yaml(definition: Mapping[str, object]) -> str:
    """A job's definition (plain text values) as block YAML, keys in file order."""
    return yaml.dump(
        dict(definition), Dumper=_TextDumper, sort_keys=False,
        default_flow_style=False, allow_unicode=True, width=10_000,
    )  # fmt: skip


def next_runs_text(job: Job, now: datetime, *, paused: bool) -> str:
    """The next slots of `job` (ISO 8601 with offset, in its zone), or why there are none."""
    if job.after is not None:
        return f"no slots: runs {trigger_words(job)}"
    if job.schedule is None or isinstance(job.schedule, ManualSchedule):
        return "no slots: manual (runs only by hand)"
    slots = next_slots(job.schedule, now, NEXT_RUNS)
    lines = [slot.astimezone(job.timezone).isoformat() for slot in slots]
    notes = []
    if not job.enabled:
        notes.append("disabled: these slots will not run")
    if paused:
        notes.append("paused: these slots will not run until resumed")
    if not lines:
        notes.append("no slots: the schedule has no future slot")
    return "\n".join([*notes, *lines])


def _moment(moment: datetime | None, job: Job) -> str:
    return moment.astimezone(job.timezone).strftime("%Y-%m-%d %H:%M:%S") if moment else "-"


def history_cells(run: RunRecord, job: Job) -> tuple[Text, ...]:
    """A History row: every cell plain `Text` (a status is job output, never markup)."""
    duration = run.duration
    cells = (
        run.run_id, _moment(run.slot, job), run.trigger.value, run.state.value,
        run.result.value if run.result else "-", _moment(run.started_at, job),
        format_elapsed(duration) if duration is not None else "-",
        plain_text(run.status or run.reason).replace("\n", " ")[:200],
    )  # fmt: skip
    return tuple(Text(cell, no_wrap=True) for cell in cells)


def read_output_tail(path: Path, limit: int = OUTPUT_TAIL_BYTES) -> list[str]:
    """The last `limit` bytes of an output file as plain lines (a cut first line dropped)."""
    with path.open("rb") as file:
        size = file.seek(0, 2)
        file.seek(max(0, size - limit))
        data = file.read()
    if size > limit and b"\n" in data:
        data = data[data.index(b"\n") + 1 :]
    lines = plain_text(data).split("\n")
    if lines and not lines[-1]:
        lines.pop()
    return lines


class JobDetailScreen(Screen[None]):
    """One job, in five tabs; `escape` or `q` goes back to the jobs."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Back"),
        Binding("q", "close", "Back", show=False),
        Binding("r", "run", "Run this job"),
        Binding("p", "toggle_pause", "Pause/resume this job"),
    ]

    def __init__(self, runtime: Runtime, job_name: str, clock: Callable[[], datetime]) -> None:
        super().__init__()
        self.runtime = runtime
        self.job_name = job_name
        self.clock = clock
        self._job = runtime.config.jobs.get(job_name)
        self._live: str | None = None
        """The run whose output the Output tab follows, if one is running."""
        self._events: list[RunEvent] = []
        self._subscription: Subscription | None = None

    def compose(self) -> ComposeResult:
        job = self._job
        title = f" {self.job_name}" + (f"  {job.kind_name}  {trigger_words(job)}" if job else "")
        yield Static(Text(title), id="detail-title")
        with TabbedContent(id="detail-tabs"):
            with TabPane("Definition", id="tab-definition"), VerticalScroll():
                yield Static(id="detail-definition")
            with TabPane("Next runs", id="tab-next"), VerticalScroll():
                yield Static(id="detail-next")
            with TabPane("History", id="tab-history"):
                yield DataTable[Text](id="detail-history", cursor_type="row", zebra_stripes=True)
            with TabPane("Output", id="tab-output"):
                yield Static(id="detail-output-source")
                yield Log(id="detail-output", highlight=False, max_lines=20_000)
            if job is not None and job.requires:
                with TabPane("Waits for", id="tab-waits"), VerticalScroll():
                    yield Static(id="detail-waits")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#detail-history", DataTable).add_columns(*HISTORY_COLUMNS)
        self._show_definition()
        self._refresh_live()
        self._subscription = self.runtime.bus.subscribe(RunEvent, self._on_run_event)
        self._follow_running()
        self._load_history()
        self.set_interval(REFRESH_SECONDS, self._apply_output)
        self.set_interval(1.0, self._refresh_live)

    def on_unmount(self) -> None:
        if self._subscription is not None:
            self._subscription.unsubscribe()

    def action_close(self) -> None:
        self.dismiss(None)

    def _host(self) -> TuischedApp:
        return self.app  # type: ignore[return-value]  # only the console opens this screen

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """`--read-only` hides running and pausing."""
        return not (action in ("run", "toggle_pause") and self._host().read_only)

    def action_run(self) -> None:
        self._host().ask_run(self.job_name)

    def action_toggle_pause(self) -> None:
        self._host().ask_pause_job(self.job_name)

    # --- tabs -------------------------------------------------------------------------

    @work(exclusive=True, group="detail-definition")
    async def _show_definition(self) -> None:
        """The job as the file says it (loading a big file takes a while: in a thread)."""
        source = self.runtime.source
        if source is None:
            return
        text, path, name = source.text, source.path, self.job_name
        definition = await asyncio.to_thread(lambda: ConfigDocument(text, path).job(name))
        shown = definition_yaml(definition) if definition else f"no job named '{name}'"
        self.query_one("#detail-definition", Static).update(Text(shown))

    def _refresh_live(self) -> None:
        """Next runs and what the job waits for: cheap, redone every second."""
        job = self.runtime.config.jobs.get(self.job_name)
        try:
            paused = job is not None and self.runtime.engine.is_paused(job)
        except TuischedError:  # the runtime stopped: the console is closing
            return
        if job is None:
            return
        now = self.clock()
        self.query_one("#detail-next", Static).update(Text(next_runs_text(job, now, paused=paused)))
        if job.requires and self.query("#detail-waits"):
            self.query_one("#detail-waits", Static).update(Text(self._waits_text(job, now)))

    def _waits_text(self, job: Job, now: datetime) -> str:
        engine = self.runtime.engine
        lines: list[str] = []
        for run in engine.waiting():
            if run.job == job.name:
                slot = run.slot.astimezone(job.timezone).isoformat() if run.slot else "manual"
                lines.append(f"run {run.run_id} (slot {slot}) waits for:")
                lines += [f"  {need.describe()}" for need in engine.waiting_room.needs(run.run_id)]
        if lines:
            return "\n".join(lines)
        if job.schedule is None:
            return "no run is waiting"
        upcoming: list[datetime] = next_slots(job.schedule, now, 1)
        if not upcoming:
            return "no run is waiting, and the job has no future slot"
        needs = requirements_of(self.runtime.config, job, upcoming[0])
        local = upcoming[0].astimezone(job.timezone).isoformat()
        head = f"no run is waiting; the slot {local} will need:"
        return "\n".join([head, *(f"  {need.describe()}" for need in needs)])

    @work(exclusive=True, group="detail-history")
    async def _load_history(self) -> None:
        """The last runs, then (when nothing runs) the newest one's output file."""
        name = self.job_name
        runs = await self.runtime.history.call(lambda store: store.recent(name, HISTORY_RUNS))
        job = self.runtime.config.jobs.get(name)
        if job is None:
            return
        table = self.query_one("#detail-history", DataTable)
        table.clear()
        for run in runs:
            table.add_row(*history_cells(run, job), key=run.run_id)
        if self._live is None:
            await self._show_last_output(runs)

    # --- output -----------------------------------------------------------------------

    def _output_path(self, run_id: str) -> Path:
        state_dir = self.runtime.config.settings.state_dir
        return state_dir / "output" / self.job_name / f"{run_id}.log"

    def _follow_running(self) -> None:
        """Show a running run's output so far (its file), then follow it live."""
        running = [run for run in self.runtime.engine.running() if run.job == self.job_name]
        if not running:
            return
        run = running[-1]
        self._live = run.run_id
        path = self._output_path(run.run_id)
        # Read on the loop (bounded): the queue starts empty after this, no line twice.
        lines = read_output_tail(path) if path.exists() else []
        self._events = []
        self._show_source(f"live output of run {run.run_id} (running)")
        self._write(lines)

    async def _show_last_output(self, runs: list[RunRecord]) -> None:
        for run in runs:
            if not run.state.terminal:
                continue
            path = self._output_path(run.run_id)
            if path.exists():
                lines = await asyncio.to_thread(read_output_tail, path)
                self._show_source(f"output of the last run, {run.run_id} ({run.state.value})")
                self._write(lines, replace=True)
                return
            if run.output_tail:
                self._show_source(f"output of the last run, {run.run_id} (tail only)")
                self._write(plain_text(run.output_tail).split("\n"), replace=True)
                return
        self._show_source("no output recorded")

    def _show_source(self, text: str) -> None:
        self.query_one("#detail-output-source", Static).update(Text(text))

    def _write(self, lines: list[str], *, replace: bool = False) -> None:
        log = self.query_one("#detail-output", Log)
        if replace:
            log.clear()
        if lines:
            log.auto_scroll = log.is_vertical_scroll_end or replace
            log.write_lines(lines)

    def _on_run_event(self, event: RunEvent) -> None:
        """Bus callback: only queue (applied by `_apply_output`)."""
        if event.run.job == self.job_name:
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
        try:
            running = {run.run_id for run in self.runtime.engine.running()}
        except TuischedError:  # the runtime stopped: the console is closing
            return
        if self._live is not None and self._live not in running:
            self._show_source(f"output of run {self._live} (finished)")
            self._live = None
        self._load_history()
