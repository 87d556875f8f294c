"""The cluster protocol's statements against a real PostgreSQL, raced as nodes race them.

Time is the database's: runs are made due in the past or the future by its
clock, and leases expire by asking for a lease of zero, never by sleeping.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import replace
from datetime import timedelta

from tuisched.domain.runs import new_run_id
from tuisched.runtime.cluster.store import ClusterStore, Due, new_node_id

LEASE = timedelta(seconds=30)
NOW = timedelta(0)
JOBS = [f"job{i:03d}" for i in range(100)]


async def _join(store: ClusterStore, pid: int, capacity: int = 8) -> str:
    node = new_node_id(pid)
    await store.register(node, name=f"node{pid}", pid=pid, capacity=capacity,
                         config_hash="h", job_hashes={})  # fmt: skip
    return node


async def test_every_node_materializes_every_slot_and_one_row_is_kept(
    nodes: list[ClusterStore],
) -> None:
    base = (await nodes[0].now()).replace(microsecond=0) - timedelta(minutes=1)
    slots = [base - timedelta(seconds=i) for i in range(100)]

    async def fire(store: ClusterStore) -> int:
        made = 0
        for job in JOBS[:10]:
            for slot in slots:
                made += await store.materialize(job, slot) is not None
        return made

    made = await asyncio.gather(*(fire(store) for store in nodes))
    assert sum(made) == 1_000  # each of the 1,000 (job, slot) pairs exactly once
    rows = await nodes[0].runs()
    assert len(rows) == 1_000
    assert len({(row[1], row[2]) for row in rows}) == 1_000


async def test_two_nodes_making_the_same_slots_in_opposite_orders_never_deadlock(
    nodes: list[ClusterStore],
) -> None:
    # Each node's batch comes in the order its own scheduler fired; the database takes
    # them in one order, so neither waits for a key the other waits on.
    base = (await nodes[0].now()).replace(microsecond=0) - timedelta(minutes=1)
    for round_ in range(6):
        slot = base - timedelta(minutes=round_)
        dues = [Due(run_id=new_run_id(), job=job, slot=slot, trigger="schedule", attempt=0,
                    due_at=None, preferred=None) for job in JOBS]  # fmt: skip
        again = [replace(due, run_id=new_run_id()) for due in reversed(dues)]
        made = await asyncio.gather(
            nodes[0].materialize_many(dues), nodes[1].materialize_many(again)
        )
        assert sum(made) == len(JOBS)
    assert len(await nodes[0].runs()) == 6 * len(JOBS)


async def test_three_claimers_take_each_due_run_once_and_none_before_its_time(
    nodes: list[ClusterStore],
) -> None:
    now = await nodes[0].now()
    for i, job in enumerate(JOBS):
        await nodes[0].materialize(job, now - timedelta(seconds=1 + i % 7))
    future = await nodes[0].materialize("later", now + timedelta(hours=1))
    ids = [await _join(store, pid) for pid, store in enumerate(nodes, start=100)]

    async def drain(store: ClusterStore, node: str) -> list[int]:
        fences: list[int] = []
        while True:
            claims = await store.claim(node, free=4, lease=LEASE, steal_after=NOW,
                                       jobs=[*JOBS, "later"])  # fmt: skip
            if not claims:
                return fences
            fences += [claim.fence for claim in claims]

    taken = await asyncio.gather(*(drain(s, n) for s, n in zip(nodes, ids, strict=True)))
    fences = [fence for share in taken for fence in share]
    assert len(fences) == len(JOBS)  # every due run, once
    assert len(set(fences)) == len(fences)  # each claim its own fencing number
    rows = await nodes[0].runs()
    owners = Counter(row[6] for row in rows if row[5] == "running")
    assert sum(owners.values()) == len(JOBS)
    assert {row[0]: row[5] for row in rows}[future] == "due"  # not before its time


async def test_a_run_that_prefers_another_node_waits_before_it_is_stolen(
    nodes: list[ClusterStore],
) -> None:
    a, b = await _join(nodes[0], 1), await _join(nodes[1], 2)
    now = await nodes[0].now()
    await nodes[0].materialize("job000", now - timedelta(seconds=1), preferred=b)
    steal = timedelta(seconds=2)
    assert await nodes[0].claim(a, free=8, lease=LEASE, steal_after=steal, jobs=JOBS) == []
    await nodes[0].materialize("job001", now - timedelta(seconds=3), preferred=b)  # older
    (stolen,) = await nodes[0].claim(a, free=8, lease=LEASE, steal_after=steal, jobs=JOBS)
    assert stolen.job == "job001"  # due longer than steal_after ago: anyone may take it
    (own,) = await nodes[1].claim(b, free=8, lease=LEASE, steal_after=steal, jobs=JOBS)
    assert own.job == "job000"


async def test_a_run_that_prefers_a_node_no_longer_alive_is_taken_at_once(
    nodes: list[ClusterStore],
) -> None:
    a, gone = await _join(nodes[0], 1), await _join(nodes[1], 2)
    await nodes[1].leave(gone)  # or declared dead, or rejoined under a new id
    now = await nodes[0].now()
    await nodes[0].materialize("job000", now - timedelta(seconds=1), preferred=gone)
    steal = timedelta(seconds=30)
    (taken,) = await nodes[0].claim(a, free=8, lease=LEASE, steal_after=steal, jobs=JOBS)
    assert taken.job == "job000"


async def test_paused_jobs_and_a_pause_of_everything_are_not_claimed(
    nodes: list[ClusterStore],
) -> None:
    node = await _join(nodes[0], 1)
    now = await nodes[0].now()
    for job in JOBS[:3]:
        await nodes[0].materialize(job, now - timedelta(seconds=1))
    await nodes[1].set_paused("job", "job000", paused=True, by="ops")
    await nodes[1].set_paused("all", "", paused=True, by="ops")

    async def claim() -> list[str]:
        found = await nodes[0].claim(node, free=8, lease=LEASE, steal_after=NOW, jobs=JOBS)
        return [c.job for c in found]

    assert await claim() == []
    await nodes[2].set_paused("all", "", paused=False, by="ops")
    assert sorted(await claim()) == ["job001", "job002"]
    await nodes[2].set_paused("job", "job000", paused=False, by="ops")
    assert await claim() == ["job000"]


async def test_a_presumed_dead_node_that_comes_back_changes_nothing(
    nodes: list[ClusterStore],
) -> None:
    zombie, other = await _join(nodes[0], 1), await _join(nodes[1], 2)
    now = await nodes[0].now()
    await nodes[0].materialize("job000", now - timedelta(seconds=1))
    (claim,) = await nodes[0].claim(zombie, free=1, lease=NOW, steal_after=NOW, jobs=JOBS)
    # The zombie stops (SIGSTOP, a partition): its lease expires and a reaper closes the run.
    (abandoned,) = await nodes[1].reap(dead_after=timedelta(hours=1), recover=["job000"])
    assert (abandoned.run_id, abandoned.owner) == (claim.run_id, zombie)
    assert abandoned.recovery is not None
    (again,) = await nodes[1].claim(other, free=1, lease=LEASE, steal_after=NOW, jobs=JOBS)
    assert (again.run_id, again.attempt) == (abandoned.recovery, 1)  # run once more elsewhere
    assert again.fence > claim.fence
    # The zombie wakes up and reports its result: nothing is overwritten.
    assert not await nodes[0].finish(claim.run_id, claim.fence, state="SUCCESS",
                                     result="completed", status="exit 0", exit_code=0)  # fmt: skip
    states = {row[0]: row[5] for row in await nodes[2].runs()}
    assert states[claim.run_id] == "abandoned"
    assert await nodes[1].finish(again.run_id, again.fence, state="SUCCESS",
                                 result="completed", status="exit 0", exit_code=0)  # fmt: skip


async def test_three_reapers_at_once_make_one_change(nodes: list[ClusterStore]) -> None:
    owner = await _join(nodes[0], 1)
    now = await nodes[0].now()
    for job in JOBS[:30]:
        await nodes[0].materialize(job, now - timedelta(seconds=1))
    claims = await nodes[0].claim(owner, free=30, lease=NOW, steal_after=NOW, jobs=JOBS)
    assert len(claims) == 30
    reaped = await asyncio.gather(
        *(store.reap(dead_after=timedelta(hours=1), recover=JOBS) for store in nodes)
    )
    abandoned = [a for share in reaped for a in share]
    assert sorted(a.run_id for a in abandoned) == sorted(c.run_id for c in claims)
    rows = await nodes[0].runs()
    recoveries = [row for row in rows if row[4] == 1]
    assert len(recoveries) == 30  # one more attempt per abandoned run, not three
    assert len({row[1] for row in recoveries}) == 30


async def test_a_node_declared_dead_learns_it_at_its_next_heartbeat(
    nodes: list[ClusterStore],
) -> None:
    node = await _join(nodes[0], 1)
    assert await nodes[0].heartbeat(node, running=(), lease=LEASE)
    await nodes[1].reap(dead_after=NOW, recover=())  # its heartbeat is older than "now"
    assert not await nodes[0].heartbeat(node, running=(), lease=LEASE)  # it must self-fence
    (row,) = await nodes[2].nodes()
    assert (row.node_id, row.state) == (node, "dead")


async def test_the_heartbeat_renews_the_leases_of_the_node_s_runs(
    nodes: list[ClusterStore],
) -> None:
    node = await _join(nodes[0], 1)
    now = await nodes[0].now()
    await nodes[0].materialize("job000", now - timedelta(seconds=1))
    claimed = await nodes[0].claim(node, free=1, lease=NOW, steal_after=NOW, jobs=JOBS)
    held = [claimed[0].run_id]
    assert await nodes[0].heartbeat(node, running=held, lease=LEASE)  # renewed before expiry
    assert await nodes[1].reap(dead_after=timedelta(hours=1), recover=()) == []


async def test_run_now_from_two_nodes_with_one_key_makes_one_run(
    nodes: list[ClusterStore],
) -> None:
    made = await asyncio.gather(*(store.request("job000", key="press-1") for store in nodes))
    assert len(set(made)) == 1
    other = await nodes[0].request("job000", key="press-2")
    assert other != made[0]
    assert len(await nodes[0].runs("job000")) == 2


async def test_a_job_that_does_not_overlap_runs_once_at_a_time_across_nodes(
    nodes: list[ClusterStore],
) -> None:
    ids = [await _join(store, pid) for pid, store in enumerate(nodes, start=10)]
    now = await nodes[0].now()
    for second in range(1, 11):  # ten slots of one job, all due, and one of another
        await nodes[0].materialize("backup", now - timedelta(seconds=second))
    await nodes[0].materialize("job000", now - timedelta(seconds=1))

    async def claim(store: ClusterStore, node: str) -> list[str]:
        found = await store.claim(node, free=4, lease=LEASE, steal_after=NOW,
                                  jobs=["backup", "job000"], exclusive=["backup"])  # fmt: skip
        return [c.job for c in found]

    for _ in range(5):  # three nodes at once, again and again
        taken = await asyncio.gather(*(claim(s, n) for s, n in zip(nodes, ids, strict=True)))
        running = [row for row in await nodes[0].runs("backup") if row[5] == "running"]
        assert len(running) == 1, taken  # never two at once, whoever claimed
    rows = {row[0]: row for row in await nodes[0].runs()}
    assert [row[5] for row in rows.values() if row[1] == "job000"] == ["running"]
    (current,) = [row for row in rows.values() if row[1] == "backup" and row[5] == "running"]
    owner = nodes[ids.index(str(current[6]))]
    assert await owner.finish(str(current[0]), int(str(current[7])), state="SUCCESS",
                              result="completed", status="exit 0", exit_code=0)  # fmt: skip
    (nxt,) = await nodes[1].claim(ids[1], free=4, lease=LEASE, steal_after=NOW,
                                  jobs=["backup"], exclusive=["backup"])  # fmt: skip
    assert nxt.job == "backup"  # the lock went with the finish: the next slot may run


async def test_a_job_that_does_not_overlap_takes_its_slots_in_order(
    nodes: list[ClusterStore],
) -> None:
    node = await _join(nodes[0], 1)
    now = await nodes[0].now()
    slots = [now - timedelta(seconds=second) for second in (3, 2, 1)]
    # Run ids that sort against the slots' order: the earliest slot's is the greatest.
    for slot, run_id in zip(slots, ("c0000000000c", "b0000000000b", "a0000000000a"), strict=True):
        await nodes[0].materialize("backup", slot, run_id=run_id)
    taken = []
    for _ in slots:
        (claim,) = await nodes[0].claim(node, free=4, lease=LEASE, steal_after=NOW,
                                        jobs=["backup"], exclusive=["backup"])  # fmt: skip
        taken.append(claim.slot)
        assert await nodes[0].finish(claim.run_id, claim.fence, state="success",
                                     result="completed", status="", exit_code=0)  # fmt: skip
    assert taken == slots


async def test_an_abandoned_run_gives_its_job_back(nodes: list[ClusterStore]) -> None:
    node = await _join(nodes[0], 1)
    now = await nodes[0].now()
    for second in (1, 2):
        await nodes[0].materialize("backup", now - timedelta(seconds=second))
    (first,) = await nodes[0].claim(node, free=4, lease=NOW, steal_after=NOW,
                                    jobs=["backup"], exclusive=["backup"])  # fmt: skip
    (abandoned,) = await nodes[1].reap(dead_after=timedelta(hours=1), recover=())
    assert abandoned.run_id == first.run_id
    (second,) = await nodes[2].claim(node, free=4, lease=LEASE, steal_after=NOW,
                                     jobs=["backup"], exclusive=["backup"])  # fmt: skip
    assert second.run_id != first.run_id


async def test_a_claim_whose_reply_was_lost_is_not_renewed_and_is_given_back(
    nodes: list[ClusterStore],
) -> None:
    node = await _join(nodes[0], 1)
    now = await nodes[0].now()
    await nodes[0].materialize("job000", now - timedelta(seconds=1))
    await nodes[0].materialize("job001", now - timedelta(seconds=1))
    claimed = await nodes[0].claim(
        node, free=2, lease=NOW, steal_after=NOW, jobs=JOBS, exclusive=JOBS
    )
    kept, lost = claimed[0].run_id, claimed[1].run_id  # as if the reply of `lost` never came
    assert await nodes[0].heartbeat(node, running=[kept], lease=LEASE)
    assert await nodes[0].hand_back_unknown(node, [kept]) == [lost]
    again = await nodes[1].claim("other", free=2, lease=LEASE, steal_after=NOW, jobs=JOBS,
                                 exclusive=JOBS)  # fmt: skip
    assert [(c.run_id, c.fence > claimed[1].fence) for c in again] == [(lost, True)]


async def test_a_slot_of_a_skip_job_is_skipped_only_while_another_run_still_holds_it(
    nodes: list[ClusterStore],
) -> None:
    node = await _join(nodes[0], 1)
    now = await nodes[0].now()
    await nodes[0].materialize("job000", now - timedelta(seconds=2))
    (first,) = await nodes[0].claim(node, free=1, lease=LEASE, steal_after=NOW, jobs=JOBS,
                                    exclusive=["job000"], skip=["job000"])  # fmt: skip
    second = await nodes[0].materialize("job000", now - timedelta(seconds=1))
    hour = timedelta(hours=1)  # within the grace: the first run's end may be on its way
    assert await nodes[1].claim("other", free=1, lease=LEASE, steal_after=hour, jobs=JOBS,
                                exclusive=["job000"], skip=["job000"]) == []  # fmt: skip
    states = {row[0]: row[5] for row in await nodes[0].runs("job000")}
    assert states == {first.run_id: "running", second: "due"}
    await nodes[1].claim("other", free=0, lease=LEASE, steal_after=NOW, jobs=(),
                         skip=["job000"])  # fmt: skip
    states = {row[0]: row[5] for row in await nodes[0].runs("job000")}
    assert states == {first.run_id: "running", second: "not_started"}


async def test_an_upstream_slot_done_on_one_node_is_seen_by_another(
    nodes: list[ClusterStore],
) -> None:
    node = await _join(nodes[0], 1)
    now = await nodes[0].now()
    slot, other = now - timedelta(seconds=2), now - timedelta(seconds=1)
    await nodes[0].materialize("job000", slot)
    (claim,) = await nodes[0].claim(node, free=1, lease=LEASE, steal_after=NOW, jobs=JOBS)
    assert await nodes[1].slots_done([("job000", slot)]) == (set(), {("job000", slot)})
    await nodes[0].finish(claim.run_id, claim.fence, state="success", result="completed",
                          status="exit 0", exit_code=0)  # fmt: skip
    wanted = [("job000", slot), ("job000", other)]
    assert await nodes[1].slots_done(wanted) == ({("job000", slot)}, {("job000", slot)})


async def test_nodes_gone_for_a_day_are_forgotten_by_the_reapers(
    nodes: list[ClusterStore],
) -> None:
    old, recent = await _join(nodes[0], 1), await _join(nodes[0], 2)
    await nodes[0].leave(old)
    await nodes[0].leave(recent)
    async with nodes[0]._db.pool.connection() as connection:  # aging a row by hand
        await connection.execute("UPDATE tuisched_nodes SET heartbeat_at = now() - "
                                 "'25 hours'::interval WHERE node_id = %s", (old,))  # fmt: skip
    await nodes[1].reap(dead_after=timedelta(hours=1), recover=())
    assert [row.node_id for row in await nodes[1].nodes()] == [recent]
