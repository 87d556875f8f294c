"""Jobs in words, for every front end (the command line, the console, logs)."""

from __future__ import annotations

from datetime import datetime

from tuisched.domain.model import Job
from tuisched.domain.schedule.duration import format_duration
from tuisched.domain.schedule.slots import describe, has_future


def trigger_words(job: Job) -> str:
    """What makes the job run: `every hour from ...`, `after 'export' succeeds (+10s)`."""
    if job.after is not None:
        delay = f" (+{format_duration(job.after.delay)})" if job.after.delay else ""
        outcome = {"success": "succeeds", "failure": "fails", "both": "finishes"}[job.after.on]
        return f"after '{job.after.job}' {outcome}{delay}"
    return describe(job.schedule) if job.schedule is not None else "-"


def job_state(job: Job, now: datetime, *, paused: bool = False) -> str:
    """`disabled`, `paused`, `finished` (no slot left), or `active`."""
    if not job.enabled:
        return "disabled"
    if paused:
        return "paused"
    if job.schedule is not None and not has_future(job.schedule, now):
        return "finished"
    return "active"
