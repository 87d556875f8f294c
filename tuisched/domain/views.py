"""What a front end sees of a scheduler: frozen snapshots the control seam returns.

Every view is a frozen dataclass of plain values (text, numbers, aware
datetimes, run records), so it can cross a thread or a socket as it is and be
turned into JSON and back. Views are facts at one moment; the events that
follow say what changed since.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from tuisched.domain.model import Overlap
from tuisched.domain.runs import RunRecord, RunState, Trigger
from tuisched.domain.schedule.bounds import MAX_LIMIT, MOST_ROWS


class PauseKind(enum.StrEnum):
    """What a pause holds: one job, a group's jobs, or every job."""

    JOB = "job"
    GROUP = "group"
    ALL = "all"


@dataclass(frozen=True, slots=True, kw_only=True)
class Pause:
    """One pause in force; `name` is "" for `all`."""

    kind: PauseKind
    name: str = ""

    def __str__(self) -> str:
        return "every job" if self.kind is PauseKind.ALL else f"{self.kind} {self.name}"


class JobState(enum.StrEnum):
    """A job's state in one word, most urgent first: what the jobs pane shows."""

    DISABLED = "disabled"
    PAUSED = "paused"
    RUNNING = "running"
    WAITING = "waiting"
    MANUAL = "manual"
    """Runs only by hand (`schedule: manual`)."""
    FINISHED = "finished"
    """Its schedule has no slot left (`at` past, or `stop` reached)."""
    STARTING = "starting"
    """The scheduler is starting: its next slot and pauses are not known yet."""
    ACTIVE = "active"


@dataclass(frozen=True, slots=True, kw_only=True)
class JobStatus:
    """One job as a front end shows it: definition in words, and its live state."""

    name: str
    kind: str
    """`command`, `python` or `wait_for`."""
    trigger: str
    """What makes it run, in words: `every hour from ...`, `after 'export' succeeds`."""
    groups: tuple[str, ...] = ()
    description: str = ""
    timezone: str = "UTC"
    state: JobState = JobState.ACTIVE
    enabled: bool = True
    scheduled: bool = False
    """True for a job with slots (`every`, `cron`, `at`); False for manual and `after`."""
    requires: tuple[str, ...] = ()
    """The upstream jobs its slots need (R9)."""
    next_fire: datetime | None = None
    """When it fires next: None when paused, disabled, finished, manual or `after` a job."""
    last: RunRecord | None = None
    """Its newest finished run."""
    paused_by: tuple[Pause, ...] = ()
    """The pauses that hold it (its own, its groups', everything); empty when not paused."""
    running: int = 0
    waiting: int = 0
    overlap: Overlap = Overlap.SKIP
    """What a run asked for while another of the job is in progress meets."""

    @property
    def paused(self) -> bool:
        """Whether any pause holds the job."""
        return bool(self.paused_by)

    why: str = ""
    """Why it is not running now, in one line (`paused by ...`, `waiting for export's slot
    ...`, `next slot at ...`); "" when the scheduler did not say."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupStatus:
    """A group, its jobs, and whether it is paused as a group."""

    name: str
    jobs: tuple[str, ...]
    paused: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeView:
    """A node of the cluster, as `tuisched nodes` and the console's nodes pane show it."""

    node_id: str
    name: str
    host: str
    pid: int
    started_at: datetime
    heartbeat_age: float
    """Seconds since its last heartbeat, by the database's clock."""
    state: str
    """alive, dead (the reapers said so) or left (it stopped cleanly)."""
    running: int
    capacity: int
    config_hash: str
    drifted: tuple[str, ...] = ()
    """Jobs it defines differently from the cluster (it does not run them)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunStatus:
    """A run in progress (RUNNING, QUEUED or WAITING) and what it says or waits for."""

    run: RunRecord
    live_status: str = ""
    """What it says now: a python job's `status`, else "" (output lines come as events)."""
    waits_for: tuple[str, ...] = ()
    """For a WAITING run, each requirement not met yet: `export slot 2026-05-07T01:30:00+02:00`."""


class SchedulerState(enum.StrEnum):
    """Where the scheduler is in its life."""

    STARTING = "starting"
    RUNNING = "running"
    STOPPING = "stopping"
    """Draining: no new runs; running ones finish or are stopped."""
    STOPPED = "stopped"


@dataclass(frozen=True, slots=True, kw_only=True)
class SchedulerStatus:
    """The scheduler at a glance: what the status line shows."""

    config_path: Path
    node: str
    timezone: str
    """The default zone (`settings.timezone`), an IANA key."""
    state: SchedulerState
    jobs: int
    groups: int
    running: int
    queued: int
    waiting: int
    pauses: tuple[Pause, ...] = ()
    offline_edit: bool = False
    """The file on disk differs from the configuration in force (R17)."""
    can_undo: bool = False
    last_seq: int = 0
    """The sequence number of the newest event published so far."""
    loop_lag: float = 0.0
    """How long the event loop was blocked in its latest episode, if that was within the
    last minute (seconds; 0 otherwise)."""
    lag_episodes: int = 0
    """Times the event loop was blocked for over 250 ms since the scheduler started."""
    pid: int = 0
    """The scheduler's process (0 when none runs)."""
    started_at: datetime | None = None
    """When the scheduler started (None when none runs)."""
    cluster: str = ""
    """In cluster mode, the database's state as the status line says it ("" otherwise)."""

    @property
    def all_paused(self) -> bool:
        """Whether everything is paused."""
        return any(pause.kind is PauseKind.ALL for pause in self.pauses)


@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryQuery:
    """Which runs of the history to read: newest first, filtered, one page at a time."""

    job: str | None = None
    limit: int = 20
    offset: int = 0
    """Runs to skip (the newest first): `offset=20, limit=20` is the second page."""
    states: tuple[RunState, ...] = ()
    """Only these states (all when empty)."""
    triggers: tuple[Trigger, ...] = ()
    """Only these triggers (all when empty)."""
    since: datetime | None = None
    """Only runs queued at or after this instant."""
    until: datetime | None = None
    """Only runs queued before this instant."""

    def __post_init__(self) -> None:
        """ValueError for a page no database can read: a count below 0 or beyond 2**63."""
        for name, value in (("limit", self.limit), ("offset", self.offset)):
            if not 0 <= value <= MOST_ROWS:
                raise ValueError(f"{name} must be from 0 to {MOST_ROWS}, not {value}")


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputChunk:
    """A piece of one run's output, as plain text lines (never markup or escapes)."""

    run_id: str
    job: str
    lines: tuple[str, ...] = ()
    offset: int = 0
    """Where in the output file the lines begin (bytes)."""
    next_offset: int = 0
    """Where to read from next time to get only what came since."""
    source: str = "file"
    """`file` (the run's output file), `tail` (only the tail the history kept) or `none`."""
    running: bool = False
    """True while the run still writes output."""
    run: RunRecord | None = None
    """The run as it stood when read: its state, and why it did not start or how it
    ended (None from a scheduler that does not say)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditChunk:
    """Lines of the audit log (SPEC R15), oldest first."""

    lines: tuple[str, ...] = ()
    next_offset: int = 0
    """Where to read from next time (bytes into the log)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingEdit:
    """An offline edit of the configuration file and what reloading it would do (R17)."""

    present: bool = False
    """True when the file on disk differs from the configuration in force."""
    valid: bool = True
    """False when the file on disk does not validate (reloading would change nothing)."""
    lines: tuple[str, ...] = ()
    """The job-level diff, or the problems, ready to show."""
    summary: str = ""
    """`+1 -0 ~3 jobs` for a valid edit."""
    details: tuple[str, ...] = ()
    """`lines` without their heading: the changes, one a line, or the problems (what a
    report of the reload lists under its own words)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class JobPlan:
    """A job's upcoming slots and what its next runs need, for the detail view."""

    job: str
    slots: tuple[datetime, ...] = ()
    """The next slots (in the job's zone), empty for a job that has none."""
    notes: tuple[str, ...] = ()
    """Why the slots will not run or there are none: disabled, paused, manual, after..."""
    waits: tuple[str, ...] = ()
    """For a job with `requires`: what its waiting runs (or its next slot) wait for."""


class EditAction(enum.StrEnum):
    """What an edit does to a job or a group of the configuration file."""

    ADD = "add"
    REPLACE = "replace"
    DELETE = "delete"


class EditTarget(enum.StrEnum):
    """The section of the configuration file an edit changes."""

    JOB = "job"
    GROUP = "group"


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigEdit:
    """One change to the configuration file (SPEC R16), checked before it is written.

    `definition` is the job's or group's mapping as the file would hold it
    (plain values: text, numbers, booleans, lists, mappings); None to delete.
    """

    action: EditAction
    target: EditTarget
    name: str
    definition: Mapping[str, object] | None = None

    @classmethod
    def add_job(cls, name: str, definition: Mapping[str, object]) -> ConfigEdit:
        """Add a job (refused if the name exists)."""
        return cls(action=EditAction.ADD, target=EditTarget.JOB, name=name, definition=definition)

    @classmethod
    def replace_job(cls, name: str, definition: Mapping[str, object]) -> ConfigEdit:
        """Replace a job's definition (refused if there is no such job)."""
        return cls(
            action=EditAction.REPLACE, target=EditTarget.JOB, name=name, definition=definition
        )

    @classmethod
    def delete_job(cls, name: str) -> ConfigEdit:
        """Delete a job; a run in progress keeps running."""
        return cls(action=EditAction.DELETE, target=EditTarget.JOB, name=name)

    def describe(self) -> str:
        """`add job backup`, for messages and the actions log."""
        return f"{self.action} {self.target} {self.name}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigChange:
    """A change put in force (an edit through the seam, or a reload), as `undo()` would
    take it back: what it was, when, and what it changed."""

    number: int
    """Counts the changes since the scheduler started: `undo(change=number)` takes back
    this one only, never one made since (by another console) that the operator never saw."""
    action: str
    """`add`, `replace` or `delete` (an `EditAction`), or `reload`."""
    subject: str = ""
    """What it changed: `job backup`, `group nightly` ("" for a reload)."""
    at: datetime
    lines: tuple[str, ...] = ()
    """What it changed, one a line: the configuration diff's lines (`~ backup`,
    `    schedule: every hour -> every 2 hours`)."""


# --- the output viewer: a run's output file paged by byte offset, and searched ----------


class OutputSource(enum.StrEnum):
    """Where a page of a run's output comes from."""

    FILE = "file"
    """The run's output file (`state_dir/output/JOB/RUN_ID.log`)."""
    TAIL = "tail"
    """Only the tail the history kept: the file was pruned (or never written)."""
    NONE = "none"
    """Nothing: the run printed nothing (or not yet)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputPage:
    """Whole lines of one run's output, each with the byte offset where it begins.

    A page is a window on the file: the viewer asks for the lines after one
    offset, the lines before one, or the last lines, and never for the whole
    file. Lines are plain text (never markup or escapes); a line longer than
    the page can show ends with a note of how much was left out.
    """

    run_id: str
    job: str
    state: RunState
    running: bool = False
    """True while the run still writes output (the file may grow)."""
    source: OutputSource = OutputSource.FILE
    lines: tuple[str, ...] = ()
    offsets: tuple[int, ...] = ()
    """Where each line begins in the file (bytes); with `source` TAIL, its index."""
    end: int = 0
    """Where the line after the last one begins (bytes)."""
    size: int = 0
    """The file's size when the page was read."""
    path: str = ""
    """The output file (on the scheduler's machine, which is the console's)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputMatch:
    """The answer to one bounded step of a search through a run's output file.

    A search of a big file is a series of steps, each scanning a bounded number
    of bytes: `found` ends it; else `done` says the file was scanned to its end
    (or start) without a match, and otherwise the next step goes on from
    `scanned_to`.
    """

    found: bool = False
    offset: int = 0
    """Where the matching line begins (bytes)."""
    end: int = 0
    """Where the line after it begins (bytes)."""
    column: int = 0
    """Where the match begins in the line as shown (characters)."""
    length: int = 0
    """How many characters of the line as shown match."""
    scanned_to: int = 0
    """Where the next step goes on from (bytes): forward, the bytes before it are done;
    backward, those after it."""
    size: int = 0
    """The file's size when the step ran."""
    done: bool = False
    """True when nothing matched up to the file's end (or start, searching backward)."""


# --- the downtime ledger (SPEC R25) ------------------------------------------------------


class MissedChoice(enum.StrEnum):
    """What the operator does with a job's missed slots."""

    LATEST = "latest"
    """Run the newest missed slot once (a catch-up run); the older ones are skipped."""
    ALL = "all"
    """Run every listed missed slot as a catch-up run, in slot order."""
    SKIP = "skip"
    """Run none of them."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MissedSlots:
    """One job's entry in the downtime ledger: the slots it missed and what became of them."""

    job: str
    timezone: str = "UTC"
    """The job's zone (IANA key), to show its slots in."""
    slots: tuple[datetime, ...] = ()
    """The missed slots the history lists, oldest first."""
    earlier: int = 0
    """Missed slots before those, only counted (a long downtime of a frequent job)."""
    misfire: str = "skip"
    """The job's `misfire` policy."""
    policy: str = ""
    """What that policy already did: "recorded only", or the catch-up run it made."""
    decided: str = ""
    """How the slots were decided ("" while they wait for the operator)."""

    @property
    def count(self) -> int:
        """How many slots the job missed in all."""
        return len(self.slots) + self.earlier

    @property
    def pending(self) -> bool:
        """Whether the operator still has to decide."""
        return not self.decided


# --- seeing ahead: the schedule simulator (R25) -------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class SimulatedRun:
    """One run a window would hold, as `tuisched simulate` lists it."""

    at: datetime
    """When it would start, in its job's zone."""
    job: str
    trigger: str
    """`schedule` (a slot) or `dependency` (an `after` dependant of `upstream`)."""
    upstream: str = ""
    """For a dependency run: the job whose run starts it."""
    note: str = ""
    """What to know of it: the assumed outcome it follows, the slots its `requires`
    need, a pause in force."""
    dst: str = ""
    """A DST warning when its wall-clock time falls in a gap or repeats in a fold."""
    timezone: str = "UTC"


@dataclass(frozen=True, slots=True, kw_only=True)
class Simulation:
    """Every run of a window, in time order, and what the listing assumed or left out."""

    start: datetime
    end: datetime
    """The window is `start <= time < end`."""
    runs: tuple[SimulatedRun, ...] = ()
    left_out: int = 0
    """Runs past the limit, not listed."""
    counted_all: bool = True
    """False when counting the runs left out stopped: there are at least `left_out`."""
    limit: int = 0
    """The most runs the answer could list."""
    assumptions: tuple[str, ...] = ()


# --- the edit form's impact preview (SPEC R25) ---------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class DstWarning:
    """What a schedule does on a day the clocks change: a line for the operator."""

    text: str
    """`Sun 2026-03-29, clocks go forward 02:00 -> 03:00: 02:30 does not exist; ...`."""
    slots: tuple[datetime, ...] = ()
    """The slots the change moves or repeats (to mark them where slots are listed)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EditImpact:
    """What an edit of a job would change, seen ahead: its next slots before and after,
    the clock changes its new schedule meets, and the jobs whose dependencies it touches."""

    job: str
    timezone: str = "UTC"
    """The zone the slots are shown in (the job's, after the edit)."""
    before: tuple[datetime, ...] = ()
    """The next slots as the job stands (empty for a new job)."""
    after: tuple[datetime, ...] = ()
    """The next slots the edited job would have (empty while the edit does not validate)."""
    before_note: str = ""
    """Why `before` is empty or will not run: a new job, manual, after a job, disabled..."""
    after_note: str = ""
    """The same for `after`; the first problem while the edit does not validate."""
    dst: tuple[DstWarning, ...] = ()
    """For the edited schedule, each clock change of the coming year that touches it."""
    dependencies: tuple[str, ...] = ()
    """The jobs whose `after` or `requires` the edit affects, and what the job will wait for."""
    problems: tuple[str, ...] = ()
    """Every problem saving the edit would meet (as `preview` says them)."""


# --- backfill of a window (SPEC R24) ---------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class LeftOutSlot:
    """A slot of a backfill window that is not run, and why."""

    slot: datetime
    reason: str
    """`already succeeded (run 1a2b...)`, `a run of this slot is in progress`, ..."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BackfillPlan:
    """What a backfill of one job over a window runs (or, for a dry run, would run)."""

    job: str
    timezone: str = "UTC"
    """The job's zone (IANA key), to show its slots in."""
    start: datetime
    """The window's first instant (included)."""
    end: datetime
    """The window's end (excluded)."""
    slots: tuple[datetime, ...] = ()
    """The slots run, oldest first: those with no successful run."""
    left_out: tuple[LeftOutSlot, ...] = ()
    """The window's other slots, each with why it is not run."""
    notes: tuple[str, ...] = ()
    """What bounds the window besides: the job's `start` or `stop`, now."""
    order: str = ""
    """How the runs go: one after another, or a few at a time (`overlap: allow`)."""
    dry_run: bool = False
    """True when nothing was queued: the plan only lists."""


# --- history stats (issue 16) -------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class StatsQuery:
    """Which runs `stats` sums up: those queued in [since, until), of `job` or of every job."""

    job: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    slowest: int = 0
    """Also list this many of the window's slowest runs (0: none)."""

    def __post_init__(self) -> None:
        """ValueError for more slowest runs than one answer may list."""
        if not 0 <= self.slowest <= MAX_LIMIT:
            raise ValueError(f"slowest must be from 0 to {MAX_LIMIT}, not {self.slowest}")


@dataclass(frozen=True, slots=True, kw_only=True)
class JobStats:
    """One job's runs over a window: how many, how they ended, how long they took.

    A run counts once it has ended after starting: SUCCESS, FAILED or
    ABANDONED. Runs that never started (NOT_STARTED, MISSED) and runs still
    in progress are not counted.
    """

    job: str
    runs: int
    successes: int
    failures: int
    """FAILED and ABANDONED runs."""
    p50: timedelta | None = None
    """Median duration of the counted runs that have one."""
    p95: timedelta | None = None
    slowest_run: str | None = None
    """The run id of the longest run."""
    slowest: timedelta | None = None
    last_failure_at: datetime | None = None
    """When the newest failure ended."""
    last_failure: str = ""
    """Its state and result, e.g. `FAILED (timed_out)`."""

    @property
    def success_rate(self) -> float | None:
        """Successes per counted run (None when there was none)."""
        return self.successes / self.runs if self.runs else None


@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryStats:
    """The answer to a `StatsQuery`: each job's stats, and the slowest runs asked for."""

    since: datetime | None = None
    until: datetime | None = None
    jobs: tuple[JobStats, ...] = ()
    """Jobs with at least one counted run, by name."""
    slowest: tuple[RunRecord, ...] = ()
    """The window's longest runs, longest first."""
