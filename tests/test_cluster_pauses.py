"""A pause or resume made on a node of a cluster, and the same change read back from the
cluster's table by that node's own link before the node has applied it.

The link learns of pauses made on other nodes a poll or two late, and leaves the slots of
that last stretch to the node that made the change. A node's own change must not be taken
for one: its resume would leave its last slots to itself, and no node would record them
(a pause on one node and a resume on another once left two slots with no row at all).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from tuisched.domain.model import Job
from tuisched.runtime.clock import ManualClock
from tuisched.runtime.configfiles import load_config
from tuisched.runtime.engine.engine import Engine, _ClusterHost
from tuisched.runtime.engine.pauses import Pauses

from .runtime_fixtures import write_config

START = datetime(2026, 11, 28, 2, 56, 17, tzinfo=UTC)
POLL = timedelta(seconds=1)


class _Store:
    """The history's pause table, as far as a pause needs it."""

    def set_pause(self, kind: str, name: str, *, paused: bool, at: datetime) -> None:
        pass


class _History:
    async def call(self, work: Callable[[_Store], Any]) -> Any:
        return work(_Store())


class _Outcomes:
    def publish(self, event: object) -> None:
        pass


class _Cluster:
    """The cluster's pause table, and the link that reads it: it reads it (as the
    write's notice wakes it) before the write's caller goes on, the order that lost
    the slots."""

    def __init__(self, clock: ManualClock) -> None:
        self.settings = SimpleNamespace(poll=POLL)
        self.pauses: set[tuple[str, str]] = set()
        self.host: _ClusterHost | None = None
        self._clock = clock

    async def set_paused(self, kind: str, name: str, *, paused: bool, jobs: object) -> None:
        (self.pauses.add if paused else self.pauses.discard)((kind, name))
        await self._clock.advance(0.5)  # the write takes a moment
        assert self.host is not None
        await self.host.pauses_seen(set(self.pauses))


def _node(tmp_path: Path) -> tuple[Any, ManualClock, list[tuple[datetime, datetime]]]:
    """A stand-in for the engine with the real `Pauses` and `set_paused`, on a cluster
    whose link reads the table first; and the stretches handed over as missed."""
    config = load_config(write_config(tmp_path, "tick: {command: [/bin/true], schedule: manual}"))
    clock = ManualClock(START)
    missed: list[tuple[datetime, datetime]] = []

    def resumed(job: Job, since: datetime, until: datetime) -> None:
        missed.append((since, until))

    pauses = Pauses(
        history=_History(), outcomes=_Outcomes(), clock=clock,  # type: ignore[arg-type]
        config=lambda: config, changed=lambda job, paused: None, resumed=resumed,
    )  # fmt: skip
    node = _Node(_Cluster(clock), pauses, config)
    node.cluster.host = _ClusterHost(node, pauses)  # type: ignore[arg-type]
    return node, clock, missed


class _Node:
    """What `Engine.set_paused` and the cluster's host use of an engine."""

    def __init__(self, cluster: _Cluster, pauses: Pauses, config: object) -> None:
        self.cluster, self._pauses, self.config = cluster, pauses, config

    @property
    def pauses(self) -> frozenset[tuple[str, str]]:
        return self._pauses.in_force


async def test_a_resume_made_here_hands_over_every_slot_up_to_it(tmp_path: Path) -> None:
    node, clock, missed = _node(tmp_path)
    await Engine.set_paused(node, "job", "tick", paused=True, actor="alice")
    assert ("job", "tick") in node._pauses.in_force
    assert node._pauses.notes["job", "tick"].actor == "alice"  # made here, not heard
    await clock.advance(4)
    await Engine.set_paused(node, "job", "tick", paused=False)
    assert ("job", "tick") not in node._pauses.in_force
    # Paused from the first change to the second, whole: not two polls short of it.
    assert missed == [(START + timedelta(seconds=0.5), START + timedelta(seconds=5))]
    assert not node._pauses.making


async def test_a_resume_heard_from_another_node_leaves_it_the_last_two_polls(
    tmp_path: Path,
) -> None:
    node, clock, missed = _node(tmp_path)
    cluster = node.cluster
    cluster.pauses.add(("job", "tick"))
    await cluster.host.pauses_seen({("job", "tick")})
    await clock.advance(4)
    await cluster.host.pauses_seen(set())  # another node resumed
    assert missed == [(START, START + timedelta(seconds=4) - 2 * POLL)]
