"""The cluster's tables in PostgreSQL, as numbered migrations (see CLUSTER.md).

Each migration is applied once per database, in order, and recorded in
`tuisched_schema`. Nodes that start together all call `migrate`; the first
to take the advisory lock applies what is missing, and the others find it
done. A database whose schema is newer than this tuisched knows is refused:
an older node must not write rows whose meaning has changed.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Migration:
    """One step of the schema: its number, what it does, and its statements."""

    version: int
    description: str
    statements: tuple[str, ...]


LOCK_KEY = 0x7475_6973_6368_6564 & 0x7FFF_FFFF_FFFF_FFFF
"""The advisory lock held while migrating ("tuisched" in ASCII, as a bigint)."""

VERSION_TABLE = """
CREATE TABLE IF NOT EXISTS tuisched_schema (
    version     integer PRIMARY KEY,
    description text NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now(),
    applied_by  text NOT NULL
)"""

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "nodes, runs with one row per (job, slot, trigger, attempt), fences, pauses, commands",
        (
            """CREATE TABLE tuisched_nodes (
                node_id      text PRIMARY KEY,
                name         text NOT NULL,
                host         text NOT NULL,
                pid          integer NOT NULL,
                started_at   timestamptz NOT NULL DEFAULT now(),
                heartbeat_at timestamptz NOT NULL DEFAULT now(),
                state        text NOT NULL DEFAULT 'alive',
                capacity     integer NOT NULL,
                running      integer NOT NULL DEFAULT 0,
                config_hash  text NOT NULL,
                job_hashes   jsonb NOT NULL DEFAULT '{}'
            )""",
            "CREATE SEQUENCE tuisched_fence",
            """CREATE TABLE tuisched_runs (
                run_id          text PRIMARY KEY,
                job             text NOT NULL,
                slot            timestamptz,
                trigger         text NOT NULL,
                attempt         integer NOT NULL DEFAULT 0,
                idempotency_key text UNIQUE,
                state           text NOT NULL,
                result          text,
                status          text,
                exit_code       integer,
                due_at          timestamptz NOT NULL,
                preferred       text,
                owner           text,
                fence           bigint,
                lease_until     timestamptz,
                pid             integer,
                created_at      timestamptz NOT NULL DEFAULT now(),
                started_at      timestamptz,
                ended_at        timestamptz
            )""",
            # The promise of CLUSTER.md: one run per slot, whatever a node believes.
            """CREATE UNIQUE INDEX tuisched_runs_one_per_slot
                ON tuisched_runs (job, slot, trigger, attempt) WHERE slot IS NOT NULL""",
            "CREATE INDEX tuisched_runs_due ON tuisched_runs (due_at) WHERE state = 'due'",
            """CREATE INDEX tuisched_runs_leases
                ON tuisched_runs (lease_until) WHERE state = 'running'""",
            "CREATE INDEX tuisched_runs_by_job ON tuisched_runs (job, created_at DESC)",
            """CREATE TABLE tuisched_pauses (
                kind      text NOT NULL,
                name      text NOT NULL,
                paused_at timestamptz NOT NULL DEFAULT now(),
                paused_by text NOT NULL,
                PRIMARY KEY (kind, name)
            )""",
            """CREATE TABLE tuisched_commands (
                id        bigserial PRIMARY KEY,
                verb      text NOT NULL,
                run_id    text,
                issued_at timestamptz NOT NULL DEFAULT now(),
                issued_by text NOT NULL
            )""",
        ),
    ),
    Migration(
        2,
        "claims walk due runs in (due_at, run_id) order on an index, stopping at the limit",
        (
            """CREATE INDEX tuisched_runs_due_order
                ON tuisched_runs (due_at, run_id) WHERE state = 'due'""",
            "DROP INDEX tuisched_runs_due",
        ),
    ),
    Migration(
        3,
        "one run at a time of a job that does not overlap, across every node",
        (
            """CREATE TABLE tuisched_job_locks (
                job    text PRIMARY KEY,
                run_id text NOT NULL,
                since  timestamptz NOT NULL DEFAULT now()
            )""",
        ),
    ),
    Migration(
        4,
        "backfill runs may repeat a slot (its earlier backfill failed); a missed slot's "
        "reason apart from its decision",
        (
            # A backfill run of a slot is one of possibly several over time (each after the
            # previous one failed); `ClusterStore.offer_backfill` keeps one at a time.
            """CREATE UNIQUE INDEX tuisched_runs_one_per_slot_v4
                ON tuisched_runs (job, slot, trigger, attempt)
                WHERE slot IS NOT NULL AND trigger <> 'backfill'""",
            "DROP INDEX tuisched_runs_one_per_slot",
            "CREATE INDEX tuisched_runs_by_slot ON tuisched_runs (job, slot) "
            "WHERE slot IS NOT NULL",
            # The status of a MISSED row is the operator's decision ("" while none): why the
            # slot was missed moves to its own column.
            "ALTER TABLE tuisched_runs ADD COLUMN reason text",
            # Rows recorded before: their status held the reason, and nobody was asked.
            "UPDATE tuisched_runs SET reason = status, "
            "status = 'recorded before the cluster kept a downtime ledger' "
            "WHERE state = 'missed'",
        ),
    ),
)

LATEST = MIGRATIONS[-1].version
"""The newest schema this tuisched knows."""
