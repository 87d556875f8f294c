"""A node's membership of the cluster: heartbeats, self-fencing, reaping (CLUSTER.md).

`ClusterNode` joins under a new node id, renews its row and its runs' leases
every `heartbeat`, and reaps for everyone every `reap_every`. Each database
call is bounded by the node's own clock (a blackholed connection never holds
it), and a database that fails is retried with a growing pause, never
waited on.

Self-fencing: when no heartbeat has succeeded for `lease - 2 x heartbeat`
(by this process's monotonic clock), the node may no longer claim, since
others may soon take its runs; it stays fenced until the database answers
again, and then rejoins under a new id if the reapers declared the old one
dead meanwhile. The fence counts from when a good heartbeat was *sent*, not
from when its answer came: the database renewed the leases in between, so a
slow answer (a busy machine, a blocked loop) must not move the fence later
than the leases it protects.

Time and timers come from the injected `Clock`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum

from tuisched.domain.model import ClusterSettings
from tuisched.runtime.clock import Clock, SystemClock, within
from tuisched.runtime.cluster.store import ClusterStore, new_node_id

log = logging.getLogger(__name__)

MAX_BACKOFF = 30.0
"""The longest pause between two attempts to reach a database that fails."""


class NodeState(StrEnum):
    JOINING = "joining"
    ALIVE = "alive"
    FENCED = "fenced"
    """No good heartbeat for too long: claims nothing until the database answers."""
    LEFT = "left"


@dataclass(frozen=True, slots=True)
class Timing:
    """CLUSTER.md's defaults; all settable."""

    heartbeat: timedelta = timedelta(seconds=5)
    lease: timedelta = timedelta(seconds=30)
    dead_after: timedelta = timedelta(seconds=20)
    reap_every: timedelta = timedelta(seconds=5)

    @classmethod
    def of(cls, settings: ClusterSettings) -> Timing:
        """The timing `settings.cluster` asks for (the reaper passes once a heartbeat)."""
        return cls(
            heartbeat=settings.heartbeat, lease=settings.lease, dead_after=settings.dead_after,
            reap_every=settings.heartbeat,
        )  # fmt: skip

    @property
    def fence_after(self) -> float:
        """Seconds without a good heartbeat after which the node stops claiming."""
        return (self.lease - 2 * self.heartbeat).total_seconds()


class ClusterNode:
    """This process as a node of the cluster (see the module)."""

    def __init__(
        self, store: ClusterStore, *, name: str, capacity: int, config_hash: str,
        job_hashes: dict[str, str], timing: Timing | None = None,
        running: Callable[[], Collection[str]] = tuple,
        recover: Callable[[], Collection[str]] = tuple,
        clock: Clock | None = None,
        fence: Callable[[float | None, float], None] | None = None,
    ) -> None:  # fmt: skip
        """`running` gives the ids of the runs this node holds (claimed, not finished in
        the database yet); `recover` names the jobs that say `recover: true`; `fence`
        is told how long the runs held may go on (see `ClusterLink`)."""
        self._store = store
        self._name = name
        self._capacity = capacity
        self._config_hash = config_hash
        self._job_hashes = job_hashes
        self.timing = timing or Timing()
        self._running = running
        self._recover = recover
        self._clock: Clock = clock or SystemClock()
        self._monotonic = self._clock.monotonic
        self._fence = fence or (lambda seconds, grace: None)
        self.node_id = new_node_id(os.getpid())
        self._state = NodeState.JOINING
        self.trouble: str | None = None
        """What the database last failed with (None while it answers)."""
        self._last_good = self._monotonic()
        self._deadline: float | None = None
        """When this node's claims lapse without another good heartbeat (its monotonic)."""
        self.epoch = 0
        """Bumped each time this node's claims lapse: see `claims_epoch`."""
        self._tasks: list[asyncio.Task[None]] = []
        self._hashes_changed = False

    @property
    def state(self) -> NodeState:
        """Where the node is; FENCED as soon as its own clock says the heartbeats are stale."""
        fresh = self._monotonic() - self._last_good <= self.timing.fence_after
        if self._state is NodeState.ALIVE and not fresh:
            return NodeState.FENCED
        return self._state

    def update_hashes(self, config_hash: str, job_hashes: dict[str, str]) -> None:
        """A reload's definitions: written with the next heartbeat."""
        self._config_hash, self._job_hashes = config_hash, job_hashes
        self._hashes_changed = True

    @property
    def may_claim(self) -> bool:
        """Whether this node may take runs now (alive, and not fenced by its own clock)."""
        return self.state is NodeState.ALIVE

    async def start(self) -> None:
        """Begin joining, beating and reaping (in tasks of their own: nothing waits here)."""
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._beat()), loop.create_task(self._reap())]

    async def stop(self) -> None:
        """Stop beating and reaping, and leave (best effort, bounded)."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self.state is not NodeState.JOINING:
            with contextlib.suppress(Exception):
                await within(self._clock, self.timing.heartbeat.total_seconds(),
                             self._store.leave(self.node_id))  # fmt: skip
        self._state = NodeState.LEFT
        self._fence(None, 0.0)

    async def _beat(self) -> None:
        backoff = self.timing.heartbeat.total_seconds()
        while True:
            sent = self._monotonic()  # the leases are renewed after this, whenever it answers
            ok = await self._attempt(self._beat_once(sent))
            if ok:
                backoff = self.timing.heartbeat.total_seconds()
            else:
                self._fence_if_stale()
                backoff = min(backoff * 2, MAX_BACKOFF, self.timing.lease.total_seconds() / 3)
            await self._clock.sleep(self.timing.heartbeat.total_seconds() if ok else backoff)

    async def _beat_once(self, sent: float) -> None:
        """One heartbeat (or a join) sent at `sent` on this node's monotonic clock."""
        if self._state is NodeState.JOINING or (
            self._state is NodeState.FENCED and self.trouble == "declared dead"
        ):
            await self._join(sent)
            return
        hashes = (self._config_hash, self._job_hashes) if self._hashes_changed else None
        renewed = await self._store.heartbeat(
            self.node_id, running=self._running(), lease=self.timing.lease, hashes=hashes
        )
        self._hashes_changed = self._hashes_changed and not renewed
        if renewed:
            self._good(sent)
            return
        log.warning("cluster: node %s was declared dead by the others: its runs end, and "
                    "it claims nothing until it rejoins under a new id", self.node_id)  # fmt: skip
        self._state, self.trouble = NodeState.FENCED, "declared dead"
        self._lapse()
        self._fence(0.0, self.fence_grace)  # its claims may be taken: they end now
        await self._join(sent)

    async def _join(self, sent: float) -> None:
        if self._state is not NodeState.JOINING:
            self.node_id = new_node_id(os.getpid())
        await self._store.register(
            self.node_id, name=self._name, pid=os.getpid(), capacity=self._capacity,
            config_hash=self._config_hash, job_hashes=self._job_hashes,
        )  # fmt: skip
        log.info("cluster: joined as node %s", self.node_id)
        self._good(sent)

    def _good(self, sent: float) -> None:
        """A heartbeat sent at `sent` succeeded: the node's claims hold until `sent` plus
        the fence (the leases were renewed after `sent`, by the database's clock)."""
        if self.state is NodeState.FENCED:
            log.info("cluster: the database answers again; node %s claims again", self.node_id)
        self.claims_epoch()  # the claims held since the last good beat may have lapsed
        self._state, self.trouble = NodeState.ALIVE, None
        self._last_good = sent
        self._deadline = sent + self.timing.fence_after
        left = self._deadline - self._monotonic()
        if left <= 0:
            log.warning("cluster: a heartbeat of node %s was answered %.1f s late, past its "
                        "fence: the runs it holds end", self.node_id, -left)  # fmt: skip
        self._fence(left, self.fence_grace)

    def claims_epoch(self) -> int:
        """The epoch of this node's claims. It moves on once their fence has passed with no
        good heartbeat (by this node's clock: the keeper ended their runs then), or when
        the others declared the node dead: a run claimed in an earlier epoch is not this
        node's any more, and its end is written ABANDONED, as a reaper would."""
        if self._deadline is not None and self._monotonic() > self._deadline:
            self._lapse()
        return self.epoch

    def _lapse(self) -> None:
        self.epoch += 1
        self._deadline = None

    @property
    def fence_grace(self) -> float:
        """Seconds between SIGTERM and SIGKILL for the runs this node must end when fenced:
        under one heartbeat, so they are gone before their lease can expire elsewhere
        (fenced at `lease - 2 x heartbeat` after a good beat was sent, which is before
        the database renewed the lease: two heartbeats less the grace are left for the
        keeper to act and for the reapers' clock)."""
        return self.timing.heartbeat.total_seconds() / 2

    def _fence_if_stale(self) -> None:
        if self._state is NodeState.ALIVE and self.state is NodeState.FENCED:
            silent = self._monotonic() - self._last_good
            log.warning("cluster: no heartbeat for %.0f s (%s): node %s stops claiming",
                        silent, self.trouble, self.node_id)  # fmt: skip
            self._state = NodeState.FENCED

    async def _attempt(self, call: Awaitable[None]) -> bool:
        """Await the database call `call`, bounded by one heartbeat; False if it failed."""
        try:
            await within(self._clock, self.timing.heartbeat.total_seconds(), call)
        except TimeoutError:
            self.trouble = "the database did not answer"
        except Exception as error:  # an outage is a state, never a crash
            self.trouble = (
                str(error).strip().splitlines()[0] if str(error).strip() else (type(error).__name__)
            )
        else:
            return True
        return False

    async def _reap(self) -> None:
        while True:
            await self._clock.sleep(self.timing.reap_every.total_seconds())
            if self.state is not NodeState.ALIVE:
                continue  # a fenced node judges nobody
            try:
                abandoned = await within(
                    self._clock, self.timing.heartbeat.total_seconds(),
                    self._store.reap(dead_after=self.timing.dead_after, recover=self._recover()),
                )  # fmt: skip
            except Exception as error:  # the next pass tries again
                log.debug("cluster: reaping failed: %s", error)
                continue
            for run in abandoned:
                again = f"; run again as {run.recovery}" if run.recovery else ""
                log.warning("cluster: run %s of %s ABANDONED: node %s stopped renewing its "
                            "lease%s", run.run_id, run.job, run.owner, again)  # fmt: skip
