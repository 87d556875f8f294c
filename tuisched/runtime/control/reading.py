"""What both sides of the seam read the same way: a run's output, the audit log, a job's plan.

A scheduler in this process and the files a stopped one left answer these
alike; only where the run record and the pauses come from differs.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from tuisched.domain.errors import WireError
from tuisched.domain.model import Job, ManualSchedule
from tuisched.domain.runs import RunRecord
from tuisched.domain.schedule.bounds import MAX_PLAN
from tuisched.domain.schedule.describe import plan_notes
from tuisched.domain.schedule.slots import next_slots
from tuisched.domain.text import plain_text
from tuisched.domain.views import (
    AuditChunk,
    JobPlan,
    OutputChunk,
    OutputMatch,
    OutputPage,
    OutputSource,
)
from tuisched.runtime.control.paging import find_text, line_number, page_after, page_before
from tuisched.runtime.control.seam import OUTPUT_CHUNK_BYTES
from tuisched.runtime.execution.output import read_output
from tuisched.runtime.handlers.audit import read_from, tail_and_end
from tuisched.runtime.threads import Lane, in_thread

PAGE_LINES_MAX = 2000
"""The most lines one `output_page` answers with."""


async def output_chunk(
    state_dir: Path, run: RunRecord, *, running: bool, offset: int | None, limit: int
) -> OutputChunk:
    """`run`'s output: from its file; else, once it ended, the tail its record kept.

    Raises:
        WireError: `limit` is not from 0 to OUTPUT_CHUNK_BYTES.
    """
    if not 0 <= limit <= OUTPUT_CHUNK_BYTES:
        raise WireError(f"output: limit {limit} is not from 0 to {OUTPUT_CHUNK_BYTES} bytes")
    path = state_dir / "output" / run.job / f"{run.run_id}.log"
    try:
        lines, start, end = await in_thread(
            Lane.FILES, read_output, path, offset=offset, limit=limit, growing=running
        )
    except FileNotFoundError:
        if running:  # no output yet
            return OutputChunk(run_id=run.run_id, job=run.job, running=True, run=run)
        if run.output_tail:
            tail = tuple(run.output_tail.split("\n"))
            return OutputChunk(run_id=run.run_id, job=run.job, source="tail", lines=tail, run=run)
        return OutputChunk(run_id=run.run_id, job=run.job, source="none", run=run)
    return OutputChunk(
        run_id=run.run_id, job=run.job, lines=tuple(lines), offset=start, next_offset=end,
        running=running, run=run,
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
    """`job`'s next `count` slots after `now` (in its zone), with why they will not run.

    Raises:
        WireError: `count` is more than MAX_PLAN (the question was the asker's fault).
    """
    if count > MAX_PLAN:
        raise WireError(f"plan: count {count} is more than the {MAX_PLAN} slots one plan lists")
    schedule = job.schedule
    slots: tuple[datetime, ...] = ()
    if job.after is None and schedule is not None and not isinstance(schedule, ManualSchedule):
        slots = tuple(slot.astimezone(job.timezone) for slot in next_slots(schedule, now, count))
    notes = plan_notes(job, paused=paused, slots=len(slots))
    return JobPlan(job=job.name, slots=slots, notes=notes, waits=waits)


# --- the output viewer: pages of a run's output file, and searching it -----------------


def output_path(state_dir: Path, run: RunRecord) -> Path:
    """Where `run`'s output file is (or was: only the newest files of each job are kept)."""
    return state_dir / "output" / run.job / f"{run.run_id}.log"


async def output_page(
    state_dir: Path, run: RunRecord, *, running: bool, offset: int | None, before: bool,
    lines: int,
) -> OutputPage:  # fmt: skip
    """A page of `run`'s output (see `SchedulerQueries.output_page`); once the file is
    gone, the tail the run's record kept."""
    path = output_path(state_dir, run)
    lines = max(1, min(lines, PAGE_LINES_MAX))
    try:
        if offset is None or before:
            page = await in_thread(Lane.FILES, page_before, path, offset, lines, growing=running)
        else:
            page = await in_thread(Lane.FILES, page_after, path, offset, lines, growing=running)
    except FileNotFoundError:
        return _page_without_file(run, running=running)
    return OutputPage(
        run_id=run.run_id, job=run.job, state=run.state, running=running,
        lines=tuple(page.lines), offsets=tuple(page.offsets), end=page.end, size=page.size,
        path=str(path),
    )  # fmt: skip


def _page_without_file(run: RunRecord, *, running: bool) -> OutputPage:
    """No output file: nothing yet (a running run), or the tail the history kept."""
    source = OutputSource.NONE
    lines: tuple[str, ...] = ()
    if not running and run.output_tail:
        source, lines = OutputSource.TAIL, tuple(plain_text(run.output_tail).split("\n"))
    return OutputPage(
        run_id=run.run_id, job=run.job, state=run.state, running=running, source=source,
        lines=lines, offsets=tuple(range(len(lines))), end=len(lines),
    )  # fmt: skip


async def output_search(
    state_dir: Path, run: RunRecord, text: str, *, offset: int, backward: bool
) -> OutputMatch:
    """One bounded step of a search of `run`'s output file (see `search_output`)."""
    if not text:
        return OutputMatch(done=True)
    path = output_path(state_dir, run)
    try:
        found = await in_thread(Lane.FILES, find_text, path, text, offset, backward=backward)
    except FileNotFoundError:
        return OutputMatch(done=True)
    return OutputMatch(
        found=found.found, offset=found.offset, end=found.end, column=found.column,
        length=found.length, scanned_to=found.scanned_to, size=found.size, done=found.done,
    )  # fmt: skip


async def output_line(state_dir: Path, run: RunRecord, offset: int) -> int | None:
    """The line number at `offset` of `run`'s output file (see `output_line_number`)."""
    try:
        return await in_thread(Lane.FILES, line_number, output_path(state_dir, run), offset)
    except FileNotFoundError:
        return 0
