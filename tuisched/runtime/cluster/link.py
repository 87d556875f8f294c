"""One node's link between its engine and the cluster (CLUSTER.md).

The engine goes on firing slots as on one node; in cluster mode a run that
is ready to queue is *offered* to the cluster instead (a `due` row, one per
slot whichever nodes insert it), and the node runs only what it *claims*:

    offer       fired slots, retries, dependants and run-now become due rows
    claim loop  every `poll` (and at once after an offer): as many due rows as
                the node has free workers, of the jobs it defines as the
                cluster does; each claim starts on the engine with its fence
    finish      a run's end, written only while the node holds its fence
                (kept and tried again while the database is away)
    control     pauses and stop commands of every node, read each poll (rows
                first: a missed poll costs delay, never a wrong run)
    drift       each node's per-job definition hashes, compared each heartbeat

Every call to the database is bounded in time and made from tasks: the
event loop (and the console on it) never waits on PostgreSQL. A database
that is away is a state (`DatabaseState`), tried again with backoff. Time,
pauses and bounds come from the injected `Clock`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from tuisched.domain.errors import DatabaseUnreachableError
from tuisched.domain.model import ClusterSettings, Config, Job, Overlap
from tuisched.domain.runs import Result, RunRecord, RunState, Trigger
from tuisched.domain.text import counted
from tuisched.runtime.clock import Clock, SystemClock, within
from tuisched.runtime.cluster.database import ClusterDatabase
from tuisched.runtime.cluster.linkparts import CALL_SECONDS, DatabaseAsks, DatabaseConnection
from tuisched.runtime.cluster.node import MAX_BACKOFF, ClusterNode, NodeState, Timing
from tuisched.runtime.cluster.rules import (
    ClusterView,
    DatabaseState,
    config_hashes,
    drifted_jobs,
    elsewhere_run,
    last_attempt,
    preferred_node,
    run_of_row,
    state_of,
    unrun_jobs,
)
from tuisched.runtime.cluster.slotrows import Due
from tuisched.runtime.cluster.store import CHANNEL, Claim, ClusterStore, NodeRow

log = logging.getLogger(__name__)

FINISH_RETRIES_FOR = timedelta(minutes=10)
"""How long a run's end is kept and tried again while the database is away."""
LAPSED = "its node had no good heartbeat within its fence: the run was ended"
"""The status of a run closed ABANDONED by its own node once its claim lapsed."""


class Host(Protocol):
    """What the link needs of the engine."""

    def free_workers(self) -> int: ...
    def claimed_ids(self) -> list[str]:
        """The runs claimed from the cluster that run or wait for a worker here."""
        ...

    def start_claimed(self, claim: Claim) -> None: ...
    async def pauses_seen(self, pauses: set[tuple[str, str]]) -> None: ...
    def stop_here(self, run_id: str) -> bool: ...
    def end_lapsed(self, run_id: str) -> None:
        """End a claimed run at once, queued or running: its claim lapsed."""
        ...

    async def recheck_waiting(self) -> None: ...
    def claimable(self) -> list[Job]:
        """Enabled jobs that are not paused on this node."""
        ...


@dataclass(slots=True)
class _Offer:
    run: RunRecord
    job: Job
    due_at: datetime | None


Ended = Callable[[RunRecord], None]
"""Told the last attempt of a run followed with `ClusterLink.watch`."""


@dataclass(slots=True)
class _Watch:
    run: RunRecord
    ended: Ended
    retries: int
    """How many retries its job allows."""
    retry_wait: timedelta
    """How long after a failed attempt its retry may take to get a row."""
    offered: bool = False
    """Its row was written (so a row that is not there is gone)."""


class ClusterLink(DatabaseAsks, DatabaseConnection):
    """This process as a node: its database, its membership, its claims (see the module);
    what others ask of the database and the database's state are its parts in `linkparts`."""

    def __init__(
        self, settings: ClusterSettings, config: Config, *, password: str | None,
        node_name: str, clock: Clock | None = None, now: Callable[[], datetime] | None = None,
        fence: Callable[[float | None, float], None] | None = None,
    ) -> None:  # fmt: skip
        """`clock`: the runtime's (`now`, when given alone, is its `now`: the system's
        clock keeps the timers then). `fence(seconds, grace)` is told, after each good
        heartbeat, how long this node's claims hold without another (None: no limit; 0:
        they are lost now), and `grace` the time between SIGTERM and SIGKILL for runs
        that must end then (`Keeper.fence`)."""
        self.settings = settings
        self._fence = fence
        self._clock: Clock = clock or SystemClock()
        self._now = now or self._clock.now
        self._name = settings.name or node_name
        # Named so that `pg_stat_activity` tells the nodes apart.
        self._db = ClusterDatabase(settings.database, password=password, node=self._name)
        self.store = ClusterStore(self._db)
        self._config = config
        self._job_index = _job_index(config)
        self._host: Host | None = None
        self._node: ClusterNode | None = None
        self._state = DatabaseState.CONNECTING
        self._since = self._now()
        self._trouble: str | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._wake = asyncio.Event()
        self._offers: list[_Offer] = []
        self._watches: dict[str, _Watch] = {}
        """Runs followed to their end, by run id (see `watch`)."""
        self._finishes: list[tuple[RunRecord, int, datetime]] = []
        self._epochs: dict[str, int] = {}
        """The node's claims epoch (`ClusterNode.claims_epoch`) each claimed run began in."""
        self._ended_epoch = 0
        """The last epoch whose lapsed runs were ended here."""
        self._nodes: list[NodeRow] = []
        self._drifted: tuple[str, ...] = ()
        self._job_hashes: dict[str, str] = config_hashes(config)[1]
        """This node's hash of each job's definition (`config_hashes`)."""
        self._drift_known = False
        """Whether this node has been seen alive among the nodes, its drift judged: until
        then it offers no slot (one of a job it defines differently would be run)."""
        self._drift_said: set[str] = set()
        self._last_command = -1
        self._listening = False
        """Whether the wake-up connection LISTENs now."""
        self._notified = False
        """Another node wrote a pause, a stop or a run-now since the last full pass."""
        self._pauses_seen: set[tuple[str, str]] | None = None
        self.elsewhere: tuple[RunRecord, ...] = ()
        """The runs due or running on the other nodes, as of the last poll."""

    # --- what front ends see -----------------------------------------------------------

    @property
    def name(self) -> str:
        """This node's name (`settings.cluster.name`, `TUISCHED_NODE_NAME` or the host's)."""
        return self._name

    @property
    def node_id(self) -> str:
        return self._node.node_id if self._node is not None else ""

    def view(self) -> ClusterView:
        node = self._node
        return ClusterView(
            database=self._db.shown, state=self._state, since=self._since,
            node_id=self.node_id, node_state=str(node.state) if node else "joining",
            trouble=self._trouble or (node.trouble if node else None), drifted=self._drifted,
        )  # fmt: skip

    # --- life cycle ------------------------------------------------------------------

    async def open(self) -> None:
        """Connect and migrate, once. A database that is only away now is tried again in
        the background (`start`); any other failure is for the operator to fix.

        Raises:
            ClusterDatabaseError: what to fix (wrong password, no such database, no rights,
                a schema from a newer tuisched...).
        """
        try:
            await self._db.open()
        except DatabaseUnreachableError as error:
            self._trouble = str(error)
            log.warning("cluster: %s; trying again in the background", error)
            return
        self._connected()

    def apply(self, config: Config) -> None:
        """A reload: the new definitions (their hashes go out with the next heartbeat)."""
        self._config = config
        self._job_index = _job_index(config)
        digest, self._job_hashes = config_hashes(config)
        if self._node is not None:
            self._node.update_hashes(digest, self._job_hashes)

    def start(self, host: Host) -> None:
        """Join and begin claiming (tasks of their own: nothing waits here)."""
        self._host = host
        digest, jobs = config_hashes(self._config)
        self._job_hashes = jobs
        self._node = ClusterNode(
            self.store, name=self._name, capacity=self._config.settings.max_workers,
            config_hash=digest, job_hashes=jobs, timing=Timing.of(self.settings),
            running=self._held,
            recover=lambda: [n for n, job in self._config.jobs.items() if job.recover],
            fence=self._fence, clock=self._clock,
        )  # fmt: skip
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._run()), loop.create_task(self._listen())]

    async def stop(self, grace: float) -> None:
        """Write what is left to write (within `grace` s), leave the cluster, close."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._state is DatabaseState.CONNECTED:
            with contextlib.suppress(Exception):
                await within(self._clock, max(grace, 1.0), self._flush_finishes())
        if self._finishes:
            log.warning("cluster: the end of %s could not be written: the reapers will "
                        "close them ABANDONED", counted(len(self._finishes), "run"))  # fmt: skip
        if self._node is not None:
            await self._node.stop()
        with contextlib.suppress(Exception):
            await self._db.close()

    # --- what the engine asks ----------------------------------------------------------

    def offer(self, run: RunRecord, job: Job, *, due_at: datetime | None = None) -> None:
        """Make `run` a due row of the cluster (soon: in the claim loop's task)."""
        self._offers.append(_Offer(run, job, due_at))
        self._wake.set()

    def finished(self, run: RunRecord) -> None:
        """`run` (claimed with its fence) has ended here: write its end, fenced; a MISSED
        slot is recorded unless some node ran it. A run whose claim lapsed while it ran
        (no good heartbeat within the fence: the keeper ended it) is closed ABANDONED,
        as the reapers would, and run again where the job says `recover: true`."""
        epoch, node = self._epochs.pop(run.run_id, None), self._node
        if epoch is not None and node is not None and epoch != node.claims_epoch():
            log.warning("cluster: run %s of %s ended after this node's claims lapsed (no "
                        "heartbeat within the fence): recorded ABANDONED",
                        run.run_id, run.job)  # fmt: skip
            run = dataclasses.replace(
                run, state=RunState.ABANDONED, result=Result.ABANDONED, status=LAPSED
            )
        if run.fence is not None or run.state is RunState.MISSED:
            self._finishes.append((run, run.fence or 0, self._now()))
            self._wake.set()

    def _held(self) -> list[str]:
        """The runs this node holds: claimed and running or queued here, or ended here
        with their end not written yet."""
        held = [run.run_id for run, _, _ in self._finishes]
        return held + (self._host.claimed_ids() if self._host is not None else [])

    def _end_lapsed(self) -> None:
        """End the runs of claims that lapsed (the keeper has, where there is one): a node
        that comes back keeps or ends the runs it held, never both."""
        if self._node is None or self._host is None:
            return
        epoch = self._node.claims_epoch()
        if epoch == self._ended_epoch:
            return
        self._ended_epoch = epoch
        for run_id in self._host.claimed_ids():
            if self._epochs.get(run_id, epoch) != epoch:
                self._host.end_lapsed(run_id)

    # --- the loop ------------------------------------------------------------------------

    async def _run(self) -> None:
        backoff = self.settings.poll.total_seconds()
        node_started = False
        last_beat = last_full = -self._beat_seconds
        poll = self.settings.poll.total_seconds()
        monotonic = self._clock.monotonic
        while True:
            self._end_lapsed()
            if self._state is not DatabaseState.CONNECTED:
                if not await self._reconnect():
                    backoff = min(backoff * 2, MAX_BACKOFF)
                    await self._sleep(backoff)
                    continue
                backoff = self.settings.poll.total_seconds()
            if not node_started and self._node is not None:
                await self._node.start()
                node_started = True
            beat = monotonic() - last_beat >= self._beat_seconds
            full = self._notified or monotonic() - last_full >= poll
            self._notified = False
            try:
                await within(self._clock, CALL_SECONDS, self._pass(beat=beat, full=full))
            except Exception as error:  # an outage is a state; the next pass tries again
                self._lost(error)
                continue
            if beat:
                last_beat = monotonic()
            if full:
                last_full = monotonic()
            await self._sleep(poll)

    async def _listen(self) -> None:
        """Wake the loop when another node writes a pause, a stop or a run-now (NOTIFY
        is a wake-up only: the loop reads the rows, and polls anyway). After each
        (re)connection the loop is woken too, to read what was missed meanwhile."""
        backoff = self.settings.poll.total_seconds()
        while True:
            try:
                connection = await within(self._clock, CALL_SECONDS, self._db.listen(CHANNEL))
            except Exception as error:  # down: the poll goes on; try again later
                log.debug("cluster: LISTEN failed: %s", error)
                await self._clock.sleep(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF)
                continue
            backoff = self.settings.poll.total_seconds()
            self._listening = True
            self._notified = True  # read what was missed while not listening
            self._wake.set()
            try:
                while True:  # a heartbeat's worth of wake-ups, then a check that it lives
                    # (psycopg's own timeout: the socket's wait, in real time)
                    async for _ in connection.notifies(timeout=self._beat_seconds):
                        self._notified = True
                        self._wake.set()
                    await within(self._clock, CALL_SECONDS, connection.execute("SELECT 1"))
            except Exception as error:  # lost, or silent: LISTEN again on a new connection
                said = str(error).strip().splitlines()[0] if str(error).strip() else "no answer"
                log.info("cluster: the wake-up connection was lost (%s): listening again", said)
            finally:
                self._listening = False
                with contextlib.suppress(Exception):
                    await connection.close()

    @property
    def _beat_seconds(self) -> float:
        return self.settings.heartbeat.total_seconds()

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await within(self._clock, seconds, self._wake.wait())
        self._wake.clear()

    async def _pass(self, *, beat: bool, full: bool) -> None:
        """One round: offers, ends and claims; with `full` (each poll, and when another
        node wrote a pause, stop or run-now) pauses, commands and the other nodes'
        runs; with `beat` the nodes, drift and lost claims."""
        if beat or not self._drift_known:
            self._nodes = await self.store.nodes()
            if self._node is not None and self._node.state is NodeState.ALIVE:
                await self._judge_drift(self._node.node_id)
            if self._host is not None:  # upstream runs on other nodes are not on this bus
                await self._host.recheck_waiting()
            if self._node is not None and self._node.state is NodeState.ALIVE:
                lost = await self.store.hand_back_unknown(self._node.node_id, self._held())
                if lost:
                    log.warning("cluster: %s whose reply was lost given back: %s",
                                counted(len(lost), "claim"), ", ".join(lost))  # fmt: skip
        await self._flush_offers()
        await self._flush_finishes()
        if full:
            await self._read_control()
        await self._claim()
        if full:
            rows = await self.store.in_progress(exclude=self.node_id)
            names = {node.node_id: node.name for node in self._nodes}
            self.elsewhere = tuple(elsewhere_run(row, names) for row in rows)
            await self._check_watches()

    async def _judge_drift(self, node_id: str) -> None:
        """Which jobs this node defines differently from the cluster (it neither claims
        nor offers their slots), and close the due runs of jobs no live node runs."""
        if not any(row.node_id == node_id and row.state == "alive" for row in self._nodes):
            return  # not seen joined yet
        drifted = drifted_jobs(node_id, self._nodes)
        if drifted != self._drifted:
            self._drift_said.clear()
            if drifted:
                log.warning("cluster: this node defines %s differently from the cluster: "
                            "it does not run them", ", ".join(drifted))  # fmt: skip
        self._drifted, self._drift_known = drifted, True
        unrun = unrun_jobs(await self.store.due_jobs(), self._nodes)
        if unrun and (closed := await self.store.close_unrun(unrun)):
            log.warning("cluster: %s of %s closed: no live node runs them",
                        counted(closed, "due run"), ", ".join(unrun))  # fmt: skip

    async def _flush_offers(self) -> None:
        """Slots in one statement (every node inserts them: one round trip a pass), then
        the runs asked for by hand one by one. Kept until the database takes them; none
        before this node's drift is known, and no slot of a job it defines differently."""
        if not self._drift_known:
            return
        now = self._now()
        slots: list[_Offer] = []
        others: list[_Offer] = []
        backfills: list[_Offer] = []
        too_late: dict[str, list[datetime]] = {}
        for offer in self._offers:
            run = offer.run
            late = now - run.slot if run.slot is not None else timedelta(0)
            if run.trigger is Trigger.SCHEDULE and late > offer.job.grace:
                assert run.slot is not None  # noqa: S101  (late: it has a slot)
                too_late.setdefault(run.job, []).append(run.slot)
            elif run.slot is not None and run.job in self._drifted:
                if run.job not in self._drift_said:  # once per job and drift
                    self._drift_said.add(run.job)
                    log.warning("cluster: no slot of %s is offered from this node: it defines "
                                "the job differently from the cluster", run.job)  # fmt: skip
            elif run.trigger is Trigger.BACKFILL:
                backfills.append(offer)
            else:
                (others if run.slot is None else slots).append(offer)
        self._offers = []  # offers made while this pass awaits wait for the next one
        for job, passed in too_late.items():  # one line a job, however long the outage
            log.warning("cluster: %s of %s from %s to %s not offered: the database "
                        "was away past the job's grace (any other node may have run them)",
                        counted(len(passed), "slot"), job, min(passed), max(passed))  # fmt: skip
        try:
            while backfills:
                await self._offer_backfill(backfills[0])
                backfills.pop(0)
            if slots:
                await self.store.materialize_many([self._due(offer) for offer in slots])
                self._offered(offer.run.run_id for offer in slots)
                slots = []
            while others:  # run now, or a retry or dependant of one: here if this node
                run, due_at = others[0].run, others[0].due_at  # has a worker free in time
                await self.store.request(
                    run.job, key=run.run_id, run_id=run.run_id, trigger=str(run.trigger),
                    attempt=run.attempt, due_at=due_at, preferred=self.node_id or None,
                )  # fmt: skip
                self._offered([run.run_id])
                others.pop(0)
        finally:
            self._offers = backfills + slots + others + self._offers

    def _due(self, offer: _Offer) -> Due:
        run = offer.run
        assert run.slot is not None  # noqa: S101  (slots only)
        # Only a node that defines the job as this one does claims it: never prefer another.
        mine = self._job_hashes.get(run.job)
        nodes = [node for node in self._nodes if node.job_hashes.get(run.job) == mine]
        preferred = preferred_node(run.job, run.slot, nodes, index=self._job_index.get(run.job, 0))
        return Due(
            run_id=run.run_id, job=run.job, slot=run.slot, trigger=str(run.trigger),
            attempt=run.attempt, due_at=offer.due_at, preferred=preferred,
        )  # fmt: skip

    async def _flush_finishes(self) -> None:
        while self._finishes:
            run, fence, since = self._finishes[0]
            if self._now() - since > FINISH_RETRIES_FOR:
                log.warning("cluster: gave up writing the end of run %s", run.run_id)
                self._finishes.pop(0)
                continue
            if run.state is RunState.MISSED:
                assert run.slot is not None  # noqa: S101  (a missed run is a slot's)
                await self.store.record_missed(run.job, run.slot, run.reason,
                                               status=run.status, run_id=run.run_id)  # fmt: skip
                self._finishes.pop(0)
                continue
            if run.state is RunState.ABANDONED:
                job = self._config.jobs.get(run.job)
                await self.store.abandon(run.run_id, fence, status=LAPSED,
                                         recover=job is not None and job.recover)  # fmt: skip
                self._finishes.pop(0)
                continue
            if run.state is RunState.NOT_STARTED and run.result is Result.SHUTDOWN:
                await self.store.hand_back(run.run_id, fence)  # never started: another node
                self._finishes.pop(0)
                continue
            written = await self.store.finish(
                run.run_id, fence, state=state_of(run), result=str(run.result or ""),
                status=run.status or run.reason, exit_code=run.exit_code,
            )  # fmt: skip
            if not written:
                log.warning("cluster: late result of run %s (%s) not recorded: the run was "
                            "taken from this node (fence %d is no longer current)",
                            run.run_id, run.job, fence)  # fmt: skip
            self._finishes.pop(0)

    async def _read_control(self) -> None:
        host = self._host
        if host is None:
            return
        pauses = await self.store.pauses()
        if pauses != self._pauses_seen:
            self._pauses_seen = pauses
            await host.pauses_seen(pauses)
        commands = await self.store.commands(self._last_command)
        if self._last_command < 0:
            self._last_command = commands[0][0] if commands else 0
            return
        for command_id, verb, run_id in commands:
            self._last_command = command_id
            if verb == "stop" and host.stop_here(run_id):
                log.info("cluster: stopping run %s as asked from another node", run_id)

    async def _claim(self) -> None:
        host, node = self._host, self._node
        if host is None or node is None or not node.may_claim:
            return
        free = host.free_workers()
        jobs = [job for job in host.claimable() if job.name not in self._drifted]
        exclusive = [job.name for job in jobs if job.overlap is not Overlap.ALLOW]
        skip = [job.name for job in jobs if job.overlap is Overlap.SKIP]
        if free <= 0:
            if skip:
                await self.store.claim(node.node_id, free=0, lease=self.settings.lease,
                                       steal_after=self.settings.steal_after,
                                       jobs=(), skip=skip)  # fmt: skip
            return
        claims = await self.store.claim(
            node.node_id, free=free, lease=self.settings.lease,
            steal_after=self.settings.steal_after, jobs=[job.name for job in jobs],
            exclusive=exclusive, skip=skip,
        )  # fmt: skip
        for claim in claims:
            self._epochs[claim.run_id] = node.claims_epoch()
            host.start_claimed(claim)

    # --- runs followed wherever they run: backfill and the ledger (issue 16) -------------

    def watch(self, run: RunRecord, job: Job, ended: Ended) -> None:
        """Call `ended` once with the last attempt of `run` (a run of a slot this node
        offered) when it has ended on whichever node ran it, its retries too; or with
        `run` itself, NOT_STARTED, when its row was refused or is gone. Checked every
        poll (the other nodes' ends are not on this node's bus)."""
        self._watches[run.run_id] = _Watch(
            run=run, ended=ended, retries=job.retries,
            retry_wait=job.retry_delay + self.settings.lease + 2 * self.settings.poll,
        )  # fmt: skip

    def unwatch(self, run_id: str) -> None:
        """Stop following `run_id` (its end was heard here)."""
        self._watches.pop(run_id, None)

    def _offered(self, run_ids: Iterable[str]) -> None:
        for run_id in run_ids:
            watch = self._watches.get(run_id)
            if watch is not None:
                watch.offered = True

    async def _offer_backfill(self, offer: _Offer) -> None:
        """A backfill run's row, unless its slot is on its way already (some node's backfill
        took it): then the run is over before it began."""
        run = offer.run
        if await self.store.offer_backfill(self._due(offer)):
            self._offered([run.run_id])
            return
        log.info("cluster: backfill of %s at %s left out: another backfill runs that slot",
                 run.job, run.slot)  # fmt: skip
        self._gone(run.run_id, "left out: another backfill runs this slot")

    def _gone(self, run_id: str, why: str) -> None:
        watch = self._watches.pop(run_id, None)
        if watch is not None:
            watch.ended(dataclasses.replace(
                watch.run, state=RunState.NOT_STARTED, result=Result.SKIPPED, status=why
            ))  # fmt: skip

    async def _check_watches(self) -> None:
        if not self._watches:
            return
        watches = list(self._watches.values())
        keys = {(w.run.job, w.run.slot, str(w.run.trigger)) for w in watches if w.run.slot}
        now, rows = await self.store.slot_runs(sorted(keys))
        for watch in watches:
            run = watch.run
            if self._watches.get(run.run_id) is not watch:
                continue  # heard here meanwhile
            found = [r for r in rows if (r["job"], r["slot"], r["trigger"]) == (
                run.job, run.slot, str(run.trigger))]  # fmt: skip
            last = last_attempt(run.run_id, found, retries=watch.retries,
                                retry_wait=watch.retry_wait, now=now)  # fmt: skip
            if last is not None:
                del self._watches[run.run_id]
                watch.ended(run_of_row(last))
            elif watch.offered and not any(r["run_id"] == run.run_id for r in found):
                self._gone(run.run_id, "its row is not in the cluster's table")


def _job_index(config: Config) -> dict[str, int]:
    """Each job's place among the jobs in name order (the same on every node)."""
    return {name: index for index, name in enumerate(sorted(config.jobs))}
