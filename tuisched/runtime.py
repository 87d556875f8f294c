"""The runtime: one start order and one stop order for everything a scheduler is.

    start: state dir -> instance lock -> bus -> history -> audit log
           -> close abandoned runs -> engine (pauses, waiting runs, missed slots,
           then firing) -> dependency triggers -> heartbeat
    stop:  heartbeat -> dependency triggers -> engine drain -> history flush
           -> audit log -> lock

The headless front end and the console both drive this object unchanged;
nothing about scheduling or reloading lives in a front end.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import socket
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from tuisched.bus import EventBus, Subscription
from tuisched.config import load_config
from tuisched.engine import Engine
from tuisched.errors import ConfigError, TuischedError
from tuisched.events import (
    ConfigLoaded,
    ConfigRejected,
    RunAbandoned,
    SchedulerStarted,
    SchedulerStopped,
    SchedulerStopping,
)
from tuisched.execution import install_child_watcher, kill_leftovers
from tuisched.handlers.alerts import AlertHandler
from tuisched.handlers.audit import AuditLog
from tuisched.handlers.triggers import DependencyTrigger
from tuisched.mail import SmtpMailer
from tuisched.model import Config
from tuisched.runs import Result, RunRecord
from tuisched.store import AsyncHistory, HistoryStore, prepare_state_dir

log = logging.getLogger(__name__)

HEARTBEAT_SECONDS = 10.0
"""How often the runtime records that it is alive (bounds what a crash leaves unclear)."""


class AlreadyRunningError(TuischedError):
    """Another tuisched holds the state directory."""

    def __init__(self, state_dir: Path, pid: int | None) -> None:
        self.pid = pid
        who = f"pid {pid}" if pid else "another process"
        super().__init__(f"tuisched is already running on {state_dir} ({who})")


class InstanceLock:
    """An exclusive lock on a file in the state directory, holding the owner's pid."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock, or raise AlreadyRunningError naming the holder's pid."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip()
            os.close(fd)
            pid = int(holder) if holder.isdigit() else None
            raise AlreadyRunningError(self.path.parent, pid) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        """Give the lock back (idempotent). The file stays; its content is stale then."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def add_config_folder_to_path(config: Config) -> None:
    """Let `python: jobs.backup:run` live beside the configuration file."""
    folder = str(config.path.parent)
    if folder not in sys.path:
        sys.path.append(folder)


def open_history(config: Config) -> HistoryStore:
    """The history store the configuration names (default: state_dir/history.db)."""
    if config.settings.history:
        return HistoryStore.open(config.settings.history)
    return HistoryStore.open_sqlite(config.settings.state_dir / "history.db")


class Runtime:
    """A scheduler: config, bus, history, audit log and engine, started and stopped as one."""

    def __init__(
        self,
        config: Config,
        *,
        bus: EventBus | None = None,
        clock: Callable[[], datetime] | None = None,
        kill_grace: float = 5.0,
    ) -> None:
        self.config = config
        self.bus = bus or EventBus()
        self.node = socket.gethostname()
        self._clock = clock or (lambda: datetime.now(UTC))
        self._kill_grace = kill_grace
        self._lock = InstanceLock(config.settings.state_dir / "tuisched.lock")
        self._history: AsyncHistory | None = None
        self._audit: AuditLog | None = None
        self._engine: Engine | None = None
        self._triggers: DependencyTrigger | None = None
        self._alerts: AlertHandler | None = None
        self._alert_subscriptions: list[Subscription] = []
        self._heartbeat: asyncio.Task[None] | None = None

    @classmethod
    def from_file(cls, path: Path, **kwargs: object) -> Runtime:
        """A runtime for the configuration at `path` (ConfigError if it is not valid)."""
        return cls(load_config(path), **kwargs)  # type: ignore[arg-type]

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

    # --- start and stop ----------------------------------------------------------

    async def start(self) -> None:
        """Start everything, in order. Raises AlreadyRunningError if the state dir is taken."""
        settings = self.config.settings
        prepare_state_dir(settings.state_dir)
        self._lock.acquire()
        try:
            await self._start_parts()
        except BaseException:
            await self._unwind()
            raise

    async def _unwind(self) -> None:
        """Close whatever a failed start had opened, in reverse order."""
        if self._engine is not None:
            await self._engine.drain(0)
            self._engine = None
        await self._drain_alerts(0)
        if self._history is not None:
            await self._history.close()
            self._history = None
        if self._audit is not None:
            self._audit.close()
            self._audit = None
        self._lock.release()

    async def _start_parts(self) -> None:
        settings = self.config.settings
        install_child_watcher()
        self.bus.bind(asyncio.get_running_loop())
        self._history = AsyncHistory(open_history(self.config))
        self._history.start()
        self._audit = AuditLog(settings.state_dir / "audit.log", settings.timezone)
        self._audit.subscribe(self.bus)
        self._start_alerts()
        now = self._clock()
        down_since = await self._history.call(lambda store: store.last_alive(self.node))
        await self._close_abandoned(now)
        add_config_folder_to_path(self.config)
        self._engine = Engine(
            self.config, bus=self.bus, history=self._history, node=self.node,
            output_dir=settings.state_dir / "output", clock=self._clock,
            kill_grace=self._kill_grace,
        )  # fmt: skip
        self._triggers = DependencyTrigger(self._engine, lambda: self.config)
        self._triggers.subscribe(self.bus)
        await self._engine.start(down_since=down_since)
        await self._mark_alive()
        self._heartbeat = asyncio.get_running_loop().create_task(self._beat())
        self.bus.publish(
            SchedulerStarted(
                at=now, node=self.node, config_path=self.config.path, jobs=len(self.config.jobs)
            )
        )

    async def stop(self, *, grace: float | None = None, reason: str = "shutdown") -> None:
        """Drain (no new runs; running ones get `grace`, then are stopped) and close."""
        if self._engine is None or self._history is None:
            return
        if grace is None:
            grace = self.config.settings.shutdown_grace.total_seconds()
        running = len(self._engine.running())
        self.bus.publish(SchedulerStopping(at=self._clock(), reason=reason, running=running))
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._heartbeat
        # Firing stops now: the next start records later slots as MISSED.
        await self._mark_alive()
        if self._triggers is not None:
            self._triggers.stop()
        await self._engine.drain(grace)
        await self._drain_alerts(grace)
        await self._history.close()
        self.bus.publish(SchedulerStopped(at=self._clock()))
        self.bus.flush()  # the audit log must see the last runs before it closes
        if self._audit is not None:
            self._audit.close()
        self._lock.release()
        self._engine = None

    def _start_alerts(self) -> None:
        if self.config.email is None:
            return
        mailer = SmtpMailer(self.config.email.smtp, local_hostname=self.node)
        self._alerts = AlertHandler(
            lambda: self.config, mailer, bus=self.bus, hostname=self.node, clock=self._clock
        )
        self._alert_subscriptions = self._alerts.subscribe(self.bus)

    async def _drain_alerts(self, grace: float) -> None:
        """Let the last runs' mails go out (bounded by `grace`), then report what is left."""
        if self._alerts is None:
            return
        self.bus.flush()  # the last RunFinished events start their mails
        await self._alerts.drain(grace)
        self.bus.flush()  # AlertSent / AlertFailed reach the log and the console

    def hurry(self) -> None:
        """During a drain, stop every run now instead of waiting for the grace period."""
        if self._engine is not None:
            self._engine.stop_all(Result.SHUTDOWN, kill=True)

    async def _close_abandoned(self, now: datetime) -> None:
        assert self._history is not None  # noqa: S101  (called from _start_parts)
        closed: list[RunRecord] = await self._history.call(
            lambda store: store.close_abandoned(self.node, now)
        )
        if closed:
            killed = kill_leftovers([run.run_id for run in closed])
            log.warning(
                "%d run(s) were left running by a dead scheduler; %d leftover process(es) killed",
                len(closed), killed,
            )  # fmt: skip
        for run in closed:
            self.bus.publish(RunAbandoned(at=now, run=run))

    async def _mark_alive(self) -> None:
        if self._history is not None:
            at, pid = self._clock(), os.getpid()
            await self._history.call(lambda store: store.mark_alive(self.node, at, pid))

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_SECONDS)
            try:
                await self._mark_alive()
            except Exception:
                log.exception("could not record the heartbeat")

    # --- operations ----------------------------------------------------------------

    def reload(self) -> bool:
        """Re-read the configuration file and apply it; a bad one changes nothing."""
        try:
            config = load_config(self.config.path)
        except ConfigError as error:
            self.bus.publish(
                ConfigRejected(at=self._clock(), path=self.config.path, problems=error.problems)
            )
            return False
        email_changed = config.email != self.config.email
        self.config = config
        if self._engine is not None:
            self._engine.apply(config)
        if email_changed and self._engine is not None:
            for subscription in self._alert_subscriptions:
                subscription.unsubscribe()  # mails in flight finish on their own
            self._alerts = None
            self._start_alerts()
        self.bus.publish(
            ConfigLoaded(
                at=self._clock(), path=config.path, jobs=len(config.jobs), groups=len(config.groups)
            )
        )
        return True

    def run_now(self, job: str) -> RunRecord:
        """Queue a manual run of `job`."""
        return self.engine.run_now(job)

    def stop_run(self, run_id: str, *, kill: bool = False) -> None:
        """Stop a queued, waiting or running run."""
        self.engine.stop_run(run_id, kill=kill)

    async def pause_job(self, name: str, *, paused: bool = True) -> None:
        """Pause (or resume) one job; the pause survives a restart."""
        await self.engine.set_paused("job", name, paused=paused)

    async def pause_group(self, name: str, *, paused: bool = True) -> None:
        """Pause (or resume) every job of a group; the pause survives a restart."""
        await self.engine.set_paused("group", name, paused=paused)

    async def pause_all(self, *, paused: bool = True) -> None:
        """Pause (or resume) every job; the pause survives a restart."""
        await self.engine.set_paused("all", "", paused=paused)
