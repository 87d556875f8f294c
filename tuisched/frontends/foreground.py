"""`tuisched run JOB`: one run now, in the foreground, on the scheduler's own engine.

The output streams to stdout as plain text; one line per run that ends goes
to stderr. Ctrl-C (or SIGTERM) stops the run (SIGTERM to its process group,
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
from tuisched.domain.runs import Result
from tuisched.domain.text import plain_text
from tuisched.frontends.exits import exit_status, reader_gone
from tuisched.runtime.control import LocalScheduler, who


def run_in_foreground(
    config_path: Path, job: str, *, fire_events: bool, out: TextIO, err: TextIO
) -> int:
    """Run `job` once now and return the exit status (ConfigError, UnknownJobError)."""
    scheduler = LocalScheduler.foreground(config_path, fire_events=fire_events)
    return asyncio.run(_main(scheduler, job, out, err))


async def _main(scheduler: LocalScheduler, job: str, out: TextIO, err: TextIO) -> int:
    scheduler.control(who("run")).subscribe(lambda event: _show(event, out, err))
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
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        await scheduler.stop(grace=0 if stopped else None, reason="tuisched run")
    return exit_status(final)


def _show(event: Event, out: TextIO, err: TextIO) -> None:
    """Output lines to stdout; how each run ended to stderr."""
    if isinstance(event, RunOutputWritten):
        try:
            out.write("".join(f"{line}\n" for line in event.lines))
            out.flush()
        except BrokenPipeError:  # the reader went away (`| head`): the run goes on unread
            reader_gone()
    elif isinstance(event, RunFinished | RunNotStarted):
        run = event.run
        if run.result is Result.DEPENDENCY:
            err.write(f"{run.job}: NOT_STARTED ({run.reason})\n")
        else:
            summary = plain_text(run.status or run.reason)
            err.write(f"{run.job}#{run.run_id}: {run.state} ({run.result}) {summary}\n")
        err.flush()
