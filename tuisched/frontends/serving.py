"""A scheduler served headless: events logged, signals obeyed, until it stops.

What `tuisched --no-ui` does once started, and what a console becomes when
it detaches or loses its terminal.
"""

from __future__ import annotations

import asyncio
import logging
import signal

from tuisched.domain.errors import (
    AlreadyRunningError,
    ClusterDatabaseError,
    MetricsListenError,
    StateError,
    TuischedError,
)
from tuisched.domain.events import Event, SchedulerStopping
from tuisched.frontends.eventlog import EventLog
from tuisched.runtime.control import LocalScheduler, SchedulerControl, who

log = logging.getLogger(__name__)

EX_OK = 0
EX_SOFTWARE = 70
EX_CANTCREAT = 73
"""The state directory (or a file in it) cannot be created or used."""
EX_IOERR = 74
"""The scheduler stopped with history writes that had not landed."""
EX_TEMPFAIL = 75
EX_CONFIG = 78


def start_failure_code(error: TuischedError) -> int:
    """The exit code of a scheduler that could not start, headless or in a console: 75
    another one holds the state directory, 78 what to fix is in the configuration (its
    cluster database, its metrics address), 73 the state directory is unusable, 70 else."""
    if isinstance(error, AlreadyRunningError):
        return EX_TEMPFAIL
    if isinstance(error, ClusterDatabaseError | MetricsListenError):
        return EX_CONFIG
    if isinstance(error, StateError):
        return EX_CANTCREAT
    return EX_SOFTWARE


class Serving:
    """A scheduler run headless: its events logged, signals obeyed, until it stops.

    SIGTERM/SIGINT drain (a second one stops the runs now), SIGHUP reloads, and a
    shutdown asked through the control socket ends it too. Also what a console
    that detached, or lost its terminal, becomes.
    """

    def __init__(self, scheduler: LocalScheduler, *, log_events: bool = True) -> None:
        """`log_events`: log each event (False when something logs them already)."""
        self._scheduler = scheduler
        self._stopping = asyncio.Event()
        self._reason = "signal"
        control = scheduler.control(who("headless"))
        write = EventLog(scheduler.timezone).write

        def hear(event: Event) -> None:
            if log_events:
                write(event)
            if isinstance(event, SchedulerStopping):  # asked through the control socket
                self._stopping.set()

        control.subscribe(hear)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._on_stop_signal, sig.name)
        loop.add_signal_handler(signal.SIGHUP, lambda: loop.create_task(_reload(control)))

    def _on_stop_signal(self, name: str) -> None:
        if self._stopping.is_set():
            log.warning("%s again: stopping every run now", name)
            self._scheduler.hurry()
        else:
            log.info("%s: draining", name)
            self._stopping.set()

    async def until_stopped(self) -> int:
        """Wait for a stop (a signal, or one asked through the socket); return 0 once done,
        74 when history writes had not landed (the history's line said how many)."""
        await self._stopping.wait()
        await self._scheduler.stop(reason="signal")
        return EX_IOERR if self._scheduler.left_unwritten else EX_OK


async def _reload(control: SchedulerControl) -> None:
    """SIGHUP: re-read the configuration (a bad one is refused and logged by the runtime)."""
    try:
        await control.reload()
    except TuischedError as error:
        log.warning("SIGHUP: %s", error)
