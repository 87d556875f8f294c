"""`tuisched --no-ui`: the runtime on a server, driven by signals (SPEC R19).

SIGTERM/SIGINT drain (no new runs; running ones get `shutdown_grace`, then
are stopped and recorded); a second one stops the runs at once. SIGHUP
re-reads the configuration; a shutdown asked through the control socket
drains too. Under systemd (`Type=notify`) it says READY, STATUS, WATCHDOG
and STOPPING (see `notify`). Exit codes: 0 after a clean drain, 73 when the
state directory cannot be used, 75 when another instance holds it, 78 on a
bad configuration (a cluster database that refuses this node included: a
wrong password, no such database, no rights, a newer schema; and a
`settings.metrics.listen` whose port is in use).
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

from tuisched.domain.errors import (
    ConfigError,
    TuischedError,
)
from tuisched.domain.events import SchedulerStopping
from tuisched.domain.text import counted
from tuisched.frontends.eventlog import configure_logging
from tuisched.frontends.notify import NOTIFY_VARIABLES, Notifier, notifying
from tuisched.frontends.serving import (
    EX_CONFIG,
    EX_TEMPFAIL,
    Serving,
    start_failure_code,
)
from tuisched.runtime.control import (
    AlreadyRunningError,
    DriverMissingError,
    LocalScheduler,
    SchedulerControl,
    who,
)

log = logging.getLogger(__name__)


def run_headless(config_path: Path, *, log_format: str = "human") -> int:
    """Run the scheduler until a signal stops it; return the exit status."""
    configure_logging(log_format)
    try:
        scheduler = LocalScheduler.from_file(config_path)
    except ConfigError as error:
        for problem in error.problems:
            log.error("%s", problem)  # noqa: TRY400  (a report, not a crash: no traceback)
        if not isinstance(error, DriverMissingError):  # its line says all: what to install
            log.error("not started: the configuration is not valid")  # noqa: TRY400
        return EX_CONFIG
    configure_logging(log_format, tz=scheduler.timezone)
    return asyncio.run(_serve(scheduler))


async def _serve(scheduler: LocalScheduler) -> int:
    notifier = Notifier.from_environment(_take_notify_variables())  # before any job starts
    serving = Serving(scheduler)  # handlers first: a signal during start-up must drain, not kill
    try:
        await scheduler.start()
    except AlreadyRunningError as error:
        hint = ""
        if scheduler.in_cluster:
            hint = (
                "; to run another node of this cluster on this machine, name it: "
                "TUISCHED_NODE_NAME=NAME (its state then goes to STATE_DIR/nodes/NAME)"
            )
        log.error("%s%s", error, hint)  # noqa: TRY400  (expected; no traceback)
        return EX_TEMPFAIL
    except TuischedError as error:  # what to fix is in the line: a report, not a crash
        log.error("not started: %s", error)  # noqa: TRY400
        return start_failure_code(error)
    return await _serve_notifying(scheduler, serving, notifier)


# --- systemd notifications (Type=notify units; see tuisched.frontends.notify) -----------


def _take_notify_variables() -> dict[str, str]:
    """systemd's variables for this process, taken out of the environment so that jobs
    (which inherit it) do not see the socket or speak for the scheduler on it."""
    return {name: os.environ.pop(name) for name in NOTIFY_VARIABLES if name in os.environ}


async def _serve_notifying(
    scheduler: LocalScheduler, serving: Serving, notifier: Notifier | None
) -> int:
    """Serve until stopped, telling systemd READY, STATUS, WATCHDOG and STOPPING."""
    control = scheduler.control(who("service manager"))
    async with notifying(notifier, lambda: _status_line(control)) as stopping:
        heard = control.subscribe(
            lambda event: stopping() if isinstance(event, SchedulerStopping) else None
        )
        try:
            return await serving.until_stopped()
        finally:
            heard.unsubscribe()


async def _status_line(control: SchedulerControl) -> str:
    """What `systemctl status` shows: `STATE: N jobs, N running, N queued, N waiting`."""
    status = await control.status()
    return (
        f"{status.state}: {counted(status.jobs, 'job')}, {status.running} running, "
        f"{status.queued} queued, {status.waiting} waiting"
    )
