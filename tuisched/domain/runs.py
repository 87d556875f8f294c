"""What a run is: its states, what triggered it, how it ended, and its record.

A *job* is the definition; a *run* is one execution of it; a *slot* is the
scheduled instant a run belongs to (None for a run started by hand).
"""

from __future__ import annotations

import enum
import random
from dataclasses import dataclass
from datetime import datetime, timedelta


class RunState(enum.StrEnum):
    """Where a run is in its life (SPEC R12)."""

    QUEUED = "QUEUED"
    """Waiting for a worker."""
    WAITING = "WAITING"
    """Waiting for its `requires` to hold (R9)."""
    RUNNING = "RUNNING"
    SUCCESS = "SUCCESS"
    FAILED = "FAILED"
    NOT_STARTED = "NOT_STARTED"
    """Could not begin: launch failure, overlap skip, dependency outcome, requirement timeout."""
    MISSED = "MISSED"
    """A slot that passed while the scheduler was not running (or too late to run)."""
    ABANDONED = "ABANDONED"
    """Left RUNNING by a scheduler that died; closed by the next start."""

    @property
    def terminal(self) -> bool:
        """True once the run can change no more."""
        return self not in (RunState.QUEUED, RunState.WAITING, RunState.RUNNING)


class Trigger(enum.StrEnum):
    """What made the run happen."""

    SCHEDULE = "schedule"
    DEPENDENCY = "dependency"
    MANUAL = "manual"
    CATCHUP = "catchup"
    BACKFILL = "backfill"
    """Asked for by an operator for a past slot with no successful run (`tuisched backfill`)."""


class Result(enum.StrEnum):
    """The scheduler's account of how a run ended (the audit log's third field)."""

    COMPLETED = "completed"
    """The job ran to its end by itself (successfully or not)."""
    STOPPED = "stopped"
    """An operator stopped it."""
    TIMED_OUT = "timed_out"
    SHUTDOWN = "shutdown"
    """The scheduler shut down and stopped it after the grace period."""
    LAUNCH_FAILED = "launch_failed"
    ERROR = "error"
    """The scheduler itself failed while running it."""
    SKIPPED = "skipped"
    """Not started: the previous run was still running (`overlap: skip`)."""
    DEPENDENCY = "dependency"
    """Not started because of an upstream outcome or requirement."""
    MISSED = "missed"
    ABANDONED = "abandoned"


# Drawn from the system's randomness at each call (about a microsecond), without `secrets`
# (which loads OpenSSL's hashes: a command line verb that reads a run record does not need
# them). No state: a forked child never draws its parent's ids, and a test that seeds
# `random` changes nothing here.
_IDS = random.SystemRandom()


def new_run_id() -> str:
    """A fresh run id: 12 hex digits (48 random bits), unique enough across nodes and years."""
    return f"{_IDS.getrandbits(48):012x}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """How a runner says a run ended."""

    state: RunState
    """SUCCESS, FAILED or NOT_STARTED."""
    result: Result
    status: str = ""
    """The job's own words: exit code and last output line, or a python job's status."""
    exit_code: int | None = None
    reason: str = ""
    """Why it did not start or was stopped, for NOT_STARTED and alerts."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunRecord:
    """One run as the history store keeps it. Times are aware (UTC in the store)."""

    run_id: str
    job: str
    slot: datetime | None
    trigger: Trigger
    state: RunState
    queued_at: datetime
    result: Result | None = None
    status: str = ""
    exit_code: int | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    pid: int | None = None
    node: str = ""
    reason: str = ""
    output_tail: str = ""
    """The last few lines of output, decoded with replacement characters."""
    attempt: int = 0
    """0 for the first try, then 1, 2... for retries."""
    fence: int | None = None
    """In cluster mode, the fencing number of this node's claim of the run."""

    @property
    def duration(self) -> timedelta | None:
        """How long it ran, once it has ended (never negative, even in old records
        written while the wall clock was set back)."""
        if self.started_at is None or self.ended_at is None:
            return None
        return max(self.ended_at - self.started_at, timedelta(0))

    def started(self, at: datetime, pid: int | None = None) -> RunRecord:
        """This run, RUNNING since `at` (in process `pid`, for a command or a python process)."""
        return RunRecord(
            run_id=self.run_id, job=self.job, slot=self.slot, trigger=self.trigger,
            state=RunState.RUNNING, queued_at=self.queued_at, result=self.result,
            status=self.status, exit_code=self.exit_code, started_at=at, ended_at=self.ended_at,
            pid=pid, node=self.node, reason=self.reason, output_tail=self.output_tail,
            attempt=self.attempt, fence=self.fence,
        )  # fmt: skip

    def finished(self, outcome: Outcome, ended_at: datetime, output_tail: str = "") -> RunRecord:
        """This run, closed with `outcome` at `ended_at`."""
        # Spelled out, not `dataclasses.replace`: a burst closes thousands of runs a second.
        return RunRecord(
            run_id=self.run_id, job=self.job, slot=self.slot, trigger=self.trigger,
            state=outcome.state, queued_at=self.queued_at, result=outcome.result,
            status=outcome.status, exit_code=outcome.exit_code, started_at=self.started_at,
            ended_at=ended_at, pid=self.pid, node=self.node, reason=outcome.reason,
            output_tail=output_tail or self.output_tail, attempt=self.attempt, fence=self.fence,
        )  # fmt: skip
