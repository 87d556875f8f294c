"""The statements of the cluster protocol (CLUSTER.md), each one transaction.

Every node runs the same statements; PostgreSQL alone decides between them:

- `materialize`: a fired slot becomes a `due` row; the unique key on (job,
  slot, trigger, attempt) keeps one whichever nodes insert it;
- `claim`: a node takes at most as many due rows as it has free workers,
  `FOR UPDATE SKIP LOCKED`, judged due by the database's clock, each with a
  new fencing number and a lease; a row that prefers another node waits
  `steal_after` before anyone else may take it; paused jobs are not taken;
- `heartbeat`: the node's row and the leases of its runs, together; a node
  the reapers declared dead learns it here (and must stop claiming);
- `finish`: only the holder of the run's current fence can close it, so a
  node that was presumed dead and comes back changes nothing;
- `reap`: expired leases become ABANDONED (and, for jobs that say
  `recover: true`, one more attempt), stale nodes dead; SKIP LOCKED and
  state conditions make three reapers at once one change.
"""

from __future__ import annotations

import secrets
import socket
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb

from tuisched.runtime.cluster.database import ClusterDatabase


@dataclass(frozen=True, slots=True)
class Claim:
    """A run this node now owns: run it, and finish it with `fence`."""

    run_id: str
    job: str
    slot: datetime | None
    trigger: str
    attempt: int
    fence: int


@dataclass(frozen=True, slots=True)
class Abandoned:
    """A run whose owner stopped renewing its lease, and its recovery run if one was made."""

    run_id: str
    job: str
    owner: str
    recovery: str | None


@dataclass(frozen=True, slots=True)
class NodeRow:
    """A node as the database knows it (`age`: since its last heartbeat, by the database)."""

    node_id: str
    name: str
    host: str
    pid: int
    started_at: datetime
    age: timedelta
    state: str
    capacity: int
    running: int
    config_hash: str
    job_hashes: dict[str, str]


_CLAIM = """
    UPDATE tuisched_runs SET state = 'running', owner = %(node)s,
        fence = nextval('tuisched_fence'), lease_until = now() + %(lease)s, started_at = now()
    WHERE run_id IN (
        SELECT run_id FROM tuisched_runs AS due
        WHERE state = 'due' AND due_at <= now() AND job = ANY(%(jobs)s)
          AND (preferred IS NULL OR preferred = %(node)s OR due_at <= now() - %(steal)s)
          AND NOT EXISTS (SELECT 1 FROM tuisched_pauses WHERE kind = 'all')
          AND NOT EXISTS (
              SELECT 1 FROM tuisched_pauses AS p WHERE p.kind = 'job' AND p.name = due.job)
          AND NOT (due.job = ANY(%(exclusive)s) AND EXISTS (
              SELECT 1 FROM tuisched_job_locks AS l WHERE l.job = due.job))
        ORDER BY due_at, run_id
        LIMIT %(free)s
        FOR UPDATE SKIP LOCKED)
    RETURNING run_id, job, slot, trigger, attempt, fence
"""
"""The claim (see `ClusterStore.claim`); a held job lock is skipped here, and re-checked
by `_lock_job` after, since two nodes may both see it free."""
_HAND_BACK = (
    "UPDATE tuisched_runs SET state = 'due', owner = NULL, fence = NULL, lease_until = NULL, "
    "started_at = NULL WHERE run_id = %s"
)


async def _lock_job(connection: AsyncConnection[Any], claim: Claim) -> bool:
    """Take the job's lock for `claim`'s run; False when another run holds it (waiting, if
    another node's claim of it is not committed yet, for its outcome)."""
    cursor = await connection.execute(
        "INSERT INTO tuisched_job_locks (job, run_id) VALUES (%s, %s) ON CONFLICT DO NOTHING",
        (claim.job, claim.run_id),
    )
    return cursor.rowcount == 1


async def _insert_due(
    connection: AsyncConnection[Any], job: str, slot: datetime | None, trigger: str,
    attempt: int, *, due_at: datetime | None = None, preferred: str | None = None,
) -> str | None:  # fmt: skip
    """A `due` run (due at `due_at`, else now by the database's clock); its run id, or None
    when one with the same (job, slot, trigger, attempt) is there already."""
    run_id = new_run_id()
    cursor = await connection.execute(
        "INSERT INTO tuisched_runs (run_id, job, slot, trigger, attempt, state, due_at, "
        "preferred) VALUES (%s, %s, %s, %s, %s, 'due', coalesce(%s, now()), %s) "
        "ON CONFLICT (job, slot, trigger, attempt) WHERE slot IS NOT NULL DO NOTHING",
        (run_id, job, slot, trigger, attempt, due_at, preferred),
    )
    return run_id if cursor.rowcount == 1 else None


def _claims(rows: Sequence[tuple[Any, ...]]) -> list[Claim]:
    return sorted((Claim(*row) for row in rows), key=lambda c: (c.slot is None, c.slot))


def new_node_id(pid: int) -> str:
    """`host:pid:random`: new for every process, and for every rejoin after self-fencing."""
    return f"{socket.gethostname()}:{pid}:{secrets.token_hex(4)}"


def new_run_id() -> str:
    return secrets.token_hex(6)


class ClusterStore:
    """The protocol's statements over an open `ClusterDatabase`."""

    def __init__(self, database: ClusterDatabase) -> None:
        self._db = database

    async def now(self) -> datetime:
        """The database's clock, which judges due-ness, leases and heartbeats."""
        return await self._db.now()

    # --- nodes ----------------------------------------------------------------------

    async def register(
        self, node_id: str, *, name: str, pid: int, capacity: int, config_hash: str,
        job_hashes: dict[str, str],
    ) -> None:  # fmt: skip
        """Join the cluster as `node_id` (alive, heartbeat now)."""
        async with self._db.pool.connection() as connection:
            await connection.execute(
                "INSERT INTO tuisched_nodes (node_id, name, host, pid, capacity, config_hash, "
                "job_hashes) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                (node_id, name, socket.gethostname(), pid, capacity, config_hash,
                 Jsonb(job_hashes)),
            )  # fmt: skip

    async def heartbeat(self, node_id: str, *, running: int, lease: timedelta) -> bool:
        """Renew the node's row and its runs' leases, in one transaction; False when the
        node was declared dead meanwhile (it must stop claiming, and rejoin anew)."""
        async with self._db.pool.connection() as connection, connection.transaction():
            cursor = await connection.execute(
                "UPDATE tuisched_nodes SET heartbeat_at = now(), running = %s "
                "WHERE node_id = %s AND state = 'alive'",
                (running, node_id),
            )
            if cursor.rowcount != 1:
                return False
            await connection.execute(
                "UPDATE tuisched_runs SET lease_until = now() + %s "
                "WHERE owner = %s AND state = 'running'",
                (lease, node_id),
            )
        return True

    async def leave(self, node_id: str) -> None:
        """A clean stop: the node is gone (its runs were finished or handed back first)."""
        async with self._db.pool.connection() as connection:
            await connection.execute(
                "UPDATE tuisched_nodes SET state = 'left' WHERE node_id = %s", (node_id,)
            )

    async def nodes(self) -> list[NodeRow]:
        """Every node the database knows, newest first."""
        async with self._db.pool.connection() as connection:
            cursor = await connection.execute(
                "SELECT node_id, name, host, pid, started_at, now() - heartbeat_at, state, "
                "capacity, running, config_hash, job_hashes FROM tuisched_nodes "
                "ORDER BY started_at DESC"
            )
            rows = await cursor.fetchall()
        return [NodeRow(*row) for row in rows]

    # --- runs -----------------------------------------------------------------------

    async def materialize(
        self, job: str, slot: datetime, *, trigger: str = "scheduled", attempt: int = 0,
        preferred: str | None = None,
    ) -> str | None:  # fmt: skip
        """Make the slot a `due` run; its run id, or None when another node already did."""
        async with self._db.pool.connection() as connection:
            return await _insert_due(connection, job, slot, trigger, attempt,
                                     due_at=slot, preferred=preferred)  # fmt: skip

    async def request(self, job: str, *, key: str) -> str:
        """A run of `job` now (run now from any node); the same `key` makes one run."""
        run_id = new_run_id()
        async with self._db.pool.connection() as connection:
            cursor = await connection.execute(
                "INSERT INTO tuisched_runs (run_id, job, trigger, state, due_at, "
                "idempotency_key) VALUES (%s, %s, 'manual', 'due', now(), %s) "
                "ON CONFLICT (idempotency_key) DO NOTHING",
                (run_id, job, key),
            )
            if cursor.rowcount == 1:
                return run_id
            cursor = await connection.execute(
                "SELECT run_id FROM tuisched_runs WHERE idempotency_key = %s", (key,)
            )
            row = await cursor.fetchone()
        assert row is not None  # noqa: S101  (the conflict was on this key)
        return str(row[0])

    async def claim(
        self, node_id: str, *, free: int, lease: timedelta, steal_after: timedelta,
        jobs: Collection[str], exclusive: Collection[str] = (),
    ) -> list[Claim]:  # fmt: skip
        """Take up to `free` due runs of `jobs` (those this node runs as the cluster does),
        oldest first; none that is paused, none before its time by the database's clock.

        A job in `exclusive` (its `overlap` is not `allow`) runs once at a time across
        every node: its run is claimed only with the job's row in `tuisched_job_locks`,
        which `finish` and `reap` give back; a run claimed without it stays due.
        """
        if free <= 0 or not jobs:
            return []
        parameters = {
            "node": node_id, "lease": lease, "steal": steal_after, "free": free,
            "jobs": list(jobs), "exclusive": list(exclusive),
        }  # fmt: skip
        async with self._db.pool.connection() as connection:
            if not exclusive:
                cursor = await connection.execute(_CLAIM, parameters)
                return _claims(await cursor.fetchall())
            async with connection.transaction():
                cursor = await connection.execute(_CLAIM, parameters)
                claims = _claims(await cursor.fetchall())
                given_back = set()
                # Locks in one order on every node: two claims never wait on each other.
                for claim in sorted(claims, key=lambda c: (c.job, c.run_id)):
                    if claim.job in exclusive and not await _lock_job(connection, claim):
                        await connection.execute(_HAND_BACK, (claim.run_id,))
                        given_back.add(claim.run_id)
            return [claim for claim in claims if claim.run_id not in given_back]

    async def finish(
        self, run_id: str, fence: int, *, state: str, result: str, status: str,
        exit_code: int | None,
    ) -> bool:  # fmt: skip
        """Close the run, if this node still holds it (its fence is the current one).

        False: the run was taken from this node (presumed dead: its lease expired);
        nothing was written, and the caller logs a late result.
        """
        async with self._db.pool.connection() as connection, connection.transaction():
            cursor = await connection.execute(
                "UPDATE tuisched_runs SET state = %s, result = %s, status = %s, exit_code = %s, "
                "ended_at = now(), lease_until = NULL "
                "WHERE run_id = %s AND fence = %s AND state = 'running'",
                (state, result, status, exit_code, run_id, fence),
            )
            if cursor.rowcount != 1:
                return False
            await connection.execute("DELETE FROM tuisched_job_locks WHERE run_id = %s", (run_id,))
        return True

    async def reap(self, *, dead_after: timedelta, recover: Collection[str]) -> list[Abandoned]:
        """Declare stale nodes dead and their expired runs ABANDONED; make one more
        attempt of each abandoned run of a job in `recover`. Any node may call it, at
        the same time as others: each change is made once."""
        async with self._db.pool.connection() as connection, connection.transaction():
            await connection.execute(
                "UPDATE tuisched_nodes SET state = 'dead' WHERE node_id IN ("
                "SELECT node_id FROM tuisched_nodes WHERE state = 'alive' "
                "AND heartbeat_at < now() - %s FOR UPDATE SKIP LOCKED)",
                (dead_after,),
            )
            cursor = await connection.execute(
                "UPDATE tuisched_runs SET state = 'abandoned', result = 'abandoned', "
                "status = 'its node stopped renewing the lease', ended_at = now() "
                "WHERE run_id IN (SELECT run_id FROM tuisched_runs WHERE state = 'running' "
                "AND lease_until < now() FOR UPDATE SKIP LOCKED) "
                "RETURNING run_id, job, owner, slot, trigger, attempt"
            )
            expired = await cursor.fetchall()
            await connection.execute(
                "DELETE FROM tuisched_job_locks WHERE run_id = ANY(%s)", ([r[0] for r in expired],)
            )
            abandoned = []
            for run_id, job, owner, slot, trigger, attempt in expired:
                recovery = None
                if job in recover:  # once more, due now, whichever reaper gets here first
                    recovery = await _insert_due(connection, job, slot, trigger, attempt + 1)
                abandoned.append(Abandoned(run_id, job, owner, recovery))
        return abandoned

    # --- pauses ---------------------------------------------------------------------

    async def set_paused(self, kind: str, name: str, *, paused: bool, by: str) -> None:
        """Pause or resume a job (`kind` job), a group or everything (`all`, name '')."""
        async with self._db.pool.connection() as connection:
            if paused:
                await connection.execute(
                    "INSERT INTO tuisched_pauses (kind, name, paused_by) VALUES (%s, %s, %s) "
                    "ON CONFLICT (kind, name) DO NOTHING",
                    (kind, name, by),
                )
            else:
                await connection.execute(
                    "DELETE FROM tuisched_pauses WHERE kind = %s AND name = %s", (kind, name)
                )

    async def runs(self, job: str | None = None) -> Sequence[tuple[object, ...]]:
        """Rows of runs (run_id, job, slot, trigger, attempt, state, owner, fence), oldest
        first: what `history --json` and the tests read."""
        async with self._db.pool.connection() as connection:
            cursor = await connection.execute(
                "SELECT run_id, job, slot, trigger, attempt, state, owner, fence "
                "FROM tuisched_runs WHERE %(job)s::text IS NULL OR job = %(job)s "
                "ORDER BY created_at, run_id",
                {"job": job},
            )
            return await cursor.fetchall()
