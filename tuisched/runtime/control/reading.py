"""What both sides of the seam read the same way: a run's output, the audit log, a job's plan.

A scheduler in this process and the files a stopped one left answer these
alike; only where the run record and the pauses come from differs.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from tuisched.domain.model import Job, ManualSchedule
from tuisched.domain.runs import RunRecord
from tuisched.domain.schedule.describe import plan_notes
from tuisched.domain.schedule.slots import next_slots
from tuisched.domain.views import AuditChunk, JobPlan, OutputChunk
from tuisched.runtime.execution.output import read_output
from tuisched.runtime.handlers.audit import read_from, tail_and_end
from tuisched.runtime.threads import Lane, in_thread


async def output_chunk(
    state_dir: Path, run: RunRecord, *, running: bool, offset: int | None, limit: int
) -> OutputChunk:
    """`run`'s output: from its file; else, once it ended, the tail its record kept."""
    path = state_dir / "output" / run.job / f"{run.run_id}.log"
    try:
        lines, start, end = await in_thread(
            Lane.FILES, read_output, path, offset=offset, limit=limit, growing=running
        )
    except FileNotFoundError:
        if running:  # no output yet
            return OutputChunk(run_id=run.run_id, job=run.job, running=True)
        if run.output_tail:
            tail = tuple(run.output_tail.split("\n"))
            return OutputChunk(run_id=run.run_id, job=run.job, source="tail", lines=tail)
        return OutputChunk(run_id=run.run_id, job=run.job, source="none")
    return OutputChunk(
        run_id=run.run_id, job=run.job, lines=tuple(lines), offset=start, next_offset=end,
        running=running,
    )  # fmt: skip


async def audit_chunk(path: Path, *, offset: int | None, lines: int) -> AuditChunk:
    """The audit log from byte `offset`, or its last `lines` lines."""
    if offset is None:
        found, end = await in_thread(Lane.FILES, tail_and_end, path, lines)
    else:
        found, end = await in_thread(Lane.FILES, read_from, path, offset)
    return AuditChunk(lines=tuple(found), next_offset=end)


def job_plan(
    job: Job, *, now: datetime, count: int, paused: bool, waits: tuple[str, ...] = ()
) -> JobPlan:
    """`job`'s next `count` slots after `now` (in its zone), with why they will not run."""
    schedule = job.schedule
    slots: tuple[datetime, ...] = ()
    if job.after is None and schedule is not None and not isinstance(schedule, ManualSchedule):
        slots = tuple(slot.astimezone(job.timezone) for slot in next_slots(schedule, now, count))
    notes = plan_notes(job, paused=paused, slots=len(slots))
    return JobPlan(job=job.name, slots=slots, notes=notes, waits=waits)
