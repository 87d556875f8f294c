"""Jobs in words, for every front end (the command line, the console, logs)."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from tuisched.domain.model import Job, ManualSchedule
from tuisched.domain.reasons import JobFacts, why_not_running
from tuisched.domain.runs import RunRecord
from tuisched.domain.schedule.duration import format_duration
from tuisched.domain.schedule.slots import describe
from tuisched.domain.views import JobState, JobStatus, Pause, PauseKind


def trigger_words(job: Job) -> str:
    """What makes the job run: `every hour from ...`, `after 'export' succeeds (+10s)`."""
    if job.after is not None:
        delay = f" (+{format_duration(job.after.delay)})" if job.after.delay else ""
        outcome = {"success": "succeeds", "failure": "fails", "both": "finishes"}[job.after.on]
        return f"after '{job.after.job}' {outcome}{delay}"
    return describe(job.schedule) if job.schedule is not None else "-"


def job_state(
    job: Job,
    *,
    paused: bool,
    next_fire: datetime | None,
    running: int = 0,
    waiting: int = 0,
    starting: bool = False,
) -> JobState:
    """A job's state in one word, the most urgent first.

    `next_fire` is when the job fires next as far as the caller knows (the
    engine's next fire time, or the schedule's next slot after now): a job with
    a schedule but no next fire has no slot left, unless the scheduler is
    `starting` and does not know its slots and pauses yet.
    """
    if not job.enabled:
        return JobState.DISABLED
    if starting:
        return JobState.MANUAL if isinstance(job.schedule, ManualSchedule) else JobState.STARTING
    if paused:
        return JobState.PAUSED
    if running:
        return JobState.RUNNING
    if waiting:
        return JobState.WAITING
    if isinstance(job.schedule, ManualSchedule):
        return JobState.MANUAL
    if job.schedule is not None and next_fire is None:
        return JobState.FINISHED
    return JobState.ACTIVE


def holding_pauses(job: Job, pauses: Collection[tuple[str, str]]) -> tuple[Pause, ...]:
    """The pauses among `pauses` (as (kind, name)) that hold `job`, the widest first."""
    held: list[Pause] = []
    if ("all", "") in pauses:
        held.append(Pause(kind=PauseKind.ALL))
    held += [Pause(kind=PauseKind.GROUP, name=g) for g in job.groups if ("group", g) in pauses]
    if ("job", job.name) in pauses:
        held.append(Pause(kind=PauseKind.JOB, name=job.name))
    return tuple(held)


def job_status(
    job: Job,
    *,
    pauses: Collection[tuple[str, str]],
    next_fire: datetime | None,
    last: RunRecord | None = None,
    running: int = 0,
    waiting: int = 0,
    facts: JobFacts | None = None,
    starting: bool = False,
) -> JobStatus:
    """What a front end shows of `job`, given what the scheduler knows of it now; with
    `facts`, also why it is not running (`JobStatus.why`); `starting`: the scheduler is
    starting, and knows only the job's definition and last run yet."""
    held = holding_pauses(job, pauses) if pauses else ()
    schedule = job.schedule
    return JobStatus(
        name=job.name,
        kind=job.kind_name,
        trigger=trigger_words(job),
        groups=job.groups,
        description=job.description,
        timezone=job.timezone.key,
        state=job_state(
            job,
            paused=bool(held),
            next_fire=next_fire,
            running=running,
            waiting=waiting,
            starting=starting,
        ),
        enabled=job.enabled,
        scheduled=schedule is not None and not isinstance(schedule, ManualSchedule),
        requires=job.requires,
        next_fire=next_fire,
        last=last,
        paused_by=held,
        running=running,
        waiting=waiting,
        overlap=job.overlap,
        why=why_not_running(job, facts) if facts is not None else "",
    )


def plan_notes(job: Job, *, paused: bool, slots: int) -> tuple[str, ...]:
    """Why a job's next slots will not run, or why it has none (for the detail view)."""
    if job.after is not None:
        return (f"no slots: runs {trigger_words(job)}",)
    if job.schedule is None or isinstance(job.schedule, ManualSchedule):
        return ("no slots: manual (runs only by hand)",)
    notes = []
    if not job.enabled:
        notes.append("disabled: these slots will not run")
    if paused:
        notes.append("paused: these slots will not run until resumed")
    if not slots:
        notes.append("no slots: the schedule has no future slot")
    return tuple(notes)


def pause_views(pauses: Collection[tuple[str, str]]) -> tuple[Pause, ...]:
    """Pauses given as (kind, name), as views: everything first, then groups, then jobs."""
    order = {"all": 0, "group": 1, "job": 2}
    return tuple(
        Pause(kind=PauseKind(kind), name=name)
        for kind, name in sorted(pauses, key=lambda pause: (order[pause[0]], pause[1]))
    )
