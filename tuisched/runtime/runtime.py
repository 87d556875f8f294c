"""The runtime: one start order for everything a scheduler is; stopping is its reverse.

    start: state dir -> instance lock -> watchdog -> bus -> metrics -> audit log
           -> history -> kept alerts -> alerts (sending those kept)
           -> close abandoned runs -> processes of runs
           -> fork servers of python jobs -> cluster -> engine (pauses, waiting
           runs, missed slots, then firing) -> dependency triggers
           -> config watcher -> heartbeat -> retention

Each part says how it stops as it starts, on one `contextlib.AsyncExitStack`
(`Runtime._parts`): `stop` drains the engine and closes everything in the
reverse order, and a start that fails half-way closes what it had opened
the same way. Before that, `stop` stops firing and says the scheduler is
stopping; the history closes before "scheduler stopped" is said, and the
audit log hears it before it closes.

The headless front end and the console both drive this object unchanged, on
the runtime's own lane (`loopthread`); nothing about scheduling or reloading
lives in a front end.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from tuisched.domain.bus import EventBus, Subscription
from tuisched.domain.config.diff import ConfigDiff
from tuisched.domain.errors import (
    TuischedError,
)
from tuisched.domain.events import (
    Event,
    SchedulerStarted,
    SchedulerStopped,
    SchedulerStopping,
)
from tuisched.domain.model import ClusterSettings, Config
from tuisched.domain.runs import Result, Trigger
from tuisched.domain.views import SchedulerState
from tuisched.runtime.abandoned import FORK_JOURNALS, PROCESSES_RECORD, Leftovers
from tuisched.runtime.actions import Actions
from tuisched.runtime.alerting import Alerting
from tuisched.runtime.clock import Clock, SystemClock
from tuisched.runtime.configsource import ConfigSource
from tuisched.runtime.configtext import user_state_dir
from tuisched.runtime.engine.backfill import Backfills
from tuisched.runtime.engine.engine import Engine
from tuisched.runtime.engine.ledger import Ledger
from tuisched.runtime.engine.waiting import WaitingRoom
from tuisched.runtime.execution import (
    close_fork_servers,
    install_child_watcher,
    open_fork_servers,
)
from tuisched.runtime.execution.descendants import become_subreaper
from tuisched.runtime.execution.keeper import Keeper
from tuisched.runtime.handlers.actions import ActionLog
from tuisched.runtime.handlers.audit import AuditLog
from tuisched.runtime.handlers.latest import LatestRuns
from tuisched.runtime.handlers.outbox import OUTBOX_FILE, KeptAlert
from tuisched.runtime.handlers.triggers import DependencyTrigger
from tuisched.runtime.historian import Historian
from tuisched.runtime.pgdriver import require_driver
from tuisched.runtime.processes import RunProcesses
from tuisched.runtime.secrets import Secrets, hide_process, secret_names
from tuisched.runtime.store import AsyncHistory, InstanceLock, prepare_state_dir
from tuisched.runtime.store.statedir import earlier_shared_state
from tuisched.runtime.threads import Lane, in_thread
from tuisched.runtime.watch import ConfigWatcher
from tuisched.runtime.watchdog import LoopWatchdog

if TYPE_CHECKING:
    from tuisched.runtime.cluster.link import ClusterLink  # cluster mode only: psycopg
    from tuisched.runtime.metrics import MetricsEndpoint  # with settings.metrics only

log = logging.getLogger(__name__)

HEARTBEAT_SECONDS = 10.0
"""How often the runtime records that it is alive (bounds what a crash leaves unclear)."""


async def _join_cluster(
    settings: ClusterSettings, config: Config, *, secrets: Secrets, node: str, clock: Clock,
    keeper: Keeper | None,
) -> ClusterLink:  # fmt: skip
    """Open the cluster's database (ClusterDatabaseError: what to fix); one that is
    only away now is waited for in the background."""
    # Here, not at the top: a single node never imports psycopg (see pgdriver).
    from tuisched.runtime.cluster.database import read_password  # noqa: PLC0415
    from tuisched.runtime.cluster.link import ClusterLink  # noqa: PLC0415

    password = await in_thread(Lane.FILES, read_password, settings, dict(secrets))
    link = ClusterLink(settings, config, password=password, node_name=node,
                       clock=clock, fence=keeper.fence if keeper else None)  # fmt: skip
    await link.open()
    return link


def add_config_folder_to_path(config: Config) -> None:
    """Let `python: jobs.backup:run` live beside the configuration file."""
    folder = str(config.path.parent)
    if folder not in sys.path:
        sys.path.append(folder)


KEEPER_LOG = "keeper.log"
"""What the run keeper did, in the state directory (it ends the runs of a killed scheduler)."""
MAIL_GRACE = 1.0
"""Seconds alert mail gets at shutdown when the runs took the whole grace."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Role:
    """What a runtime does besides running what it is asked to run."""

    fires_slots: bool = True
    """Fire schedules; record missed slots; take back WAITING runs and close abandoned ones
    (of this node); beat the heartbeat."""
    watches_config: bool = True
    """Notice edits of the configuration file."""
    exclusive: bool = True
    """Hold the state directory's instance lock (one scheduler per state directory)."""
    follows_runs: bool = True
    """Send alerts and start `after` dependants when runs conclude."""
    node_suffix: str = ""
    """Added to the host name: a foreground run is not the scheduler's node, so a
    scheduler starting meanwhile does not close its runs as abandoned."""


SCHEDULER = Role()
"""The scheduler itself (`tuisched`, `tuisched --no-ui`)."""


def foreground(*, fire_events: bool) -> Role:
    """`tuisched run JOB`: one run (and, with `fire_events`, its alerts and dependants)."""
    return Role(
        fires_slots=False,
        watches_config=False,
        exclusive=False,
        follows_runs=fire_events,
        node_suffix=":run",
    )


class Runtime:
    """A scheduler: config, bus, history, audit log and engine, started and stopped as one."""

    def __init__(
        self,
        config: Config,
        *,
        text: str | None = None,
        bus: EventBus | None = None,
        clock: Clock | None = None,
        kill_grace: float = 5.0,
        role: Role = SCHEDULER,
    ) -> None:
        self.config = config
        self.role = role
        self._text = text if text is not None else config.path.read_text(encoding="utf-8")
        """The configuration file's content that `config` was read from."""
        self.bus = bus or EventBus()
        self.source: ConfigSource | None = None
        self._watcher: ConfigWatcher | None = None
        self.watchdog = LoopWatchdog()
        """Notices a blocked event loop and says what blocked it."""
        self.latest = LatestRuns()
        """Each job's newest finished run and each running run's last line, for front ends."""
        self.state = SchedulerState.STARTING
        self.started_at: datetime | None = None
        """When `start` finished (None before)."""
        self._secrets = Secrets()
        """The variables the configuration names for secrets, moved out of the environment."""
        self._actions_log = ActionLog(
            config.settings.state_dir / "actions.log", config.settings.timezone
        )
        self.actions = Actions(self, self._actions_log)
        """What operators do: run now, stop, pause, edit... each recorded in actions.log."""
        self.node = socket.gethostname() + role.node_suffix
        self._clock: Clock = clock or SystemClock()
        self._kill_grace = kill_grace
        self._lock = InstanceLock(config.settings.state_dir / "tuisched.lock", config.path)
        self._historian = Historian(lambda: self.config, bus=self.bus, clock=self._clock,
                                    node=self.node)  # fmt: skip
        self._audit: AuditLog | None = None
        self._engine: Engine | None = None
        self.cluster: ClusterLink | None = None
        """This node's link to the cluster (cluster mode only, once started)."""
        self._triggers: DependencyTrigger | None = None
        self._alerting = Alerting(lambda: self.config, bus=self.bus, clock=self._clock,
                                  node=self.node, secrets=self._secrets)  # fmt: skip
        self._processes = RunProcesses(clock=self._clock, kill_grace=kill_grace)
        self._closers: list[Callable[[], Awaitable[None]]] = []
        self._parts: contextlib.AsyncExitStack | None = None
        """How each started part stops, last started first (set once started)."""
        self._grace = 0.0
        """The grace of the stop under way (0 when a failed start is undone)."""
        self._draining_since = self._clock.now()
        """When the stop under way began draining."""
        self._stopping: asyncio.Future[None] | None = None
        """The stop under way (or done)."""
        self._ledger: tuple[Engine, Ledger] | None = None
        """The downtime ledger, and the engine it was made for (see `ledger`)."""
        self.metrics: MetricsEndpoint | None = None
        """`/metrics` and `/healthz` (with `settings.metrics`, once started)."""

    @classmethod
    def from_file(cls, path: Path, **kwargs: object) -> Runtime:
        """A runtime for the configuration at `path` (ConfigError if it is not valid, or
        if it uses PostgreSQL and the `postgres` extra is not installed)."""
        text, config = ConfigSource.read(path)
        role = kwargs.get("role", SCHEDULER)
        require_driver(config, cluster=not isinstance(role, Role) or role.fires_slots)
        return cls(config, text=text, **kwargs)  # type: ignore[arg-type]

    @property
    def firing(self) -> bool:
        """Whether slots may fire: the engine exists (it fires once built, a little before
        the start is over)."""
        return self._engine is not None

    @property
    def engine(self) -> Engine:
        """The engine (only after start)."""
        if self._engine is None:
            raise TuischedError("the runtime is not started")
        return self._engine

    @property
    def history(self) -> AsyncHistory:
        """The history writer (only after start)."""
        history = self._historian.history
        if history is None:
            raise TuischedError("the runtime is not started")
        return history

    @property
    def history_if_open(self) -> AsyncHistory | None:
        """The history writer, once start opened it (it stays after stop, closed)."""
        return self._historian.history

    @property
    def unwritten(self) -> tuple[int, int]:
        """What is kept in memory because the disk or database does not take it now:
        (history writes, audit log bytes)."""
        history = self._historian.history
        writes = history.unwritten if history is not None else 0
        audit = self._audit.unwritten if self._audit is not None else 0
        return writes, audit

    @property
    def config_text(self) -> str:
        """The configuration file's text that the configuration in force was read from."""
        return self.source.text if self.source is not None else self._text

    def now(self) -> datetime:
        """The runtime's clock."""
        return self._clock.now()

    def subscribe(
        self, callback: Callable[[Event], object], *, after: int | None = None
    ) -> Subscription:
        """Call `callback` with every event after sequence number `after` (None: from now on).

        Call it on the loop thread. Raises EventsLostError when events after
        `after` are no longer kept.
        """
        return self.bus.subscribe(Event, callback, after=after)

    @property
    def busy(self) -> bool:
        """Whether runs are in progress or to come: queued, running, waiting, retries,
        dependants in their delay. (Mail in flight is the drain's business.)"""
        engine_busy = self._engine is not None and self._engine.busy
        return engine_busy or (self._triggers is not None and self._triggers.pending > 0)

    async def settled(self) -> None:
        """Return once nothing is in progress (see `busy`), checked after every event."""
        changed = asyncio.Event()
        subscription = self.bus.subscribe(Event, lambda _: changed.set())
        try:
            while self.busy:
                changed.clear()
                await changed.wait()
        finally:
            subscription.unsubscribe()

    async def flush_audit(self) -> None:
        """Write the audit lines of the events delivered so far (before reading the log)."""
        if self._audit is not None:
            await in_thread(Lane.AUDIT, self._audit.flush)

    # --- start and stop ----------------------------------------------------------

    async def start(self) -> None:
        """Start every part, in order. Each part says how it stops as it starts (`_parts`):
        stopping is starting reversed, and a start that fails stops what had started.

        Raises:
            AlreadyRunningError: another scheduler holds the state directory.
        """
        self._stopping = None
        self._grace, self._draining_since = 0.0, self._clock.now()
        parts = contextlib.AsyncExitStack()
        try:
            await self._start_parts(parts)
        except BaseException:
            await parts.aclose()  # with no grace: nothing had started to run
            self._engine = self._historian.history = self._audit = self.cluster = None
            raise
        self._parts = parts

    async def _start_parts(self, parts: contextlib.AsyncExitStack) -> None:
        settings, role = self.config.settings, self.role
        if "state_dir" not in settings.lines and role.exclusive:
            notice = earlier_shared_state(settings.state_dir, user_state_dir())
            if notice is not None:
                log.warning("%s", notice)
        prepare_state_dir(settings.state_dir)
        if role.exclusive:
            self._lock.acquire()
            parts.callback(self._lock.release)
        self.watchdog.start()
        parts.callback(self.watchdog.stop)
        self._secrets.take(secret_names(self.config))  # before any job or thread can look
        hide_process()
        become_subreaper()  # orphans of runs are adopted here, not by init
        record = settings.state_dir / PROCESSES_RECORD if role.exclusive else None
        self._processes.begin(record)
        install_child_watcher()
        self.bus.bind(asyncio.get_running_loop())
        self.latest.subscribe(self.bus)
        self._start_metrics()  # early: a port in use stops the start before anything fires
        parts.push_async_callback(self._stop_metrics)  # late: /healthz says 503 while runs drain
        parts.push_async_callback(self._close_at_stop)  # after the drain (the control socket)
        parts.push_async_callback(in_thread, Lane.AUDIT, self._actions_log.close)
        self._audit = AuditLog(settings.state_dir / "audit.log", settings.timezone)
        self._audit.subscribe(self.bus)
        parts.push_async_callback(in_thread, Lane.AUDIT, self._audit.close)
        parts.callback(self._told_stopped)  # once the history holds every run's end
        historian = self._historian
        history = await historian.open(
            password=self._secrets.get("PGPASSWORD"),
            journaled=role.exclusive and settings.cluster is None,
        )
        self.latest.merge(await history.call(lambda store: store.last_runs()))
        parts.push_async_callback(historian.close)
        historian.start_checks()
        parts.push_async_callback(historian.stop_checks)
        kept: list[KeptAlert] = []
        if role.follows_runs and role.exclusive:
            kept = await self._alerting.open_outbox(settings.state_dir / OUTBOX_FILE)
            parts.push_async_callback(self._alerting.close_outbox)  # after the drain: what is left
        if role.follows_runs:
            self._alerting.start(kept)
        parts.push_async_callback(self._drain_alerts_left)
        now = self._clock.now()
        down_since = None
        if role.fires_slots:
            down_since = await history.call(lambda store: store.last_alive(self.node))
            await self._leftovers(history).close(now)
        add_config_folder_to_path(self.config)
        # The keeper leaves last: if this scheduler dies while it stops what ended runs
        # left, the keeper still ends them (and at a clean stop it finds nothing left).
        processes = self._processes
        parts.push_async_callback(processes.stop_keeper)
        processes.start_following()
        parts.push_async_callback(processes.stop_leftovers)
        journals = settings.state_dir / FORK_JOURNALS if role.exclusive else None
        open_fork_servers(journals, self._clock)
        parts.push_async_callback(close_fork_servers)  # before leftovers are looked for
        if role.exclusive:  # the scheduler that runs the jobs: its runs end with it
            # (stopped after the leftovers: `stop_keeper`)
            await processes.start_keeper(settings.state_dir / KEEPER_LOG, record, journals)
        if settings.cluster is not None and role.fires_slots:
            cluster = self.cluster = await _join_cluster(
                settings.cluster, self.config, secrets=self._secrets, node=self.node,
                clock=self._clock, keeper=self._processes.keeper,
            )  # fmt: skip
            # the runs' ends, fenced, then leave
            parts.push_async_callback(_given_the_grace, self, cluster.stop)
        await self._start_engine(parts, down_since=down_since)
        self.source = ConfigSource(
            path=self.config.path, text=self._text, config=self.config,
            apply=self._apply_config, bus=self.bus, clock=self._clock.now,
        )  # fmt: skip
        if role.watches_config:
            self._watcher = ConfigWatcher(self.config.path, self.source.look)
            self._watcher.start()
            parts.push_async_callback(self._watcher.stop)
        if role.fires_slots:
            await historian.mark_alive()
            historian.start_heartbeat(HEARTBEAT_SECONDS, self._waiting_room)
            parts.push_async_callback(historian.stop_heartbeat)
            historian.start_retention(self.cluster)
        parts.push_async_callback(historian.stop_retention)  # a reload may have started it
        self.state = SchedulerState.RUNNING
        self.started_at = now
        self.bus.publish(
            SchedulerStarted(
                at=now, node=self.node, config_path=self.config.path, jobs=len(self.config.jobs)
            )
        )

    def _leftovers(self, history: AsyncHistory) -> Leftovers:
        """Where this runtime finds what a dead scheduler on its node left."""
        settings, exclusive = self.config.settings, self.role.exclusive
        return Leftovers(
            history=history, bus=self.bus, node=self.node,
            state_dir=settings.state_dir if exclusive else None,
            own_history=exclusive and not settings.history and settings.cluster is None,
        )  # fmt: skip

    def _waiting_room(self) -> WaitingRoom | None:
        """The engine's runs waiting for their requirements (None when there is none)."""
        return self._engine.waiting_room if self._engine is not None else None

    async def _start_engine(
        self, parts: contextlib.AsyncExitStack, *, down_since: datetime | None
    ) -> None:
        """The engine, and the dependency triggers that follow its runs (they stop before
        it drains)."""
        settings = self.config.settings
        engine = self._engine = Engine(
            self.config, bus=self.bus, history=self.history, node=self.node,
            output_dir=settings.state_dir / "output", clock=self._clock,
            kill_grace=self._kill_grace, descendants=self._processes.descendants,
            keeper=self._processes.keeper,
            cluster=self.cluster,
        )  # fmt: skip
        parts.push_async_callback(_given_the_grace, self, engine.drain)
        if self.role.follows_runs:
            self._triggers = DependencyTrigger(engine, lambda: self.config, self._clock)
            self._triggers.subscribe(self.bus)
            parts.callback(self._triggers.stop)
        await engine.start(down_since=down_since, fire=self.role.fires_slots)

    def close_at_stop(self, closer: Callable[[], Awaitable[None]]) -> None:
        """Await `closer` near the end of `stop`, after the drain, while the state directory
        is still ours (however the stop was asked for: a front end, the control socket, a
        signal)."""
        self._closers.append(closer)

    async def stop(self, *, grace: float | None = None, reason: str = "shutdown") -> None:
        """Drain (no new runs; running ones get `grace`, then are stopped) and close.

        Asked again while a stop is under way (a signal, the console, the control
        socket), it waits for that stop: `hurry` is how to cut a drain short."""
        if self._stopping is None:
            if self._engine is None or self._parts is None:
                return
            self._stopping = asyncio.ensure_future(self._stop(grace=grace, reason=reason))
        await asyncio.shield(self._stopping)

    async def _stop(self, *, grace: float | None, reason: str) -> None:
        assert self._engine is not None  # noqa: S101  (stop checked)
        assert self._parts is not None  # noqa: S101
        if grace is None:
            grace = self.config.settings.shutdown_grace.total_seconds()
        self._engine.stop_firing()  # now: what follows awaits, and no run may start meanwhile
        running = len(self._engine.running())
        self.state = SchedulerState.STOPPING
        self.bus.publish(SchedulerStopping(at=self._clock.now(), reason=reason, running=running))
        self._grace, self._draining_since = grace, self._clock.now()
        parts, self._parts = self._parts, None
        await parts.aclose()  # every part, in the reverse of the order it started in
        self._engine = None
        self.state = SchedulerState.STOPPED

    # How each part stops (pushed on `_parts` as it starts; `_grace` is the stop's).

    async def _drain_alerts_left(self) -> None:
        """Mail gets what is left of the grace (at least MAIL_GRACE s for the last runs'
        alerts); none after a failed start."""
        grace = self._grace
        spent = (self._clock.now() - self._draining_since).total_seconds()
        await self._alerting.drain(min(grace, max(grace - spent, MAIL_GRACE)))

    def _told_stopped(self) -> None:
        """Say the scheduler stopped (only one that ran), and let the audit log hear it."""
        if self.state is SchedulerState.STOPPING:
            self.bus.publish(SchedulerStopped(at=self._clock.now()))
        self.bus.flush()  # the audit log must see the last runs before it closes

    async def _close_at_stop(self) -> None:
        for closer in self._closers:
            try:
                await closer()
            except Exception:  # the stop goes on: the lock must be released
                log.exception("closing %r at stop failed", closer)
        self._closers.clear()

    def hurry(self) -> None:
        """During a drain, stop every run now instead of waiting for the grace period."""
        if self._engine is not None:
            self._engine.stop_all(Result.SHUTDOWN, kill=True)

    async def _apply_config(self, config: Config, diff: ConfigDiff, origin: str) -> None:
        """Put `config` in force: the schedule, and the mailer if `email:` changed."""
        email_changed = config.email != self.config.email
        if config.settings.metrics != self.config.settings.metrics and self.role.fires_slots:
            # The metrics address is bound at start.
            log.warning("settings.metrics changed: it takes effect at the next start")
        self.config = config
        if self.role.fires_slots and self.state is SchedulerState.RUNNING:
            self._historian.start_retention(self.cluster)  # a reload that sets it starts it
        if config.settings.history_retention is None:
            await self._historian.stop_retention()  # one that unsets it stops it (no hourly pass)
        if self._engine is not None:
            await self._engine.apply(config)
        if email_changed:
            self._alerting.email_changed()  # its mails in flight go on, drained at stop
        self._secrets.take(secret_names(config))  # a webhook's new secret_env, say

    # --- the downtime ledger (SPEC R25) ---------------------------------------------------

    @property
    def ledger(self) -> Ledger:
        """The missed slots per job and the operator's decisions (only after start)."""
        engine = self.engine
        if self._ledger is None or self._ledger[0] is not engine:
            if self._ledger is not None:
                self._ledger[1].close()
            made = Ledger(
                config=lambda: self.config, history=self.history, bus=self.bus, now=self.now,
                submit=lambda job, slot, run_id: engine.submit(
                    job, slot=slot, trigger=Trigger.CATCHUP, run_id=run_id
                ),
                since=self.started_at or self.now(), cluster=self.cluster,
            )  # fmt: skip
            self._ledger = (engine, made)
        return self._ledger[1]

    # --- metrics and health (SPEC R24) ------------------------------------------------

    def _start_metrics(self) -> None:
        """Serve `/metrics` and `/healthz` when `settings.metrics` says where (the
        scheduler only: a foreground `tuisched run` would take its port)."""
        settings = self.config.settings.metrics
        if settings is None or not self.role.fires_slots:
            return
        # Here, not at the top: without metrics, prometheus_client is never imported.
        from tuisched.runtime.metrics import MetricsEndpoint, Probes  # noqa: PLC0415

        probes = Probes(
            config=lambda: self.config, state=lambda: self.state.value,
            firing=lambda: self._engine is not None and self._engine.accepting,
            cluster=lambda: self.cluster.health() if self.cluster is not None else None,
        )  # fmt: skip
        endpoint = MetricsEndpoint(settings, probes=probes, watchdog=self.watchdog)
        endpoint.start(self.bus)
        self.metrics = endpoint

    async def _stop_metrics(self) -> None:
        """Stop serving: last, so that `/healthz` says 503 while the runs drain."""
        if self.metrics is not None:
            await self.metrics.stop()
            self.metrics = None

    # --- backfill of a window (SPEC R24) --------------------------------------------------

    _backfills: tuple[Engine, Backfills] | None = None
    """The backfills under way, and the engine they were made for (see `backfills`)."""

    @property
    def backfills(self) -> Backfills:
        """Backfills of a window: planned, and carried out in slot order (only after start)."""
        engine = self.engine
        if self._backfills is None or self._backfills[0] is not engine:
            if self._backfills is not None:
                self._backfills[1].close()
            made = Backfills(
                config=lambda: self.config, history=self.history, bus=self.bus, now=self.now,
                submit=lambda job, slot: engine.submit(job, slot=slot, trigger=Trigger.BACKFILL),
                cluster=self.cluster,
            )  # fmt: skip
            self._backfills = (engine, made)
        return self._backfills[1]


async def _given_the_grace(runtime: Runtime, stop: Callable[[float], Awaitable[object]]) -> None:
    """`stop(grace)` with the grace the scheduler's stop was given (known only then)."""
    await stop(runtime._grace)
