"""Slots that passed while the scheduler was down (SPEC R5): recorded MISSED, made up once if asked.

At start, each job's slots since the scheduler was last alive that have no
run are recorded as MISSED (the newest few; older ones are counted); a job
that says `misfire: once` gets one catch-up run for the newest of them.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from tuisched.domain import ledger
from tuisched.domain.model import Config, Job, Misfire, Schedule
from tuisched.domain.runs import RunRecord, Trigger
from tuisched.domain.schedule.slots import slots_between
from tuisched.domain.text import counted
from tuisched.runtime.engine.outcomes import Outcomes
from tuisched.runtime.store import AsyncHistory

MAX_MISSED_RECORDED = 20
"""MISSED rows written per job at a time; older missed slots are counted, not listed."""
SCAN_LIMIT = 10_000
"""Missed slots walked one by one per job at start-up before estimating the rest."""

Submit = Callable[[Job, datetime, Trigger], RunRecord]
"""Queues a run of a job for a slot, with its trigger."""


async def record_missed(
    config: Config,
    *,
    since: datetime,
    now: datetime,
    history: AsyncHistory,
    outcomes: Outcomes,
    submit: Submit,
    recorded: set[tuple[str, datetime]] | None = None,
) -> None:
    """Record the slots in [since, now] that have no run as MISSED (the newest few per job).

    `recorded`: the (job, slot) pairs that have a row, when not the history's say (in
    cluster mode, the cluster's: a slot another node ran was not missed).
    """
    if recorded is None:
        recorded = await history.slots_since(since)  # with the writes held: every record
    after = since - timedelta(microseconds=1)  # a slot at the last heartbeat counts too
    for index, job in enumerate(config.jobs.values()):
        if index % 100 == 99:
            await asyncio.sleep(0)  # thousands of jobs: let the loop breathe
        if not job.enabled or job.schedule is None:
            continue
        newest, total = recent_slots(job.schedule, after, now, MAX_MISSED_RECORDED)
        missed = [s for s in newest if (job.name, s.astimezone(UTC)) not in recorded]
        statuses = _policy_statuses(job, missed, submit)
        for slot, status in zip(missed, statuses, strict=True):
            reason = "the scheduler was not running at this slot"
            if slot == missed[0] and total > len(newest):
                reason += f" (and about {counted(total - len(newest), 'earlier slot')})"
            outcomes.slot_missed(job, slot, now, reason, status=status)


def _policy_statuses(job: Job, missed: list[datetime], submit: Submit) -> list[str]:
    """What `misfire` decides for each missed slot: `once` runs the newest now and
    leaves the others (the downtime ledger lists them as decided); `skip` leaves them
    all to the operator ("")."""
    if not missed or job.misfire is not Misfire.ONCE:
        return [""] * len(missed)
    run = submit(job, missed[-1], Trigger.CATCHUP)
    return [ledger.policy_skipped()] * (len(missed) - 1) + [ledger.policy_made_up(run.run_id)]


async def record_paused(job: Job, since: datetime, now: datetime, outcomes: Outcomes) -> None:
    """Record the slots of `job` in (since, now] as MISSED: it was paused then.

    They wait for the operator's decision in the downtime ledger, whatever the
    job's `misfire` (that policy is about the scheduler being down).
    """
    await asyncio.sleep(0)  # one job per turn of the loop when many are resumed at once
    if not job.enabled or job.schedule is None:
        return
    newest, total = recent_slots(job.schedule, since, now, MAX_MISSED_RECORDED)
    for slot in newest:
        reason = "the job was paused at this slot"
        if slot == newest[0] and total > len(newest):
            reason += f" (and about {counted(total - len(newest), 'earlier slot')})"
        outcomes.slot_missed(job, slot, now, reason)


def recent_slots(
    schedule: Schedule, after: datetime, until: datetime, keep: int
) -> tuple[list[datetime], int]:
    """The newest `keep` slots in (after, until], and how many there are in all.

    Walks at most SCAN_LIMIT slots: past that (an every-second job down for a
    month), the total is estimated from the pace so far and only the last
    stretch is walked.
    """
    newest: deque[datetime] = deque(maxlen=keep)
    first: datetime | None = None
    count = 0
    for slot in slots_between(schedule, after, until):
        first = first or slot
        newest.append(slot)
        count += 1
        if count == SCAN_LIMIT:
            break
    else:
        return list(newest), count
    assert first is not None  # noqa: S101  (count reached SCAN_LIMIT)
    pace = (newest[-1] - first) / (count - 1)
    if not pace:
        return list(newest), count
    skip_to = max(newest[-1], until - pace * keep * 2)
    estimate = count + int((skip_to - newest[-1]) / pace)
    for slot in slots_between(schedule, skip_to, until):
        newest.append(slot)
        estimate += 1
    return list(newest), estimate
