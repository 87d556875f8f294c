"""Backfill of a window (SPEC R24): which slots of a job a backfill runs, and why not the others.

A backfill runs the slots of a window (`start` included, `end` excluded) that
have no successful run in the history, oldest first. A slot is left out when
its job already succeeded for it, when a run of it is in progress, or when it
is not past yet (the schedule runs it). The job's own `start` and `stop`
bound the window too: no slot lies outside them, and the plan says so.

The window is bounded (`MAX_SLOTS`): a wider one is refused with one line,
before anything is queued.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from itertools import islice

from tuisched.domain.errors import JobActionError, ScheduleError
from tuisched.domain.model import CronSchedule, EverySchedule, Job, Overlap
from tuisched.domain.runs import RunRecord, RunState
from tuisched.domain.schedule.slots import slots_between
from tuisched.domain.views import BackfillPlan, LeftOutSlot

MAX_SLOTS = 10_000
"""The most slots one backfill may look at (its window, up to now)."""
_TICK = timedelta(microseconds=1)
_IN_PROGRESS = frozenset({RunState.QUEUED, RunState.RUNNING, RunState.WAITING})


def window_slots(
    job: Job, start: datetime, end: datetime, *, limit: int = MAX_SLOTS
) -> list[datetime]:
    """Every slot of `job` with `start <= slot < end`, oldest first.

    Raises:
        ScheduleError: the window is empty, or holds more than `limit` slots.
        JobActionError: the job is disabled or has no schedule (manual, after a job).
    """
    _check_window(start, end)
    schedule = _schedule_of(job)
    try:
        found = list(islice(slots_between(schedule, start - _TICK, end - _TICK), limit + 1))
    except OverflowError:  # a window from the first instant of the year 1
        raise ScheduleError(
            f"the window starts at the calendar's first instant ({start.isoformat()}): "
            "start it later"
        ) from None
    if len(found) > limit:
        raise ScheduleError(
            f"the window holds more than {limit} slots of {job.name}: backfill a narrower one"
        )
    return found


def _check_window(start: datetime, end: datetime) -> None:
    if end <= start:
        raise ScheduleError(f"the window is empty: its end ({end.isoformat()}) must come after "
                            f"its start ({start.isoformat()})")  # fmt: skip


def _schedule_of(job: Job) -> EverySchedule | CronSchedule:
    if not job.enabled:
        raise JobActionError(f"job '{job.name}' is disabled: enable it to backfill it")
    if not isinstance(job.schedule, EverySchedule | CronSchedule):
        raise JobActionError(
            f"job '{job.name}' has no repeating schedule (cron or every): no slots to backfill"
        )
    return job.schedule


def plan(
    job: Job, start: datetime, end: datetime, *, now: datetime, runs: Iterable[RunRecord],
    dry_run: bool = False, max_workers: int = 1, limit: int = MAX_SLOTS,
) -> BackfillPlan:  # fmt: skip
    """What a backfill of `job` from `start` to `end` (excluded) runs, as of `now`.

    `runs` are the job's recorded runs whose slot lies in the window (any
    state; others are ignored): a SUCCESS leaves its slot out, and so does a
    run in progress. Slots at or after `now` are left to the schedule.

    Raises:
        ScheduleError: the window is empty or too wide (see `window_slots`).
        JobActionError: the job cannot be backfilled.
    """
    _check_window(start, end)
    past_end = min(end, now)
    slots = window_slots(job, start, past_end, limit=limit) if past_end > start else []
    _schedule_of(job)  # a window wholly ahead still says why a job cannot be backfilled
    held = _held(runs)
    chosen, left_out = [], []
    for slot in slots:
        reason = held.get(slot.astimezone(UTC))
        if reason:
            left_out.append(LeftOutSlot(slot=slot, reason=reason))
        else:
            chosen.append(slot)
    return BackfillPlan(
        job=job.name, timezone=job.timezone.key, start=start, end=end, slots=tuple(chosen),
        left_out=tuple(left_out), notes=notes(job, start, end, now),
        order=order_words(job, max_workers), dry_run=dry_run,
    )  # fmt: skip


def _held(runs: Iterable[RunRecord]) -> dict[datetime, str]:
    """Why each slot with a success or a run in progress is left out, by UTC slot
    (a success wins over a run in progress)."""
    held: dict[datetime, str] = {}
    for run in runs:
        if run.slot is None:
            continue
        slot = run.slot.astimezone(UTC)
        if run.state is RunState.SUCCESS:
            held[slot] = f"already succeeded (run {run.run_id})"
        elif run.state in _IN_PROGRESS and slot not in held:
            held[slot] = f"a run of this slot is in progress (run {run.run_id})"
    return held


def notes(job: Job, start: datetime, end: datetime, now: datetime) -> tuple[str, ...]:
    """What bounds the window besides its own ends: the job's `start` and `stop`, and now."""
    schedule = job.schedule
    found = []
    if isinstance(schedule, EverySchedule | CronSchedule):
        first, last = schedule.start, schedule.stop
        if first is not None and first > start:
            found.append(f"slots before the job's start ({first.isoformat()}) are outside it")
        if last is not None and last < end:
            found.append(f"slots after the job's stop ({last.isoformat()}) are outside it")
    if end > now:
        shown = now.astimezone(job.timezone).replace(microsecond=0).isoformat()
        found.append(f"slots from now ({shown}) on are left to the schedule")
    return tuple(found)


def order_words(job: Job, max_workers: int) -> str:
    """How a backfill of `job` goes: `overlap: allow` runs up to `max_workers` at once;
    any other overlap runs one slot after the other, so the rule never drops one."""
    if job.overlap is Overlap.ALLOW and max_workers > 1:
        return f"in slot order, up to {max_workers} at a time (overlap: allow)"
    return "in slot order, each after the one before has ended"


def in_flight(job: Job, max_workers: int) -> int:
    """How many runs of a backfill of `job` may be queued or running at once."""
    return max(max_workers, 1) if job.overlap is Overlap.ALLOW else 1
