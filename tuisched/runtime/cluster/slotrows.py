"""The cluster's rows of slots: which slots ran or were missed, the MISSED rows the
downtime ledger decides, and the backfill runs offered slot by slot (issue 16).
`ClusterStore` (`store`) is these and the protocol's other statements."""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection, Rollback
from psycopg.rows import dict_row

from tuisched.runtime.cluster.database import ClusterDatabase


@dataclass(frozen=True, slots=True)
class Due:
    """A slot to make a due run of (see `ClusterStore.materialize_many`)."""

    run_id: str
    job: str
    slot: datetime
    trigger: str
    attempt: int
    due_at: datetime | None
    """When it is due, if not at its slot (a retry's delay)."""
    preferred: str | None


def new_run_id() -> str:
    return secrets.token_hex(6)


async def dict_rows(
    connection: AsyncConnection[Any], query: str, params: Sequence[object] | Mapping[str, object]
) -> list[dict[str, Any]]:
    """The rows of `query`, each a dict by column name."""
    async with connection.cursor(row_factory=dict_row) as cursor:
        await cursor.execute(query, params)
        return await cursor.fetchall()


BACKFILL_LOCK = 0x626B_666C
"""With a job's hash, the advisory lock a node holds while it offers a backfill run ("bkfl")."""


class SlotRows:
    """The statements on the rows of slots, over an open `ClusterDatabase`."""

    _db: ClusterDatabase

    async def slots_since(self, since: datetime) -> set[tuple[str, datetime]]:
        """The (job, slot) pairs at or after `since` that have a row (run, or missed)."""
        async with self._db.pool.connection() as connection:
            cursor = await connection.execute(
                "SELECT DISTINCT job, slot FROM tuisched_runs WHERE slot >= %s", (since,)
            )
            return {(str(job), slot) for job, slot in await cursor.fetchall()}

    async def record_missed(
        self, job: str, slot: datetime, reason: str, *, status: str = "", run_id: str | None = None
    ) -> bool:
        """Record that no node ran `job`'s `slot` (why: `reason`; `status`: what its
        `misfire` policy decided, "" when the operator is to decide); False when some node
        ran it (or it was recorded already): the unique key keeps the run."""
        async with self._db.pool.connection() as connection:
            cursor = await connection.execute(
                "INSERT INTO tuisched_runs (run_id, job, slot, trigger, attempt, state, result, "
                "status, reason, due_at, ended_at) VALUES (%s, %s, %s, 'schedule', 0, 'missed', "
                "'missed', %s, %s, %s, now()) "
                "ON CONFLICT (job, slot, trigger, attempt) WHERE slot IS NOT NULL "
                "AND trigger <> 'backfill' DO NOTHING",
                (run_id or new_run_id(), job, slot, status, reason, slot),
            )
            return cursor.rowcount == 1

    async def slots_done(
        self, wanted: Sequence[tuple[str, datetime]]
    ) -> tuple[set[tuple[str, datetime]], set[tuple[str, datetime]]]:
        """Of the (job, slot) pairs `wanted`: those with a successful run, and those with
        any run at all (whichever node ran them)."""
        async with self._db.pool.connection() as connection:
            cursor = await connection.execute(
                "SELECT job, slot, bool_or(state = 'success') FROM tuisched_runs "
                "WHERE (job, slot) IN (SELECT * FROM unnest(%s::text[], %s::timestamptz[])) "
                "GROUP BY job, slot",
                ([job for job, _ in wanted], [slot for _, slot in wanted]),
            )
            rows = await cursor.fetchall()
        succeeded = {(job, slot) for job, slot, success in rows if success}
        return succeeded, {(job, slot) for job, slot, _ in rows}

    async def offer_backfill(self, due: Due) -> bool:
        """Make a backfill run of `due`'s slot a due run (due now), unless the slot has a run
        due, running or successful by then: some backfill, on any node, took it (False).

        One offer at a time per job (an advisory lock), so two backfills of a window, from
        two nodes at once, run each slot once. A retry (attempt > 0) is made as asked. A
        row already there with `due.run_id` (a COMMIT whose reply was lost) counts as made.
        """
        async with self._db.pool.connection() as connection, connection.transaction():
            await connection.execute(
                "SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (BACKFILL_LOCK, due.job)
            )
            cursor = await connection.execute(
                "SELECT 1 FROM tuisched_runs WHERE run_id = %s", (due.run_id,)
            )
            if await cursor.fetchone() is not None:
                return True
            if due.attempt == 0:
                cursor = await connection.execute(
                    "SELECT 1 FROM tuisched_runs WHERE job = %s AND slot = %s "
                    "AND state IN ('due', 'running', 'success') LIMIT 1",
                    (due.job, due.slot),
                )
                if await cursor.fetchone() is not None:
                    return False
            await connection.execute(
                "INSERT INTO tuisched_runs (run_id, job, slot, trigger, attempt, state, due_at, "
                "preferred) VALUES (%s, %s, %s, %s, %s, 'due', coalesce(%s, now()), %s)",
                (due.run_id, due.job, due.slot, due.trigger, due.attempt, due.due_at,
                 due.preferred),
            )  # fmt: skip
        return True

    async def slot_runs(
        self, keys: Sequence[tuple[str, datetime, str]]
    ) -> tuple[datetime, list[dict[str, Any]]]:
        """The database's clock, and every run of each (job, slot, trigger) of `keys` (all
        their attempts), as `history` gives them."""
        async with self._db.pool.connection() as connection:
            cursor = await connection.execute("SELECT now()")
            row = await cursor.fetchone()
            assert row is not None  # noqa: S101  (SELECT now() has a row)
            rows = await dict_rows(
                connection,
                "SELECT run_id, job, slot, trigger, attempt, state, result, status, reason, "
                "exit_code, owner AS node, fence, due_at, started_at, ended_at, created_at "
                "FROM tuisched_runs WHERE (job, slot, trigger) IN "
                "(SELECT * FROM unnest(%s::text[], %s::timestamptz[], %s::text[]))",
                ([k[0] for k in keys], [k[1] for k in keys], [k[2] for k in keys]),
            )
        return row[0], rows

    async def runs_of_slots(self, job: str, start: datetime, end: datetime) -> list[dict[str, Any]]:
        """The runs of `job` whose slot lies from `start` (included) to `end` (excluded)
        that are due, running or successful (a backfill leaves their slots out), as
        `history` gives them."""
        async with self._db.pool.connection() as connection:
            return await dict_rows(
                connection,
                "SELECT run_id, job, slot, trigger, attempt, state, result, status, reason, "
                "exit_code, owner AS node, fence, due_at, started_at, ended_at, created_at "
                "FROM tuisched_runs WHERE job = %s AND slot >= %s AND slot < %s "
                "AND state IN ('due', 'running', 'success') ORDER BY slot, run_id",
                (job, start, end),
            )

    async def decide_missed(
        self, decisions: Sequence[tuple[str, str]], *, fenced: bool = True
    ) -> bool:
        """Write each (run_id, status) on its MISSED row, all or none. `fenced`: only while
        every one of them waits for a decision; False (nothing written) when another node
        decided one first."""
        async with self._db.pool.connection() as connection, connection.transaction():
            cursor = await connection.execute(
                "UPDATE tuisched_runs AS r SET status = u.s "
                "FROM unnest(%s::text[], %s::text[]) AS u(i, s) "
                "WHERE r.run_id = u.i AND r.state = 'missed' "
                "AND (NOT %s OR coalesce(r.status, '') = '')",
                ([run_id for run_id, _ in decisions], [text for _, text in decisions], fenced),
            )
            if fenced and cursor.rowcount != len(decisions):
                raise Rollback()  # another node decided first: nothing of this decision
            return True
        return False  # rolled back

    async def settle_missed(self, job: str, slots: Sequence[datetime], status: str) -> int:
        """Write `status` on the undecided MISSED rows of `job`'s `slots` (a backfill runs
        them); how many."""
        async with self._db.pool.connection() as connection:
            cursor = await connection.execute(
                "UPDATE tuisched_runs SET status = %s WHERE job = %s AND slot = ANY(%s) "
                "AND state = 'missed' AND coalesce(status, '') = ''",
                (status, job, list(slots)),
            )
            return cursor.rowcount
