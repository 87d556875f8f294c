"""A scheduler hosted by a front end in its own process: started, steered, stopped.

The console and headless mode host the scheduler they show: they start it,
steer it through the control seam (`control(actor)`), and stop it. This is
the one thing a hosting front end sees of the runtime besides the seam.

The runtime runs on a lane of its own (a thread and event loop: SPEC R26),
started with it and ended after it stops; the control socket is served from
that lane too, so the command-line verbs are answered whatever the front
end's loop is busy with. Every method here may be called from the front
end's loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from tuisched.domain.errors import SchedulerNotRunningError, TuischedError
from tuisched.domain.events import Event, RunConcluded
from tuisched.domain.runs import Result, RunRecord, Trigger
from tuisched.domain.views import SchedulerState
from tuisched.runtime.control.local import LocalControl
from tuisched.runtime.control.protocol import socket_path
from tuisched.runtime.loopthread import LoopThread
from tuisched.runtime.runtime import Runtime, foreground

if TYPE_CHECKING:  # aiohttp.web: only a scheduler that serves the socket imports it
    from tuisched.runtime.control.server import ControlServer

log = logging.getLogger(__name__)


class LocalScheduler:
    """A scheduler in this process, for the front end that hosts it."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._server: ControlServer | None = None
        self.lane = LoopThread()
        """The thread and event loop the runtime runs on, once started."""
        self._starting: asyncio.Future[None] | None = None

    @classmethod
    def from_file(cls, path: Path, *, kill_grace: float = 5.0) -> LocalScheduler:
        """The scheduler of the configuration at `path` (ConfigError if it is not valid)."""
        return cls(Runtime.from_file(path, kill_grace=kill_grace))

    @classmethod
    def foreground(cls, path: Path, *, fire_events: bool) -> LocalScheduler:
        """A runtime for `tuisched run`: it fires no slot and runs only what it is asked.

        The same engine, retries, timeouts, history and audit log as the
        scheduler; alerts and `after` dependants only with `fire_events`. It
        does not take the state directory: it may run beside the scheduler.
        """
        return cls(Runtime.from_file(path, role=foreground(fire_events=fire_events)))

    async def run_job(self, name: str) -> RunRecord:
        """Run `name` now and return its conclusion (its last attempt), once nothing of
        what it set off (dependants, their retries) is still in progress.

        Raises:
            UnknownJobError: no job by that name.
        """
        return await self.lane.run(self._run_job(name))

    async def _run_job(self, name: str) -> RunRecord:
        runtime = self._runtime
        concluded: asyncio.Future[RunRecord] = asyncio.get_running_loop().create_future()

        def hear(event: Event) -> None:
            if not isinstance(event, RunConcluded) or concluded.done():
                return
            if event.run.job == name and event.run.trigger is Trigger.MANUAL:
                concluded.set_result(event.run)

        subscription = runtime.subscribe(hear)
        try:
            runtime.engine.run_now(name)
            final = await concluded
            await runtime.settled()
        finally:
            subscription.unsubscribe()
        return final

    def stop_runs(self) -> None:
        """Stop every run in progress now (an operator's Ctrl-C): recorded as stopped."""
        self.lane.call_soon(lambda: self._runtime.engine.stop_all(Result.STOPPED))

    @property
    def config_path(self) -> Path:
        """The configuration file."""
        return self._runtime.config.path

    @property
    def state_dir(self) -> Path:
        """The scheduler's state directory (`settings.state_dir`)."""
        return self._runtime.config.settings.state_dir

    @property
    def left_unwritten(self) -> int:
        """History writes that had not landed when it stopped (kept in the journal for the
        next start, or lost): a stop that leaves any is not a clean one."""
        history = self._runtime.history_if_open
        return history.left_unwritten if history is not None else 0

    @property
    def in_cluster(self) -> bool:
        """Whether the scheduler is a node of a cluster (`settings.cluster`)."""
        return self._runtime.config.settings.cluster is not None

    @property
    def timezone(self) -> ZoneInfo:
        """The scheduler's default zone (`settings.timezone`), for log lines and clocks."""
        return self._runtime.config.settings.timezone

    @property
    def state(self) -> SchedulerState:
        """Where the scheduler is in its life."""
        return self._runtime.state

    async def start(self) -> None:
        """Start the lane, then everything on it (AlreadyRunningError when the state
        directory is taken), and serve the control seam on the state directory's socket
        (a scheduler only). A start that fails ends the lane again.

        There is one start: called again, or by another caller, it waits for the same
        one. Cancelling a caller does not cancel the start (a console that detaches
        while its scheduler starts leaves it starting); `stop` undoes an unfinished one.
        """
        if self._starting is None:
            self._starting = asyncio.ensure_future(self._start_on_lane())
            self._starting.add_done_callback(_seen)
        await asyncio.shield(self._starting)

    async def _start_on_lane(self) -> None:
        self.lane.start()
        try:
            await self.lane.run(self._start())
        except BaseException:
            await self.lane.stop()
            raise

    async def _start(self) -> None:
        runtime = self._runtime
        if not runtime.role.exclusive:  # `tuisched run` serves no socket
            await runtime.start()
            return
        # Before the start, so that importing aiohttp.web delays no run.
        from tuisched.runtime.control.server import ControlServer  # noqa: PLC0415

        await runtime.start()
        path = socket_path(runtime.config.settings.state_dir)
        server = ControlServer(
            path, self.control, refused=runtime.actions.refused, config=runtime.config.path
        )
        try:
            await server.start()
        except (OSError, TuischedError) as error:
            log.warning("no control socket at %s: %s; attach and the CLI verbs will not "
                        "reach this scheduler", path, error)  # fmt: skip
            return
        self._server = server
        runtime.close_at_stop(server.stop_listening)

    async def stop(self, *, grace: float | None = None, reason: str = "shutdown") -> None:
        """Drain and stop (idempotent): no new runs; running ones get `grace` seconds;
        then end the lane.

        The control socket answers during the drain, and closes after it. A start
        still under way is undone, not finished first."""
        starting = self._starting
        if starting is not None and not starting.done():
            starting.cancel()
            await asyncio.wait({starting})  # undone on its lane, which it then ends
        with contextlib.suppress(SchedulerNotRunningError):  # the lane has ended already
            await self.lane.run(self._stop(grace=grace, reason=reason))
        await self.lane.stop()

    async def _stop(self, *, grace: float | None, reason: str) -> None:
        await self._runtime.stop(grace=grace, reason=reason)
        if self._server is not None:
            await self._server.stop()
            self._server = None

    def hurry(self) -> None:
        """During a drain, stop every run now."""
        self.lane.call_soon(self._runtime.hurry)

    def control(self, actor: str) -> LocalControl:
        """The control seam over this scheduler, recording commands as `actor`: one given
        while the scheduler starts acts once it has started."""
        return LocalControl(self._runtime, actor=actor, lane=self.lane, started=self._started)

    async def _started(self) -> None:
        """Wait for a start under way on this loop (how it ended is the start's caller's
        to hear: a command then finds the scheduler running, or not)."""
        starting = self._starting
        if starting is None or starting.done():
            return
        if starting.get_loop() is not asyncio.get_running_loop():
            return  # the control socket: served only once the start is over
        await asyncio.wait({starting})


def _seen(start: asyncio.Future[None]) -> None:
    """A start nobody awaits any more (its console closed) fails quietly: whoever stops
    the scheduler, or awaits `start` again, hears of it."""
    if not start.cancelled():
        start.exception()
