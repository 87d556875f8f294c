"""The control seam in-process: a front end in the same process as the scheduler.

Queries read the live runtime on the loop thread (cheap: in memory) or off it
(files, the history, parsing a configuration); commands go through the
runtime's own operations, recorded in the actions log as this control's actor.

The runtime runs on a lane of its own (`LoopThread`, SPEC R26) while the front
end keeps its own loop: every query and command runs on the lane and answers
on the caller's loop, and events reach a subscriber on the loop it subscribed
from. A control with no lane (tests that drive a runtime on their own loop)
runs everything where it is called.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import logging
import os
import threading
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Collection, Coroutine, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from tuisched.domain.config.diff import config_diff
from tuisched.domain.config.impact import edit_impact
from tuisched.domain.errors import (
    ClusterDatabaseError,
    ConfigError,
    EventsLostError,
    JobActionError,
    SchedulerNotRunningError,
    TuischedError,
    UnknownRunError,
)
from tuisched.domain.events import Event
from tuisched.domain.model import Config, Job
from tuisched.domain.runs import RunRecord
from tuisched.domain.schedule.describe import job_status, pause_views
from tuisched.domain.schedule.simulate import simulate
from tuisched.domain.schedule.slots import next_slot
from tuisched.domain.stats import stats_history_query, stats_of_runs
from tuisched.domain.text import counted
from tuisched.domain.views import (
    AuditChunk,
    BackfillPlan,
    ConfigChange,
    ConfigEdit,
    EditAction,
    EditImpact,
    EditTarget,
    GroupStatus,
    HistoryQuery,
    HistoryStats,
    JobPlan,
    JobStatus,
    MissedChoice,
    MissedSlots,
    NodeView,
    OutputChunk,
    OutputMatch,
    OutputPage,
    Pause,
    PauseKind,
    PendingEdit,
    RunStatus,
    SchedulerState,
    SchedulerStatus,
    Simulation,
    StatsQuery,
)
from tuisched.runtime.cluster.rules import cluster_text
from tuisched.runtime.configfiles import parse_config
from tuisched.runtime.configtext import read_config_text
from tuisched.runtime.control.reading import (
    audit_chunk,
    job_plan,
    output_chunk,
    output_line,
    output_page,
    output_search,
)
from tuisched.runtime.control.seam import (
    AUDIT_LINES,
    OUTPUT_CHUNK_BYTES,
    PAGE_LINES,
    Subscription,
)
from tuisched.runtime.document import ConfigDocument
from tuisched.runtime.engine.engine import Engine
from tuisched.runtime.engine.standing import JobStanding
from tuisched.runtime.engine.waiting import requirements_of
from tuisched.runtime.loopthread import LoopThread
from tuisched.runtime.runtime import Runtime
from tuisched.runtime.store.stats import read_stats
from tuisched.runtime.threads import Lane, in_thread

_LIVE = frozenset({SchedulerState.RUNNING, SchedulerState.STOPPING})
"""States in which the engine exists and answers."""
JOBS_PER_TURN = 1_000
"""Job statuses built per turn of the lane's loop: listing 100,000 never stalls it."""

log = logging.getLogger(__name__)

T = TypeVar("T")
C = TypeVar("C", bound=type)


def _on_lane(cls: C) -> C:
    """Run every public coroutine method of `cls` on the runtime's lane, wherever it is
    awaited: the answer comes back to the caller's loop. The methods `cls` names in
    `_AFTER_START` first wait for a start under way."""
    after_start = vars(cls).get("_AFTER_START", frozenset())
    for name, member in list(vars(cls).items()):
        if not name.startswith("_") and inspect.iscoroutinefunction(member):
            setattr(cls, name, _crossing(member, after_start=name in after_start))
    return cls


def _crossing(
    method: Callable[..., Coroutine[Any, Any, T]], *, after_start: bool
) -> Callable[..., Coroutine[Any, Any, T]]:
    @functools.wraps(method)
    async def crossing(self: LocalQueries, *args: Any, **kwargs: Any) -> T:
        if after_start and self._started is not None:
            await self._started()
        work = method(self, *args, **kwargs)
        return await (self._lane.run(work) if self._lane is not None else work)

    return crossing


@_on_lane
class LocalQueries:
    """`SchedulerQueries` over a runtime in this process."""

    def __init__(
        self,
        runtime: Runtime,
        *,
        lane: LoopThread | None = None,
        started: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """`lane`: the thread and loop the runtime runs on (None: the caller's own).
        `started`: waits for a start of the scheduler under way (a command given while
        the scheduler starts acts once it has started, not refused)."""
        self._runtime = runtime
        self._lane = lane
        self._started = started

    def _engine(self) -> Engine:
        """The engine, while the scheduler runs or drains."""
        if self._runtime.state not in _LIVE:
            raise SchedulerNotRunningError(f"the scheduler is {self._runtime.state}")
        return self._runtime.engine

    async def status(self) -> SchedulerStatus:
        runtime = self._runtime
        config, state = runtime.config, runtime.state
        engine = runtime.engine if state in _LIVE else None
        lag = runtime.watchdog.report()
        source = runtime.source
        return SchedulerStatus(
            config_path=config.path,
            node=runtime.node,
            timezone=config.settings.timezone.key,
            state=state,
            jobs=len(config.jobs),
            groups=len(config.groups),
            running=len(engine.running()) if engine else 0,
            queued=len(engine.queued()) if engine else 0,
            waiting=len(engine.waiting()) if engine else 0,
            pauses=pause_views(engine.pauses) if engine else (),
            offline_edit=source is not None and source.pending is not None,
            can_undo=source is not None and source.can_undo,
            last_seq=runtime.bus.last_seq,
            loop_lag=lag.recent,
            lag_episodes=lag.episodes,
            pid=os.getpid() if state in _LIVE else 0,
            started_at=runtime.started_at,
            cluster=cluster_text(runtime.cluster.view()) if runtime.cluster else "",
        )

    async def jobs(self, names: Collection[str] | None = None) -> tuple[JobStatus, ...]:
        """Built JOBS_PER_TURN at a time, the lane's loop free in between once slots may
        fire. While the scheduler starts, from the configuration and the last runs alone
        (`starting`); before its engine is built, in one go: nothing can run late, and the
        console's first frame waits for these (100,000 jobs: about 1 s, instead of twice
        that taking turns with the engine's loading)."""
        runtime, config = self._runtime, self._runtime.config
        selected = (
            list(config.jobs.values())
            if names is None
            else [config.jobs[name] for name in names if name in config.jobs]
        )
        statuses: list[JobStatus] = []
        for first in range(0, len(selected), JOBS_PER_TURN):
            chunk = selected[first : first + JOBS_PER_TURN]
            if first and runtime.firing:
                await asyncio.sleep(0)  # runs due meanwhile start now, not after the last job
            if runtime.state is SchedulerState.STARTING:
                statuses += self._starting(chunk)
            else:
                statuses += self._statuses(self._engine(), chunk)
        return tuple(statuses)

    def _statuses(self, engine: Engine, jobs: list[Job]) -> list[JobStatus]:
        running = Counter(run.job for run in engine.running())
        waiting = Counter(run.job for run in engine.waiting())
        latest, pauses = self._runtime.latest, engine.pauses
        standing = JobStanding(engine, self._runtime.now())
        return [
            job_status(
                job, pauses=pauses, next_fire=engine.next_fire(job.name),
                last=latest.last_run(job.name), running=running[job.name],
                waiting=waiting[job.name], facts=standing.facts(job),
            )
            for job in jobs
        ]  # fmt: skip

    def _starting(self, jobs: list[Job]) -> list[JobStatus]:
        latest = self._runtime.latest
        return [
            job_status(
                job, pauses=(), next_fire=None, last=latest.last_run(job.name), starting=True
            )
            for job in jobs
        ]

    async def groups(self) -> tuple[GroupStatus, ...]:
        """While the scheduler starts, as if none were paused (its pauses are not read
        yet)."""
        starting = self._runtime.state is SchedulerState.STARTING
        pauses = () if starting else self._engine().pauses
        return tuple(
            GroupStatus(name=name, jobs=group.jobs, paused=("group", name) in pauses)
            for name, group in self._runtime.config.groups.items()
        )

    async def nodes(self) -> tuple[NodeView, ...]:
        cluster = self._runtime.cluster
        return await cluster.nodes() if cluster is not None else ()

    async def runs(self) -> tuple[RunStatus, ...]:
        engine, latest = self._engine(), self._runtime.latest
        room = engine.waiting_room
        cluster = self._runtime.cluster
        here = cluster.name if cluster is not None else None
        active = [
            RunStatus(
                # In a cluster, this node's runs by its name, as the other nodes' are.
                run=run if here is None else dataclasses.replace(run, node=here),
                live_status=latest.last_line(run.run_id) or engine.live_status(run.run_id),
            )
            for run in (*engine.running(), *engine.queued())
        ]
        waiting = [
            RunStatus(
                run=run,
                waits_for=tuple(need.describe() for need in room.needs(run.run_id)),
            )
            for run in engine.waiting()
        ]
        # The other nodes' runs, as of the last poll.
        elsewhere = [RunStatus(run=run) for run in cluster.elsewhere] if cluster else []
        return (*active, *waiting, *elsewhere)

    async def history(self, query: HistoryQuery) -> tuple[RunRecord, ...]:
        cluster = self._runtime.cluster
        if cluster is not None:  # every node's runs; this node's own when the database is away
            try:
                return await cluster.history(query)
            except ClusterDatabaseError as error:
                log.warning("cluster history not read (%s): this node's runs only", error)
        runs = await self._runtime.history.call(lambda store: store.page(query))
        return tuple(runs)

    async def failures_since(self, since: datetime) -> tuple[datetime, ...]:
        found = await self._runtime.history.call(lambda store: store.failures_since(since))
        return tuple(found)

    async def output(
        self, run_id: str, *, offset: int | None = None, limit: int = OUTPUT_CHUNK_BYTES
    ) -> OutputChunk:
        run = await self._find_run(run_id)
        running = run.run_id in {r.run_id for r in self._engine().running()}
        state_dir = self._runtime.config.settings.state_dir
        return await output_chunk(state_dir, run, running=running, offset=offset, limit=limit)

    async def _find_run(self, run_id: str) -> RunRecord:
        engine = self._engine()
        for run in (*engine.running(), *engine.queued(), *engine.waiting()):
            if run.run_id == run_id:
                return run
        found = await self._runtime.history.call(lambda store: store.get(run_id))
        if found is None:
            raise UnknownRunError([run_id])
        return found

    async def audit(self, *, offset: int | None = None, lines: int = AUDIT_LINES) -> AuditChunk:
        await self._runtime.flush_audit()  # the lines of the events delivered so far, written
        path = self._runtime.config.settings.state_dir / "audit.log"
        return await audit_chunk(path, offset=offset, lines=lines)

    async def config_text(self) -> str:
        source = self._runtime.source
        return source.text if source is not None else self._runtime.config_text

    async def pending_edit(self) -> PendingEdit:
        """The file on disk as it reads now: a save the watcher has not looked at yet (its
        events are debounced) is an offline edit all the same."""
        source = self._runtime.source
        if source is None:
            return _NO_EDIT
        live, now = self._runtime.config, self._runtime.now()
        return await in_thread(Lane.CONFIG, _pending, source.text, source.path, live, now)

    async def job_definition(self, name: str) -> Mapping[str, object] | None:
        source = self._runtime.source
        if source is not None:  # read from the job's own block of the file
            return await source.job_definition(name)
        text, path = self._runtime.config_text, self._runtime.config.path
        return await in_thread(Lane.CONFIG, lambda: ConfigDocument(text, path).job(name))

    async def plan(self, name: str, *, count: int = 10, after: datetime | None = None) -> JobPlan:
        engine, job = self._engine(), self._runtime.config.job(name)
        now = after or self._runtime.now()
        paused, waits = engine.is_paused(job), self._waits(name, now)
        return job_plan(job, now=now, count=count, paused=paused, waits=waits)

    def _waits(self, name: str, now: datetime) -> tuple[str, ...]:
        """What the job's waiting runs wait for, or what its next slot will need."""
        engine, config = self._engine(), self._runtime.config
        job = config.job(name)
        if not job.requires:
            return ()
        lines: list[str] = []
        for run in engine.waiting():
            if run.job == name:
                slot = run.slot.astimezone(job.timezone).isoformat() if run.slot else "manual"
                lines.append(f"run {run.run_id} (slot {slot}) waits for:")
                lines += [f"  {need.describe()}" for need in engine.waiting_room.needs(run.run_id)]
        if lines:
            return tuple(lines)
        upcoming = next_slot(job.schedule, now) if job.schedule is not None else None
        if job.schedule is None:
            return ("no run is waiting",)
        if upcoming is None:
            return ("no run is waiting, and the job has no future slot",)
        needs = requirements_of(config, job, upcoming)
        local = upcoming.astimezone(job.timezone).isoformat()
        head = f"no run is waiting; the slot {local} will need:"
        return (head, *(f"  {need.describe()}" for need in needs))

    async def preview(self, edit: ConfigEdit) -> tuple[str, ...]:
        source = self._runtime.source
        if source is None:
            return ("the scheduler is not running",)
        try:
            if edit.target is EditTarget.JOB and edit.action is not EditAction.DELETE:
                adding = edit.action is EditAction.ADD
                await source.check_job(edit.name, edit.definition or {}, adding=adding)
            else:
                await in_thread(Lane.CONFIG, source.preview, _change(edit))
        except ConfigError as error:
            return tuple(str(problem) for problem in error.problems) or (str(error),)
        except (TuischedError, TypeError) as error:
            return (str(error),)
        return ()

    async def last_change(self) -> ConfigChange | None:
        return self._runtime.actions.last_change()

    def subscribe(
        self, callback: Callable[[Event], object], *, after: int | None = None
    ) -> Subscription:
        lane = self._lane
        if lane is None or lane.on_lane():
            return self._runtime.subscribe(callback, after=after)
        relayed = _LaneSubscription(_Relay(asyncio.get_running_loop(), callback), lane)
        if lane.loop is None:  # not started yet: events will come from the lane's thread
            relayed.take(self._runtime, after)
        else:  # on the lane: replay and subscription are one step there, before what follows
            lane.call_soon(relayed.take, self._runtime, after)
        return relayed

    # --- the output viewer ---------------------------------------------------------------

    async def output_page(
        self, run_id: str, *, offset: int | None = None, before: bool = False,
        lines: int = PAGE_LINES,
    ) -> OutputPage:  # fmt: skip
        run = await self._find_run(run_id)
        running = run.run_id in {r.run_id for r in self._engine().running()}
        state_dir = self._runtime.config.settings.state_dir
        return await output_page(
            state_dir, run, running=running, offset=offset, before=before, lines=lines
        )

    async def search_output(
        self, run_id: str, text: str, *, offset: int = 0, backward: bool = False
    ) -> OutputMatch:
        run = await self._find_run(run_id)
        state_dir = self._runtime.config.settings.state_dir
        return await output_search(state_dir, run, text, offset=offset, backward=backward)

    async def output_line_number(self, run_id: str, offset: int) -> int | None:
        run = await self._find_run(run_id)
        return await output_line(self._runtime.config.settings.state_dir, run, offset)

    # --- the downtime ledger (SPEC R25) ---

    async def missed(self) -> tuple[MissedSlots, ...]:
        self._engine()
        return await self._runtime.ledger.entries()

    # --- seeing ahead (R25) ---------------------------------------------------------------

    async def simulate(
        self, start: datetime, end: datetime, *, jobs: tuple[str, ...] = (), limit: int = 10_000
    ) -> Simulation:
        engine, config = self._engine(), self._runtime.config
        paused = [job.name for job in config.jobs.values() if engine.is_paused(job)]
        return await in_thread(
            Lane.FILES, lambda: simulate(config, start, end, jobs=jobs, limit=limit, paused=paused)
        )

    # --- the edit form's impact preview (SPEC R25) ---

    async def impact(self, edit: ConfigEdit) -> EditImpact:
        if edit.target is not EditTarget.JOB or edit.action is EditAction.DELETE:
            raise JobActionError("only adding or replacing a job is previewed")
        live, now = self._runtime.config, self._runtime.now()
        edited, problems = await self._edited(edit)
        return await in_thread(
            Lane.CONFIG, edit_impact, live, edit.name, edited, now=now, problems=problems
        )

    async def _edited(self, edit: ConfigEdit) -> tuple[Config | None, tuple[str, ...]]:
        """The configuration a job edit gives, checked as saving it would check it; or
        None and every problem it would meet."""
        source = self._runtime.source
        if source is None:
            return None, ("the scheduler is not running",)
        adding = edit.action is EditAction.ADD
        try:
            return await source.check_job(edit.name, edit.definition or {}, adding=adding), ()
        except ConfigError as error:
            return None, tuple(str(problem) for problem in error.problems) or (str(error),)
        except (TuischedError, TypeError) as error:
            return None, (str(error),)

    # --- history stats (issue 16) ---

    async def stats(self, query: StatsQuery) -> HistoryStats:
        cluster = self._runtime.cluster
        if cluster is not None:  # every node's runs; this node's own when the database is away
            try:
                return stats_of_runs(await cluster.history(stats_history_query(query)), query)
            except ClusterDatabaseError as error:
                log.warning("cluster stats not read (%s): this node's runs only", error)
        return await self._runtime.history.call(lambda store: read_stats(store, query))


@_on_lane
class LocalControl(LocalQueries):
    """`SchedulerControl` over a runtime in this process; commands recorded as `actor`."""

    _AFTER_START = frozenset({
        "run_now", "stop_run", "set_paused", "edit", "undo", "reload", "decide_missed",
        "backfill",
    })  # fmt: skip
    """The commands that, given while the scheduler starts, wait for it (not `shutdown`:
    a stop undoes an unfinished start)."""

    def __init__(
        self,
        runtime: Runtime,
        *,
        actor: str,
        lane: LoopThread | None = None,
        started: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        super().__init__(runtime, lane=lane, started=started)
        self.actor = actor
        """Who this control's commands are recorded as: `user@host (console)`."""

    async def run_now(self, job: str, *, key: str | None = None, queue: bool = False) -> RunRecord:
        self._engine()
        return self._runtime.actions.run_now(job, key=key, actor=self.actor, queue=queue)

    async def stop_run(self, run_id: str, *, kill: bool = False) -> None:
        self._engine()
        await self._runtime.actions.stop_run(run_id, kill=kill, actor=self.actor)

    async def set_paused(self, pause: Pause, *, paused: bool) -> None:
        self._engine()
        runtime, actor = self._runtime, self.actor
        if pause.kind is PauseKind.JOB:
            await runtime.actions.pause_job(pause.name, paused=paused, actor=actor)
        elif pause.kind is PauseKind.GROUP:
            await runtime.actions.pause_group(pause.name, paused=paused, actor=actor)
        else:
            await runtime.actions.pause_all(paused=paused, actor=actor)

    async def edit(self, edit: ConfigEdit) -> None:
        self._engine()
        await self._runtime.actions.edit(edit, actor=self.actor)

    async def undo(self, *, change: int | None = None) -> None:
        self._engine()
        await self._runtime.actions.undo(change=change, actor=self.actor)

    async def reload(self) -> bool:
        self._engine()
        return await self._runtime.actions.reload(actor=self.actor)

    async def shutdown(self, *, grace: float | None = None, reason: str = "shutdown") -> None:
        await self._runtime.stop(grace=grace, reason=reason)

    async def hurry(self) -> None:
        self._runtime.hurry()

    # --- the downtime ledger (SPEC R25) ---

    async def decide_missed(self, job: str | None, choice: MissedChoice) -> tuple[MissedSlots, ...]:
        self._engine()
        return await self._runtime.actions.decide_missed(job, choice, actor=self.actor)

    # --- backfill of a window (SPEC R24) ---

    async def backfill(
        self, job: str, start: datetime, end: datetime, *, dry_run: bool = False
    ) -> BackfillPlan:
        self._engine()
        actions = self._runtime.actions
        return await actions.backfill(job, start, end, dry_run=dry_run, actor=self.actor)


class _Relay:
    """Events heard on the lane, handed to a subscriber on its own loop: in order, the
    ones of a turn together."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, callback: Callable[[Event], object]
    ) -> None:
        self._loop = loop
        self._callback = callback
        self._events: deque[Event] = deque()
        self._lock = threading.Lock()
        self._scheduled = False
        self.closed = False

    def put(self, event: Event) -> None:
        """Called on the lane (any thread): queue `event` for the subscriber's loop."""
        with self._lock:
            if self.closed:
                return
            self._events.append(event)
            if self._scheduled:
                return
            self._scheduled = True
        try:
            self._loop.call_soon_threadsafe(self._deliver)
        except RuntimeError:  # the subscriber's loop has closed: nobody listens any more
            self.closed = True

    def put_many(self, events: list[Event]) -> None:
        """`put` for each of `events`, at the cost of one (a replay of the kept events)."""
        if not events:
            return
        with self._lock:
            if self.closed:
                return
            self._events.extend(events)
            if self._scheduled:
                return
            self._scheduled = True
        try:
            self._loop.call_soon_threadsafe(self._deliver)
        except RuntimeError:
            self.closed = True

    def _deliver(self) -> None:
        with self._lock:
            events, self._events = self._events, deque()
            self._scheduled = False
        for event in events:
            if self.closed:
                return
            try:
                self._callback(event)
            except Exception:  # as the bus does: one subscriber's failure silences nothing else
                log.exception("event subscriber %r failed on %s", self._callback, event)


class _LaneSubscription:
    """A subscription made on the lane for a subscriber on another loop."""

    def __init__(self, relay: _Relay, lane: LoopThread) -> None:
        self._relay = relay
        self._lane = lane
        self._taken: Subscription | None = None

    def take(self, runtime: Runtime, after: int | None) -> None:
        """Subscribe the relay (on the lane, or before the lane has started)."""
        if self._relay.closed:
            return
        try:  # the kept events in one step: two hundred readers must not hold the lane
            replay = runtime.bus.since(after) if after is not None else []
        except EventsLostError as error:  # not raised in the caller: it asked from afar
            log.warning("a subscriber missed events: %s", error)
            return
        self._relay.put_many(replay)
        self._taken = runtime.subscribe(self._relay.put)  # on the lane: nothing in between

    def unsubscribe(self) -> None:
        self._relay.closed = True
        self._lane.call_soon(self._drop)

    def _drop(self) -> None:
        if self._taken is not None:
            self._taken.unsubscribe()
            self._taken = None


def _change(edit: ConfigEdit) -> Callable[[ConfigDocument], None]:
    """The document operation that makes `edit`."""
    definition = edit.definition or {}
    name = edit.name
    operations: dict[tuple[EditTarget, EditAction], Callable[[ConfigDocument], None]] = {
        (EditTarget.JOB, EditAction.ADD): lambda doc: doc.add_job(name, definition),
        (EditTarget.JOB, EditAction.REPLACE): lambda doc: doc.replace_job(name, definition),
        (EditTarget.JOB, EditAction.DELETE): lambda doc: doc.delete_job(name),
        (EditTarget.GROUP, EditAction.ADD): lambda doc: doc.add_group(name, definition),
        (EditTarget.GROUP, EditAction.REPLACE): lambda doc: doc.replace_group(name, definition),
        (EditTarget.GROUP, EditAction.DELETE): lambda doc: doc.delete_group(name),
    }
    return operations[edit.target, edit.action]


_NO_EDIT = PendingEdit(lines=("no offline edit: the file on disk is what is running",))


def _pending(in_force: str, path: Path, live: Config, now: datetime) -> PendingEdit:
    """What reloading the file at `path` would change from `in_force` (blocking: reading
    and parsing a big file takes a while)."""
    try:
        text = read_config_text(path)
        if text == in_force:
            return _NO_EDIT
        candidate = parse_config(text, path)
    except ConfigError as error:
        problems = tuple(str(problem) for problem in error.problems) or (str(error),)
        head = (
            f"the file on disk does not validate ({counted(len(problems), 'problem')});"
            " reloading would change nothing:"
        )
        return PendingEdit(present=True, valid=False, lines=(head, *problems), details=problems)
    diff = config_diff(live, candidate, now)
    if diff.empty:
        lines: tuple[str, ...] = ("the file on disk differs, but no job, group or setting changes",)
        return PendingEdit(present=True, lines=lines)
    summary, details = diff.summary(), tuple(diff.lines())
    head = f"reloading would apply: {summary}"
    return PendingEdit(present=True, lines=(head, "", *details), summary=summary, details=details)
