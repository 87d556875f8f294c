"""Running one run that holds a worker: launch, output, timeout, stop, and its end.

Whatever happens (a launch failure, a timeout, a stop, a bug of ours), the
run is closed in the history and on the bus and its worker is freed. A run's
output goes to `output_dir/JOB/RUN_ID.log`; the newest OUTPUT_FILES_KEPT
files of each job are kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections import defaultdict
from collections.abc import Callable, Coroutine
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

from tuisched.domain.errors import LaunchError
from tuisched.domain.events import RunFinished, RunNotStarted, RunOutputWritten, RunStarted
from tuisched.domain.model import CommandSpec, Config, Job, PythonSpec
from tuisched.domain.runs import Outcome, Result, RunRecord, RunState
from tuisched.runtime.clock import Clock, Timer
from tuisched.runtime.engine.dispatch import Active, Dispatcher
from tuisched.runtime.engine.environment import job_environment
from tuisched.runtime.engine.outcomes import Outcomes
from tuisched.runtime.engine.retries import Retries
from tuisched.runtime.execution import Runner, make_runner
from tuisched.runtime.execution.descendants import Descendants
from tuisched.runtime.execution.output import OutputCapture
from tuisched.runtime.execution.python import PythonRunner
from tuisched.runtime.store import AsyncHistory
from tuisched.runtime.threads import Lane, in_thread

log = logging.getLogger(__name__)

ROW_WAIT_SECONDS = 1.0
"""How long a run waits for its row to land before it starts anyway (the history is out)."""
OUTPUT_FILES_KEPT = 50
"""Output files kept per job."""
OUTPUT_LINES_PER_EVENT = 100
"""Output lines one RunOutputWritten carries at most (the newest)."""


class Workers:
    """Runs the runs the dispatcher gives a worker, each as one task."""

    def __init__(
        self,
        *,
        config: Callable[[], Config],
        dispatcher: Dispatcher,
        retries: Retries,
        outcomes: Outcomes,
        history: AsyncHistory,
        clock: Clock,
        output_dir: Path,
        kill_grace: float,
        descendants: Descendants | None = None,
    ) -> None:
        self._config = config
        self._descendants = descendants or Descendants()
        self._dispatcher = dispatcher
        self._retries = retries
        self._outcomes = outcomes
        self._history = history
        self._clock = clock
        self._output_dir = output_dir
        self._kill_grace = kill_grace
        self._tasks: set[asyncio.Future[None]] = set()
        """Done when their run has been recorded: a task, or a future of a run started
        at once."""
        self._finished: defaultdict[str, int] = defaultdict(int)

    @property
    def tasks(self) -> set[asyncio.Future[None]]:
        """What a drain waits on: done once each run in progress has been recorded."""
        return set(self._tasks)

    def start(self, active: Active) -> None:
        """Run `active`: at once when nothing needs awaiting (a python function on a
        thread, its row written), else in a task of its own."""
        row_ready = self._history.committed(self._dispatcher.ticket(active.run.run_id))
        kind = active.job.kind
        if row_ready and isinstance(kind, PythonSpec) and kind.in_thread:
            self._start_at_once(active)
        else:
            self._track(asyncio.get_running_loop().create_task(self._execute(active, row_ready)))

    def _track(self, done: asyncio.Future[None]) -> None:
        self._tasks.add(done)
        done.add_done_callback(self._tasks.discard)

    def _start_at_once(self, active: Active) -> None:
        """Launch a python job on a thread without a task, when its function needs no
        import first (else in a task after all).

        Saves a task, its steps and a future per run: most of the loop's own
        work for a run of a short python job.
        """
        runner = self._prepare(active)
        assert isinstance(runner, PythonRunner)  # noqa: S101  (a python job on a thread)
        done = asyncio.get_running_loop().create_future()
        if not runner.start_at_once(lambda: self._ended_at_once(active, done)):
            self._track(asyncio.ensure_future(self._execute(active, True, prepared=True)))
            return
        self._track(done)
        active.timer = self._arm_timeout(active)
        self._launched(active, pid=None)

    def _ended_at_once(self, active: Active, done: asyncio.Future[None]) -> None:
        if active.timer is not None:
            active.timer.cancel()
        try:
            assert isinstance(active.runner, PythonRunner)  # noqa: S101  (started at once)
            outcome = active.runner.outcome()
        except Exception as error:  # a bug of ours must not take the scheduler down
            outcome = self._scheduler_error(active, error)
        try:
            self._finish(active, outcome)
        finally:
            done.set_result(None)

    def stop(self, active: Active, result: Result, *, kill: bool = False) -> None:
        """Ask `active` to stop; `result` is recorded (the first asked wins; kill escalates)."""
        if active.stop_result is None or kill:
            active.stop_result = active.stop_result or result
            active.kill = active.kill or kill
            if active.runner is not None:
                active.runner.stop(active.stop_result, kill=kill)
            self._signal_descendants(active.run.run_id, kill=kill)

    def _signal_descendants(self, run_id: str, *, kill: bool) -> None:
        """Stop the processes the run started outside its group too (off the loop)."""
        if not self._descendants.watching:
            return
        signum = signal.SIGKILL if kill else signal.SIGTERM
        _background(in_thread(Lane.PROCESSES, self._descendants.signal, run_id, signum))
        if not kill:
            self._clock.call_later(self._kill_grace, self._kill_descendants, run_id)

    def _kill_descendants(self, run_id: str) -> None:
        _background(in_thread(Lane.PROCESSES, self._descendants.signal, run_id, signal.SIGKILL))

    def live_status(self, run_id: str) -> str:
        """What a running run says of itself now (a python job's `status`), or ""."""
        active = self._dispatcher.active.get(run_id)
        return active.runner.status if active is not None and active.runner is not None else ""

    # --- one run ---------------------------------------------------------------------

    async def _execute(self, active: Active, row_ready: bool, *, prepared: bool = False) -> None:
        """Run one run to its end; whatever happens, it is recorded and the worker freed.

        `row_ready`: its QUEUED row is in the history; `prepared`: its runner is made.
        """
        try:
            outcome = await self._run(active, row_ready, prepared=prepared)
        except Exception as error:  # a bug of ours must not take the scheduler down
            outcome = self._scheduler_error(active, error)
        self._finish(active, outcome)

    @staticmethod
    def _scheduler_error(active: Active, error: Exception) -> Outcome:
        log.error("run %s of %s failed in the scheduler", active.run.run_id, active.job.name,
                  exc_info=error)  # fmt: skip
        status = f"scheduler error: {error}"
        return Outcome(state=RunState.FAILED, result=Result.ERROR, status=status)

    async def _run(self, active: Active, row_ready: bool, *, prepared: bool) -> Outcome:
        if not prepared:
            active.run = replace(active.run, state=RunState.RUNNING, started_at=self._clock.now())
            if row_ready:  # usually
                self._history.update_soon(active.run)
            else:  # the row should be in the database before anything starts
                await self._row_written(active.run)
            if active.stop_result is not None:
                reason = "stopped before it started"
                return Outcome(state=RunState.NOT_STARTED, result=active.stop_result, reason=reason)
            self._prepare(active)
        timer = self._arm_timeout(active)  # an import or exec can hang too
        try:
            return await self._launch_and_wait(active)
        finally:
            if timer is not None:
                timer.cancel()

    def _prepare(self, active: Active) -> Runner:
        """Make `active`'s output capture and runner."""
        run, job = active.run, active.job
        active.output = OutputCapture(
            self._output_path(run),
            file_cap=self._config().settings.output_max,
            on_lines=lambda lines: self._on_output(active, lines),
        )
        active.runner = make_runner(
            job.kind, env=self._environment(job, run), output=active.output,
            kill_grace=self._kill_grace, clock=self._clock,
        )  # fmt: skip
        return active.runner

    async def _row_written(self, run: RunRecord) -> None:
        """Wait for `run`'s row to land, for `ROW_WAIT_SECONDS` at most.

        A history that takes no writes now (locked by another process, a full
        disk) keeps the write and lands it later; the run does not wait for that.
        """
        writing = asyncio.ensure_future(self._history.update(run))
        done, _ = await asyncio.wait({writing}, timeout=ROW_WAIT_SECONDS)
        if writing in done:
            writing.result()  # a write the history refused fails the run, as before
            return
        writing.add_done_callback(_ignore_result)  # the writer logs a write that fails
        log.info("run %s of %s starts before its row is in the history", run.run_id, run.job)

    async def _launch_and_wait(self, active: Active) -> Outcome:
        assert active.runner is not None  # noqa: S101  (made in _run)
        try:
            pid = await active.runner.start()
        except LaunchError as error:
            reason = str(error)
            return Outcome(state=RunState.NOT_STARTED, result=Result.LAUNCH_FAILED, reason=reason)
        self._launched(active, pid)
        if active.stop_result is not None:  # a stop came while it was launching
            active.runner.stop(active.stop_result, kill=active.kill)
        return await active.runner.wait()

    def _launched(self, active: Active, pid: int | None) -> None:
        """`active` is launched: RUNNING from now, in the history and on the bus."""
        started = self._clock.now()
        active.began = self._clock.monotonic()
        if pid is not None:
            self._descendants.watch(active.run.run_id, pid)
        active.run = replace(active.run, state=RunState.RUNNING, pid=pid, started_at=started)
        self._history.update_soon(active.run)
        self._outcomes.publish(RunStarted(at=started, run=active.run))

    def _report_leftovers(self, run: RunRecord) -> None:
        left = self._descendants.run_ended(run.run_id)
        if left:
            log.warning(
                "run %s of %s ended and left %d process(es) running (pid %s); they are "
                "stopped when the scheduler stops", run.run_id, run.job, len(left),
                ", ".join(str(proc.pid) for proc in left),
            )  # fmt: skip

    def _ended_at(self, active: Active, now: datetime) -> datetime:
        """When `active` ended: its start plus the time it ran on the monotonic clock,
        so a wall clock set back (or forward) meanwhile gives no negative duration."""
        started = active.run.started_at
        if started is None or active.began is None:
            return now
        return started + timedelta(seconds=max(0.0, self._clock.monotonic() - active.began))

    def _arm_timeout(self, active: Active) -> Timer | None:
        if active.job.timeout is None:
            return None
        seconds = active.job.timeout.total_seconds()
        return self._clock.call_later(seconds, self.stop, active, Result.TIMED_OUT)

    def _finish(self, active: Active, outcome: Outcome) -> None:
        run, job = active.run, active.job
        try:
            now = self._clock.now()
            tail = active.output.tail() if active.output is not None else ""
            if active.output is not None:
                active.output.close()
            closed = run.finished(outcome, self._ended_at(active, now), tail)
            self._report_leftovers(closed)
            self._history.update_soon(closed)
            self._outcomes.ended(closed)
            data = active.runner.message_data if active.runner is not None else {}
            final = not self._retries.schedule(job, closed, data)
            if outcome.state is RunState.NOT_STARTED:
                self._outcomes.publish(RunNotStarted(at=now, run=closed, final=final))
            else:
                self._outcomes.publish(
                    RunFinished(at=now, run=closed, final=final, message_data=data)
                )
            if final:
                self._outcomes.conclude(closed, data)
        finally:
            self._dispatcher.release(run)
            self._count_finished(run)
            self._dispatcher.dispatch()

    # --- output ----------------------------------------------------------------------

    def _on_output(self, active: Active, lines: tuple[str, ...]) -> None:
        event = RunOutputWritten(
            at=self._clock.now(), run=active.run, lines=lines[-OUTPUT_LINES_PER_EVENT:]
        )
        self._outcomes.publish(event)

    def _environment(self, job: Job, run: RunRecord) -> dict[str, str]:
        # Jobs in a process of their own get an environment: building one copies os.environ.
        kind = job.kind
        if isinstance(kind, CommandSpec) or (isinstance(kind, PythonSpec) and not kind.in_thread):
            return job_environment(self._config(), job, run)
        return {}

    def _output_path(self, run: RunRecord) -> str:
        # OutputCapture creates the folder at the first output, if any comes. A string:
        # joining Paths is a tenth of the loop's work for a run that prints nothing.
        return f"{self._output_dir}/{run.job}/{run.run_id}.log"

    def _count_finished(self, run: RunRecord) -> None:
        self._finished[run.job] += 1
        if self._finished[run.job] % 10 == 0:
            self._prune_output(run.job)
        if run.job not in self._config().jobs:
            self._finished.pop(run.job, None)

    def _prune_output(self, job: str) -> None:
        """Keep the newest OUTPUT_FILES_KEPT output files of `job`."""
        folder = self._output_dir / job
        running = {f"{run_id}.log" for run_id in self._dispatcher.active}
        try:
            files = [f for f in folder.glob("*.log") if f.is_file() and f.name not in running]
            files.sort(key=lambda f: f.stat().st_mtime)
        except OSError:
            return
        for old in files[: max(0, len(files) - OUTPUT_FILES_KEPT)]:
            with contextlib.suppress(OSError):
                old.unlink()


def _ignore_result(task: asyncio.Future[None]) -> None:
    if not task.cancelled():
        task.exception()  # retrieved: the writer thread logged it already


_BACKGROUND: set[asyncio.Future[object]] = set()


def _background(work: Coroutine[object, object, object]) -> None:
    """Run `work` without awaiting it (kept referenced until done; failures logged)."""
    task = asyncio.ensure_future(work)
    _BACKGROUND.add(task)
    task.add_done_callback(_done)


def _done(task: asyncio.Future[object]) -> None:
    _BACKGROUND.discard(task)
    if not task.cancelled() and task.exception() is not None:
        log.error("signalling a run's processes failed", exc_info=task.exception())
