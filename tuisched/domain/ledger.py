"""The downtime ledger (SPEC R25): each job's missed slots, and what their decision says.

A missed slot is a MISSED row of the history. While nobody has decided what
becomes of it, its `status` is empty; a decision writes its words there, so
`tuisched history` shows them beside the slot:

    made up by run 0a1b2c3d4e5f (root@ops1 (console), 2026-05-07T09:30:00+02:00)
    skipped by root@ops1 (console) at 2026-05-07T09:30:00+02:00
    made up by run 0a1b2c3d4e5f (misfire: once)

Only the newest slots of a long downtime have a row each; the older ones are
counted in the oldest row's reason ("(and about 140 earlier slots)").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime

from tuisched.domain.model import Job
from tuisched.domain.runs import RunRecord, RunState
from tuisched.domain.text import counted
from tuisched.domain.views import MissedChoice, MissedSlots

_EARLIER = re.compile(r"\(and (?:about )?(\d+) earlier slots?\)")
"""How the oldest recorded row of a long downtime counts the slots before it."""

POLICY = "misfire: once"


def earlier_slots(reason: str) -> int:
    """The missed slots a row's `reason` counts before its own (0 when it counts none)."""
    found = _EARLIER.search(reason)
    return int(found.group(1)) if found else 0


def undecided(run: RunRecord) -> bool:
    """Whether `run` is a missed slot that waits for the operator's decision."""
    return run.state is RunState.MISSED and not run.status


def _when(at: datetime, job: Job) -> str:
    return at.astimezone(job.timezone).isoformat(timespec="seconds")


def skipped(actor: str, at: datetime, job: Job) -> str:
    """The status of a slot the operator chose not to run."""
    return f"skipped by {actor} at {_when(at, job)}"


def made_up(run_id: str, actor: str, at: datetime, job: Job) -> str:
    """The status of a slot made up by the catch-up run `run_id`, as `actor` chose."""
    return f"made up by run {run_id} ({actor}, {_when(at, job)})"


def to_be_made_up(actor: str, at: datetime, job: Job) -> str:
    """The status of a slot whose catch-up run waits for the one before it to end."""
    return f"to be made up in slot order ({actor}, {_when(at, job)})"


def backfilled(actor: str, at: datetime, job: Job) -> str:
    """The status of a slot a backfill runs (`tuisched backfill`) before anyone decided."""
    return f"made up by backfill ({actor}, {_when(at, job)})"


def policy_made_up(run_id: str) -> str:
    """The status of the slot `misfire: once` made up at start."""
    return f"made up by run {run_id} ({POLICY})"


def policy_skipped() -> str:
    """The status of the older slots `misfire: once` leaves (it runs only the newest)."""
    return f"skipped ({POLICY} runs only the newest)"


def entry(job: Job, rows: Sequence[RunRecord], *, decided: str = "") -> MissedSlots:
    """The ledger's entry for `job` from its missed rows (any order).

    `decided` is how they were decided, "" when they wait for the operator.
    """
    ordered = sorted((row for row in rows if row.slot is not None), key=_slot)
    policy = _policy(job, ordered)
    if not decided and ordered and all(POLICY in row.status for row in ordered):
        decided = policy
    return MissedSlots(
        job=job.name, timezone=job.timezone.key, slots=tuple(_slot(row) for row in ordered),
        earlier=max((earlier_slots(row.reason) for row in ordered), default=0),
        misfire=job.misfire.value, policy=policy, decided=decided,
    )  # fmt: skip


def _slot(row: RunRecord) -> datetime:
    assert row.slot is not None  # noqa: S101  (rows without a slot are left out first)
    return row.slot


def _policy(job: Job, rows: Sequence[RunRecord]) -> str:
    """What the job's `misfire` policy did with these slots."""
    made = [row.status for row in rows if row.status.startswith("made up") and POLICY in row.status]
    if made:
        return made[-1]
    if job.misfire.value == "once":
        return f"{POLICY}: no catch-up run for these slots"
    return "recorded only (misfire: skip)"


def summary(choice: MissedChoice, count: int, run_ids: Sequence[str]) -> str:
    """What a decision did, in words, for the actions log and the operator."""
    slots = counted(count, "missed slot")
    if choice is MissedChoice.SKIP:
        return f"skipped {slots}"
    if choice is MissedChoice.LATEST:
        return f"ran the latest of {slots} (run {run_ids[0]})" if run_ids else f"skipped {slots}"
    return f"runs {slots} in slot order"
