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
from tuisched.runtime.cluster.slotrows import (
    Due,
    SlotRows,
    dict_rows,
    new_run_id,
)


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
          AND (preferred IS NULL OR preferred = %(node)s OR due_at <= now() - %(steal)s
               OR NOT EXISTS (SELECT 1 FROM tuisched_nodes AS n
                              WHERE n.node_id = due.preferred AND n.state = 'alive'))
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
by `_lock_job` after, since two nodes may both see it free. A run that prefers a node no
longer alive (dead, or rejoined under a new id) is anyone's at once."""
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
    run_id: str | None = None,
) -> str | None:  # fmt: skip
    """A `due` run (due at `due_at`, else now by the database's clock); its run id, or None
    when one with the same (job, slot, trigger, attempt) is there already."""
    run_id = run_id or new_run_id()
    cursor = await connection.execute(
        "INSERT INTO tuisched_runs (run_id, job, slot, trigger, attempt, state, due_at, "
        "preferred) VALUES (%s, %s, %s, %s, %s, 'due', coalesce(%s, now()), %s) "
        "ON CONFLICT (job, slot, trigger, attempt) WHERE slot IS NOT NULL "
        "AND trigger <> 'backfill' DO NOTHING",
        (run_id, job, slot, trigger, attempt, due_at, preferred),
    )
    return run_id if cursor.rowcount == 1 else None


def _claims(rows: Sequence[tuple[Any, ...]]) -> list[Claim]:
    return sorted((Claim(*row) for row in rows), key=lambda c: (c.slot is None, c.slot))


NODES_KEPT = timedelta(days=1)
"""How long a node that left or died stays listed (`tuisched nodes`, the nodes pane)."""
CHANNEL = "tuisched"
"""The channel of the wake-ups: a pause, a stop or a run-now was written (rows first)."""
_WAKE = f"SELECT pg_notify('{CHANNEL}', '')"


def new_node_id(pid: int) -> str:
    """`host:pid:random`: new for every process, and for every rejoin after self-fencing."""
    return f"{socket.gethostname()}:{pid}:{secrets.token_hex(4)}"


class ClusterStore(SlotRows):
    """The protocol's statements over an open `ClusterDatabase` (those on the rows of
    slots, missed and backfilled, are its part in `slotrows`)."""

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

    async def heartbeat(
        self, node_id: str, *, running: Collection[str], lease: timedelta,
        hashes: tuple[str, dict[str, str]] | None = None,
    ) -> bool:  # fmt: skip
        """Renew the node's row and the leases of the runs it holds (`running`: their
        ids), in one transaction (with new definition `hashes` after a reload); False
        when the node was declared dead meanwhile (it must stop claiming, and rejoin
        anew). A run the database says is the node's but the node does not hold (a
        claim whose reply was lost) is not renewed: see `hand_back_unknown`."""
        async with self._db.pool.connection() as connection, connection.transaction():
            cursor = await connection.execute(
                "UPDATE tuisched_nodes SET heartbeat_at = now(), running = %s WHERE node_id = %s "
                "AND state = 'alive'",
                (len(running), node_id),
            )
            if cursor.rowcount == 1 and hashes is not None:
                await connection.execute(
                    "UPDATE tuisched_nodes SET config_hash = %s, job_hashes = %s "
                    "WHERE node_id = %s",
                    (hashes[0], Jsonb(hashes[1]), node_id),
                )
            if cursor.rowcount != 1:
                return False
            await connection.execute(
                "UPDATE tuisched_runs SET lease_until = now() + %s "
                "WHERE owner = %s AND state = 'running' AND run_id = ANY(%s)",
                (lease, node_id, list(running)),
            )
        return True

    async def hand_back(self, run_id: str, fence: int) -> bool:
        """Give a claimed run that never started back to due (this node is stopping), if
        the node still holds it; another node takes it under a new fence."""
        async with self._db.pool.connection() as connection, connection.transaction():
            cursor = await connection.execute(
                _HAND_BACK + " AND fence = %s AND state = 'running'", (run_id, fence)
            )
            if cursor.rowcount != 1:
                return False
            await connection.execute("DELETE FROM tuisched_job_locks WHERE run_id = %s", (run_id,))
        return True

    async def abandon(self, run_id: str, fence: int, *, status: str, recover: bool) -> str | None:
        """Close a run of this node ABANDONED, if it still holds it (its fence): its claim
        lapsed and its process was ended. With `recover`, one more attempt is made due,
        as a reaper would; its id (None: nothing made)."""
        async with self._db.pool.connection() as connection, connection.transaction():
            cursor = await connection.execute(
                "UPDATE tuisched_runs SET state = 'abandoned', result = 'abandoned', "
                "status = %s, ended_at = now(), lease_until = NULL "
                "WHERE run_id = %s AND fence = %s AND state = 'running' "
                "RETURNING job, slot, trigger, attempt",
                (status, run_id, fence),
            )
            row = await cursor.fetchone()
            if row is None:
                return None
            await connection.execute("DELETE FROM tuisched_job_locks WHERE run_id = %s", (run_id,))
            job, slot, trigger, attempt = row
            if not recover:
                return None
            return await _insert_due(connection, job, slot, trigger, attempt + 1)

    async def due_jobs(self) -> list[str]:
        """The jobs with runs waiting to be claimed."""
        async with self._db.pool.connection() as connection:
            cursor = await connection.execute(
                "SELECT DISTINCT job FROM tuisched_runs WHERE state = 'due'"
            )
            return [str(row[0]) for row in await cursor.fetchall()]

    async def close_unrun(self, jobs: Collection[str]) -> int:
        """Close the due runs of `jobs`, which no live node runs, NOT_STARTED; how many."""
        async with self._db.pool.connection() as connection:
            cursor = await connection.execute(
                "UPDATE tuisched_runs SET state = 'not_started', result = 'stopped', "
                "status = 'no live node runs this job (most do not define it; those that do "
                "define it differently)', ended_at = now() "
                "WHERE state = 'due' AND job = ANY(%s)",
                (list(jobs),),
            )
            return cursor.rowcount

    async def hand_back_unknown(self, node_id: str, held: Collection[str]) -> list[str]:
        """Runs the database says `node_id` claimed but that it does not hold (`held`):
        claims whose COMMIT reply was lost, never started. They go back to due (their
        job's lock too), for any node to take under a new fence; their ids."""
        async with self._db.pool.connection() as connection, connection.transaction():
            cursor = await connection.execute(
                "UPDATE tuisched_runs SET state = 'due', owner = NULL, fence = NULL, "
                "lease_until = NULL, started_at = NULL WHERE owner = %s AND state = 'running' "
                "AND NOT run_id = ANY(%s) RETURNING run_id",
                (node_id, list(held)),
            )
            lost = [str(row[0]) for row in await cursor.fetchall()]
            if lost:
                await connection.execute(
                    "DELETE FROM tuisched_job_locks WHERE run_id = ANY(%s)", (lost,)
                )
        return lost

    async def leave(self, node_id: str) -> None:
        """A clean stop: the node is gone (its runs were finished or handed back first)."""
        async with self._db.pool.connection() as connection:
            await connection.execute(
                "UPDATE tuisched_nodes SET state = 'left', running = 0 WHERE node_id = %s",
                (node_id,),
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
        preferred: str | None = None, run_id: str | None = None,
        due_at: datetime | None = None,
    ) -> str | None:  # fmt: skip
        """Make the slot a `due` run (due at the slot, or at `due_at`: a retry's delay);
        its run id, or None when another node already did."""
        async with self._db.pool.connection() as connection:
            return await _insert_due(connection, job, slot, trigger, attempt,
                                     due_at=due_at or slot, preferred=preferred,
                                     run_id=run_id)  # fmt: skip

    async def materialize_many(self, slots: Sequence[Due]) -> int:
        """Make every slot of `slots` a due run in one statement; how many rows are new
        (the others some node had made already: the unique key keeps one)."""
        columns = list(zip(*(
            (d.run_id, d.job, d.slot, d.trigger, d.attempt, d.due_at or d.slot, d.preferred)
            for d in slots
        ), strict=True))  # fmt: skip
        if not columns:
            return 0
        async with self._db.pool.connection() as connection:
            cursor = await connection.execute(
                "INSERT INTO tuisched_runs (run_id, job, slot, trigger, attempt, state, due_at, "
                "preferred) SELECT r, j, s, t, a, 'due', d, p FROM unnest(%s::text[], "
                "%s::text[], %s::timestamptz[], %s::text[], %s::int[], %s::timestamptz[], "
                "%s::text[]) AS u(r, j, s, t, a, d, p) "
                # One order on every node: two nodes inserting the same slots in opposite
                # orders wait for each other's keys (`deadlock detected`).
                "ORDER BY j, s, t, a "
                "ON CONFLICT (job, slot, trigger, attempt) WHERE slot IS NOT NULL "
                "AND trigger <> 'backfill' DO NOTHING",
                [list(column) for column in columns],
            )
            return cursor.rowcount

    async def request(
        self, job: str, *, key: str, run_id: str | None = None, trigger: str = "manual",
        attempt: int = 0, due_at: datetime | None = None, preferred: str | None = None,
    ) -> str:  # fmt: skip
        """A run of `job` now (run now from any node; or at `due_at`), preferring node
        `preferred` (the one it was asked on); the same `key` makes one run."""
        run_id = run_id or new_run_id()
        async with self._db.pool.connection() as connection:
            cursor = await connection.execute(
                "INSERT INTO tuisched_runs (run_id, job, trigger, attempt, state, due_at, "
                "idempotency_key, preferred) "
                "VALUES (%s, %s, %s, %s, 'due', coalesce(%s, now()), %s, %s) "
                "ON CONFLICT (idempotency_key) DO NOTHING",
                (run_id, job, trigger, attempt, due_at, key, preferred),
            )
            if cursor.rowcount == 1:
                await connection.execute(_WAKE)  # after the row: a wake-up, never the news
                return run_id
            cursor = await connection.execute(
                "SELECT run_id FROM tuisched_runs WHERE idempotency_key = %s", (key,)
            )
            row = await cursor.fetchone()
        assert row is not None  # noqa: S101  (the conflict was on this key)
        return str(row[0])

    async def claim(
        self, node_id: str, *, free: int, lease: timedelta, steal_after: timedelta,
        jobs: Collection[str], exclusive: Collection[str] = (), skip: Collection[str] = (),
    ) -> list[Claim]:  # fmt: skip
        """Take up to `free` due runs of `jobs` (those this node runs as the cluster does),
        oldest first; none that is paused, none before its time by the database's clock.

        A job in `exclusive` (its `overlap` is not `allow`) runs once at a time across
        every node: its run is claimed only with the job's row in `tuisched_job_locks`,
        which `finish` and `reap` give back; a run claimed without it stays due, unless its
        job is in `skip` (`overlap: skip`): then it is closed NOT_STARTED, skipped.
        """
        if skip:
            await self._skip_busy(list(skip), steal_after)
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
                # Locks in one order on every node (by job: two claims never wait on each
                # other), and a job's earlier slot first (claims come by slot; the sort
                # keeps that order): a later slot never takes the lock an earlier one waits
                # for, which would run the two out of order.
                for claim in sorted(claims, key=lambda c: c.job):
                    if claim.job in exclusive and not await _lock_job(connection, claim):
                        await connection.execute(_HAND_BACK, (claim.run_id,))
                        given_back.add(claim.run_id)
            return [claim for claim in claims if claim.run_id not in given_back]

    async def _skip_busy(self, jobs: list[str], grace: timedelta) -> None:
        """Close the due runs of `overlap: skip` jobs that another run of the job still
        holds after `grace`: the lock outlives its run by the moment its end takes to
        be written, and a run that ended just before a slot must not skip it."""
        async with self._db.pool.connection() as connection:
            await connection.execute(
                "UPDATE tuisched_runs AS due SET state = 'not_started', result = 'skipped', "
                "status = 'run ' || l.run_id || ' still running', ended_at = now() "
                "FROM tuisched_job_locks AS l WHERE l.job = due.job AND due.state = 'due' "
                "AND due.due_at <= now() - %s AND due.job = ANY(%s) AND due.run_id <> l.run_id",
                (grace, jobs),
            )

    async def finish(
        self, run_id: str, fence: int, *, state: str, result: str, status: str,
        exit_code: int | None,
    ) -> bool:  # fmt: skip
        """Close the run, if this node still holds it (its fence is the current one).

        A run that ended here while this node was cut off, and that the reapers
        closed ABANDONED meanwhile, gets what really happened, as long as no node
        took it over (no later attempt of it exists: `recover: true` makes one).

        False: the run was taken from this node; nothing was written, and the
        caller logs a late result.
        """
        async with self._db.pool.connection() as connection, connection.transaction():
            cursor = await connection.execute(
                "UPDATE tuisched_runs SET state = %s, result = %s, status = %s, exit_code = %s, "
                "ended_at = now(), lease_until = NULL "
                "WHERE run_id = %s AND fence = %s AND state = 'running'",
                (state, result, status, exit_code, run_id, fence),
            )
            if cursor.rowcount == 1:
                await connection.execute(
                    "DELETE FROM tuisched_job_locks WHERE run_id = %s", (run_id,)
                )
                return True
            cursor = await connection.execute(
                "UPDATE tuisched_runs AS r SET state = %s, result = %s, status = %s, "
                "exit_code = %s WHERE run_id = %s AND fence = %s AND state = 'abandoned' "
                "AND NOT EXISTS (SELECT 1 FROM tuisched_runs AS n WHERE n.job = r.job "
                "AND n.slot IS NOT DISTINCT FROM r.slot AND n.trigger = r.trigger "
                "AND n.attempt > r.attempt)",
                (state, result, f"{status} (recorded late: its node was cut off)",
                 exit_code, run_id, fence),
            )  # fmt: skip
            return cursor.rowcount == 1

    async def reap(self, *, dead_after: timedelta, recover: Collection[str]) -> list[Abandoned]:
        """Declare stale nodes dead and their expired runs ABANDONED; make one more
        attempt of each abandoned run of a job in `recover`; forget nodes gone for
        `NODES_KEPT`. Any node may call it, at the same time as others: each change is
        made once."""
        async with self._db.pool.connection() as connection, connection.transaction():
            await connection.execute(
                "UPDATE tuisched_nodes SET state = 'dead' WHERE node_id IN ("
                "SELECT node_id FROM tuisched_nodes WHERE state = 'alive' "
                "AND heartbeat_at < now() - %s FOR UPDATE SKIP LOCKED)",
                (dead_after,),
            )
            await connection.execute(
                "DELETE FROM tuisched_nodes WHERE node_id IN (SELECT node_id FROM "
                "tuisched_nodes WHERE state <> 'alive' AND heartbeat_at < now() - %s "
                "FOR UPDATE SKIP LOCKED)",
                (NODES_KEPT,),
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

    async def set_paused(
        self, kind: str, name: str, *, paused: bool, by: str, jobs: Collection[str] = ()
    ) -> None:
        """Pause or resume a job (`kind` job), a group or everything (`all`, name '');
        a pause also closes the due runs of the `jobs` it holds (NOT_STARTED, stopped)."""
        async with self._db.pool.connection() as connection, connection.transaction():
            if paused:
                await connection.execute(
                    "INSERT INTO tuisched_pauses (kind, name, paused_by) VALUES (%s, %s, %s) "
                    "ON CONFLICT (kind, name) DO NOTHING",
                    (kind, name, by),
                )
                await connection.execute(
                    "UPDATE tuisched_runs SET state = 'not_started', result = 'stopped', "
                    "status = 'the job was paused', ended_at = now() "
                    "WHERE state = 'due' AND job = ANY(%s)",
                    (list(jobs),),
                )
            else:
                await connection.execute(
                    "DELETE FROM tuisched_pauses WHERE kind = %s AND name = %s", (kind, name)
                )
            await connection.execute(_WAKE)  # sent at COMMIT, after the change

    async def pauses(self) -> set[tuple[str, str]]:
        """The pauses in force across the cluster, as (kind, name)."""
        async with self._db.pool.connection() as connection:
            cursor = await connection.execute("SELECT kind, name FROM tuisched_pauses")
            return {(str(kind), str(name)) for kind, name in await cursor.fetchall()}

    # --- commands -------------------------------------------------------------------

    async def stop(self, run_id: str, *, by: str) -> str | None:
        """Stop a run wherever it is: a due one is closed here (NOT_STARTED, stopped); a
        running one gets a `stop` command for its owner. The run's state before, or None
        when there is no such run, or it has ended."""
        async with self._db.pool.connection() as connection, connection.transaction():
            cursor = await connection.execute(
                "SELECT state FROM tuisched_runs WHERE run_id = %s FOR UPDATE", (run_id,)
            )
            row = await cursor.fetchone()
            if row is None or row[0] not in ("due", "running"):
                return None
            if row[0] == "due":
                await connection.execute(
                    "UPDATE tuisched_runs SET state = 'not_started', result = 'stopped', "
                    "status = 'stopped before it started', ended_at = now() WHERE run_id = %s",
                    (run_id,),
                )
            else:
                await connection.execute(
                    "INSERT INTO tuisched_commands (verb, run_id, issued_by) "
                    "VALUES ('stop', %s, %s)",
                    (run_id, by),
                )
                await connection.execute(_WAKE)  # sent at COMMIT, after the row
            return str(row[0])

    async def commands(self, after: int) -> list[tuple[int, str, str]]:
        """Commands issued after id `after` (id, verb, run id), oldest first; with `after`
        -1, none but the newest id (where a node that joins starts reading)."""
        async with self._db.pool.connection() as connection:
            if after < 0:
                cursor = await connection.execute(
                    "SELECT coalesce(max(id), 0), '', '' FROM tuisched_commands"
                )
            else:
                cursor = await connection.execute(
                    "SELECT id, verb, coalesce(run_id, '') FROM tuisched_commands "
                    "WHERE id > %s ORDER BY id",
                    (after,),
                )
            return [(int(i), str(verb), str(run)) for i, verb, run in await cursor.fetchall()]

    async def history(
        self, limit: int = 1000, job: str | None = None, *, offset: int = 0,
        states: Collection[str] = (), triggers: Collection[str] = (),
        since: datetime | None = None, until: datetime | None = None,
    ) -> list[dict[str, Any]]:  # fmt: skip
        """The newest runs of the whole cluster (of `job`, in `states`, by `triggers`, made
        in [since, until)), skipping `offset`, oldest first, as `history --json` shows
        them (with the node that ran each one and its fence)."""
        async with self._db.pool.connection() as connection:
            return await dict_rows(
                connection,
                "SELECT * FROM (SELECT run_id, job, slot, trigger, attempt, state, result, "
                "status, reason, exit_code, owner AS node, fence, due_at, started_at, ended_at, "
                "created_at FROM tuisched_runs WHERE (%(job)s::text IS NULL OR job = %(job)s) "
                "AND (cardinality(%(states)s::text[]) = 0 OR state = ANY(%(states)s)) "
                "AND (cardinality(%(triggers)s::text[]) = 0 OR trigger = ANY(%(triggers)s)) "
                "AND (%(since)s::timestamptz IS NULL OR created_at >= %(since)s) "
                "AND (%(until)s::timestamptz IS NULL OR created_at < %(until)s) "
                "ORDER BY created_at DESC, run_id LIMIT %(limit)s OFFSET %(offset)s) AS r "
                "ORDER BY created_at, run_id",
                {"job": job, "limit": limit, "offset": offset, "states": list(states),
                 "triggers": list(triggers), "since": since, "until": until},
            )  # fmt: skip

    async def in_progress(self, *, exclude: str, limit: int = 200) -> list[tuple[Any, ...]]:
        """Runs due now or running, but not on node `exclude` (run_id, job, slot, trigger,
        attempt, state, owner, fence, due_at, started_at), oldest first."""
        async with self._db.pool.connection() as connection:
            cursor = await connection.execute(
                "SELECT run_id, job, slot, trigger, attempt, state, owner, fence, due_at, "
                "started_at FROM tuisched_runs WHERE (state = 'running' AND owner <> %s) "
                "OR (state = 'due' AND due_at <= now()) ORDER BY due_at, run_id LIMIT %s",
                (exclude, limit),
            )
            return await cursor.fetchall()

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

    # --- history retention (issue 16) -------------------------------------------------

    async def prune(
        self, before: datetime | None, runs_per_job: int | None, *, batch: int
    ) -> list[tuple[str, str]] | None:
        """Forget at most `batch` ended runs created before `before` or beyond each job's
        newest `runs_per_job`, oldest first; never a due or running run, nor a missed
        slot without a status. One node at a time: None when another node holds the
        pruning lock now (it does the work; nothing was changed here).

        Returns:
            (job, run_id) of each run forgotten.
        """
        async with self._db.pool.connection() as connection, connection.transaction():
            cursor = await connection.execute("SELECT pg_try_advisory_xact_lock(%s)", (PRUNE_LOCK,))
            row = await cursor.fetchone()
            if row is None or not row[0]:
                return None
            cursor = await connection.execute(_PRUNE, {
                "before": before, "keep": runs_per_job, "batch": batch,
            })  # fmt: skip
            return [(str(job), str(run_id)) for job, run_id in await cursor.fetchall()]

    # --- backfill and the downtime ledger (issue 16) ---------------------------------------


PRUNE_LOCK = 0x7475_6973_7072_756E
"""The advisory lock a node holds while it prunes the shared table ("tuisprun")."""
_PRUNE = (
    "WITH ranked AS (SELECT run_id, created_at, state, status, row_number() OVER "
    "(PARTITION BY job ORDER BY created_at DESC, run_id DESC) AS rank FROM tuisched_runs), "
    "doomed AS (SELECT run_id FROM ranked WHERE state NOT IN ('due', 'running') "
    "AND NOT (state = 'missed' AND coalesce(status, '') = '') "
    "AND ((%(before)s::timestamptz IS NOT NULL AND created_at < %(before)s) "
    "OR (%(keep)s::integer IS NOT NULL AND rank > %(keep)s)) "
    "ORDER BY created_at, run_id LIMIT %(batch)s) "
    "DELETE FROM tuisched_runs WHERE run_id IN (SELECT run_id FROM doomed) RETURNING job, run_id"
)
"""Forget one batch of the runs retention lets go (see `ClusterStore.prune`)."""
