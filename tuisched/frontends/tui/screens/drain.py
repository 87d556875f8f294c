"""The drain screen: quitting with runs in progress, each run's real state as it ends.

While the scheduler stops, no job has a next slot, so the jobs pane would
call every scheduled job "finished". This screen shows instead the runs
that were in progress when the operator quit, and what became of each:
running (or queued, waiting), then succeeded, failed, stopped or killed.
It hears the scheduler through the control seam like the panes do (events
queued as they come, applied a few times a second).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Footer

from tuisched.domain.events import Event, RunEvent
from tuisched.domain.runs import Result, RunRecord, RunState
from tuisched.domain.text import counted
from tuisched.frontends.tui.screens.present import present
from tuisched.frontends.tui.widgets.status import StatusLine
from tuisched.frontends.tui.widgets.table import Column, KeyedTable
from tuisched.runtime.control import SchedulerControl, Subscription

REFRESH_SECONDS = 0.2
SIGKILL_EXIT = -9
"""The exit code of a process ended by SIGKILL."""


def drain_word(run: RunRecord) -> str:
    """What became of `run`: `▶ running` ... `✔ succeeded`, `✘ failed`, `■ stopped`,
    `■ killed` (a glyph and a word: the word alone is enough)."""
    if run.state is RunState.SUCCESS:
        return "✔ succeeded"
    if run.result in (Result.STOPPED, Result.SHUTDOWN):
        return "■ killed" if run.exit_code == SIGKILL_EXIT else "■ stopped"
    words = {
        RunState.RUNNING: "▶ running",
        RunState.QUEUED: "… queued",
        RunState.WAITING: "⧗ waiting",
        RunState.NOT_STARTED: "⊘ not started",
        RunState.ABANDONED: "? abandoned",
        RunState.MISSED: "◌ missed",
    }
    if run.result is Result.TIMED_OUT:
        return "✘ timed out"
    return words.get(run.state, "✘ failed")


@dataclass(frozen=True, slots=True)
class DrainRow:
    """A line of the drain screen."""

    job: str
    run_id: str
    state: str
    status: str


def drain_row(run: RunRecord) -> DrainRow:
    """`run`'s line: its job, id, what became of it, and its own last words."""
    return DrainRow(run.job, run.run_id, drain_word(run), (run.status or run.reason)[:200])


class DrainTable(KeyedTable):
    """The runs being drained, one row each, updated in place."""

    COLUMNS: ClassVar[tuple[Column, ...]] = (
        Column("job", "Job", 12, 24),
        Column("run_id", "Run", 12, 12),
        Column("state", "State", 13, 13),
        Column("status", "Status", 10, 200),
    )
    DROPPED_FIRST: ClassVar[tuple[str, ...]] = ("status", "run_id")
    GROWN_FIRST: ClassVar[tuple[tuple[str, int | None], ...]] = (
        ("job", 18), ("status", 40), ("job", None), ("status", None),
    )  # fmt: skip

    def show_run(self, row: DrainRow) -> None:
        """Add `row`'s run, or show its new state."""
        self.put(row.run_id, row)


class DrainScreen(Screen[None]):
    """The runs in progress as the scheduler stops, until the last one has ended."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "app.quit_console", "Stop them now"),
    ]

    def __init__(self, control: SchedulerControl, runs: Iterable[RunRecord], *, wait: bool) -> None:
        """`runs`: those in progress when the operator quit; `wait`: for them to end."""
        super().__init__()
        self._control = control
        self._runs = {run.run_id: run for run in runs}
        self._wait = wait
        self._pending: list[Event] = []
        self._subscription: Subscription | None = None

    @property
    def runs(self) -> dict[str, RunRecord]:
        """Each run shown, as last heard of, by id."""
        return dict(self._runs)

    def compose(self) -> ComposeResult:
        yield StatusLine(id="status")
        table = DrainTable(id="drain")
        table.border_title = "Stopping the scheduler"
        yield table
        yield Footer()

    def on_mount(self) -> None:
        self._subscription = self._control.subscribe(self._heard)
        if (table := present(self, "DrainTable", DrainTable)) is None:
            return
        for run in self._runs.values():
            table.show_run(drain_row(run))
        self._show_status()
        self.set_interval(REFRESH_SECONDS, self._apply)
        table.focus()

    def on_unmount(self) -> None:
        if self._subscription is not None:
            self._subscription.unsubscribe()
            self._subscription = None

    def _heard(self, event: Event) -> None:
        """The one place events are heard: queue them for `_apply`."""
        self._pending.append(event)

    def _apply(self) -> None:
        """The events heard since the last time: each run of ours takes its new state."""
        events, self._pending = self._pending, []
        if (table := present(self, "DrainTable", DrainTable)) is None:
            return
        for event in events:
            if not isinstance(event, RunEvent):
                continue
            run = event.run
            if run.run_id in self._runs:
                self._runs[run.run_id] = run
                table.show_run(drain_row(run))
        if events:
            self._show_status()

    def _show_status(self) -> None:
        left = sum(run.state in _IN_PROGRESS for run in self._runs.values())
        how = "waiting for" if self._wait else "stopping"
        text = f" stopping: {how} {counted(left, 'run')} in progress"
        if not left:
            text = " stopping: every run has ended"
        if left and self._wait:
            text += " - q or ctrl+c stops them now"
        if (line := present(self, "StatusLine", StatusLine)) is not None:
            line.text = text


_IN_PROGRESS = frozenset({RunState.RUNNING, RunState.QUEUED, RunState.WAITING})
