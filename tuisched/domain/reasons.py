"""Why a job is not running now, in one line (R25): the jobs pane, the detail view, `jobs --json`.

The runtime gathers the facts (`JobFacts`: its runs, its place in the queue,
the pauses holding it, what its waiting runs wait for); `why_not_running`
words them, the most telling first:

    disabled > running (and what overlap does meanwhile) > paused
    > queue full (max_workers) > queued behind its own run (overlap queue)
    > waiting for an upstream's slot (requires)
    > manual only > after another job > outside start/stop > next slot

`overlap_refusal` words why a new run of a busy job is not taken: what a
hand's trigger is told (the console, `tuisched trigger`), and the reason a
skipped slot is recorded with.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from tuisched.domain.errors import Refusal
from tuisched.domain.model import (
    AtSchedule,
    CronSchedule,
    EverySchedule,
    Job,
    ManualSchedule,
    Overlap,
)
from tuisched.domain.runs import RunRecord, Trigger
from tuisched.domain.schedule.duration import format_duration
from tuisched.domain.views import Pause, PauseKind

__all__ = ["MAX_BACKLOG", "JobFacts", "PauseNote", "overlap_refusal", "why_not_running"]

MAX_BACKLOG = 10
"""Runs that may wait behind a job's running one (`overlap: queue`, `trigger --queue`)."""

_OUTCOME_WORDS = {"success": "succeeds", "failure": "fails", "both": "finishes"}
_OVERLAP_WORDS = {
    Overlap.SKIP: "; overlap skip: slots meanwhile are skipped",
    Overlap.QUEUE: "; overlap queue: slots meanwhile wait behind it",
    Overlap.ALLOW: "",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class PauseNote:
    """Who paused, and when, as far as the scheduler knows."""

    at: datetime | None = None
    actor: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class JobFacts:
    """What the scheduler knows of one job now (gathered by the runtime, worded here)."""

    now: datetime
    paused_by: tuple[Pause, ...] = ()
    """The pauses holding the job, the widest first."""
    pause_note: PauseNote | None = None
    """Who set the widest of them and when, if known."""
    running: tuple[RunRecord, ...] = ()
    queued: RunRecord | None = None
    """Its first run waiting for a worker."""
    queued_ahead: int = 0
    """Runs of other jobs that leave the queue before `queued`."""
    behind: str = ""
    """The run id its backlogged runs wait behind (`overlap: queue`)."""
    backlogged: int = 0
    """How many of its runs wait behind `behind`."""
    workers_busy: int = 0
    max_workers: int = 0
    waiting: RunRecord | None = None
    """Its first run WAITING for its `requires`."""
    waits_for: tuple[tuple[str, datetime], ...] = ()
    """What `waiting` still needs: (upstream job, slot)."""
    next_fire: datetime | None = None


def why_not_running(job: Job, facts: JobFacts) -> str:
    """One line that says why `job` is not running now (or that it is, and since when)."""
    if not job.enabled:
        return "disabled in the configuration (enabled: false)"
    for reason in (_running, _paused, _queued, _waiting):
        line = reason(job, facts)
        if line:
            return line
    return _trigger(job, facts)


def _running(job: Job, facts: JobFacts) -> str:
    if not facts.running:
        return ""
    run = facts.running[0]
    since = f" since {_clock(run.started_at, job)}" if run.started_at else ""
    more = f" (and {len(facts.running) - 1} more)" if len(facts.running) > 1 else ""
    overlap = _OVERLAP_WORDS[job.overlap]
    if facts.backlogged:
        how = " (overlap queue)" if job.overlap is Overlap.QUEUE else ""  # else: --queue
        overlap = f"; {facts.backlogged} more queued behind it{how}"
    return f"running run {run.run_id}{since}{more}{overlap}"


def overlap_refusal(
    job: str, overlap: Overlap, tz: ZoneInfo, running: Sequence[RunRecord],
    queued: Sequence[RunRecord], *, backlog: int, behind: bool = False,
) -> Refusal | None:  # fmt: skip
    """Why `overlap` does not take a new run of `job` now, or None when it takes it (at
    once, or to wait behind the runs in progress).

    `running` are its runs holding a worker, `queued` its runs queued or waiting behind
    them, `backlog` how many of those wait behind them. `behind`: the new run asks to
    wait behind them where `skip` would refuse it (`trigger --queue`). Under `skip`, a
    run waits behind catch-ups alone (a start's `misfire: once` takes a moment to
    begin); under `queue` (or `behind`), at most MAX_BACKLOG wait. Times are worded in
    `tz`, the job's zone.
    """
    busy = [*running, *queued]
    if not busy or overlap is Overlap.ALLOW:
        return None
    first = busy[0]
    since = first.started_at if running else first.queued_at
    if overlap is Overlap.SKIP and all(run.trigger is Trigger.CATCHUP for run in busy):
        return None  # it waits behind catch-ups alone
    if overlap is Overlap.SKIP and not behind:
        words = "still running" if running else "already queued"
        reason = f"{words}: run {first.run_id}"
        if since is not None:
            reason += f" since {since.astimezone(tz).strftime('%H:%M:%S')}"
        room = backlog < MAX_BACKLOG
        return Refusal(job=job, reason=reason, run_id=first.run_id, since=since, queueable=room)
    if backlog < MAX_BACKLOG:
        return None
    reason = f"{MAX_BACKLOG} runs already waiting behind run {first.run_id}"
    return Refusal(job=job, reason=reason, run_id=first.run_id, since=since)


def _paused(job: Job, facts: JobFacts) -> str:
    if not facts.paused_by:
        return ""
    pause = facts.paused_by[0]
    what = {
        PauseKind.ALL: "paused with everything",
        PauseKind.GROUP: f"paused with its group '{pause.name}'",
        PauseKind.JOB: "paused",
    }[pause.kind]
    note = facts.pause_note
    if note is not None and note.actor:
        what += f" by {note.actor}"
    if note is not None and note.at is not None:
        what += f" at {_moment(note.at, job)}"
    return what


def _queued(job: Job, facts: JobFacts) -> str:
    run = facts.queued
    if run is None:
        if not facts.behind:
            return ""
        how = " (overlap queue)" if job.overlap is Overlap.QUEUE else ""
        return f"queued behind its run {facts.behind}{how}"
    ahead = f", {facts.queued_ahead} queued ahead" if facts.queued_ahead else ""
    workers = f"{facts.workers_busy} of {facts.max_workers}"
    behind = f"; {facts.backlogged} more behind it" if facts.backlogged else ""
    return (
        f"queue full: max_workers reached ({workers} busy); run {run.run_id} waits{ahead}{behind}"
    )


def _waiting(job: Job, facts: JobFacts) -> str:
    if facts.waiting is None:
        return ""
    if not facts.waits_for:
        return f"waiting: run {facts.waiting.run_id} checks its requirements (requires)"
    upstream, slot = facts.waits_for[0]
    more = f" (and {len(facts.waits_for) - 1} more)" if len(facts.waits_for) > 1 else ""
    return f"waiting for {upstream}'s slot {_moment(slot, job)}{more} (requires)"


def _trigger(job: Job, facts: JobFacts) -> str:
    """Nothing holds the job: what makes it run next, or why nothing will."""
    if job.after is not None:
        return (
            f"runs only after '{job.after.job}' {_OUTCOME_WORDS[job.after.on]}: "
            f"waits for {job.after.job}"
        )
    schedule = job.schedule
    if schedule is None or isinstance(schedule, ManualSchedule):
        return "manual only: runs when started by hand"
    start = schedule.start if isinstance(schedule, EverySchedule | CronSchedule) else None
    if start is not None and start.astimezone(UTC) > facts.now.astimezone(UTC):
        return f"outside its window: starts at {_moment(start, job)}"
    if facts.next_fire is not None:  # no "in 5m": the line changes only when the facts do
        return f"next slot at {_moment(facts.next_fire, job)}{_jitter_words(job)}"
    return _ended(job, schedule)


def _ended(job: Job, schedule: EverySchedule | CronSchedule | AtSchedule) -> str:
    if isinstance(schedule, AtSchedule):
        return f"no slot to come: its one slot was at {_moment(schedule.at, job)}"
    if schedule.stop is not None:
        return f"outside its window: ended at {_moment(schedule.stop, job)}"
    return "no slot to come"


def _moment(moment: datetime, job: Job) -> str:
    """`2026-05-07 09:30 +02:00`: the job's wall clock, with its offset."""
    return _wall_text(moment, job.timezone)


@functools.lru_cache(maxsize=4096)
def _wall_text(moment: datetime, tz: ZoneInfo) -> str:
    """Cached: thousands of jobs share a next slot, and the jobs pane asks each second."""
    local = moment.astimezone(tz)
    offset = local.strftime("%z")
    seconds = ":%S" if local.second else ""
    return local.strftime(f"%Y-%m-%d %H:%M{seconds} ") + f"{offset[:3]}:{offset[3:]}"


def _clock(moment: datetime, job: Job) -> str:
    return moment.astimezone(job.timezone).strftime("%H:%M:%S")


def _jitter_words(job: Job) -> str:
    """How much later than its slot a run of `job` may start, when it has jitter."""
    if not job.jitter:
        return ""
    return f", started up to {format_duration(job.jitter)} later (jitter)"
