"""Reads of the history by slot: the newest slot of each job (where firing starts), and
what the waiting rule (R9) asks of a job's slot.

Functions over a `HistoryStore`, called on the thread that uses it (the history's
writer: `AsyncHistory.call`).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select

from tuisched.domain.runs import RunState
from tuisched.runtime.store.database import HistoryStore
from tuisched.runtime.store.schema import runs


def latest_slots(store: HistoryStore) -> dict[str, datetime]:
    """The newest slot the history holds for each job, whatever its run's state (UTC)."""
    query = (
        select(runs.c.job, func.max(runs.c.slot))
        .where(runs.c.slot.is_not(None))
        .group_by(runs.c.job)
    )
    with store.transaction() as connection:
        return {job: slot for job, slot in connection.execute(query)}  # noqa: C416  (rows)


def has_success(store: HistoryStore, job: str, slot: datetime) -> bool:
    """Whether `job` succeeded for `slot` or a later slot (R9).

    A run started by hand counts when it began at or after `slot`: an
    operator can satisfy a requirement by running the upstream job.
    """
    by_slot = runs.c.slot >= slot
    by_hand = runs.c.slot.is_(None) & (runs.c.started_at >= slot)
    query = (
        select(runs.c.run_id)
        .where(runs.c.job == job, runs.c.state == RunState.SUCCESS.value, by_slot | by_hand)
        .limit(1)
    )
    with store.transaction() as connection:
        return connection.scalar(query) is not None


def has_run_for(store: HistoryStore, job: str, slot: datetime) -> bool:
    """Whether `job` has any run recorded (in any state) for exactly `slot`."""
    query = select(runs.c.run_id).where(runs.c.job == job, runs.c.slot == slot).limit(1)
    with store.transaction() as connection:
        return connection.scalar(query) is not None
