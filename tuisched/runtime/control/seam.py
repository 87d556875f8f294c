"""The control seam: everything a front end may ask of a scheduler, and nothing more.

The console, headless mode and the command line see a scheduler only through
`SchedulerControl`. Today's implementations are in-process (`LocalControl`,
over a running runtime) and offline (`OfflineControl`, reading the state a
stopped scheduler left); one that speaks over a socket implements the same
protocol, so a front end works unchanged over any of them.

Every method is a coroutine (an answer may cross a socket) and never blocks
the caller's event loop. Every value crossing the seam is a frozen dataclass
of plain values from `tuisched.domain` (views, run records, events), so it can
be turned into JSON and back. Errors are `TuischedError`s: `JobActionError`
and `UnknownJobError` for a job that does not fit, `ConfigError` for an edit
that does not validate, `SchedulerNotRunningError` for a command that needs a
running scheduler.

Events: `subscribe(callback, after=seq)` delivers every event published after
`seq` (each carries its sequence number), then every new one, in order, on
the caller's loop: a client that reconnects with the last number it saw misses
nothing and sees nothing twice.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, TypeAlias

from tuisched.domain.runs import RunRecord
from tuisched.domain.views import (
    AuditChunk,
    BackfillPlan,
    ConfigChange,
    ConfigEdit,
    EditImpact,
    GroupStatus,
    HistoryQuery,
    HistoryStats,
    JobPlan,
    JobStatus,
    MissedChoice,
    MissedSlots,
    NodeView,
    OutputChunk,
    OutputMatch,
    OutputPage,
    Pause,
    PendingEdit,
    RunStatus,
    SchedulerStatus,
    Simulation,
    StatsQuery,
)

if TYPE_CHECKING:  # only `subscribe` speaks of events: the command line's calls never load them
    from tuisched.domain.events import Event

OUTPUT_CHUNK_BYTES = 200 * 1024
"""How much output one `output()` call reads at most (a larger `limit` is refused)."""
AUDIT_LINES = 200
"""How many audit lines `audit()` returns from the end of the log."""
PAGE_LINES = 200
"""How many lines `output_page()` returns unless told."""


class Subscription(Protocol):
    """A handle on an event subscription."""

    def unsubscribe(self) -> None:
        """Stop delivering events to the callback. Idempotent."""


class SchedulerQueries(Protocol):
    """What a front end may read of a scheduler: snapshots, files, and its events."""

    async def status(self) -> SchedulerStatus:
        """The scheduler at a glance."""
        ...

    async def jobs(self, names: Collection[str] | None = None) -> tuple[JobStatus, ...]:
        """Every job (or the named ones that exist), in the file's order."""
        ...

    async def groups(self) -> tuple[GroupStatus, ...]:
        """Every group, in the file's order."""
        ...

    async def runs(self) -> tuple[RunStatus, ...]:
        """Runs in progress: running, then queued in leaving order, then waiting."""
        ...

    async def nodes(self) -> tuple[NodeView, ...]:
        """The cluster's nodes, newest first (none on one node).

        Raises:
            ClusterDatabaseError: the cluster's database does not answer now.
        """
        ...

    async def history(self, query: HistoryQuery) -> tuple[RunRecord, ...]:
        """A page of the run history, newest first."""
        ...

    async def failures_since(self, since: datetime) -> tuple[datetime, ...]:
        """When the runs that failed (the job's own failures) since `since` ended."""
        ...

    async def output(
        self, run_id: str, *, offset: int | None = None, limit: int = OUTPUT_CHUNK_BYTES
    ) -> OutputChunk:
        """A run's output (live or past): from byte `offset`, or its last `limit` bytes."""
        ...

    async def audit(self, *, offset: int | None = None, lines: int = AUDIT_LINES) -> AuditChunk:
        """The audit log from byte `offset`, or its last `lines` lines."""
        ...

    async def config_text(self) -> str:
        """The configuration file's text as in force."""
        ...

    async def pending_edit(self) -> PendingEdit:
        """The file on disk as it reads now (an offline edit, even one the watcher has not
        seen yet), and what reloading it would change."""
        ...

    async def job_definition(self, name: str) -> Mapping[str, object] | None:
        """A job's definition as the file writes it (plain values), or None."""
        ...

    async def plan(self, name: str, *, count: int = 10, after: datetime | None = None) -> JobPlan:
        """A job's next `count` slots after `after` (default: now), and what its runs wait for
        (WireError for more than `bounds.MAX_PLAN` slots)."""
        ...

    async def preview(self, edit: ConfigEdit) -> tuple[str, ...]:
        """Every problem `edit` would cause (empty when it is valid); nothing is written."""
        ...

    async def last_change(self) -> ConfigChange | None:
        """The change to the configuration `undo()` would take back now (what, when, its
        diff), or None when there is none."""
        ...

    def subscribe(
        self, callback: Callable[[Event], object], *, after: int | None = None
    ) -> Subscription:
        """Call `callback` with every event after `after` (None: from now on), in order."""
        ...

    # --- the output viewer ---------------------------------------------------------------

    async def output_page(
        self, run_id: str, *, offset: int | None = None, before: bool = False,
        lines: int = PAGE_LINES,
    ) -> OutputPage:  # fmt: skip
        """Up to `lines` whole lines of a run's output (live or past) and their byte offsets.

        `offset` None: the last lines. Else the lines beginning at byte `offset`
        (a line's start), or with `before` the lines ending there. When the file
        was pruned, the page is the tail the history kept (`source` TAIL).
        Reads a bounded amount however large the file.
        """
        ...

    async def search_output(
        self, run_id: str, text: str, *, offset: int = 0, backward: bool = False
    ) -> OutputMatch:
        """One bounded step of a search for `text` in a run's output file, from byte
        `offset` (a line's start) forward, or backward over the lines before it.

        Case-insensitive when `text` has no capital letter. Each step scans a
        bounded number of bytes; a step that finds nothing and is not `done`
        says where the next one goes on (`scanned_to`).
        """
        ...

    async def output_line_number(self, run_id: str, offset: int) -> int | None:
        """The number (from 1) of the line beginning at byte `offset` of a run's output
        file; None while counting needs more reading (ask again: each call reads a
        bounded amount, and what was counted is kept); 0 when there is no file."""
        ...

    # --- the downtime ledger (SPEC R25) ---

    async def missed(self) -> tuple[MissedSlots, ...]:
        """Each job's missed slots: those waiting for a decision, and those decided since
        the scheduler started (by an operator or by `misfire: once`), in the file's order."""
        ...

    # --- seeing ahead (R25) ---------------------------------------------------------------

    async def simulate(
        self, start: datetime, end: datetime, *, jobs: tuple[str, ...] = (), limit: int = 10_000
    ) -> Simulation:
        """Every run the configuration in force would hold from `start` to `end` (excluded),
        dependency runs included, with DST warnings; jobs paused now are noted.

        Raises:
            ScheduleError: the window is empty or too long, or `limit` is out of range.
            UnknownJobError: a name in `jobs` is no job.
        """
        ...

    # --- the edit form's impact preview (SPEC R25) ---

    async def impact(self, edit: ConfigEdit) -> EditImpact:
        """What a job edit would change, seen ahead: the job's next slots before and after,
        the clock changes its new schedule meets, the dependencies it touches, and the
        problems saving it would meet; nothing is written."""
        ...

    # --- history stats (issue 16) ---

    async def stats(self, query: StatsQuery) -> HistoryStats:
        """Each job's runs over the query's window: counts, success rate, p50/p95
        durations, slowest run, last failure; and the window's slowest runs if asked.
        Every node's runs in cluster mode."""
        ...


class SchedulerCommands(Protocol):
    """What a front end may change: runs, pauses, the configuration, the scheduler's life."""

    async def run_now(self, job: str, *, key: str | None = None, queue: bool = False) -> RunRecord:
        """Queue a manual run; the same idempotency `key` twice makes one run.

        The scheduler decides at once, under the job's `overlap`: a run it would not
        start (`skip` while a run of the job is in progress, a full backlog, a drain) is
        refused, and nothing is recorded. With `queue`, a run `skip` would refuse waits
        behind the run in progress instead, and starts once it ends.

        Raises:
            UnknownJobError: no job by that name.
            RunRefusedError: the run is refused; its `refusal` says why.
        """
        ...

    async def stop_run(self, run_id: str, *, kill: bool = False) -> None:
        """Stop a queued, waiting or running run (SIGKILL at once with `kill`)."""
        ...

    async def set_paused(self, pause: Pause, *, paused: bool) -> None:
        """Pause or resume a job, a group or everything (kept across restarts)."""
        ...

    async def edit(self, edit: ConfigEdit) -> None:
        """Write `edit` to the configuration file, then put it in force; an edit that
        leaves the file as it is writes nothing and is not recorded (nothing to undo)."""
        ...

    async def undo(self, *, change: int | None = None) -> None:
        """Undo the last change to the configuration (file and schedule). With `change`
        (a `ConfigChange.number` from `last_change()`), only that one: JobActionError
        when another change was made since."""
        ...

    async def reload(self) -> bool:
        """Apply the file on disk; False (nothing changed) when it does not validate."""
        ...

    async def shutdown(self, *, grace: float | None = None, reason: str = "shutdown") -> None:
        """Drain and stop the scheduler: no new runs; running ones get `grace` seconds."""
        ...

    async def hurry(self) -> None:
        """During a drain, stop every run now instead of waiting for the grace period."""
        ...

    # --- the downtime ledger (SPEC R25) ---

    async def decide_missed(self, job: str | None, choice: MissedChoice) -> tuple[MissedSlots, ...]:
        """Decide the missed slots of `job` (None: of every job waiting for a decision):
        run the latest once, run all in slot order, or skip. Made once: slots decided
        already (here or by another console) raise JobActionError."""
        ...

    # --- backfill of a window (SPEC R24) ---

    async def backfill(
        self, job: str, start: datetime, end: datetime, *, dry_run: bool = False
    ) -> BackfillPlan:
        """Run the slots of `job` from `start` to `end` (excluded) that have no successful
        run, oldest first, with trigger `backfill` (honouring `requires`, `overlap` and
        `max_workers`); with `dry_run` only list them and why the others are left out.

        Raises:
            UnknownJobError: no such job. JobActionError: the job cannot be backfilled,
                or nothing to run.
            ScheduleError: the window is empty or holds more than 10,000 slots.
        """
        ...


class SchedulerControl(SchedulerQueries, SchedulerCommands, Protocol):
    """Everything a front end may do with a scheduler: read it, steer it, follow it."""


Callback: TypeAlias = "Callable[[Event], object]"
"""What `subscribe` calls with each event."""

__all__ = [
    "AUDIT_LINES",
    "OUTPUT_CHUNK_BYTES",
    "PAGE_LINES",
    "Callback",
    "SchedulerCommands",
    "SchedulerControl",
    "SchedulerQueries",
    "Subscription",
]
