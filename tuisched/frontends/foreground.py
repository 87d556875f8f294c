"""`tuisched run JOB`: one run now, in the foreground, on the scheduler's own engine.

The output streams to stdout as plain text, every line of it (read from the
run's output file as the run writes it); one line per run that ends goes to
stderr. Ctrl-C (or SIGTERM) stops the run (SIGTERM to its process group,
SIGKILL after the grace period). The run goes through the same engine as a
scheduled one: retries, timeout, history and audit log. With `--fire-events`
its alerts are sent and its `after` dependants run in the foreground too.
The exit status follows the job asked for (its last attempt): 0 success;
the job's own exit code for a failed command; 124 timed out; 127 could not
launch; 130 stopped; 1 any other failure. A reader of the output that goes away
(`| head`) reads no more of it; the run goes on to its end.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import TextIO

from tuisched.domain.events import Event, RunFinished, RunNotStarted, RunOutputWritten
from tuisched.domain.runs import Result, RunRecord
from tuisched.domain.text import plain_text
from tuisched.frontends.exits import exit_status
from tuisched.frontends.outputstream import OutputStream
from tuisched.runtime.control import LocalScheduler, who


def run_in_foreground(
    config_path: Path, job: str, *, fire_events: bool, out: TextIO, err: TextIO
) -> int:
    """Run `job` once now and return the exit status (ConfigError, UnknownJobError)."""
    scheduler = LocalScheduler.foreground(config_path, fire_events=fire_events)
    return asyncio.run(_main(scheduler, job, out, err))


async def _main(scheduler: LocalScheduler, job: str, out: TextIO, err: TextIO) -> int:
    control = scheduler.control(who("run"))
    shown = _Shown(OutputStream(control, out, outlive_reader=True), err)
    control.subscribe(shown.events.put_nowait)
    showing = asyncio.create_task(shown.show())
    loop = asyncio.get_running_loop()
    await scheduler.start()
    stopped = False

    def interrupted() -> None:
        nonlocal stopped
        stopped = True
        scheduler.stop_runs()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, interrupted)
    try:
        final = await scheduler.run_job(job)
        # Every event of what it set off crossed before the answer (one queue, in order):
        # show them all, the last lines and the ends, before the stop.
        shown.events.put_nowait(None)
        await showing
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        showing.cancel()
        await scheduler.stop(grace=0 if stopped else None, reason="tuisched run")
    return exit_status(final)


class _Shown:
    """The events of the runs, shown in the order they came: each run's whole output to
    stdout (read from its file, see `OutputStream`), and how it ended to stderr."""

    def __init__(self, stream: OutputStream, err: TextIO) -> None:
        self.events: asyncio.Queue[Event | None] = asyncio.Queue()
        """The events to show, in order; None ends the showing."""
        self._stream = stream
        self._err = err

    async def show(self) -> None:
        while (event := await self.events.get()) is not None:
            if isinstance(event, RunOutputWritten):
                await self._stream.catch_up(event.run.run_id)
            elif isinstance(event, RunFinished | RunNotStarted):
                await self._stream.catch_up(event.run.run_id)
                self._said_end(event.run)

    def _said_end(self, run: RunRecord) -> None:
        if run.result is Result.DEPENDENCY:
            self._err.write(f"{run.job}: NOT_STARTED ({run.reason})\n")
        else:
            summary = plain_text(run.status or run.reason)
            self._err.write(f"{run.job}#{run.run_id}: {run.state} ({run.result}) {summary}\n")
        self._err.flush()
