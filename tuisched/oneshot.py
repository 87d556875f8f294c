"""`tuisched run JOB`: one run now, in the foreground, recorded like any other.

The output streams to stdout as plain text; Ctrl-C stops the job (SIGTERM to
its process group, SIGKILL after the grace period). Alerts and dependants
are not fired. The exit status follows the outcome: 0 success; the job's own
exit code for a failed command; 124 timed out; 127 could not launch; 130
stopped by Ctrl-C; 1 any other failure.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import sys
from dataclasses import replace
from datetime import UTC, datetime
from typing import TextIO

from tuisched.engine import job_environment
from tuisched.execution import LaunchError, Runner, make_runner
from tuisched.handlers.audit import AuditLog
from tuisched.model import Config, Job
from tuisched.output import OutputCapture, plain_text
from tuisched.runs import Outcome, Result, RunRecord, RunState, Trigger, new_run_id
from tuisched.runtime import add_config_folder_to_path, open_history
from tuisched.store import AsyncHistory, prepare_state_dir


def exit_status(outcome: Outcome) -> int:
    """The process exit status that reports `outcome`."""
    if outcome.state is RunState.SUCCESS:
        return 0
    if outcome.result is Result.TIMED_OUT:
        return 124
    if outcome.result is Result.LAUNCH_FAILED:
        return 127
    if outcome.result is Result.STOPPED:
        return 130
    code = outcome.exit_code
    return code if code is not None and 0 < code < 256 else 1


def run_once(config: Config, job: Job, *, out: TextIO = sys.stdout) -> int:
    """Run `job` once in the foreground and return the exit status."""
    return asyncio.run(_run(config, job, out))


async def _run(config: Config, job: Job, out: TextIO) -> int:
    settings = config.settings
    prepare_state_dir(settings.state_dir)
    history = AsyncHistory(open_history(config))
    history.start()
    audit = AuditLog(settings.state_dir / "audit.log", settings.timezone)
    try:
        run = RunRecord(
            run_id=new_run_id(), job=job.name, slot=None, trigger=Trigger.MANUAL,
            state=RunState.QUEUED, queued_at=datetime.now(UTC), node=_node(),
        )  # fmt: skip
        await history.insert(run)
        closed = await _execute(config, job, run, history, out)
        await history.update(closed)
        audit.write(closed)
    finally:
        await history.close()
        audit.close()
    summary = plain_text(closed.status or closed.reason)
    print(
        f"{job.name}#{closed.run_id}: {closed.state} ({closed.result}) {summary}", file=sys.stderr
    )
    result = closed.result or Result.ERROR
    return exit_status(Outcome(state=closed.state, result=result, exit_code=closed.exit_code))


async def _execute(
    config: Config, job: Job, run: RunRecord, history: AsyncHistory, out: TextIO
) -> RunRecord:
    output_dir = config.settings.state_dir / "output" / job.name

    def show(lines: tuple[str, ...]) -> None:
        out.write("".join(f"{line}\n" for line in lines))
        out.flush()

    output = OutputCapture(output_dir / f"{run.run_id}.log", on_lines=show)
    add_config_folder_to_path(config)
    runner = make_runner(job.kind, env=job_environment(config, job, run), output=output)
    loop = asyncio.get_running_loop()
    # Signals and the timeout are armed before the launch, which can hang too.
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, runner.stop, Result.STOPPED)
    timer = None
    if job.timeout is not None:
        timer = loop.call_later(job.timeout.total_seconds(), runner.stop, Result.TIMED_OUT)
    try:
        run = replace(run, state=RunState.RUNNING, started_at=datetime.now(UTC))
        await history.update(run)
        run, outcome = await _launch_and_wait(runner, run, history)
    except Exception as error:  # never leave the row RUNNING
        status = f"error: {error}"
        outcome = Outcome(state=RunState.FAILED, result=Result.ERROR, status=status)
    finally:
        if timer is not None:
            timer.cancel()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    output.close()
    return run.finished(outcome, datetime.now(UTC), output.tail())


async def _launch_and_wait(
    runner: Runner, run: RunRecord, history: AsyncHistory
) -> tuple[RunRecord, Outcome]:
    try:
        pid = await runner.start()
    except LaunchError as error:
        reason = str(error)
        return run, Outcome(state=RunState.NOT_STARTED, result=Result.LAUNCH_FAILED, reason=reason)
    run = replace(run, pid=pid)
    history.update_soon(run)
    return run, await runner.wait()


def _node() -> str:
    # Not the scheduler's node name: a scheduler starting meanwhile must not
    # close this run as abandoned.
    return f"{socket.gethostname()}:run"
