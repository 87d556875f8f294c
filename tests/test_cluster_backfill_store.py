"""Backfill and the downtime ledger's statements against a real PostgreSQL, raced as
nodes race them (issue 16: everything works in cluster mode too)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from tuisched.runtime.cluster.database import ClusterDatabase
from tuisched.runtime.cluster.rules import last_attempt, run_of_row
from tuisched.runtime.cluster.schema import MIGRATIONS, VERSION_TABLE
from tuisched.runtime.cluster.store import ClusterStore, Due, new_node_id, new_run_id

from .pg_fixtures import PASSWORD, PostgresServer

LEASE = timedelta(seconds=30)
NOW = timedelta(0)


def _backfill(job: str, slot: datetime, attempt: int = 0) -> Due:
    return Due(run_id=new_run_id(), job=job, slot=slot, trigger="backfill", attempt=attempt,
               due_at=None, preferred=None)  # fmt: skip


async def _run(store: ClusterStore, *, state: str) -> str:
    """Claim the one due run and end it as `state`; its run id."""
    node = new_node_id(1)
    await store.register(node, name="n", pid=1, capacity=8, config_hash="h", job_hashes={})
    (claim,) = await store.claim(node, free=1, lease=LEASE, steal_after=NOW, jobs=["etl"])
    assert await store.finish(claim.run_id, claim.fence, state=state, result="completed",
                              status="exit 1" if state == "failed" else "exit 0",
                              exit_code=1 if state == "failed" else 0)  # fmt: skip
    return claim.run_id


async def test_a_slot_is_backfilled_again_after_its_backfill_failed_and_never_twice_at_once(
    nodes: list[ClusterStore],
) -> None:
    slot = (await nodes[0].now()).replace(microsecond=0) - timedelta(hours=1)
    assert await nodes[0].offer_backfill(_backfill("etl", slot))
    assert not await nodes[1].offer_backfill(_backfill("etl", slot))  # due: on its way
    await _run(nodes[0], state="failed")
    assert await nodes[1].offer_backfill(_backfill("etl", slot))  # failed: may run again
    await _run(nodes[1], state="success")
    assert not await nodes[2].offer_backfill(_backfill("etl", slot))  # succeeded: never again
    states = sorted(row[5] for row in await nodes[0].runs("etl"))
    assert states == ["failed", "success"]


async def test_three_nodes_backfilling_one_window_at_once_run_each_slot_once(
    nodes: list[ClusterStore],
) -> None:
    base = (await nodes[0].now()).replace(microsecond=0) - timedelta(days=1)
    slots = [base + timedelta(minutes=i) for i in range(50)]

    async def offer_all(store: ClusterStore) -> int:
        return sum([await store.offer_backfill(_backfill("etl", slot)) for slot in slots])

    made = await asyncio.gather(*(offer_all(store) for store in nodes))
    assert sum(made) == len(slots)
    rows = await nodes[0].runs("etl")
    assert sorted(row[2] for row in rows) == slots


async def test_an_offer_whose_reply_was_lost_is_made_once_and_a_retry_is_made_as_asked(
    nodes: list[ClusterStore],
) -> None:
    slot = (await nodes[0].now()).replace(microsecond=0) - timedelta(hours=1)
    due = _backfill("etl", slot)
    assert await nodes[0].offer_backfill(due)
    assert await nodes[0].offer_backfill(due)  # sent again after a lost COMMIT reply
    assert await nodes[0].offer_backfill(_backfill("etl", slot, attempt=1))  # its retry
    assert [(row[4], row[5]) for row in await nodes[0].runs("etl")] == [(0, "due"), (1, "due")]


async def test_a_decision_is_written_by_one_node_when_two_decide_at_once(
    nodes: list[ClusterStore],
) -> None:
    base = (await nodes[0].now()).replace(microsecond=0) - timedelta(hours=1)
    ids = [new_run_id() for _ in range(3)]
    for minute, run_id in enumerate(ids):
        slot = base + timedelta(minutes=minute)
        assert await nodes[minute].record_missed("etl", slot, "the scheduler was down",
                                                 run_id=run_id)  # fmt: skip
        assert not await nodes[(minute + 1) % 3].record_missed("etl", slot, "down too")

    async def decide(store: ClusterStore, who: str) -> bool:
        return await store.decide_missed([(run_id, f"skipped by {who}") for run_id in ids])

    won = await asyncio.gather(*(decide(store, f"n{i}") for i, store in enumerate(nodes)))
    assert sorted(won) == [False, False, True]
    rows = await nodes[0].history(job="etl", states=["missed"])
    winner = f"n{won.index(True)}"
    assert {row["status"] for row in rows} == {f"skipped by {winner}"}
    assert {row["reason"] for row in rows} == {"the scheduler was down"}
    # A sequence's later steps rewrite its own rows, unfenced.
    assert await nodes[1].decide_missed([(ids[0], "made up by run x")], fenced=False)
    assert run_of_row(next(r for r in await nodes[2].history(job="etl") if r["run_id"] == ids[0]
                           )).status == "made up by run x"  # fmt: skip


async def test_a_backfill_decides_the_missed_slots_it_runs_and_no_others(
    nodes: list[ClusterStore],
) -> None:
    base = (await nodes[0].now()).replace(microsecond=0) - timedelta(hours=1)
    slots = [base + timedelta(minutes=i) for i in range(3)]
    for slot in slots:
        await nodes[0].record_missed("etl", slot, "the job was paused at this slot")
    await nodes[0].record_missed("other", slots[0], "the job was paused at this slot")
    assert await nodes[1].settle_missed("etl", slots[:2], "made up by backfill (op)") == 2
    assert await nodes[1].settle_missed("etl", slots[:2], "made up by backfill (again)") == 0
    statuses = {(row["job"], row["slot"]): row["status"] for row in await nodes[2].history()}
    assert statuses == {
        ("etl", slots[0]): "made up by backfill (op)",
        ("etl", slots[1]): "made up by backfill (op)",
        ("etl", slots[2]): "", ("other", slots[0]): "",
    }  # fmt: skip


async def test_the_runs_of_followed_slots_are_read_with_the_database_clock(
    nodes: list[ClusterStore],
) -> None:
    slot = (await nodes[0].now()).replace(microsecond=0) - timedelta(hours=1)
    due = _backfill("etl", slot)
    assert await nodes[0].offer_backfill(due)
    await nodes[0].materialize("etl", slot)  # the scheduled run of the slot: another key
    now, rows = await nodes[1].slot_runs([("etl", slot, "backfill")])
    assert abs(now - datetime.now(UTC)) < timedelta(minutes=1)
    assert [(row["run_id"], row["trigger"]) for row in rows] == [(due.run_id, "backfill")]


# --- which row concludes a followed run (pure) ---------------------------------------------

T0 = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
WAIT = timedelta(seconds=40)


def _row(run_id: str, attempt: int, state: str, *, result: str = "completed",
         created: int = 0, ended: int | None = 1) -> dict[str, Any]:  # fmt: skip
    return {
        "run_id": run_id, "attempt": attempt, "state": state, "result": result,
        "created_at": T0 + timedelta(seconds=created),
        "ended_at": T0 + timedelta(seconds=ended) if ended is not None else None,
    }  # fmt: skip


def test_a_followed_run_goes_on_while_it_or_its_retry_may_still_run() -> None:
    def last(rows: list[dict[str, Any]], *, retries: int = 2, at: int = 10) -> object:
        found = last_attempt("a", rows, retries=retries, retry_wait=WAIT,
                             now=T0 + timedelta(seconds=at))  # fmt: skip
        return found["run_id"] if found else None

    assert last([]) is None  # its row is not written yet
    assert last([_row("a", 0, "due", ended=None)]) is None
    assert last([_row("a", 0, "success")]) == "a"
    assert last([_row("a", 0, "failed")]) is None  # its retry may come
    assert last([_row("a", 0, "failed")], at=60) == "a"  # it did not come in time
    assert last([_row("a", 0, "failed")], retries=0) == "a"  # none allowed
    assert last([_row("a", 0, "failed", result="timed_out")]) == "a"  # not retried
    retried = [_row("a", 0, "failed"), _row("b", 1, "running", created=5, ended=None)]
    assert last(retried) is None
    retried[1] = _row("b", 1, "success", created=5, ended=8)
    assert last(retried) == "b"
    # An older backfill of the same slot, and its retry, are not this run's.
    older = [_row("x", 0, "failed", created=-99), _row("y", 1, "failed", created=-50),
             _row("a", 0, "success", created=0)]  # fmt: skip
    assert last(older) == "a"


async def test_missed_rows_of_a_schema_3_database_keep_their_reason_and_ask_nobody(
    postgres: PostgresServer,
) -> None:
    name = postgres.create_database()
    with psycopg.connect(postgres.url(name).replace("postgres@", f"postgres:{PASSWORD}@"),
                         autocommit=True) as connection:  # fmt: skip
        connection.execute(VERSION_TABLE)
        for migration in MIGRATIONS[:3]:
            for statement in migration.statements:
                connection.execute(statement)  # type: ignore[arg-type]  (a literal)
            connection.execute(
                "INSERT INTO tuisched_schema (version, description, applied_by) "
                "VALUES (%s, 'x', 'test')",
                (migration.version,),
            )
        connection.execute(  # as schema 3's record_missed wrote it: the reason as status
            "INSERT INTO tuisched_runs (run_id, job, slot, trigger, attempt, state, result, "
            "status, due_at, ended_at) VALUES ('r1', 'etl', now(), 'schedule', 0, 'missed', "
            "'missed', 'the scheduler was down', now(), now())"
        )
    database = ClusterDatabase(postgres.url(name), password=PASSWORD, node="n")
    await database.open()
    try:
        (row,) = await ClusterStore(database).history(job="etl")
    finally:
        await database.close()
    assert row["reason"] == "the scheduler was down"
    assert row["status"] == "recorded before the cluster kept a downtime ledger"


async def test_a_window_s_runs_are_read_by_slot_however_many_runs_came_after(
    nodes: list[ClusterStore],
) -> None:
    now = (await nodes[0].now()).replace(microsecond=0)
    window = (now - timedelta(days=30), now - timedelta(days=29))
    made = [window[0] + timedelta(hours=hour) for hour in range(0, 30, 6)]  # 4 in, 1 out
    later = [now - timedelta(seconds=second) for second in range(1, 200)]
    for slot in made + later:
        await nodes[0].materialize("etl", slot)
    async with nodes[0]._db.pool.connection() as connection:  # every run of etl succeeded
        await connection.execute("UPDATE tuisched_runs SET state = 'success'")
    rows = await nodes[1].runs_of_slots("etl", *window)
    assert [row["slot"] for row in rows] == made[:4]
