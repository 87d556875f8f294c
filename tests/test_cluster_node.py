"""A node's membership against a real PostgreSQL, with the network broken on purpose:
heartbeats, self-fencing past the lease, reaping, and rejoining (CLUSTER.md).

Timings are shrunk (heartbeat 0.2 s, lease 1.2 s) so each wait is short and bounded.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from datetime import timedelta

import pytest

from tuisched.domain.model import ClusterSettings
from tuisched.runtime.clock import ManualClock
from tuisched.runtime.cluster.database import ClusterDatabase
from tuisched.runtime.cluster.node import ClusterNode, NodeState, Timing
from tuisched.runtime.cluster.store import ClusterStore

from .pg_fixtures import PASSWORD, PostgresServer
from .tcp_proxy import TcpProxy

FAST = Timing(
    heartbeat=timedelta(seconds=0.2),
    lease=timedelta(seconds=1.2),
    dead_after=timedelta(seconds=0.6),
    reap_every=timedelta(seconds=0.2),
)


async def _until(condition: Callable[[], object], within: float = 15) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not condition():
        assert loop.time() < deadline, "never happened"
        await asyncio.sleep(0.05)


class Cluster:
    """One database, reached directly or through a proxy that can be broken."""

    def __init__(self, url: str, proxy: TcpProxy) -> None:
        self.url = url
        self.proxy = proxy
        self._opened: list[ClusterDatabase] = []
        self._nodes: list[ClusterNode] = []

    async def store(self, *, through_proxy: bool = False) -> ClusterStore:
        url = self.url
        if through_proxy:
            url = url.replace(f":{url.split(':')[2].split('/')[0]}/", f":{self.proxy.port}/")
        database = ClusterDatabase(url, password=PASSWORD, node=f"n{len(self._opened)}")
        await database.open()
        self._opened.append(database)
        return ClusterStore(database)

    async def node(self, store: ClusterStore, **kwargs: object) -> ClusterNode:
        node = ClusterNode(store, name=f"node{len(self._nodes)}", capacity=4, config_hash="h",
                           job_hashes={}, timing=FAST, **kwargs)  # type: ignore[arg-type]  # fmt: skip
        await node.start()
        self._nodes.append(node)
        return node

    async def close(self) -> None:
        self.proxy.restore()
        for node in self._nodes:
            await node.stop()
        for database in self._opened:
            await database.close()
        await self.proxy.stop()


@pytest.fixture
async def cluster(postgres: PostgresServer) -> AsyncIterator[Cluster]:
    proxy = TcpProxy(postgres.port)
    await proxy.start()
    made = Cluster(postgres.url(postgres.create_database()), proxy)
    try:
        yield made
    finally:
        await made.close()


async def test_a_node_joins_keeps_beating_and_leaves(cluster: Cluster) -> None:
    store = await cluster.store()
    beats: list[float | None] = []  # each good heartbeat tells the fence
    node = await cluster.node(store, fence=lambda seconds, _: beats.append(seconds))
    await _until(lambda: node.may_claim)
    await _until(lambda: len(beats) >= 6)  # several heartbeats: still fresh
    (row,) = await store.nodes()
    assert (row.node_id, row.state) == (node.node_id, "alive")
    assert row.age < FAST.lease  # its leases are kept
    assert node.may_claim
    await node.stop()
    (row,) = await store.nodes()
    assert row.state == "left"


async def test_a_partitioned_node_fences_itself_and_rejoins_under_a_new_id(
    cluster: Cluster,
) -> None:
    watcher = await cluster.node(await cluster.store())
    cut_off = await cluster.node(await cluster.store(through_proxy=True))
    await _until(lambda: cut_off.may_claim and watcher.may_claim)
    first_id = cut_off.node_id
    cluster.proxy.blackhole()  # no reset, no answer: only its own clock can tell
    loop = asyncio.get_running_loop()
    began = loop.time()
    await _until(lambda: not cut_off.may_claim)
    assert loop.time() - began <= FAST.fence_after + 2 * FAST.heartbeat.total_seconds() + 0.5
    assert cut_off.state is NodeState.FENCED
    store = await cluster.store()

    async def declared_dead() -> bool:
        return any(r.node_id == first_id and r.state == "dead" for r in await store.nodes())

    for _ in range(100):  # the living node's reaper declares it dead
        if await declared_dead():
            break
        await asyncio.sleep(0.1)
    assert await declared_dead()
    cluster.proxy.restore()
    await _until(lambda: cut_off.may_claim)
    assert cut_off.node_id != first_id  # a dead node never comes back as itself
    states = {row.node_id: row.state for row in await store.nodes()}
    assert (states[first_id], states[cut_off.node_id]) == ("dead", "alive")


async def test_the_runs_of_a_node_that_went_silent_are_abandoned_and_run_once_more(
    cluster: Cluster,
) -> None:
    silent_store = await cluster.store(through_proxy=True)
    silent = await cluster.node(silent_store)
    living = await cluster.node(await cluster.store(), recover=lambda: ["backup"])
    await _until(lambda: silent.may_claim and living.may_claim)
    now = await silent_store.now()
    await silent_store.materialize("backup", now - timedelta(seconds=1))
    (claim,) = await silent_store.claim(silent.node_id, free=1, lease=FAST.lease,
                                        steal_after=timedelta(0), jobs=["backup"])  # fmt: skip
    cluster.proxy.blackhole()
    store = await cluster.store()

    async def states() -> dict[str, str]:
        return {str(row[0]): str(row[5]) for row in await store.runs("backup")}

    for _ in range(100):
        if (await states()).get(claim.run_id) == "abandoned":
            break
        await asyncio.sleep(0.1)
    found = await states()
    assert found[claim.run_id] == "abandoned"
    assert sorted(found.values()) == ["abandoned", "due"]  # one recovery run, not more


def test_the_timing_is_the_configuration_s() -> None:
    settings = ClusterSettings(
        database="postgresql://x@db/x", heartbeat=timedelta(seconds=2),
        lease=timedelta(seconds=12), dead_after=timedelta(seconds=8),
    )  # fmt: skip
    timing = Timing.of(settings)
    assert (timing.heartbeat, timing.lease, timing.dead_after, timing.reap_every) == (
        timedelta(seconds=2), timedelta(seconds=12), timedelta(seconds=8), timedelta(seconds=2),
    )  # fmt: skip
    assert timing.fence_after == 8.0  # lease - 2 x heartbeat
    assert Timing.of(ClusterSettings(database="postgresql://x@db/x")) == Timing()


class _Beats:
    """The membership part of `ClusterStore`, in memory: each heartbeat takes `delay`
    seconds of the test's clock to be answered (the leases are renewed at once)."""

    def __init__(self, clock: ManualClock) -> None:
        self._clock = clock
        self.delay = 0.0
        self.renewed: list[float] = []
        """When (on the clock's monotonic) the database renewed the leases."""

    async def register(self, node_id: str, **_: object) -> None:
        self.renewed.append(self._clock.monotonic())

    async def heartbeat(self, node_id: str, **_: object) -> bool:
        self.renewed.append(self._clock.monotonic())
        if self.delay:
            await self._clock.sleep(self.delay)
        return True

    async def reap(self, **_: object) -> list[object]:
        return []

    async def leave(self, node_id: str) -> None:
        return None


SLOW = Timing(heartbeat=timedelta(seconds=1), lease=timedelta(seconds=4),
              dead_after=timedelta(seconds=2), reap_every=timedelta(seconds=1))  # fmt: skip


async def test_the_fence_counts_from_when_the_heartbeat_was_sent_however_late_its_answer() -> None:
    clock = ManualClock()
    store = _Beats(clock)
    fences: list[tuple[float, float | None]] = []
    node = ClusterNode(
        store, name="n", capacity=1, config_hash="h", job_hashes={}, timing=SLOW,  # type: ignore[arg-type]
        clock=clock, fence=lambda seconds, grace: fences.append((clock.monotonic(), seconds)),
    )  # fmt: skip
    await node.start()
    try:
        await clock.advance(0)
        assert fences == [(0.0, SLOW.fence_after)]
        store.delay = 0.9  # a busy machine: the next answer comes 0.9 s after the renewal
        await clock.advance(1.0)  # the heartbeat is sent, and renews the leases
        await clock.advance(0.9)  # its answer comes
        told_at, seconds = fences[-1]
        assert seconds is not None
        assert told_at + seconds == store.renewed[-1] + SLOW.fence_after  # not 0.9 s later
        store.delay = 60.0  # the database falls silent
        await clock.advance(told_at + seconds - clock.monotonic())
        assert node.may_claim
        await clock.advance(0.01)
        assert not node.may_claim  # the keeper ends the runs now, 2 heartbeats before the
        assert clock.monotonic() < store.renewed[-1] + SLOW.lease.total_seconds()  # lease
    finally:
        await node.stop()
