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
import functools
import logging
import os
import signal
import socket
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuisched.domain.bus import EventBus, Subscription
from tuisched.domain.config.diff import ConfigDiff
from tuisched.domain.errors import (
    HistoryDamagedError,
    HistoryUnavailableError,
    StateError,
    TuischedError,
)
from tuisched.domain.events import (
    Event,
    HistoryDamaged,
    RunAbandoned,
    SchedulerStarted,
    SchedulerStopped,
    SchedulerStopping,
)
from tuisched.domain.model import ClusterSettings, Config
from tuisched.domain.runs import Result, RunRecord, RunState, Trigger
from tuisched.domain.text import counted
from tuisched.domain.views import SchedulerState
from tuisched.runtime.actions import Actions
from tuisched.runtime.clock import Clock, SystemClock
from tuisched.runtime.configsource import ConfigSource
from tuisched.runtime.configtext import user_state_dir
from tuisched.runtime.engine.backfill import Backfills
from tuisched.runtime.engine.engine import Engine
from tuisched.runtime.engine.ledger import Ledger
from tuisched.runtime.execution import (
    close_fork_servers,
    install_child_watcher,
    kill_left_behind,
    open_fork_servers,
)
from tuisched.runtime.execution.descendants import Descendants, become_subreaper
from tuisched.runtime.execution.keeper import Keeper
from tuisched.runtime.execution.leftovers import carried_run_ids
from tuisched.runtime.handlers.actions import ActionLog
from tuisched.runtime.handlers.alerts import AlertHandler
from tuisched.runtime.handlers.audit import AuditLog
from tuisched.runtime.handlers.latest import LatestRuns
from tuisched.runtime.handlers.outbox import MAIL, OUTBOX_FILE, KeptAlert, Outbox
from tuisched.runtime.handlers.triggers import DependencyTrigger
from tuisched.runtime.handlers.webhooks import WebhookHandler
from tuisched.runtime.mail import SmtpMailer
from tuisched.runtime.metrics import MetricsEndpoint, Probes
from tuisched.runtime.pgdriver import require_driver
from tuisched.runtime.secrets import Secrets, hide_process, secret_names
from tuisched.runtime.store import AsyncHistory, InstanceLock, prepare_state_dir
from tuisched.runtime.store.damage import keep_checking
from tuisched.runtime.store.database import abandoned
from tuisched.runtime.store.history import open_history
from tuisched.runtime.store.journal import Journal, Kept
from tuisched.runtime.store.retention import PRUNE_BATCH, SharedPrune, keep_pruning
from tuisched.runtime.store.statedir import earlier_shared_state
from tuisched.runtime.threads import Lane, in_thread
from tuisched.runtime.watch import ConfigWatcher
from tuisched.runtime.watchdog import LoopWatchdog
from tuisched.runtime.webhook import HttpPoster

if TYPE_CHECKING:  # cluster mode only: it imports psycopg (the `postgres` extra)
    from tuisched.runtime.cluster.link import ClusterLink

log = logging.getLogger(__name__)

HEARTBEAT_SECONDS = 10.0
"""How often the runtime records that it is alive (bounds what a crash leaves unclear)."""


async def _cancelled(task: asyncio.Future[Any] | None) -> None:
    """Cancel `task` (if any) and wait until it has ended."""
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def add_config_folder_to_path(config: Config) -> None:
    """Let `python: jobs.backup:run` live beside the configuration file."""
    folder = str(config.path.parent)
    if folder not in sys.path:
        sys.path.append(folder)


FOLLOW_SECONDS = 1.0
"""How often the processes of runs are looked for in /proc (while runs are going)."""
FOLLOW_GAP = 0.2
"""Seconds between two looks at least: a run that starts or ends asks for a look at once
(so that the record names its processes within a fraction of a second), and a burst of
them costs a few looks a second, not one each."""
LEFTOVER_GRACE = 1.0
"""Seconds the processes ended runs left running get between SIGTERM and SIGKILL at stop."""
PROCESSES_RECORD = "processes.json"
"""The processes of runs, in the state directory: a killed scheduler's next start stops them."""
FORK_JOURNALS = "forks"
"""The folder where fork servers record the process of each python run (same purpose)."""
KEEPER_LOG = "keeper.log"
HISTORY_JOURNAL = "history.journal"
"""The history writes the database did not take yet, in the state directory (see journal)."""
WRITER_BUSY_MS = 100
"""How long the history's writer waits for another process's lock on a SQLite history
before it counts an outage: meanwhile the writes that come are not journaled, and the
runs that wait for them wait."""
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
        self._history: AsyncHistory | None = None
        self._audit: AuditLog | None = None
        self._engine: Engine | None = None
        self.cluster: ClusterLink | None = None
        """This node's link to the cluster (cluster mode only, once started)."""
        self._triggers: DependencyTrigger | None = None
        self._alerts: AlertHandler | None = None
        self._alert_subscriptions: list[Subscription] = []
        self._retired_alerts: list[AlertHandler] = []
        """Handlers replaced by a reload that changed `email:`; drained at stop."""
        self._heartbeat: asyncio.Task[None] | None = None
        self._following: asyncio.Task[None] | None = None
        self._processes_changed = asyncio.Event()
        """Set when a run with processes starts or ends: look for its processes now."""
        self._descendants = Descendants()
        """The processes of runs (recorded in the state directory once started)."""
        self._keeper: Keeper | None = None
        """Ends the runs' processes if this scheduler dies or its cluster claims lapse."""
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
        self._webhooks: WebhookHandler | None = None
        """Posts alerts to `webhooks:` (reads the live configuration at each event)."""
        self._pruning: asyncio.Task[None] | None = None
        """History retention's background pass (when `settings.history_retention` is set)."""
        self._history_file: Path | None = None
        """The history's SQLite file (None for PostgreSQL), once opened."""
        self._checking: asyncio.Task[None] | None = None
        """The look for damage in a SQLite history's file, every few minutes."""
        self._outbox: Outbox | None = None
        """Alerts not delivered yet, kept in the state directory for the next start (the
        scheduler that owns the state directory only)."""

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
        if self._history is None:
            raise TuischedError("the runtime is not started")
        return self._history

    @property
    def history_if_open(self) -> AsyncHistory | None:
        """The history writer, once start opened it (it stays after stop, closed)."""
        return self._history

    @property
    def unwritten(self) -> tuple[int, int]:
        """What is kept in memory because the disk or database does not take it now:
        (history writes, audit log bytes)."""
        writes = self._history.unwritten if self._history is not None else 0
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
            self._engine = self._history = self._audit = self.cluster = None
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
        self._processes_changed = asyncio.Event()
        self._descendants = Descendants(record, changed=self._processes_changed.set)
        install_child_watcher()
        self.bus.bind(asyncio.get_running_loop())
        self.latest.subscribe(self.bus)
        self._start_metrics()  # early: a port in use stops the start before anything fires
        parts.push_async_callback(self._stop_metrics)  # late: /healthz says 503 while runs drain
        parts.push_async_callback(self._close_at_stop)  # after the drain (the control socket)
        parts.push_async_callback(in_thread, Lane.AUDIT, self._actions_log.close)
        self._audit = AuditLog(settings.state_dir / "audit.log", settings.timezone)
        self._audit.subscribe(self.bus)
        parts.push_async_callback(self._close_audit)
        parts.callback(self._told_stopped)  # once the history holds every run's end
        await self._open_history()
        parts.push_async_callback(self._close_history)
        self._start_history_checks()
        parts.push_async_callback(self._stop_history_checks)
        kept: list[KeptAlert] = []
        if role.follows_runs and role.exclusive:
            self._outbox = Outbox(settings.state_dir / OUTBOX_FILE, self._clock)
            kept = await self._outbox.load()
            parts.push_async_callback(self._close_outbox)  # after the drain: what is left
        if role.follows_runs:
            self._start_alerts()
            self._start_webhooks()
            self._resend(kept)
        parts.push_async_callback(self._drain_alerts_left)
        now = self._clock.now()
        down_since = None
        if role.fires_slots:
            down_since = await self.history.call(lambda store: store.last_alive(self.node))
            await self._close_abandoned(now)
        add_config_folder_to_path(self.config)
        # The keeper leaves last: if this scheduler dies while it stops what ended runs
        # left, the keeper still ends them (and at a clean stop it finds nothing left).
        parts.push_async_callback(self._stop_keeper)
        self._following = asyncio.get_running_loop().create_task(self._follow_processes())
        parts.push_async_callback(self._stop_leftovers)
        journals = settings.state_dir / FORK_JOURNALS if role.exclusive else None
        open_fork_servers(journals, self._clock)
        parts.push_async_callback(close_fork_servers)  # before leftovers are looked for
        if role.exclusive:  # the scheduler that runs the jobs: its runs end with it
            self._keeper = Keeper(settings.state_dir / KEEPER_LOG, grace=self._kill_grace,
                                  record=record)  # fmt: skip
            await self._keeper.start()  # stopped after the leftovers (`_stop_keeper`)
        if settings.cluster is not None and role.fires_slots:
            self.cluster = await self._join_cluster(settings.cluster)
            parts.push_async_callback(self._leave_cluster)  # the runs' ends, fenced, then leave
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
            await self._mark_alive()
            self._heartbeat = asyncio.get_running_loop().create_task(self._beat())
            parts.push_async_callback(self._stop_heartbeat)
            self._start_retention()
        parts.push_async_callback(self._stop_retention)  # a reload may have started it
        self.state = SchedulerState.RUNNING
        self.started_at = now
        self.bus.publish(
            SchedulerStarted(
                at=now, node=self.node, config_path=self.config.path, jobs=len(self.config.jobs)
            )
        )

    async def _open_history(self) -> None:
        """Open the history off the loop (a SQLite file's damage check, or a silent
        PostgreSQL, takes seconds), then read each job's newest run from it."""
        password = self._secrets.get("PGPASSWORD")
        store = await in_thread(
            Lane.FILES, lambda: open_history(self.config, password=password, busy_ms=WRITER_BUSY_MS)
        )
        self._history_file = store.sqlite_path
        database = str(store.sqlite_path or "history")
        store.on_damage = lambda damage: self._history_damaged(database, damage)
        journal: Journal | None = None
        kept: list[Kept] = []
        if self.role.exclusive and self.config.settings.cluster is None:
            path = self.config.settings.state_dir / HISTORY_JOURNAL
            try:
                journal, kept = await in_thread(Lane.FILES, Journal.open, path)
            except (OSError, StateError) as error:  # runs go on; an outage keeps writes in memory
                log.error("history: cannot use the journal %s: %s", path, error)  # noqa: TRY400
        if kept:
            log.warning("history: the journal kept %s since the last run: they land first",
                        counted(len(kept), "write"))  # fmt: skip
        self._history = AsyncHistory(store, journal=journal, kept=kept, clock=self._clock)
        self._history.start()
        self.latest.merge(await self._history.call(lambda store: store.last_runs()))

    def _history_damaged(self, database: str, damage: HistoryDamagedError) -> None:
        """Damage found while running (on the writer's thread, once): one ERROR line, and
        the event that the console shows."""
        said = (f"{damage}. Meanwhile runs go on, and their records are kept in memory "
                "(not written to the damaged file)")  # fmt: skip
        log.error("history: %s", said)
        self.bus.publish(HistoryDamaged(at=self._clock.now(), database=database, error=said))

    def _start_history_checks(self) -> None:
        """Look at a SQLite history's file for damage every few minutes (issue 26)."""
        if self._history_file is not None:
            self._checking = asyncio.get_running_loop().create_task(
                keep_checking(self.history, self._history_file, self._clock)
            )

    async def _stop_history_checks(self) -> None:
        await _cancelled(self._checking)
        self._checking = None

    async def _start_engine(
        self, parts: contextlib.AsyncExitStack, *, down_since: datetime | None
    ) -> None:
        """The engine, and the dependency triggers that follow its runs (they stop before
        it drains)."""
        settings = self.config.settings
        engine = self._engine = Engine(
            self.config, bus=self.bus, history=self.history, node=self.node,
            output_dir=settings.state_dir / "output", clock=self._clock,
            kill_grace=self._kill_grace, descendants=self._descendants, keeper=self._keeper,
            cluster=self.cluster,
        )  # fmt: skip
        parts.push_async_callback(self._drain_engine)
        if self.role.follows_runs:
            self._triggers = DependencyTrigger(engine, lambda: self.config, self._clock)
            self._triggers.subscribe(self.bus)
            parts.callback(self._triggers.stop)
        await engine.start(down_since=down_since, fire=self.role.fires_slots)

    async def _join_cluster(self, settings: ClusterSettings) -> ClusterLink:
        """Open the cluster's database (ClusterDatabaseError: what to fix); one that is
        only away now is waited for in the background."""
        # Here, not at the top: a single node never imports psycopg (see pgdriver).
        from tuisched.runtime.cluster.database import read_password  # noqa: PLC0415
        from tuisched.runtime.cluster.link import ClusterLink  # noqa: PLC0415

        environ = dict(self._secrets)
        password = await in_thread(Lane.FILES, read_password, settings, environ)
        keeper = self._keeper
        link = ClusterLink(settings, self.config, password=password, node_name=self.node,
                           now=self._clock.now, fence=keeper.fence if keeper else None)  # fmt: skip
        await link.open()
        return link

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

    async def _drain_engine(self) -> None:
        if self._engine is not None:
            await self._engine.drain(self._grace)

    async def _leave_cluster(self) -> None:
        if self.cluster is not None:
            await self.cluster.stop(self._grace)

    async def _stop_heartbeat(self) -> None:
        """No more beats; the last one says when firing stopped (the next start records
        later slots MISSED)."""
        await _cancelled(self._heartbeat)
        self._heartbeat = None
        await self._mark_alive()

    async def _drain_alerts_left(self) -> None:
        """Mail gets what is left of the grace (at least MAIL_GRACE s for the last runs'
        alerts); none after a failed start."""
        grace = self._grace
        spent = (self._clock.now() - self._draining_since).total_seconds()
        await self._drain_alerts(min(grace, max(grace - spent, MAIL_GRACE)))

    async def _close_history(self) -> None:
        if self._history is not None:
            await self._history.close()

    def _told_stopped(self) -> None:
        """Say the scheduler stopped (only one that ran), and let the audit log hear it."""
        if self.state is SchedulerState.STOPPING:
            self.bus.publish(SchedulerStopped(at=self._clock.now()))
        self.bus.flush()  # the audit log must see the last runs before it closes

    async def _close_audit(self) -> None:
        if self._audit is not None:
            await in_thread(Lane.AUDIT, self._audit.close)

    async def _close_at_stop(self) -> None:
        for closer in self._closers:
            try:
                await closer()
            except Exception:  # the stop goes on: the lock must be released
                log.exception("closing %r at stop failed", closer)
        self._closers.clear()

    async def _follow_processes(self) -> None:
        """Look for the processes of runs once a second, and soon after a run starts or
        ends (on the runtime's clock)."""
        changed = self._processes_changed
        while True:
            asking = asyncio.ensure_future(changed.wait())
            try:
                await self._clock.wait({asking}, FOLLOW_SECONDS - FOLLOW_GAP)
            finally:
                await _cancelled(asking)
            asked = changed.is_set()
            changed.clear()
            if asked or self._descendants.watching:
                try:
                    await in_thread(Lane.PROCESSES, self._descendants.scan)
                except Exception:  # the runs go on; only their leftovers may be missed
                    log.exception("looking for the processes of runs failed")
            await self._clock.sleep(FOLLOW_GAP)

    async def _stop_leftovers(self) -> None:
        """Stop what ended runs left running: SIGTERM, then SIGKILL after the kill grace."""
        await _cancelled(self._following)
        self._following = None
        await in_thread(Lane.PROCESSES, self._descendants.scan)
        stopped = await in_thread(Lane.PROCESSES, self._descendants.stop_all, signal.SIGTERM)
        if stopped:
            log.warning("stopping %s that ended runs left running",
                        counted(stopped, "process", "processes"))  # fmt: skip
            await self._clock.sleep(min(self._kill_grace, LEFTOVER_GRACE))
            await in_thread(Lane.PROCESSES, self._descendants.scan)
            await in_thread(Lane.PROCESSES, self._descendants.stop_all, signal.SIGKILL)
        await in_thread(Lane.PROCESSES, self._descendants.forget_record)

    async def _stop_keeper(self) -> None:
        """Let the keeper go, once no run and nothing a run left is running."""
        if self._keeper is not None:
            await self._keeper.stop()

    def _start_alerts(self) -> None:
        if self.config.email is None:
            return
        self._secrets.take(secret_names(self.config))
        mailer = SmtpMailer(self.config.email.smtp, env=self._secrets, local_hostname=self.node)
        self._alerts = AlertHandler(
            lambda: self.config,
            mailer,
            bus=self.bus,
            hostname=self.node,
            clock=self._clock,
            outbox=self._outbox,
        )
        self._alert_subscriptions = self._alerts.subscribe(self.bus)

    async def _drain_alerts(self, grace: float) -> None:
        """Let the last runs' mails go out (bounded by `grace`), then report what is left."""
        handlers: list[AlertHandler | WebhookHandler] = [
            *self._retired_alerts, *([self._alerts] if self._alerts else []),
            *([self._webhooks] if self._webhooks else []),
        ]  # fmt: skip
        if not handlers:
            return
        self.bus.flush()  # the last conclusions start their mails and posts
        await asyncio.gather(*(handler.drain(grace) for handler in handlers))
        self.bus.flush()  # AlertSent / AlertFailed reach the log and the console

    def hurry(self) -> None:
        """During a drain, stop every run now instead of waiting for the grace period."""
        if self._engine is not None:
            self._engine.stop_all(Result.SHUTDOWN, kill=True)

    async def _close_abandoned(self, now: datetime) -> None:
        assert self._history is not None  # noqa: S101  (called from _start_parts)
        closed = await self._closed_abandoned(now)
        ours = await self._runs_left_carried()
        killed = await self._kill_left_processes([run.run_id for run in closed] + ours)
        if closed:
            log.warning(
                "a dead scheduler left %s running; %s killed",
                counted(len(closed), "run"),
                counted(killed, "leftover process", "leftover processes"),
            )  # fmt: skip
        elif killed:
            log.warning("%s left by the runs of a dead scheduler killed",
                        counted(killed, "process", "processes"))  # fmt: skip
        for run in closed:
            self.bus.publish(RunAbandoned(at=now, run=run))

    async def _closed_abandoned(self, now: datetime) -> list[RunRecord]:
        """Close the runs a dead scheduler on this node left open, as ABANDONED: those of
        the database, and those of the journal that have not landed yet. A database that
        takes no writes now gets the closings as held writes (the journal keeps them)."""
        assert self._history is not None  # noqa: S101  (called from _start_parts)
        history, node = self._history, self.node
        kept = {run.run_id: run for run in await history.held_runs()}
        try:
            closed = await history.call(lambda store: store.close_abandoned(node, now))
        except HistoryUnavailableError:
            if not history.journaled:
                raise
            found = await history.call(lambda store: store.abandonable(node, now))
            closed = [run for run in found if run.run_id not in kept]  # judged by what is kept
            history.write_soon([], closed)
        seen = {run.run_id for run in closed}
        held = [
            abandoned(run, now) for run in kept.values()
            if run.state in (RunState.QUEUED, RunState.RUNNING) and run.run_id not in seen
            and (run.node == node or run.node.startswith(f"{node}:"))
        ]  # fmt: skip
        if held:
            history.write_soon([], held)
        return closed + held

    async def _runs_left_carried(self) -> list[str]:
        """The runs of this scheduler whose id a process still carries in its environment,
        however long ago the runs ended (their processes are a dead scheduler's leftovers).

        Only with the state directory's own history, which no other scheduler writes
        (the instance lock): a database shared with other schedulers (`history:`, a
        cluster) may hold the runs of a live one on a host of the same name.
        """
        settings = self.config.settings
        if settings.history or settings.cluster is not None or not self.role.exclusive:
            return []
        carried = sorted(await in_thread(Lane.PROCESSES, carried_run_ids))
        if not carried:
            return []
        ours = await self.history.call(lambda store: store.runs_of(self.node, carried))
        ours.update(run.run_id for run in await self.history.held_runs()  # not landed yet
                    if run.run_id in carried and run.node == self.node)  # fmt: skip
        return sorted(ours)

    async def _kill_left_processes(self, run_ids: list[str]) -> int:
        """Kill what a dead scheduler's runs left: the processes recorded in the state
        directory, the python runs' processes its fork servers journaled, every process
        carrying the id of one of those runs or of `run_ids` (abandoned, or carried),
        and everything under them or in their sessions and groups (`leftovers.py`).
        How many."""
        state_dir = self.config.settings.state_dir
        exclusive = self.role.exclusive
        return await in_thread(
            Lane.PROCESSES, kill_left_behind,
            state_dir / PROCESSES_RECORD if exclusive else None,
            state_dir / FORK_JOURNALS if exclusive else None, run_ids,
        )  # fmt: skip

    async def _mark_alive(self) -> None:
        """Note in the history that this scheduler is alive now (a heartbeat).

        A history that takes no write now (its outage is reported by the
        writer) costs only this beat: the next start then counts missed slots
        from an earlier beat, which records more MISSED slots, never fewer.
        """
        if self._history is not None:
            at, pid = self._clock.now(), os.getpid()
            try:
                await self._history.call(lambda store: store.mark_alive(self.node, at, pid))
            except HistoryUnavailableError as error:
                log.debug("heartbeat not noted: %s", error)

    async def _beat(self) -> None:
        while True:
            await self._clock.sleep(HEARTBEAT_SECONDS)
            try:
                await self._mark_alive()
                if self._engine is not None:  # successes recorded by other processes
                    await self._engine.waiting_room.recheck()
            except Exception:
                log.exception("could not record the heartbeat")

    async def _apply_config(self, config: Config, diff: ConfigDiff, origin: str) -> None:
        """Put `config` in force: the schedule, and the mailer if `email:` changed."""
        email_changed = config.email != self.config.email
        self._warn_metrics_changed(config)
        self.config = config
        if self.role.fires_slots and self.state is SchedulerState.RUNNING:
            self._start_retention()  # a reload that sets history_retention starts it
        if config.settings.history_retention is None:
            await self._stop_retention()  # and the one that unsets it stops it (no hourly pass)
        if self._engine is not None:
            await self._engine.apply(config)
        if email_changed:
            for subscription in self._alert_subscriptions:
                subscription.unsubscribe()  # its mails in flight go on, drained at stop
            if self._alerts is not None:
                self._retired_alerts.append(self._alerts)
            self._alerts = None
            self._start_alerts()
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

    def _warn_metrics_changed(self, config: Config) -> None:
        """The metrics address is bound at start; a reload that moves it says so."""
        before, after = self.config.settings.metrics, config.settings.metrics
        if before != after and self.role.fires_slots:
            log.warning("settings.metrics changed: it takes effect at the next start")

    # --- webhook alerts (issue 16, item 4) ----------------------------------------------

    def _start_webhooks(self) -> None:
        """Post alerts to the configuration's webhooks (now and after any reload)."""
        self._webhooks = WebhookHandler(
            lambda: self.config, HttpPoster(), bus=self.bus, hostname=self.node,
            clock=self._clock, secrets=self._secrets, outbox=self._outbox,
        )  # fmt: skip
        self._webhooks.subscribe(self.bus)

    # --- alerts kept by the previous scheduler (issue 26) ---------------------------------

    def _resend(self, kept: list[KeptAlert]) -> None:
        """Send the alerts the previous scheduler kept, through today's mailer and webhooks."""
        if kept:
            log.info("sending %s kept since before the last stop", counted(len(kept), "alert"))
        for alert in kept:
            if alert.channel != MAIL:
                assert self._webhooks is not None  # noqa: S101  (started with the mailer)
                self._webhooks.resend(alert)
            elif self._alerts is not None:
                self._alerts.resend(alert)
            else:
                log.warning("%s alert mail for job %r kept since before the last stop "
                            "dropped: email is not configured now",
                            alert.alert, alert.job)  # fmt: skip
                if self._outbox is not None:
                    self._outbox.done(alert.key)

    async def _close_outbox(self) -> None:
        if self._outbox is not None:
            await self._outbox.close()
            self._outbox = None

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

    # --- history retention (issue 16) ---------------------------------------------------

    def _start_retention(self) -> None:
        """Prune the history in the background, now and every hour (whatever the
        configuration says then: a reload may change or unset `history_retention`).

        Only once the configuration asks for it (at start, or the first reload that
        sets it): a scheduler that keeps everything arms no hourly timer for it. A
        reload that unsets it stops the pass (`_apply_config`); one that sets it again
        starts it again.
        """
        wanted = self.config.settings.history_retention
        if self._pruning is not None or wanted is None or self._history is None:
            return
        cluster = self.cluster
        shared: SharedPrune | None = None
        if cluster is not None:  # the shared table too, one node at a time
            shared = functools.partial(cluster.store.prune, batch=PRUNE_BATCH)
        self._pruning = asyncio.get_running_loop().create_task(keep_pruning(
            self._history, lambda: self.config.settings.history_retention, self._clock,
            self.config.settings.state_dir / "output", shared=shared,
        ))  # fmt: skip

    async def _stop_retention(self) -> None:
        await _cancelled(self._pruning)
        self._pruning = None
