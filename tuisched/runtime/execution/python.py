"""Python jobs: a callable or a run/stop class, on reused daemon threads."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib
import inspect
import logging
import queue
import sys
import threading
import traceback
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from tuisched.domain.errors import LaunchError
from tuisched.domain.model import PythonSpec
from tuisched.domain.runs import Outcome, Result, RunState
from tuisched.runtime.clock import Clock, SystemClock, Timer
from tuisched.runtime.execution.base import (
    _NO_PROPS,
    _cut,
    _describe,
    _not_started,
    _StopRequest,
)
from tuisched.runtime.execution.output import OutputCapture
from tuisched.runtime.execution.pyjob import load_target, prepare_target

log = logging.getLogger(__name__)

# --- python jobs -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Ending:
    """How a python job's thread ended, as reported to the loop."""

    error: str | None = None
    """`ValueError: message` when run() or the callable raised."""
    abandoned: bool = False
    """The job did not stop within the grace period; its thread was left running."""


def function_now(target: str) -> Callable[[], object] | None:
    """`target` if it names a plain function of a module imported already, else None.

    Such a run needs nothing before it runs (no import, no instance): a job
    thread can start it by itself (see `run_on_job_thread`). Anything else (a
    class, a module not imported yet, a missing attribute) takes
    `PythonRunner`, which imports it in its thread, where failures become
    launch failures.
    """
    module_name, _, attr = target.partition(":")
    obj: Any = sys.modules.get(module_name)
    for name in attr.split("."):
        obj = getattr(obj, name, None)
    return obj if inspect.isfunction(obj) or inspect.isbuiltin(obj) else None


@dataclass(frozen=True, slots=True)
class _Link:
    """The loop's end of one job thread: where the thread's reports land."""

    loop: asyncio.AbstractEventLoop
    crossing: _Crossing
    launched: asyncio.Future[object | None]
    """Resolves to the instance (None for a plain callable), or to a LaunchError."""
    ending: asyncio.Future[_Ending]


Work = Callable[[], "Work | None"]
"""What a job thread does: run one run, and return what it does next (None: nothing)."""


class _Workers:
    """Daemon threads reused across python runs; a new one starts only when none is idle.

    Daemon threads, not an executor's: a job that never returns can neither
    block interpreter shutdown nor starve other runs (the next run simply
    gets a new thread). Idle threads end after `IDLE_SECONDS`. A thread goes
    on with the work its work returns, so it can take the next run itself.

    New threads are started by a starter thread of their own, never by the
    caller: `Thread.start()` waits until the new thread runs, which on a busy
    machine held the event loop for a good part of a second.
    """

    IDLE_SECONDS = 60.0

    def __init__(self) -> None:
        self._work: queue.SimpleQueue[tuple[Work, str]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        """Threads waiting for work that nobody was promised yet."""
        self._wanted: queue.SimpleQueue[bool] = queue.SimpleQueue()
        """One item per thread to start: True for one that waits idle for work to come."""
        self._starter: threading.Thread | None = None

    def submit(self, work: Work, name: str) -> None:
        """Run `work` on an idle thread, or on a new one, naming the thread `name` meanwhile."""
        with self._lock:
            reuse = self._idle > 0
            if reuse:
                self._idle -= 1  # that thread is promised to this work
        self._work.put((work, name))
        if not reuse:
            self._start(idle=False)

    def keep_ready(self, count: int) -> None:
        """Have at least `count` threads waiting for work (they retire when idle for long)."""
        with self._lock:
            missing = count - self._idle
            self._idle += max(0, missing)  # counted from now: the work may come before they do
        for _ in range(missing):
            self._start(idle=True)

    def _start(self, *, idle: bool) -> None:
        self._wanted.put(idle)
        if self._starter is None:  # once: the one thread the caller waits for
            self._starter = threading.Thread(
                target=self._start_threads, name="tuisched-job-starter", daemon=True
            )
            self._starter.start()

    def _start_threads(self) -> None:
        while True:
            self._wanted.get()
            threading.Thread(target=self._serve, name="tuisched-job", daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                work, name = self._work.get(timeout=self.IDLE_SECONDS)
            except queue.Empty:
                with self._lock:
                    if self._idle > 0:  # nobody was promised this thread: retire it
                        self._idle -= 1
                        return
                continue
            thread = threading.current_thread()
            thread.name = name  # the job's name shows in py-spy, gdb and thread dumps
            going: Work | None = work
            while going is not None:  # each work reports its own outcome and never raises
                going = going()
            thread.name = "tuisched-job"
            with self._lock:
                self._idle += 1


_WORKERS = _Workers()


def run_on_job_thread(work: Work, name: str) -> None:
    """Run `work` on a job thread (an idle one, or a new one), then what it returns, and so
    on; the thread is named `name` meanwhile. `work` must report its own outcome and never
    raise."""
    _WORKERS.submit(work, name)


def keep_job_threads(count: int) -> None:
    """Have `count` job threads started and waiting for runs (started off the caller's
    thread), so that a burst's first runs do not wait for threads to start."""
    _WORKERS.keep_ready(count)


def import_soon(targets: Iterable[str]) -> None:
    """Import the modules of python job `targets` that are not imported yet, in a job thread
    (the caller does not wait): the first run of a plain function then starts like the next
    ones, on a job thread by itself (see `function_now`), instead of importing first.

    A module that fails to import is left alone (its run then fails to launch, saying why).
    """
    modules = {target.partition(":")[0] for target in targets}
    missing = sorted(name for name in modules if name and name not in sys.modules)
    if missing:
        _WORKERS.submit(lambda: _import_quietly(missing), "tuisched-job-imports")


def _import_quietly(modules: list[str]) -> None:
    for name in modules:
        try:
            importlib.import_module(name)
        except BaseException as error:  # a job module's SystemExit included: its run says why
            log.debug("importing %s ahead of its runs failed: %s", name, _describe(error))


def call_function(function: Callable[[], object]) -> tuple[str, str] | None:
    """Call a python job's function on this (job) thread: None if it returned, else what it
    raised (`Error: message`) and its traceback."""
    try:
        function()
    except BaseException as exc:  # a job's SystemExit fails the run, not the scheduler
        return _describe(exc), "".join(traceback.format_exception(exc))
    return None


_RETURNED = Outcome(state=RunState.SUCCESS, result=Result.COMPLETED)


def thread_outcome(
    stop: Result | None, error: str | None, *, abandoned: bool, kill_grace: float,
    status: str = "", stop_error: str = "",
) -> Outcome:  # fmt: skip
    """How a python run on a thread ended: `stop` is the result an operator or a timeout
    asked for (None if nobody did); `error` what the job raised (`Error: message`);
    `abandoned` when its thread was given up on; `status` the instance's own."""
    if stop is None and error is None and not abandoned and not status and not stop_error:
        return _RETURNED  # the usual outcome: one object for them all
    result = stop if stop is not None else Result.COMPLETED
    if abandoned:
        status = f"did not stop within {kill_grace:g}s; its thread was left running"
    elif error is not None:
        status = error
    else:
        status = status or ("stopped" if stop is not None else "")
    ok = stop is None and error is None and not abandoned
    return Outcome(
        state=RunState.SUCCESS if ok else RunState.FAILED,
        result=result,
        status=_cut(status),
        reason=stop_error,
    )


class PythonRunner:
    """Runs `package.module:attr` in a daemon thread: a plain callable or a run/stop class.

    The thread is a daemon `threading.Thread`, not an executor worker, so a
    job that never returns cannot block interpreter shutdown or starve
    other work. The job's own `print()`s are not captured (they go to the
    scheduler's stdout); an exception's traceback is written to the output.
    """

    def __init__(
        self,
        spec: PythonSpec,
        *,
        output: OutputCapture,
        kill_grace: float = 5.0,
        clock: Clock | None = None,
    ) -> None:
        """Prepare a run of `spec.target`; `kill_grace` (on `clock`) bounds a stop."""
        self._target = spec.target
        self._output = output
        self._kill_grace = kill_grace
        self._clock = clock or SystemClock()
        self._link: _Link | None = None
        self._launched = False
        """True once start() has the instance: from then on stop() can reach it."""
        self._instance: object | None = None
        self._stop: _StopRequest | None = None
        self._stop_called = False
        self._stop_error = ""
        self._give_up: Timer | None = None

    @property
    def status(self) -> str:
        """The instance's `status` attribute; "" if it has none or reading it fails."""
        try:
            value = getattr(self._instance, "status", "")
            return _cut(value if isinstance(value, str) else str(value))
        except Exception:
            return ""

    @property
    def message_data(self) -> Mapping[str, object]:
        """A snapshot of the instance's `message_data` if it is a mapping, else {}."""
        try:
            data = getattr(self._instance, "message_data", None)
            if isinstance(data, Mapping):
                return MappingProxyType(dict(data))
        except Exception:  # the job's property raised, or it changed while we copied
            return _NO_PROPS
        return _NO_PROPS

    def _submit(self, work: Callable[[_Link], None]) -> _Link:
        """Hand `work(link)` to a job thread; the link is where its reports land."""
        loop = asyncio.get_running_loop()
        link = _Link(loop, _crossing(loop), loop.create_future(), loop.create_future())
        self._link = link
        _WORKERS.submit(functools.partial(_once, work, link), f"tuisched-job-{self._target}")
        return link

    async def start(self) -> int | None:
        """Import the target (and create the instance) in the worker thread; then run it.

        Raises:
            LaunchError: The target cannot be imported or instantiated.
        """
        if self._stop is not None:
            return None
        function = function_now(self._target)
        if function is not None:  # no import, no instance: nothing to wait for
            self._submit(lambda link: self._thread_call(link, function))
            self._launched = True
            return None
        link = self._submit(self._thread_main)
        try:
            self._instance = await link.launched
        except LaunchError:
            self._link = None
            raise
        self._launched = True
        if self._stop is not None:  # stop() came while we were importing
            self._apply_stop(link, self._stop)
        return None

    async def wait(self) -> Outcome:
        """Wait for the job to return (or for the grace period after a stop to pass)."""
        if self._link is None:
            self._output.close()
            return _not_started(self._stop.result if self._stop else Result.ERROR)
        try:
            await asyncio.shield(self._link.ending)
        finally:
            if self._give_up is not None:
                self._give_up.cancel()
            self._output.close()
        return self.outcome()

    def outcome(self) -> Outcome:
        """How the run ended, once it has (after `wait()`); closes the output capture."""
        link = self._link
        assert link is not None  # noqa: S101  (started)
        if self._give_up is not None:
            self._give_up.cancel()
        self._output.close()
        return self._outcome(link.ending.result())

    def stop(self, result: Result, *, kill: bool = False) -> None:
        """Call the instance's `stop()`; give up on its thread after `kill_grace`.

        With `kill=True` it gives up at once: a thread cannot be killed, so
        `wait()` returns while the thread is left running.
        """
        link = self._link
        if link is not None and link.ending.done():
            return
        if self._stop is None:
            self._stop = _StopRequest(result, kill)
        self._stop.kill = self._stop.kill or kill
        if link is not None and self._launched:
            self._apply_stop(link, self._stop)
        elif link is not None and self._give_up is None:
            # Still importing (an import can hang): give up on it after the grace period.
            delay = 0 if self._stop.kill else self._kill_grace
            self._give_up = self._clock.call_later(delay, self._abandon_launch, link)

    def _apply_stop(self, link: _Link, stop: _StopRequest) -> None:
        if not self._stop_called:
            self._stop_called = True
            self._call_instance_stop()
        if stop.kill:
            self._abandon(link)
        elif self._give_up is None:
            self._give_up = self._clock.call_later(self._kill_grace, self._abandon, link)

    def _call_instance_stop(self) -> None:
        stop = getattr(self._instance, "stop", None)
        if not callable(stop):
            return
        try:
            stop()
        except Exception as exc:
            self._stop_error = f"stop() raised {_describe(exc)}"

    def _abandon_launch(self, link: _Link) -> None:
        self._give_up = None
        if not link.launched.done():
            link.launched.set_result(None)
        self._abandon(link)

    @staticmethod
    def _abandon(link: _Link) -> None:
        if not link.ending.done():
            link.ending.set_result(_Ending(abandoned=True))

    # The worker thread. It touches nothing of ours except through `_cross`.

    def _thread_main(self, link: _Link) -> None:
        try:
            instance, call = prepare_target(load_target(self._target))
        except BaseException as exc:  # SystemExit at import must not leave start() waiting
            _cross(link, _report_launch, link, LaunchError(self._launch_reason(exc)))
            return
        _cross(link, _report_launch, link, instance)
        self._thread_call(link, call)

    def _thread_call(self, link: _Link, call: Callable[[], object]) -> None:
        try:
            call()
        except BaseException as exc:  # a job's SystemExit fails the run, not the scheduler
            text = "".join(traceback.format_exception(exc))
            _cross(link, self._on_finished, link, _Ending(error=_describe(exc)), text)
            return
        _cross(link, self._on_finished, link, _Ending(), "")

    def _launch_reason(self, exc: BaseException) -> str:
        if isinstance(exc, ImportError | AttributeError):
            return f"cannot import '{self._target}': {exc}"
        return f"cannot start '{self._target}': {_describe(exc)}"

    def _on_finished(self, link: _Link, ending: _Ending, traceback_text: str) -> None:
        """On the loop: the thread returned (maybe long after we gave up on it)."""
        if link.ending.done():
            return  # abandoned earlier: the run has already been recorded
        if traceback_text:
            self._output.write(traceback_text.encode("utf-8", "replace"))
        link.ending.set_result(ending)

    def _outcome(self, ending: _Ending) -> Outcome:
        return thread_outcome(
            self._stop.result if self._stop is not None else None, ending.error,
            abandoned=ending.abandoned, kill_grace=self._kill_grace, status=self.status,
            stop_error=self._stop_error,
        )  # fmt: skip


def _once(work: Callable[[_Link], None], link: _Link) -> None:
    """`work(link)` as a job thread's work that leads to nothing else."""
    work(link)


class _Crossing:
    """Reports from job threads to one event loop, handed over in batches.

    A thread appends its report and wakes the loop only when no hand-over is
    pending already: when many runs end together, the loop is woken once for
    all of them (one write to its self-pipe, one turn) instead of once each.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._reports: deque[tuple[Callable[..., None], tuple[object, ...]]] = deque()
        self._lock = threading.Lock()
        self._woken = False

    def put(self, callback: Callable[..., None], args: tuple[object, ...]) -> None:
        """Run `callback(*args)` on the loop soon; from any thread."""
        with self._lock:
            self._reports.append((callback, args))
            if self._woken:
                return
            self._woken = True
        # The scheduler's loop may be closed by the time an abandoned job returns.
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._hand_over)

    def _hand_over(self) -> None:
        with self._lock:
            reports, self._reports = self._reports, deque()
            self._woken = False
        for callback, args in reports:
            try:
                callback(*args)
            except Exception:  # one report's failure must not lose the others
                log.exception("a python job's report could not be taken")


_CROSSINGS: dict[asyncio.AbstractEventLoop, _Crossing] = {}


def _crossing(loop: asyncio.AbstractEventLoop) -> _Crossing:
    """The crossing to `loop` (made on the loop's thread, at a run's start)."""
    crossing = _CROSSINGS.get(loop)
    if crossing is None:
        for old in [old for old in _CROSSINGS if old.is_closed()]:
            del _CROSSINGS[old]
        crossing = _CROSSINGS[loop] = _Crossing(loop)
    return crossing


def _cross(link: _Link, callback: Callable[..., None], *args: object) -> None:
    """The one place a job thread hands something to the event loop."""
    link.crossing.put(callback, args)


def _report_launch(link: _Link, instance_or_error: object) -> None:
    """On the loop: the target was imported (and instantiated), or could not be."""
    if link.launched.done():
        return  # start() was cancelled
    if isinstance(instance_or_error, LaunchError):
        link.launched.set_exception(instance_or_error)
    else:
        link.launched.set_result(instance_or_error)
