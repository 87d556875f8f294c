"""`tuisched --no-ui`: the runtime on a server, driven by signals (SPEC R19).

SIGTERM/SIGINT drain (no new runs; running ones get `shutdown_grace`, then
are stopped and recorded); a second one stops the runs at once. SIGHUP
re-reads the configuration. Exit codes: 0 after a clean drain, 75 when
another instance holds the state directory, 78 on a bad configuration.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from pathlib import Path

from tuisched.domain.errors import ConfigError
from tuisched.frontends.eventlog import EventLog, configure_logging
from tuisched.runtime.runtime import AlreadyRunningError, Runtime

EX_OK = 0
EX_TEMPFAIL = 75
EX_CONFIG = 78

log = logging.getLogger(__name__)


def run_headless(config_path: Path, *, log_format: str = "human") -> int:
    """Run the scheduler until a signal stops it; return the exit status."""
    configure_logging(log_format)
    try:
        runtime = Runtime.from_file(config_path)
    except ConfigError as error:
        for problem in error.problems:
            log.error("%s", problem)  # noqa: TRY400  (a report, not a crash: no traceback)
        log.error("not started: the configuration is not valid")  # noqa: TRY400
        return EX_CONFIG
    configure_logging(log_format, tz=runtime.config.settings.timezone)
    return asyncio.run(_serve(runtime))


async def _serve(runtime: Runtime) -> int:
    EventLog(runtime.config.settings.timezone).subscribe(runtime.bus)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_stop_signal(name: str) -> None:
        if stopping.is_set():
            log.warning("%s again: stopping every run now", name)
            runtime.hurry()
        else:
            log.info("%s: draining", name)
            stopping.set()

    # Handlers first: a signal during start-up must drain, not kill.
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_stop_signal, sig.name)
    loop.add_signal_handler(signal.SIGHUP, lambda: loop.create_task(runtime.reload()))
    try:
        await runtime.start()
    except AlreadyRunningError as error:
        log.error("%s", error)  # noqa: TRY400  (expected; no traceback)
        return EX_TEMPFAIL
    await stopping.wait()
    await runtime.stop(reason="signal")
    return EX_OK
