"""`tuisched run JOB`: one run now, in the foreground, recorded like any other.

The output streams to stdout as plain text; Ctrl-C stops the job (SIGTERM to
its process group, SIGKILL after the grace period). Alerts and dependants
are not fired unless asked (`--fire-events`): then the run's alerts are sent
and its dependants run in the foreground too, by the same `on`/`delay` rules
as in the scheduler. The exit status follows the outcome of the job asked
for: 0 success; the job's own exit code for a failed command; 124 timed out;
127 could not launch; 130 stopped by Ctrl-C; 1 any other failure.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import sys
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import TextIO

from tuisched.domain.bus import EventBus
from tuisched.domain.events import RunConcluded
from tuisched.domain.model import Config, Job
from tuisched.domain.model import Outcome as OnOutcome
from tuisched.domain.runs import Outcome, Result, RunRecord, RunState, Trigger, new_run_id
from tuisched.domain.text import plain_text
from tuisched.runtime.clock import SystemClock
from tuisched.runtime.engine.environment import job_environment
from tuisched.runtime.execution import LaunchError, Runner, make_runner
from tuisched.runtime.execution.output import OutputCapture
from tuisched.runtime.handlers.alerts import AlertHandler
from tuisched.runtime.handlers.audit import AuditLog
from tuisched.runtime.handlers.triggers import dependants, not_started_reason, outcome_of
from tuisched.runtime.mail import SmtpMailer
from tuisched.runtime.runtime import add_config_folder_to_path, open_history, paused_jobs
from tuisched.runtime.store import AsyncHistory, prepare_state_dir

ALERT_GRACE = 30.0
"""Seconds the last alert mails get before the command exits."""


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


def run_once(
    config: Config, job: Job, *, fire_events: bool = False, out: TextIO = sys.stdout
) -> int:
    """Run `job` once in the foreground and return the exit status."""
    return asyncio.run(_Foreground(config, out, fire_events=fire_events).main(job))


class _Foreground:
    """The history, audit log and (with --fire-events) alerts of foreground runs."""

    def __init__(self, config: Config, out: TextIO, *, fire_events: bool) -> None:
        self.config = config
        self.out = out
        self.fire_events = fire_events
        self.bus = EventBus()
        self.node = f"{socket.gethostname()}:run"
        """Not the scheduler's node name: a scheduler starting meanwhile must not
        close these runs as abandoned."""

    async def main(self, job: Job) -> int:
        settings = self.config.settings
        prepare_state_dir(settings.state_dir)
        add_config_folder_to_path(self.config)
        self.bus.bind(asyncio.get_running_loop())
        self.history = AsyncHistory(open_history(self.config))
        self.history.start()
        self.paused = paused_jobs(self.config) if self.fire_events else set()
        self.audit = AuditLog(settings.state_dir / "audit.log", settings.timezone)
        alerts = self._alerts()
        try:
            first = await self.run(job, Trigger.MANUAL)
            if alerts is not None:
                self.bus.flush()
                await alerts.drain(ALERT_GRACE)
        finally:
            await self.history.close()
            self.audit.close()
        result = first.result or Result.ERROR
        return exit_status(Outcome(state=first.state, result=result, exit_code=first.exit_code))

    def _alerts(self) -> AlertHandler | None:
        if not self.fire_events or self.config.email is None:
            return None
        mailer = SmtpMailer(self.config.email.smtp, local_hostname=socket.gethostname())
        handler = AlertHandler(
            lambda: self.config, mailer, bus=self.bus, hostname=socket.gethostname(),
            clock=SystemClock(),
        )  # fmt: skip
        handler.subscribe(self.bus)
        return handler

    async def run(self, job: Job, trigger: Trigger) -> RunRecord:
        """Run `job` to its end, report it, and (with --fire-events) follow its dependants."""
        run = RunRecord(
            run_id=new_run_id(), job=job.name, slot=None, trigger=trigger,
            state=RunState.QUEUED, queued_at=datetime.now(UTC), node=self.node,
        )  # fmt: skip
        await self.history.insert(run)
        closed, data = await _execute(self.config, job, run, self.history, self.out)
        await self._report(closed, data)
        if self.fire_events:
            await self._follow(closed)
        return closed

    async def _report(self, run: RunRecord, data: Mapping[str, object]) -> None:
        await self.history.update(run)
        self.audit.write(run)
        summary = plain_text(run.status or run.reason)
        print(f"{run.job}#{run.run_id}: {run.state} ({run.result}) {summary}", file=sys.stderr)
        self.bus.publish(RunConcluded(at=datetime.now(UTC), run=run, message_data=data))

    async def _follow(self, parent: RunRecord) -> None:
        """Each dependant of `parent` at once, concurrently, each after its own delay."""
        outcome = outcome_of(parent)
        await asyncio.gather(
            *(
                self._follow_one(job, parent, outcome)
                for job in dependants(self.config).get(parent.job, [])
            )
        )

    async def _follow_one(self, job: Job, parent: RunRecord, outcome: OnOutcome | None) -> None:
        assert job.after is not None  # noqa: S101  (dependants() selects them)
        if outcome is None or job.after.on not in (outcome, OnOutcome.BOTH):
            await self._not_started(job, parent, not_started_reason(parent, outcome))
            return
        await asyncio.sleep(job.after.delay.total_seconds())
        if job.name in self.paused:
            await self._not_started(job, parent, "the job is paused")
            return
        await self.run(job, Trigger.DEPENDENCY)

    async def _not_started(self, job: Job, parent: RunRecord, reason: str) -> None:
        run = RunRecord(
            run_id=new_run_id(), job=job.name, slot=None, trigger=Trigger.DEPENDENCY,
            state=RunState.QUEUED, queued_at=datetime.now(UTC), node=self.node,
        )  # fmt: skip
        outcome = Outcome(state=RunState.NOT_STARTED, result=Result.DEPENDENCY, reason=reason)
        closed = run.finished(outcome, datetime.now(UTC))
        await self.history.insert(closed)
        await self._report_closed(closed)

    async def _report_closed(self, run: RunRecord) -> None:
        self.audit.write(run)
        print(f"{run.job}: NOT_STARTED ({run.reason})", file=sys.stderr)
        self.bus.publish(RunConcluded(at=datetime.now(UTC), run=run))
        await self._follow(run)


async def _execute(
    config: Config, job: Job, run: RunRecord, history: AsyncHistory, out: TextIO
) -> tuple[RunRecord, Mapping[str, object]]:
    def show(lines: tuple[str, ...]) -> None:
        out.write("".join(f"{line}\n" for line in lines))
        out.flush()

    path = config.settings.state_dir / "output" / job.name / f"{run.run_id}.log"
    output = OutputCapture(path, on_lines=show)
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
    return run.finished(outcome, datetime.now(UTC), output.tail()), runner.message_data


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
