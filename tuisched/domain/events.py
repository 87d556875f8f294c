"""Every event tuisched publishes: immutable facts, named in the past tense.

Events carry copies of the data (a `RunRecord` is frozen), never live
objects, so any thread may read them, and they turn into JSON and back
(`tuisched.domain.wire`). The bus stamps each with its sequence number when it
publishes it; nothing else ever changes an event.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import MappingProxyType

from tuisched.domain.config.diff import ConfigDiff
from tuisched.domain.errors import Problem
from tuisched.domain.runs import RunRecord


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """Base of all events; `at` is when it happened."""

    at: datetime
    seq: int = 0
    """The event's number in its bus's order, from 1 (0 until the bus publishes it)."""


# --- the scheduler --------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class SchedulerStarted(Event):
    """The runtime is up and firing slots."""

    node: str
    config_path: Path
    jobs: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SchedulerStopping(Event):
    """No new runs from now on; running ones get `grace` to finish."""

    reason: str
    running: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SchedulerStopped(Event):
    """Everything is closed: runs recorded, history flushed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigLoaded(Event):
    """A configuration was applied to the live schedule."""

    path: Path
    jobs: int
    groups: int
    origin: str = "start"
    """`start`, `reload` (the file was re-read), `edit` (a change through the API) or `undo`."""
    diff: ConfigDiff | None = None
    """What changed from the configuration before (None at start)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigChangedOnDisk(Event):
    """The file differs from the live configuration: an offline edit, not applied yet.

    `diff` says what a reload would change; `problems` why it would be refused.
    """

    path: Path
    diff: ConfigDiff | None
    problems: tuple[Problem, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigRejected(Event):
    """A configuration failed validation; the running schedule did not change."""

    path: Path
    problems: tuple[Problem, ...]


# --- runs -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class RunEvent(Event):
    """Base of the events about one run; `run` is its record at that moment."""

    run: RunRecord


@dataclass(frozen=True, slots=True, kw_only=True)
class RunQueued(RunEvent):
    """A run waits for a worker."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunStarted(RunEvent):
    """A run began (its process or thread exists)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunOutputWritten(RunEvent):
    """A running job wrote output; `lines` are the new complete lines, as plain text."""

    lines: tuple[str, ...]


def _no_data() -> Mapping[str, object]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFinished(RunEvent):
    """A run ended: SUCCESS or FAILED, with the scheduler's result."""

    final: bool = True
    """False when a retry follows: alerts and dependants wait for the last attempt."""
    message_data: Mapping[str, object] = field(default_factory=_no_data)
    """A python job's `message_data` at its end (read-only), for alert templates."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunNotStarted(RunEvent):
    """A run could not begin; `run.reason` says why."""

    final: bool = True
    """False when a retry follows."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunConcluded(RunEvent):
    """The final outcome of a run and its retries: what alerts and dependants act on.

    Published after the last attempt's RunFinished or RunNotStarted, and also
    when a pending retry is dropped (its job deleted or disabled, or the
    scheduler stopping): then `run` is the last attempt that did run.
    """

    message_data: Mapping[str, object] = field(default_factory=_no_data)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunWaiting(RunEvent):
    """A run waits for its `requires` (R9); `run.reason` names the slot it waits for."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SlotMissed(RunEvent):
    """A slot passed without a run (the scheduler was down or too late)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunAbandoned(RunEvent):
    """A run left RUNNING by a dead scheduler was closed as ABANDONED."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PauseChanged(Event):
    """A job, a group or everything was paused or resumed."""

    kind: str
    """`job`, `group` or `all`."""
    name: str
    """The job's or group's name ("" for all)."""
    paused: bool


# --- alerts -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class AlertSent(Event):
    """An alert mail was accepted by the SMTP server."""

    job: str
    run_id: str
    alert: str
    """The event alerted on: success, failed or not_started."""
    to: tuple[str, ...]
    subject: str
    channel: str = "email"
    """`email` (`to` holds addresses), or `webhook` (`to` holds the webhook's name)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AlertFailed(Event):
    """An alert could not be rendered or delivered (after `attempts` tries when `final`)."""

    job: str
    run_id: str
    alert: str
    to: tuple[str, ...]
    error: str
    attempts: int
    final: bool
    """True when no further attempt follows."""
    channel: str = "email"
    """`email` (`to` holds addresses), or `webhook` (`to` holds the webhook's name)."""


# --- the history ------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryDamaged(Event):
    """The history database was found damaged while the scheduler ran: nothing is written
    to it again, and the runs' records are kept in memory meanwhile."""

    database: str
    """The damaged file."""
    error: str
    """What is wrong and what to do, in the operator's words."""
