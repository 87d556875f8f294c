"""The engine: fires every job's slots, queues runs, runs them, records every step.

It is made of parts, each in its own module, wired here:

    firing      APScheduler in its thread; due slots to the loop in batches; grace, MISSED
    catchup     slots missed while the scheduler was down; `misfire: once`
    dispatch    the run queue: `overlap`, priorities, `max_workers`
    running     runs holding a worker: launch, output, timeout, stop, their end
    lane        python functions on job threads that take the next run themselves
    turn        what starts and ends in a turn of the loop, recorded in one pass
    retries     failed runs tried again `retry_delay` later
    waiting     runs WAITING for their `requires` (R9)
    pauses      jobs, groups or everything paused, kept across restarts
    outcomes    closed runs written to the history and published on the bus

Everything runs on the event loop's thread except APScheduler's own and the
job threads (which touch only the run queue and their own runs, under the
queue's lock), and every time and timer comes from the injected `Clock`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import logging
import sys
from collections.abc import Coroutine
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuisched.domain.bus import EventBus
from tuisched.domain.errors import JobActionError, Refusal, RunRefusedError, TuischedError
from tuisched.domain.model import Config, Job, Overlap, PythonSpec
from tuisched.domain.reasons import PauseNote
from tuisched.domain.runs import Result, RunRecord, RunState, Trigger, new_run_id
from tuisched.runtime.clock import Clock, SystemClock
from tuisched.runtime.engine.catchup import Submit, record_missed, record_paused
from tuisched.runtime.engine.dispatch import Dispatcher
from tuisched.runtime.engine.firing import LOADS_PER_STEP, SlotFiring
from tuisched.runtime.engine.lane import Lane
from tuisched.runtime.engine.outcomes import Outcomes
from tuisched.runtime.engine.pauses import Pause, Pauses, is_paused
from tuisched.runtime.engine.retries import Retries
from tuisched.runtime.engine.running import Workers
from tuisched.runtime.engine.runqueue import RunQueue
from tuisched.runtime.engine.waiting import WaitingRoom
from tuisched.runtime.execution.descendants import Descendants
from tuisched.runtime.execution.keeper import Keeper
from tuisched.runtime.execution.python import import_soon, keep_job_threads
from tuisched.runtime.store import AsyncHistory

if TYPE_CHECKING:  # cluster mode only: they import psycopg (the `postgres` extra)
    from tuisched.runtime.cluster.link import ClusterLink
    from tuisched.runtime.cluster.store import Claim

SHUTTING_DOWN = "the scheduler is shutting down"
log = logging.getLogger(__name__)


class Engine:
    """Fires slots, queues runs, runs them, records every step on the bus and in history."""

    def __init__(
        self,
        config: Config,
        *,
        bus: EventBus,
        history: AsyncHistory,
        node: str,
        output_dir: Path,
        clock: Clock | None = None,
        kill_grace: float = 5.0,
        descendants: Descendants | None = None,
        keeper: Keeper | None = None,
        cluster: ClusterLink | None = None,
    ) -> None:
        """`descendants` follows the processes of runs (a fresh one, not recorded, if None);
        `keeper` holds each run's process group while it runs (see `execution.keeper`);
        with `cluster`, runs ready to queue are offered to the cluster, and this node runs
        the ones it claims (see `cluster.link`)."""
        self.config = config
        self.cluster = cluster
        self.node = node
        self._clock = clock = clock or SystemClock()
        self._history = history
        self._kill_grace = kill_grace
        self._accepting = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._outcomes = outcomes = Outcomes(bus=bus, history=history, clock=clock, node=node)
        if cluster is not None:
            outcomes.ended = cluster.finished
        current = lambda: self.config  # noqa: E731  (each part reads the config in force)
        self._firing = SlotFiring(
            config=current, clock=clock, outcomes=outcomes,
            submit=self._submit_slots,
            fires=lambda job: self._accepting and not self._pauses.holds(job),
            paused_since=lambda job: self._pauses.held_since(job),  # noqa: PLW0108  (made below)
        )  # fmt: skip
        self._pauses = Pauses(
            history=history, outcomes=outcomes, clock=clock, config=current,
            changed=self._firing.set_paused,
            # Each job in a task of its own: resuming 10,000 jobs never stalls the loop. In a
            # cluster every node records them; the cluster's table keeps one row per slot.
            resumed=lambda job, since, now: self._spawn(record_paused(job, since, now, outcomes)),
        )  # fmt: skip
        self._retries = Retries(
            clock=clock, config=current, outcomes=outcomes, accepting=lambda: self._accepting,
            resubmit=lambda job, run: self.submit(
                job, slot=run.slot, trigger=run.trigger, attempt=run.attempt + 1
            ),
        )  # fmt: skip
        queue = RunQueue()
        self._dispatcher = dispatcher = Dispatcher(
            config=current, history=history, outcomes=outcomes, clock=clock,
            accepting=lambda: self._accepting, queue=queue,
            start=lambda active: self._workers.start(active),  # noqa: PLW0108  (made below)
        )  # fmt: skip
        self._workers = Workers(
            config=current, dispatcher=dispatcher, retries=self._retries,
            outcomes=outcomes, history=history, clock=clock, output_dir=output_dir,
            kill_grace=kill_grace, descendants=descendants, keeper=keeper,
            lane=lambda heard: Lane(
                queue=queue, history=history, clock=clock, heard=heard,
                backlogged=dispatcher.backlogged,
            ),
        )  # fmt: skip
        self.waiting_room = WaitingRoom(
            history=history, bus=bus, config=current, admit=self._admit, clock=clock,
            give_up=lambda run, reason: outcomes.not_started(
                run, Result.DEPENDENCY, reason, recorded=True
            ),
            unmet=cluster.unmet if cluster is not None else None,
        )  # fmt: skip

    # --- life cycle ------------------------------------------------------------

    async def start(self, *, down_since: datetime | None = None, fire: bool = True) -> None:
        """Record slots missed since `down_since`, then start firing.

        With `fire` False the engine runs only what it is asked to (`run_now`,
        dependants): no slot fires, and WAITING runs of earlier schedulers are
        left alone (`tuisched run` in the foreground).
        """
        self._accepting = True
        self._workers.lane.open(accepting=True)
        _share_the_interpreter_finely()
        await self._pauses.load()
        if not fire:
            return
        self.waiting_room.start()
        rows = await self._history.call(lambda store: store.unfinished(self.node))
        await _take_back_waiting(rows, self.config, self.waiting_room, self._outcomes)
        now = self._clock.now()
        if self.cluster is not None:
            self.cluster.start(_ClusterHost(self, self._pauses))
            if down_since is not None:  # once the database answers: what the cluster ran
                self._spawn(_record_missed_in_cluster(
                    self.cluster, self.config, since=down_since, now=now,
                    history=self._history, outcomes=self._outcomes,
                    submit=lambda job, slot, trigger: self.submit(job, slot=slot, trigger=trigger),
                ))  # fmt: skip
        elif down_since is not None:
            await record_missed(
                self.config, since=down_since, now=now, history=self._history,
                outcomes=self._outcomes,
                submit=lambda job, slot, trigger: self.submit(job, slot=slot, trigger=trigger),
            )  # fmt: skip
        # Slots after `now` fire; those up to `now` were just recorded as missed.
        jobs = [(job, self._pauses.holds(job)) for job in self.config.jobs.values()]
        held = await self._history.latest_slots()
        await self._firing.start(jobs, now, held)
        _import_functions(self.config)
        _keep_out_of_collection()

    def stop_firing(self) -> None:
        """Start no more runs (slots, dependants, waiting runs); runs in progress go on."""
        self._accepting = False
        self._workers.lane.open(accepting=False)
        self.waiting_room.stop()
        self._firing.stop()

    async def drain(self, grace: float) -> None:
        """Stop firing; give running runs `grace` seconds, then stop them (SHUTDOWN).

        WAITING runs stay WAITING in the history: the next start takes them back.
        """
        self.stop_firing()
        self._retries.drop_all()  # the retries will not come: each failure is the outcome
        self._dispatcher.cancel("the scheduler shut down before it started")
        _, pending = await self._clock.wait({*self._workers.tasks, *self._tasks}, grace)
        self.stop_all(Result.SHUTDOWN)
        # Stopped runs get their kill grace to end, and a margin.
        await self._clock.wait(pending, self._kill_grace + 5)

    @property
    def accepting(self) -> bool:
        """True while new runs may start."""
        return self._accepting

    @property
    def busy(self) -> bool:
        """Whether anything is in progress: runs queued, running or waiting, retries to come."""
        return bool(
            self._dispatcher.active
            or self._dispatcher.queued()
            or self.waiting_room.runs()
            or len(self._retries)
            or self._tasks
        )

    # --- what the engine holds -----------------------------------------------------

    def running(self) -> list[RunRecord]:
        """Runs holding a worker now."""
        return [active.run for active in self._dispatcher.active.values()]

    def queued(self) -> list[RunRecord]:
        """Runs waiting for a worker, in leaving order, then backlogged ones."""
        return self._dispatcher.queued()

    def waiting(self) -> list[RunRecord]:
        """Runs WAITING for their requirements."""
        return self.waiting_room.runs()

    def live_status(self, run_id: str) -> str:
        """What a running run says of itself now (a python job's `status`), or ""."""
        return self._workers.live_status(run_id)

    def next_fire(self, name: str) -> datetime | None:
        """When `name` fires next; None when paused, finished, manual or `after` a job."""
        return self._firing.next_fire(name)

    # --- configuration ----------------------------------------------------------

    async def apply(self, config: Config) -> None:
        """Schedule `config` instead of the current one. Runs in progress go on.

        A few hundred jobs are looked at per loop iteration, so a reload that
        changes 40,000 jobs never stalls the loop.
        """
        old = self.config
        self.config = config
        now = self._clock.now()
        for name in old.jobs.keys() - config.jobs.keys():
            self._firing.unload(name)
            self._cancel_job("its job was deleted", name)
        for count, (name, job) in enumerate(config.jobs.items(), start=1):
            if count % LOADS_PER_STEP == 0:
                await asyncio.sleep(0)
            if old.jobs.get(name) != job:
                self._firing.unload(name)
                self._firing.load(job, now, paused=self._pauses.holds(job))
                self._rewait(job)
            if not job.enabled:
                self._cancel_job("its job was disabled", name)
        if self.cluster is not None:
            self.cluster.apply(config)
        # max_workers may have shrunk (job threads then give workers back) or grown.
        self._workers.lane.shrink(len(self._dispatcher.active) - config.settings.max_workers)
        self._dispatcher.dispatch()
        _import_functions(config)
        _keep_out_of_collection()

    # --- runs ---------------------------------------------------------------------

    def run_now(self, name: str, *, queue: bool = False) -> RunRecord:
        """Queue a manual run of the job called `name`, decided at once: it is taken now
        or refused, never recorded as not started. With `queue`, it waits behind the
        job's run in progress where `overlap: skip` would refuse it.

        In cluster mode this node refuses for the runs it holds; a run of the job on
        another node is seen by the node that claims the new run, which skips it under
        `skip` (so a `skip` job's run cannot wait behind another there: `queue` is
        refused).

        Raises:
            UnknownJobError: no job by that name.
            RunRefusedError: the scheduler shuts down, or the job's overlap rule does not
                take another run now.
        """
        job = self.config.job(name)
        if not self._accepting:
            raise RunRefusedError(Refusal(job=name, reason=SHUTTING_DOWN))
        refusal = self._dispatcher.refusal(job, behind=queue)
        if self.cluster is not None and job.overlap is Overlap.SKIP:
            refusal = _in_cluster(job, refusal, queue=queue)
        if refusal is not None:
            raise RunRefusedError(refusal)
        return self.submit(job, slot=None, trigger=Trigger.MANUAL, behind=queue)

    def submit(
        self, job: Job, *, slot: datetime | None, trigger: Trigger, attempt: int = 0,
        run_id: str | None = None, behind: bool = False,
    ) -> RunRecord:  # fmt: skip
        """Create a run of `job` (called `run_id`, if given) and queue it, or record why it
        cannot run; `behind`: it waits behind the job's run in progress where `overlap:
        skip` would skip it."""
        run = RunRecord(
            run_id=run_id or new_run_id(), job=job.name, slot=slot, trigger=trigger,
            state=RunState.QUEUED, queued_at=self._clock.now(), node=self.node, attempt=attempt,
        )  # fmt: skip
        if not self._accepting:
            return self._outcomes.not_started(run, Result.SHUTDOWN, SHUTTING_DOWN)
        if job.requires and slot is not None and trigger is not Trigger.MANUAL and attempt == 0:
            self._spawn(self.waiting_room.enter(run, job))  # R9: may wait for upstream slots
            return run
        return self._queue(run, job, behind=behind)

    def _submit_slots(self, due: list[tuple[Job, datetime]]) -> None:
        """`submit` a scheduled run of each (job, slot), queued together (a burst of slots
        due at once costs one history batch and one publication)."""
        now = self._clock.now()
        queued: list[tuple[RunRecord, Job]] = []
        for job, slot in due:
            if self.cluster is not None or job.requires or not self._accepting:
                self.submit(job, slot=slot, trigger=Trigger.SCHEDULE)  # one at a time
                continue
            run = RunRecord(
                run_id=new_run_id(), job=job.name, slot=slot, trigger=Trigger.SCHEDULE,
                state=RunState.QUEUED, queued_at=now, node=self.node,
            )  # fmt: skip
            queued.append((run, job))
        if queued:
            self._workers.take_in()  # workers job threads gave back are free for these
            self._dispatcher.enqueue_many(queued)

    def _queue(
        self, run: RunRecord, job: Job, *, recorded: bool = False, behind: bool = False
    ) -> RunRecord:
        """Queue `run` here, or in cluster mode offer it to the cluster (the node that
        claims it runs it)."""
        if self.cluster is None:
            return self._dispatcher.enqueue(run, job, recorded=recorded, behind=behind)
        if recorded:  # its WAITING row here: the run now lives in the cluster's table
            self._spawn(self._history.call(lambda store: store.delete(run.run_id)))
        self.cluster.offer(run, job)
        return run

    def take_claim(self, claim: Claim) -> None:
        """Run a run this node claimed from the cluster (under its fence)."""
        assert self.cluster is not None  # noqa: S101  (claims come from the cluster)
        job = self.config.jobs.get(claim.job)
        run = RunRecord(
            run_id=claim.run_id, job=claim.job, slot=claim.slot, trigger=Trigger(claim.trigger),
            state=RunState.QUEUED, queued_at=self._clock.now(), node=self.cluster.node_id,
            attempt=claim.attempt, fence=claim.fence,
        )  # fmt: skip
        if job is None or not job.enabled:
            self._outcomes.not_started(run, Result.STOPPED, "its job was deleted or disabled")
            return
        self._dispatcher.enqueue(run, job)

    def record_not_started(
        self, job: Job, *, slot: datetime | None, trigger: Trigger, result: Result, reason: str
    ) -> RunRecord:
        """Record that a run of `job` could not begin (e.g. its upstream failed)."""
        run = RunRecord(
            run_id=new_run_id(), job=job.name, slot=slot, trigger=trigger,
            state=RunState.QUEUED, queued_at=self._clock.now(), node=self.node,
        )  # fmt: skip
        return self._outcomes.not_started(run, result, reason)

    def stop_run(self, run_id: str, *, kill: bool = False) -> None:
        """Stop a queued, waiting or running run (SIGTERM, or SIGKILL at once with `kill`)."""
        active = self._dispatcher.active.get(run_id)
        if active is not None:
            self._workers.stop(active, Result.STOPPED, kill=kill)
            return
        waiting = self.waiting_room.remove(run_id)
        if waiting is not None:
            reason = "stopped while waiting"
            self._outcomes.not_started(waiting, Result.STOPPED, reason, recorded=True)
            return
        run = self._dispatcher.take(run_id)
        if run is None and self._workers.stop_in_flight(run_id, Result.STOPPED, kill=kill):
            return  # a job thread took it this moment: it will not start
        if run is None:
            raise JobActionError(f"no run '{run_id}' is queued, waiting or running")
        reason = "stopped before it started"
        self._outcomes.not_started(run, Result.STOPPED, reason, recorded=True)

    def stop_all(self, result: Result, *, kill: bool = False) -> None:
        """Stop every running run, recording `result` (e.g. SHUTDOWN)."""
        for active in list(self._dispatcher.active.values()):
            self._workers.stop(active, result, kill=kill)

    async def stop_anywhere(self, run_id: str, *, kill: bool = False) -> None:
        """Stop a run here (see `stop_run`), or in cluster mode wherever it is: a due one
        is closed, a running one's node gets a stop command (`kill` is its own call).

        Raises:
            JobActionError: no such run in progress. ClusterDatabaseError: the database
                did not take the command.
        """
        mine = {run.run_id for run in (*self.running(), *self.queued(), *self.waiting())}
        if self.cluster is None or run_id in mine:
            self.stop_run(run_id, kill=kill)
            return
        if await self.cluster.stop_run(run_id) is None:
            raise JobActionError(f"no run '{run_id}' is due or running in the cluster")

    # --- pauses -------------------------------------------------------------------

    def is_paused(self, job: Job) -> bool:
        """Whether `job` is paused: itself, through one of its groups, or everything."""
        return self._pauses.holds(job)

    @property
    def pauses(self) -> frozenset[Pause]:
        """Pauses in force, as (kind, name)."""
        return self._pauses.in_force

    async def set_paused(self, kind: str, name: str, *, paused: bool, actor: str = "") -> None:
        """Pause or resume a job, a group (`kind` "group") or everything (`kind` "all");
        `actor` is who did it, for the job's "why not running" line.

        Raises:
            UnknownJobError: no such job. JobActionError: no such group.
            ClusterDatabaseError: in cluster mode, the database did not take it.
        """
        if self.cluster is None:
            await self._pauses.set(kind, name, paused=paused, actor=actor)
            return
        pause = (kind, self._pauses.check(kind, name, paused=paused))
        held = [job.name for job in self.config.jobs.values() if is_paused(job, {pause})]
        # The link may read the cluster's pauses between the write and the change here (the
        # write's notice wakes it): that is this node's own change, applied below as made
        # here. Taken as heard from another node, a resume would leave its last two polls'
        # slots to the node that resumed (this one), and no node would record them.
        making = {pause, (kind, name)}
        self._pauses.making |= making
        try:
            await self.cluster.set_paused(kind, name, paused=paused, jobs=held)
            await self._pauses.set(kind, name, paused=paused, actor=actor)
        finally:
            self._pauses.making -= making

    # --- waiting (R9) ------------------------------------------------------------------

    def _admit(self, run: RunRecord, job: Job) -> None:
        """The waiting room lets `run` go: queue it (its row may exist, WAITING)."""
        current = self.config.jobs.get(job.name)
        recorded = run.state is RunState.WAITING
        if current is None or not current.enabled:
            reason = "its job was deleted or disabled"
            self._outcomes.not_started(run, Result.STOPPED, reason, recorded=recorded)
            return
        if self.is_paused(current):
            reason = "the job is paused"
            self._outcomes.not_started(run, Result.STOPPED, reason, recorded=recorded)
            return
        self._queue(run, current, recorded=recorded)

    def _rewait(self, job: Job) -> None:
        """A changed job's waiting runs wait again, for what the new definition requires."""
        if job.enabled:
            for run in self.waiting_room.runs_of(job.name):
                self._spawn(self.waiting_room.enter(run, job, recorded=True))

    def _cancel_job(self, reason: str, name: str) -> None:
        """Close the queued, backlogged and waiting runs of a deleted or disabled job."""
        for waiting in self.waiting_room.runs_of(name):
            self._outcomes.not_started(waiting, Result.STOPPED, reason, recorded=True)
        self._dispatcher.cancel(reason, job=name)

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- why not running (R25) ----------------------------------------------------------

    def queue_parts(self) -> tuple[list[RunRecord], dict[str, list[RunRecord]]]:
        """Runs waiting for a worker in leaving order, and each job's backlog."""
        return self._dispatcher.queue_parts()

    def pause_note(self, pause: Pause) -> PauseNote | None:
        """Who set `pause` and when, if this scheduler knows."""
        return self._pauses.notes.get(pause)


def _import_functions(config: Config) -> None:
    """Import the modules of python jobs on threads now, in a job thread, and have a job
    thread per worker waiting: the first runs then start on a job thread by themselves,
    as the next ones do (a burst of 10,000 new jobs would otherwise start its first
    runs through imports, and wait for threads to start)."""
    targets = [
        job.kind.target
        for job in config.jobs.values()
        if job.enabled and isinstance(job.kind, PythonSpec) and job.kind.in_thread
    ]
    if targets:
        import_soon(targets)
        keep_job_threads(config.settings.max_workers)


async def _record_missed_in_cluster(
    cluster: ClusterLink, config: Config, *, since: datetime, now: datetime,
    history: AsyncHistory, outcomes: Outcomes, submit: Submit,
) -> None:  # fmt: skip
    """Slots since this node was last alive that no node of the cluster ran, up to the
    database's clock: a node whose clock is ahead must not record the slots still to
    come as missed (their rows would keep every node from running them)."""
    now = min(now, await cluster.database_now())
    recorded = await cluster.slots_since(since)  # read after: it holds every row to now
    await record_missed(
        config, since=since, now=now, history=history, outcomes=outcomes, submit=submit,
        recorded=recorded,
    )  # fmt: skip


async def _take_back_waiting(
    rows: list[RunRecord], config: Config, room: WaitingRoom, outcomes: Outcomes
) -> None:
    """WAITING runs of a previous instance (among `rows`) go on waiting (R9 survives a
    restart)."""
    for run in rows:
        job = config.jobs.get(run.job)
        if run.state is not RunState.WAITING:
            continue
        if job is None or not job.enabled:
            reason = "its job was deleted or disabled"
            outcomes.not_started(run, Result.STOPPED, reason, recorded=True)
        else:
            await room.enter(run, job, recorded=True)


SWITCH_SECONDS = 0.001
"""How long a thread may hold the interpreter while another waits for it (Python's default
is 5 ms); see `_share_the_interpreter_finely`."""


def _share_the_interpreter_finely() -> None:
    """Hand the interpreter lock over every SWITCH_SECONDS, not every 5 ms.

    The loop, the history's writer and the job threads take turns at it: in a
    burst the writer needs it between two statements and a job thread to take
    its next run, each time waiting a whole switch interval for a busy loop.
    At 1 ms the rows land and the runs start several times sooner (10,000 runs
    due at once: p99 lateness about a third lower), for a little more
    switching; a console hosted in the process hands over as often.
    """
    if sys.getswitchinterval() > SWITCH_SECONDS:
        sys.setswitchinterval(SWITCH_SECONDS)


YOUNG_OBJECTS = 10_000
"""Allocations between two rounds of the cyclic collector over the youngest objects (Python's
default is 700)."""


def _keep_out_of_collection() -> None:
    """What is alive now (the configuration, APScheduler's jobs) lives as long as the schedule:
    kept out of the cyclic collector's rounds, which otherwise rescan it while a burst of
    runs allocates (a fifth of the CPU of 10,000 runs due at once, in two full rounds).
    Reference counting still frees it when a reload replaces it.

    The rounds over young objects come every YOUNG_OBJECTS allocations: a run makes a few
    dozen short-lived objects, freed by reference counting, and at Python's default a
    burst's survivors were rescanned some 200 times (another tenth of its CPU)."""
    gc.freeze()
    young, middle, old = gc.get_threshold()
    if young and young < YOUNG_OBJECTS:
        gc.set_threshold(YOUNG_OBJECTS, middle, old)


class _ClusterHost:
    """The engine as the cluster link sees it (`cluster.link.Host`)."""

    def __init__(self, engine: Engine, pauses: Pauses) -> None:
        self._engine = engine
        self._pauses = pauses

    def free_workers(self) -> int:
        engine = self._engine
        if not engine.accepting:
            return 0
        busy = len(engine.running()) + len(engine.queued())
        return engine.config.settings.max_workers - busy

    def claimed_ids(self) -> list[str]:
        engine = self._engine
        runs = (*engine.running(), *engine.queued())
        return [run.run_id for run in runs if run.fence is not None]

    def start_claimed(self, claim: Claim) -> None:
        self._engine.take_claim(claim)

    def claimable(self) -> list[Job]:
        engine = self._engine
        return [j for j in engine.config.jobs.values() if j.enabled and not engine.is_paused(j)]

    async def recheck_waiting(self) -> None:
        await self._engine.waiting_room.recheck()

    def stop_here(self, run_id: str) -> bool:
        if run_id not in {run.run_id for run in self._engine.running()}:
            return False
        self._engine.stop_run(run_id)
        return True

    def end_lapsed(self, run_id: str) -> None:
        with contextlib.suppress(JobActionError):  # it ended meanwhile
            self._engine.stop_run(run_id, kill=True)

    async def pauses_seen(self, pauses: set[tuple[str, str]]) -> None:
        """The cluster's pauses: made this node's too (wider pauses first)."""
        engine = self._engine
        local = set(engine.pauses)
        own = self._pauses.making  # this node's own changes, applied as made here
        order = {"all": 0, "group": 1, "job": 2}
        for kind, name in sorted(pauses - local - own, key=lambda p: order.get(p[0], 3)):
            await self._quietly(kind, name, paused=True)
        for kind, name in sorted(local - pauses - own, key=lambda p: -order.get(p[0], 3)):
            await self._quietly(kind, name, paused=False)

    async def _quietly(self, kind: str, name: str, *, paused: bool) -> None:
        cluster = self._engine.cluster
        assert cluster is not None  # noqa: S101  (the cluster's pauses)
        # Heard within a poll or two: the node that resumed fired that stretch's slots, and
        # its rows are in the table once two polls have passed.
        late = 2 * cluster.settings.poll
        try:
            await self._pauses.set(kind, name, paused=paused, heard_after=late)
        except TuischedError as error:  # e.g. a group this node's file does not have
            log.debug("cluster pause %s %s not applied here: %s", kind, name, error)


def _in_cluster(job: Job, refusal: Refusal | None, *, queue: bool) -> Refusal | None:
    """What a cluster's node says of a run of the `skip` job `job`: the cluster skips it
    while another run holds the job, on any node, so it cannot wait behind one."""
    if refusal is not None:
        return dataclasses.replace(refusal, queueable=False)
    if queue:
        return Refusal(
            job=job.name, reason="cannot wait behind a run in cluster mode (overlap: skip)"
        )
    return None
