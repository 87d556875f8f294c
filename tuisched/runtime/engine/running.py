"""Runs that hold a worker: launched, followed, stopped, and recorded a turn at a time.

Whatever happens (a launch failure, a timeout, a stop, a bug of ours), the
run is closed in the history and on the bus and its worker is freed. A run's
output goes to `output_dir/JOB/RUN_ID.log`; the newest OUTPUT_FILES_KEPT
files of each job are kept.

A python function on a thread runs without a task of its own (see `lane`:
its thread takes the next run itself); any other run is one task. Either
way, what starts and ends in a turn of the loop is recorded in one pass
(`Turn`): the runs' records, one batch of history writes, one publication of
the turn's events, and then the freed workers are handed out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections import defaultdict
from collections.abc import Callable, Coroutine
from pathlib import Path

from tuisched.domain.errors import LaunchError
from tuisched.domain.events import RunOutputWritten
from tuisched.domain.model import CommandSpec, Config, Job, PythonSpec
from tuisched.domain.runs import Outcome, Result, RunRecord, RunState
from tuisched.domain.text import counted
from tuisched.runtime.clock import Clock, Timer
from tuisched.runtime.engine.dispatch import Active, Dispatcher
from tuisched.runtime.engine.environment import JobEnvironments
from tuisched.runtime.engine.lane import ROW_WAIT_SECONDS, Lane, Report, ThreadRun, ThreadRunner
from tuisched.runtime.engine.outcomes import Outcomes
from tuisched.runtime.engine.retries import Retries
from tuisched.runtime.engine.turn import Turn
from tuisched.runtime.execution.base import Runner
from tuisched.runtime.execution.descendants import Descendants
from tuisched.runtime.execution.keeper import Keeper
from tuisched.runtime.execution.output import OutputCapture
from tuisched.runtime.execution.python import thread_outcome
from tuisched.runtime.execution.runners import make_runner
from tuisched.runtime.store import AsyncHistory
from tuisched.runtime.threads import Lane as ThreadLane
from tuisched.runtime.threads import in_thread

log = logging.getLogger(__name__)


OUTPUT_FILES_KEPT = 50
"""Output files kept per job."""
OUTPUT_LINES_PER_EVENT = 100
"""Output lines one RunOutputWritten carries at most (the newest)."""
REPORTS_PER_TURN = 500
"""Reports of job threads taken in per turn of the loop (so a burst never stalls it long)."""


class Workers:
    """Runs the runs the dispatcher gives a worker, and records what they do a turn at a time."""

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
        lane: Callable[[Callable[[], None]], Lane],
        descendants: Descendants | None = None,
        keeper: Keeper | None = None,
    ) -> None:
        """`lane(heard)` makes the job threads' lane, which calls `heard()` on the loop when
        they reported."""
        self._config = config
        self._descendants = descendants or Descendants()
        self._keeper = keeper
        self._dispatcher = dispatcher
        self._outcomes = outcomes
        self._history = history
        self._clock = clock
        self._output_dir = output_dir
        self._kill_grace = kill_grace
        self.lane = lane(self._heard)
        self._turn = Turn(
            dispatcher=dispatcher, retries=retries, outcomes=outcomes, history=history,
            clock=clock, closed=self._count_finished,
        )  # fmt: skip
        self._tasks: set[asyncio.Future[None]] = set()
        """Done when their run has been recorded."""
        self._finished: defaultdict[str, int] = defaultdict(int)
        self._environments = JobEnvironments()

    @property
    def tasks(self) -> set[asyncio.Future[None]]:
        """What a drain waits on: done once each run in progress has been recorded."""
        return {*self._tasks, *self._turn.settled()}

    def start(self, active: Active) -> None:
        """Run `active`: on a job thread when it has a `ThreadRun`, else in a task."""
        if active.thread is not None:
            self._turn.holding(active)
            self.lane.hand(active.thread)
            return
        row_ready = self._history.landed(self._dispatcher.ticket(active.run.run_id))
        task = asyncio.get_running_loop().create_task(self._execute(active, row_ready))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def stop(self, active: Active, result: Result, *, kill: bool = False) -> None:
        """Ask `active` to stop; `result` is recorded (the first asked wins; kill escalates)."""
        if active.stop_result is None or kill:
            active.stop_result = active.stop_result or result
            active.kill = active.kill or kill
            if active.runner is None and active.thread is not None:
                active.runner = self._thread_runner(active.thread)  # made when first needed
            if active.runner is not None:
                active.runner.stop(active.stop_result, kill=kill)
            self._signal_descendants(active.run.run_id, kill=kill)

    def stop_in_flight(self, run_id: str, result: Result, *, kill: bool = False) -> bool:
        """Stop a run a job thread took that the loop has not heard of yet; False if none."""
        thread = self.lane.in_flight(run_id)
        return thread is not None and self.lane.stop(thread, result, kill=kill)

    def _signal_descendants(self, run_id: str, *, kill: bool) -> None:
        """Stop the processes the run started outside its group too (off the loop)."""
        if not self._descendants.watching:
            return
        signum = signal.SIGKILL if kill else signal.SIGTERM
        _background(in_thread(ThreadLane.PROCESSES, self._descendants.signal, run_id, signum))
        if not kill:
            self._clock.call_later(self._kill_grace, self._kill_descendants, run_id)

    def _kill_descendants(self, run_id: str) -> None:
        signal_all = self._descendants.signal
        _background(in_thread(ThreadLane.PROCESSES, signal_all, run_id, signal.SIGKILL))

    def live_status(self, run_id: str) -> str:
        """What a running run says of itself now (a python job's `status`), or ""."""
        active = self._dispatcher.active.get(run_id)
        return active.runner.status if active is not None and active.runner is not None else ""

    # --- runs on job threads (see `lane`) ------------------------------------------------

    def _thread_runner(self, thread: ThreadRun) -> ThreadRunner:
        return ThreadRunner(thread, self.lane, self._clock, self._kill_grace, self._gave_up)

    def take_in(self) -> None:
        """Take in what the job threads reported so far, now: before runs are queued and
        handed out, so that the workers of threads that ran out of queued runs are free
        (a burst queued a step at a time would otherwise wait a turn for each)."""
        self._heard()

    def _heard(self) -> None:
        """On the loop: take in what the job threads reported, and record the turn (a burst's
        reports over several turns, REPORTS_PER_TURN at a time)."""
        reports, more = self.lane.reports(REPORTS_PER_TURN)
        if more:
            asyncio.get_running_loop().call_soon(self._heard)
        for report, thread in reports:
            if thread.abandoned:
                continue  # closed when it was given up on; it reports only what it did since
            active = self._dispatcher.active.get(thread.run.run_id) or self._adopt(thread)
            if report is Report.STARTED:
                self._thread_started(active, thread)
            elif report is Report.ENDED:
                self._thread_ended(active, thread)
        self._turn.record()

    def _adopt(self, thread: ThreadRun) -> Active:
        """A thread took `thread` at the end of its run: it holds that run's worker now."""
        active = self._dispatcher.adopt(thread)
        self.lane.adopted(thread)
        self._turn.holding(active)
        if thread.stop is not None:  # stopped while the loop had not heard of it
            self.stop(active, thread.stop, kill=thread.kill)
        return active

    def _thread_started(self, active: Active, thread: ThreadRun) -> None:
        started = thread.started
        assert started is not None  # noqa: S101  (stamped before it is reported)
        timeout = active.job.timeout
        if timeout is not None:
            left = timeout.total_seconds() - (self._clock.monotonic() - thread.began)
            active.timer = self._clock.call_later(left, self.stop, active, Result.TIMED_OUT)
        self._turn.started(active, started, pid=None, began=thread.began)

    def _thread_ended(self, active: Active, thread: ThreadRun) -> None:
        if thread.started is None:  # stopped before its thread started it
            stopped = thread.stop or Result.STOPPED
            outcome = Outcome(
                state=RunState.NOT_STARTED, result=stopped,
                status="stopped before it started", reason="stopped before it started",
            )  # fmt: skip
            self._end_thread_run(active, outcome, ended=None)
            return
        error, text = thread.raised if thread.raised is not None else (None, "")
        if text:
            self._prepare_output(active).write(text.encode("utf-8", "replace"))
        outcome = thread_outcome(thread.stop, error, abandoned=False, kill_grace=self._kill_grace)
        self._end_thread_run(active, outcome, ended=thread.ended)

    def _gave_up(self, thread: ThreadRun) -> None:
        """The thread of a stopped run did not return in time: close the run without it."""
        active = self._dispatcher.active.get(thread.run.run_id)
        if active is None:
            return
        outcome = thread_outcome(thread.stop, None, abandoned=True, kill_grace=self._kill_grace)
        self._end_thread_run(active, outcome, ended=self._clock.monotonic())
        self._turn.record()

    def _end_thread_run(self, active: Active, outcome: Outcome, ended: float | None) -> None:
        if active.timer is not None:
            active.timer.cancel()
        if isinstance(active.runner, ThreadRunner):
            active.runner.ended()
        self._turn.ended(active, outcome, ended)

    # --- runs in a task ----------------------------------------------------------------

    async def _execute(self, active: Active, row_ready: bool) -> None:
        """Run one run to its end; whatever happens, it is recorded and the worker freed.

        `row_ready`: its QUEUED row is in the history.
        """
        try:
            outcome = await self._run(active, row_ready)
        except Exception as error:  # a bug of ours must not take the scheduler down
            outcome = self._scheduler_error(active, error)
        self._turn.ended(active, outcome, ended=None)
        self._turn.record_soon()  # a drain waits for it (`Turn.settled`)

    @staticmethod
    def _scheduler_error(active: Active, error: Exception) -> Outcome:
        log.error("run %s of %s failed in the scheduler", active.run.run_id, active.job.name,
                  exc_info=error)  # fmt: skip
        status = f"scheduler error: {error}"
        return Outcome(state=RunState.FAILED, result=Result.ERROR, status=status)

    async def _run(self, active: Active, row_ready: bool) -> Outcome:
        active.run = active.run.started(self._clock.now())
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
        runner = make_runner(
            job.kind, env=self._environment(job, run), output=self._prepare_output(active),
            kill_grace=self._kill_grace, clock=self._clock,
            held=self._keeper.hold if self._keeper is not None else None,
        )  # fmt: skip
        active.runner = runner
        return runner

    def _prepare_output(self, active: Active) -> OutputCapture:
        """`active`'s output capture (made at the first need)."""
        if active.output is None:
            active.output = OutputCapture(
                self._output_path(active.run),
                file_cap=self._config().settings.output_max,
                on_lines=lambda lines: self._on_output(active, lines),
                root=self._output_dir,
            )
        return active.output

    async def _row_written(self, run: RunRecord) -> None:
        """Wait for `run`'s row (RUNNING) to land, for `ROW_WAIT_SECONDS` at most.

        The row lands once the history's journal has it on disk, before the
        database does: a history that takes no writes now (locked by another
        process, a full disk) keeps the write and lands it later, and the run
        does not wait for that. With no journal to take it either, the run does
        not wait at all: a second spent waiting would count as running, and skip
        the next slot of a job that does not overlap.
        """
        ticket = self._history.update_soon(run)
        try:
            async with asyncio.timeout(ROW_WAIT_SECONDS):
                await self._history.until_landed(ticket)
        except TimeoutError:
            pass
        if not self._history.landed(ticket) and not self._history.undurable:
            log.info("run %s of %s starts before its row is in the history", run.run_id, run.job)

    async def _launch_and_wait(self, active: Active) -> Outcome:
        runner = active.runner
        assert runner is not None  # noqa: S101  (made in _prepare)
        assert not isinstance(runner, ThreadRunner)  # noqa: S101
        try:
            pid = await runner.start()
        except LaunchError as error:
            reason = str(error)
            return Outcome(state=RunState.NOT_STARTED, result=Result.LAUNCH_FAILED, reason=reason)
        if pid is not None:
            self._descendants.watch(active.run.run_id, pid)
            if self._keeper is not None:
                self._keeper.hold(pid)
        self._turn.started(active, self._clock.now(), pid=pid)
        self._turn.record_soon()
        if active.stop_result is not None:  # a stop came while it was launching
            runner.stop(active.stop_result, kill=active.kill)
        try:
            return await runner.wait()
        finally:
            if pid is not None and self._keeper is not None:
                self._keeper.free(pid)

    def _arm_timeout(self, active: Active) -> Timer | None:
        if active.job.timeout is None:
            return None
        seconds = active.job.timeout.total_seconds()
        return self._clock.call_later(seconds, self.stop, active, Result.TIMED_OUT)

    # --- output ----------------------------------------------------------------------

    def _on_output(self, active: Active, lines: tuple[str, ...]) -> None:
        event = RunOutputWritten(
            at=self._clock.now(), run=active.run, lines=lines[-OUTPUT_LINES_PER_EVENT:]
        )
        self._turn.publish(event)

    def _environment(self, job: Job, run: RunRecord) -> dict[str, str]:
        # Jobs in a process of their own get an environment: building one copies os.environ.
        kind = job.kind
        if isinstance(kind, CommandSpec) or (isinstance(kind, PythonSpec) and not kind.in_thread):
            return self._environments.of(self._config(), job, run)
        return {}

    def _output_path(self, run: RunRecord) -> str:
        # OutputCapture creates the folder at the first output, if any comes. A string:
        # joining Paths is a tenth of the loop's work for a run that prints nothing.
        return f"{self._output_dir}/{run.job}/{run.run_id}.log"

    def _count_finished(self, run: RunRecord) -> None:
        """`run` was closed: its leftovers are reported, its job's old output pruned."""
        self._report_leftovers(run)
        self._finished[run.job] += 1
        if self._finished[run.job] % 10 == 0:
            self._prune_output(run.job)
        if run.job not in self._config().jobs:
            self._finished.pop(run.job, None)

    def _report_leftovers(self, run: RunRecord) -> None:
        left = self._descendants.run_ended(run.run_id)
        if left:
            log.warning(
                "run %s of %s ended and left %s running (pid %s), stopped when the "
                "scheduler stops", run.run_id, run.job, counted(len(left), "process", "processes"),
                ", ".join(str(proc.pid) for proc in left),
            )  # fmt: skip

    def _prune_output(self, job: str) -> None:
        """Keep the newest OUTPUT_FILES_KEPT output files of `job` (off the loop)."""
        running = {f"{run_id}.log" for run_id in self._dispatcher.active}
        _background(in_thread(ThreadLane.FILES, _prune, self._output_dir / job, running))


def _prune(folder: Path, running: set[str]) -> None:
    """Keep the newest OUTPUT_FILES_KEPT output files in `folder`, but never `running`."""
    try:
        files = [f for f in folder.glob("*.log") if f.is_file() and f.name not in running]
        files.sort(key=lambda f: f.stat().st_mtime)
    except OSError:
        return
    for old in files[: max(0, len(files) - OUTPUT_FILES_KEPT)]:
        with contextlib.suppress(OSError):
            old.unlink()


_BACKGROUND: set[asyncio.Future[object]] = set()


def _background(work: Coroutine[object, object, object]) -> None:
    """Run `work` without awaiting it (kept referenced until done; failures logged)."""
    task = asyncio.ensure_future(work)
    _BACKGROUND.add(task)
    task.add_done_callback(_done)


def _done(task: asyncio.Future[object]) -> None:
    _BACKGROUND.discard(task)
    if not task.cancelled() and task.exception() is not None:
        log.error("background work of a run failed", exc_info=task.exception())
