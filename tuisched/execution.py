"""Runners: how one run of each job kind is launched, watched and stopped (SPEC R1, R12-R14).

The engine drives every kind through the same `Runner` protocol::

    runner = make_runner(job.kind, env=env, output=capture, kill_grace=5.0)
    pid = await runner.start()      # LaunchError: the run never began
    ...                             # runner.stop(Result.TIMED_OUT) from a timer, say
    outcome = await runner.wait()   # never raises for the job's own failures

Threads: every method of every runner is called on the event loop's thread,
and every runner writes its `OutputCapture` from that thread only. The one
exception is the worker thread of a python job, which talks back to the loop
in exactly one place, `PythonRunner._cross`. `wait()` closes the capture.

Processes: a command runs in its own session and process group, with stdin
from /dev/null and stderr merged into stdout. Stopping signals the whole group
(SIGTERM, then SIGKILL after the grace period), and when a run ends anything
left in its group is killed, so no process outlives its run.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import glob
import importlib
import inspect
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol

from watchfiles import awatch

from tuisched.errors import TuischedError
from tuisched.model import CommandSpec, JobKind, PythonSpec, WaitForSpec
from tuisched.output import OutputCapture
from tuisched.runs import Outcome, Result, RunState

__all__ = [
    "CommandRunner",
    "LaunchError",
    "PythonRunner",
    "Runner",
    "WaitForRunner",
    "install_child_watcher",
    "make_runner",
    "watch_root",
]

STATUS_MAX_CHARS = 200
"""Statuses are cut to this length: they go into one audit line."""

_EOF_GRACE = 0.5
"""After the job's own process exits, how long its pipe may stay open (a grandchild)."""
_KILLED_DRAIN = 0.2
"""After killing the group, how long to wait for the bytes still in the pipe."""
_WATCH_STEP_MS = 50
_RECHECK_MS = 5000
"""A wait_for sensor re-checks its glob this often even without events: it closes
the moment between the first check and the watch starting, and covers events
lost in directories created while being watched. It is a safety net, not a poll."""
_NO_PROPS: Mapping[str, object] = MappingProxyType({})


class LaunchError(TuischedError):
    """A run could not start; the message is the reason shown to the operator."""


class Runner(Protocol):
    """One run of one job, driven by the engine from the event loop's thread."""

    async def start(self) -> int | None:
        """Launch the run; return the pid of a command, None otherwise.

        Raises:
            LaunchError: The run could not start; the message says why.
        """
        ...

    async def wait(self) -> Outcome:
        """Wait until the run has ended (after `start()`); close the output capture.

        Never raises for the job's own failures: they are in the `Outcome`.
        """
        ...

    def stop(self, result: Result, *, kill: bool = False) -> None:
        """Ask the run to stop; `result` becomes the outcome's result.

        Idempotent (the first result wins; a later `kill=True` still
        escalates) and safe before, during or after `wait()`. Once the run has
        ended by itself it does nothing.
        """
        ...

    @property
    def status(self) -> str:
        """A short live status: the last output line, or a python job's `status`."""
        ...

    @property
    def message_data(self) -> Mapping[str, object]:
        """A python class job's `message_data`, else an empty mapping."""
        ...


def make_runner(
    kind: JobKind,
    *,
    env: Mapping[str, str],
    output: OutputCapture,
    kill_grace: float = 5.0,
) -> Runner:
    """The runner for one run of a job of `kind`.

    Args:
        kind: What to run.
        env: The complete environment of a command (the engine has merged the
            job's env over the scheduler's, secrets removed). Unused by the
            other kinds: a python job shares the scheduler's process.
        output: Where the run's output goes; the runner closes it in `wait()`.
        kill_grace: Seconds between SIGTERM and SIGKILL for a command, or
            between `stop()` and giving up on a python job's thread.
    """
    match kind:
        case CommandSpec():
            return CommandRunner(kind, env=env, output=output, kill_grace=kill_grace)
        case PythonSpec():
            return PythonRunner(kind, output=output, kill_grace=kill_grace)
        case WaitForSpec():
            return WaitForRunner(kind, output=output)


def install_child_watcher() -> None:
    """Reap child processes through pidfds on Python 3.11 Linux.

    Python 3.11's default child watcher waits in one thread per child; the
    pidfd watcher polls each child's pidfd from the loop, which reaps faster
    and spawns more runs per second. Call it once, from the main thread, in
    the loop that will run the jobs (or before that loop starts). It does
    nothing on Python 3.12+ (where the watchers are deprecated and the loop
    already uses pidfds), off the main thread, or without working pidfds.
    """
    if sys.version_info >= (3, 12) or not _pidfds_work():
        return
    if threading.current_thread() is not threading.main_thread():
        return
    policy = asyncio.get_event_loop_policy()
    watcher = policy.get_child_watcher()
    if not isinstance(watcher, asyncio.PidfdChildWatcher):
        watcher = asyncio.PidfdChildWatcher()
        policy.set_child_watcher(watcher)
    with contextlib.suppress(RuntimeError):
        watcher.attach_loop(asyncio.get_running_loop())


def _pidfds_work() -> bool:
    """True when this kernel (and sandbox) lets us open a pidfd."""
    if not hasattr(os, "pidfd_open"):
        return False
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError:
        return False
    return True


def _cut(text: str) -> str:
    return text if len(text) <= STATUS_MAX_CHARS else text[: STATUS_MAX_CHARS - 1] + "…"


def _not_started(result: Result) -> Outcome:
    """The outcome of a run stopped before it was launched."""
    return Outcome(
        state=RunState.NOT_STARTED,
        result=result,
        status="stopped before it started",
        reason="stopped before it started",
    )


async def _within(future: asyncio.Future[None], seconds: float) -> bool:
    """Wait up to `seconds` for `future`; True if it is done. Never cancels it."""
    done, _ = await asyncio.wait({future}, timeout=seconds)
    return bool(done)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


# --- commands ----------------------------------------------------------------


class _PipeProtocol(asyncio.SubprocessProtocol):
    """Feeds the pipe into the capture; tells when the process exits and the pipe closes.

    Exit and end of pipe are separate events on purpose: a grandchild may keep
    the pipe open long after the job's own process has exited.
    """

    def __init__(self, output: OutputCapture, loop: asyncio.AbstractEventLoop) -> None:
        self._output = output
        self.exited: asyncio.Future[None] = loop.create_future()
        self.eof: asyncio.Future[None] = loop.create_future()

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        """Output arrived (stdout and stderr share one pipe)."""
        self._output.write(data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        """The last writer closed the pipe."""
        _resolve(self.eof)

    def process_exited(self) -> None:
        """The job's own process exited and was reaped."""
        _resolve(self.exited)


@dataclass(slots=True)
class _StopRequest:
    result: Result
    kill: bool


class CommandRunner:
    """Runs an external program in its own session and process group (SPEC R13, R14)."""

    def __init__(
        self,
        spec: CommandSpec,
        *,
        env: Mapping[str, str],
        output: OutputCapture,
        kill_grace: float = 5.0,
    ) -> None:
        """Prepare a run of `spec` with exactly the environment `env`."""
        self._spec = spec
        self._env = dict(env)
        self._output = output
        self._kill_grace = kill_grace
        self._transport: asyncio.SubprocessTransport | None = None
        self._protocol: _PipeProtocol | None = None
        self._pgid: int | None = None
        self._stop: _StopRequest | None = None
        self._killer: asyncio.TimerHandle | None = None
        self._ended = False

    @property
    def status(self) -> str:
        """The last line of output so far."""
        return _cut(self._output.last_line())

    @property
    def message_data(self) -> Mapping[str, object]:
        """Always empty: a command has no message data."""
        return _NO_PROPS

    async def start(self) -> int | None:
        """Spawn the process; return its pid (also its process group id).

        Raises:
            LaunchError: Missing program or cwd, not executable, permission denied.
        """
        if self._stop is not None:
            return None
        argv = self._argv()
        cwd = self._checked_cwd()
        loop = asyncio.get_running_loop()
        try:
            transport, protocol = await loop.subprocess_exec(
                lambda: _PipeProtocol(self._output, loop),
                *argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                env=self._env,
                start_new_session=True,
            )
        except OSError as exc:
            raise LaunchError(_launch_reason(exc, argv[0], cwd)) from exc
        self._transport, self._protocol = transport, protocol
        self._pgid = transport.get_pid()
        if self._stop is not None:  # stop() came while we were spawning
            self._apply_stop(self._stop)
        return self._pgid

    async def wait(self) -> Outcome:
        """Wait for the process, then for its pipe (briefly), then clean up its group."""
        if self._transport is None or self._protocol is None:
            self._output.close()
            return _not_started(self._stop.result if self._stop else Result.ERROR)
        try:
            await asyncio.shield(self._protocol.exited)
            await self._drain(self._protocol.eof)
        finally:
            self._finish()
        return self._outcome(self._transport.get_returncode())

    def stop(self, result: Result, *, kill: bool = False) -> None:
        """SIGTERM the group now and SIGKILL it after `kill_grace`; `kill=True` kills at once."""
        if self._ended or (self._protocol is not None and self._protocol.exited.done()):
            return
        if self._stop is None:
            self._stop = _StopRequest(result, kill)
        self._stop.kill = self._stop.kill or kill
        if self._pgid is not None:
            self._apply_stop(self._stop)

    def _argv(self) -> list[str]:
        if self._spec.shell is not None:
            return ["/bin/sh", "-c", self._spec.shell]
        if not self._spec.argv:
            raise LaunchError("empty command")
        return list(self._spec.argv)

    def _checked_cwd(self) -> Path | None:
        """The cwd, checked here so the reason names it rather than a confusing ENOENT."""
        cwd = self._spec.cwd
        if cwd is None:
            return None
        if not cwd.exists():
            raise LaunchError(f"cwd does not exist: {cwd}")
        if not cwd.is_dir():
            raise LaunchError(f"cwd is not a directory: {cwd}")
        return cwd

    def _apply_stop(self, stop: _StopRequest) -> None:
        if stop.kill:
            self._signal_group(signal.SIGKILL)
        elif self._killer is None:
            self._signal_group(signal.SIGTERM)
            loop = asyncio.get_running_loop()
            self._killer = loop.call_later(self._kill_grace, self._signal_group, signal.SIGKILL)

    def _signal_group(self, sig: signal.Signals) -> None:
        if self._pgid is None:
            return
        # The group may be gone already; after our own exit its id is not reused
        # while any member lives, so this never hits a stranger's group.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._pgid, sig)

    async def _drain(self, eof: asyncio.Future[None]) -> None:
        """Read the pipe to its end, unless a leftover process keeps it open."""
        if await _within(eof, _EOF_GRACE):
            return
        self._signal_group(signal.SIGKILL)
        await _within(eof, _KILLED_DRAIN)

    def _finish(self) -> None:
        """Kill whatever is left in the group, close the pipe and the capture."""
        self._ended = True
        if self._killer is not None:
            self._killer.cancel()
        self._signal_group(signal.SIGKILL)
        if self._transport is not None:
            self._transport.close()
        self._output.close()

    def _outcome(self, returncode: int | None) -> Outcome:
        code = -1 if returncode is None else returncode
        status = _cut(_exit_words(code, self._output.last_line()))
        if self._stop is not None:
            return Outcome(
                state=RunState.FAILED, result=self._stop.result, status=status, exit_code=code
            )
        ok = code in self._spec.success_codes
        return Outcome(
            state=RunState.SUCCESS if ok else RunState.FAILED,
            result=Result.COMPLETED,
            status=status,
            exit_code=code,
        )


def _exit_words(returncode: int, last_line: str) -> str:
    """`exit 3: last line`, or `killed by SIGTERM` for a negative return code."""
    if returncode >= 0:
        words = f"exit {returncode}"
    else:
        try:
            words = f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            words = f"killed by signal {-returncode}"
    return f"{words}: {last_line}" if last_line else words


def _launch_reason(exc: OSError, program: str, cwd: Path | None) -> str:
    """The operator's words for why spawning failed."""
    if isinstance(exc, FileNotFoundError):
        return f"program not found: {program}"
    if isinstance(exc, PermissionError):
        if cwd is not None and not os.access(cwd, os.X_OK):
            return f"permission denied: cwd {cwd}"
        return f"permission denied: {program}"
    return f"cannot execute {program}: {exc.strerror or exc}"


# --- python jobs -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Ending:
    """How a python job's thread ended, as reported to the loop."""

    error: str | None = None
    """`ValueError: message` when run() or the callable raised."""
    abandoned: bool = False
    """The job did not stop within the grace period; its thread was left running."""


def _load(target: str) -> Callable[[], object]:
    """Import `package.module:attr` (attr may be dotted). Runs in the worker thread."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise ImportError("expected 'package.module:attr'")
    obj: Any = importlib.import_module(module_name)
    for name in attr.split("."):
        obj = getattr(obj, name)
    if not callable(obj):
        raise TypeError(f"{attr} is not callable")
    return obj  # type: ignore[no-any-return]


def _already_imported_function(target: str) -> Callable[[], object] | None:
    """`target` if it names a plain function of a module imported already, else None.

    Such a run needs nothing from its worker thread before it runs (no
    import, no instance), which saves a round trip between threads per run.
    Anything else (a class, a module not imported yet, a missing attribute)
    takes the worker-thread path, where failures become launch failures.
    """
    module_name, _, attr = target.partition(":")
    obj: Any = sys.modules.get(module_name)
    for name in attr.split("."):
        obj = getattr(obj, name, None)
    return obj if inspect.isfunction(obj) or inspect.isbuiltin(obj) else None


def _prepare(job: Callable[[], object]) -> tuple[object | None, Callable[[], object]]:
    """The instance (for a class) and what the thread calls: its `run`, or the callable."""
    if not isinstance(job, type):
        return None, job
    instance = job()
    run = getattr(instance, "run", None)
    if not callable(run):
        raise TypeError(f"{job.__name__} has no run() method")
    return instance, run


def _describe(exc: BaseException) -> str:
    """`ValueError: message`, robust against a broken `__str__`."""
    try:
        message = str(exc)
    except Exception:
        message = ""
    name = type(exc).__name__
    return f"{name}: {message}" if message else name


@dataclass(frozen=True, slots=True)
class _Link:
    """The loop's end of one job thread: where the thread's reports land."""

    loop: asyncio.AbstractEventLoop
    launched: asyncio.Future[object | None]
    """Resolves to the instance (None for a plain callable), or to a LaunchError."""
    ending: asyncio.Future[_Ending]


class _Workers:
    """Daemon threads reused across python runs; a new one starts only when none is idle.

    Daemon threads, not an executor's: a job that never returns can neither
    block interpreter shutdown nor starve other runs (the next run simply
    gets a new thread). Idle threads end after `IDLE_SECONDS`.
    """

    IDLE_SECONDS = 60.0

    def __init__(self) -> None:
        self._work: queue.SimpleQueue[tuple[Callable[[], None], str]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0

    def submit(self, work: Callable[[], None], name: str) -> None:
        """Run `work` on an idle thread, or on a new one, naming the thread `name` meanwhile."""
        with self._lock:
            reuse = self._idle > 0
            if reuse:
                self._idle -= 1  # that thread is promised to this work
        self._work.put((work, name))
        if not reuse:
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
            work()  # the work reports its own outcome and never raises
            thread.name = "tuisched-job"
            with self._lock:
                self._idle += 1


_WORKERS = _Workers()


class PythonRunner:
    """Runs `package.module:attr` in a daemon thread: a plain callable or a run/stop class.

    The thread is a daemon `threading.Thread`, not an executor worker, so a
    job that never returns cannot block interpreter shutdown or starve
    other work. The job's own `print()`s are not captured (they go to the
    scheduler's stdout); an exception's traceback is written to the output.
    """

    def __init__(self, spec: PythonSpec, *, output: OutputCapture, kill_grace: float = 5.0) -> None:
        """Prepare a run of `spec.target`."""
        self._target = spec.target
        self._output = output
        self._kill_grace = kill_grace
        self._link: _Link | None = None
        self._launched = False
        """True once start() has the instance: from then on stop() can reach it."""
        self._instance: object | None = None
        self._stop: _StopRequest | None = None
        self._stop_called = False
        self._stop_error = ""
        self._give_up: asyncio.TimerHandle | None = None

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

    async def start(self) -> int | None:
        """Import the target (and create the instance) in the worker thread; then run it.

        Raises:
            LaunchError: The target cannot be imported or instantiated.
        """
        if self._stop is not None:
            return None
        loop = asyncio.get_running_loop()
        link = _Link(loop, loop.create_future(), loop.create_future())
        self._link = link
        name = f"tuisched-job-{self._target}"
        function = _already_imported_function(self._target)
        if function is not None:  # no import, no instance: nothing to wait for
            self._launched = True
            _WORKERS.submit(functools.partial(self._thread_call, link, function), name)
            return None
        _WORKERS.submit(functools.partial(self._thread_main, link), name)
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
            ending = await asyncio.shield(self._link.ending)
        finally:
            if self._give_up is not None:
                self._give_up.cancel()
            self._output.close()
        return self._outcome(ending)

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
            self._give_up = link.loop.call_later(delay, self._abandon_launch, link)

    def _apply_stop(self, link: _Link, stop: _StopRequest) -> None:
        if not self._stop_called:
            self._stop_called = True
            self._call_instance_stop()
        if stop.kill:
            self._abandon(link)
        elif self._give_up is None:
            self._give_up = link.loop.call_later(self._kill_grace, self._abandon, link)

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
            instance, call = _prepare(_load(self._target))
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
        result = self._stop.result if self._stop is not None else Result.COMPLETED
        if ending.abandoned:
            status = f"did not stop within {self._kill_grace:g}s; its thread was left running"
        elif ending.error is not None:
            status = ending.error
        else:
            status = self.status or ("stopped" if self._stop is not None else "")
        ok = self._stop is None and ending.error is None and not ending.abandoned
        return Outcome(
            state=RunState.SUCCESS if ok else RunState.FAILED,
            result=result,
            status=_cut(status),
            reason=self._stop_error,
        )


def _cross(link: _Link, callback: Callable[..., None], *args: object) -> None:
    """The one place a job thread hands something to the event loop."""
    # The scheduler's loop may be closed by the time an abandoned job returns.
    with contextlib.suppress(RuntimeError):
        link.loop.call_soon_threadsafe(callback, *args)


def _report_launch(link: _Link, instance_or_error: object) -> None:
    """On the loop: the target was imported (and instantiated), or could not be."""
    if link.launched.done():
        return  # start() was cancelled
    if isinstance(instance_or_error, LaunchError):
        link.launched.set_exception(instance_or_error)
    else:
        link.launched.set_result(instance_or_error)


# --- wait_for sensors ----------------------------------------------------------


_MAGIC = re.compile(r"[*?[]")


def _first_match(pattern: str) -> str | None:
    """The first existing path matching `pattern` (sorted), or None."""
    # Path.glob cannot take an absolute pattern; glob.glob can.
    matches = sorted(glob.glob(pattern, recursive="**" in pattern))  # noqa: PTH207
    return matches[0] if matches else None


def watch_root(pattern: str) -> tuple[Path, bool]:
    """The folder to watch for `pattern`, and whether to watch it recursively.

    That is the deepest existing folder above the pattern's first wildcard
    (or above its file name, for a plain path). The watch is recursive only
    when a match may appear deeper than that folder's direct children: a
    wildcard in a folder name, or folders on the way that do not exist yet.
    """
    parts = Path(pattern).absolute().parts
    wild = next((i for i, part in enumerate(parts) if _MAGIC.search(part)), len(parts) - 1)
    root = Path(*parts[:wild])
    recursive = wild < len(parts) - 1
    while not root.is_dir() and root != root.parent:
        root, recursive = root.parent, True
    return root, recursive


class WaitForRunner:
    """Succeeds when a file matching a path or glob exists or appears (SPEC R1).

    It checks the glob once, then watches the folder the match would appear
    in (`watch_root`) and re-checks on each batch of changes: no busy polling.
    Atomic saves (write a temporary file, rename it) count. The engine ends a
    fruitless wait with `stop(Result.TIMED_OUT)`.
    """

    def __init__(self, spec: WaitForSpec, *, output: OutputCapture) -> None:
        """Prepare a sensor for `spec.path` (`~` is expanded)."""
        self._pattern = str(Path(spec.path).expanduser())
        self._output = output
        self._stop_event: asyncio.Event | None = None
        self._stop: Result | None = None
        self._status = f"waiting for {spec.path}"
        self._ended = False

    @property
    def status(self) -> str:
        """What it waits for, then what it found."""
        return _cut(self._status)

    @property
    def message_data(self) -> Mapping[str, object]:
        """Always empty."""
        return _NO_PROPS

    async def start(self) -> int | None:
        """Get ready to watch; nothing can fail to launch."""
        if self._stop is None:
            self._stop_event = asyncio.Event()
        return None

    async def wait(self) -> Outcome:
        """Until a match exists, or `stop()` was called."""
        if self._stop_event is None:
            self._output.close()
            return _not_started(self._stop or Result.ERROR)
        try:
            found = await self._watch(self._stop_event)
        except OSError as exc:
            return self._ended_with(RunState.FAILED, f"cannot watch {self._pattern}: {exc}")
        finally:
            self._ended = True
            self._output.close()
        if found is not None:
            return self._ended_with(RunState.SUCCESS, f"found {found}")
        return self._ended_with(RunState.FAILED, f"no file matched {self._pattern}")

    def stop(self, result: Result, *, kill: bool = False) -> None:
        """End the watch promptly (within one watch step); `kill` changes nothing."""
        if self._ended:
            return
        if self._stop is None:
            self._stop = result
        if self._stop_event is not None:
            self._stop_event.set()

    async def _watch(self, stop_event: asyncio.Event) -> str | None:
        found = await asyncio.to_thread(_first_match, self._pattern)
        if found is not None or stop_event.is_set():
            return found
        root, recursive = watch_root(self._pattern)
        async for _changes in awatch(
            root,
            stop_event=stop_event,
            watch_filter=None,  # the default filter drops names like *.swp or *~
            debounce=_WATCH_STEP_MS,
            step=_WATCH_STEP_MS,
            recursive=recursive,
            rust_timeout=_RECHECK_MS,
            yield_on_timeout=True,
        ):
            found = await asyncio.to_thread(_first_match, self._pattern)
            if found is not None:
                return found
        return None

    def _ended_with(self, state: RunState, status: str) -> Outcome:
        self._status = status
        result = self._stop if self._stop is not None and state is not RunState.SUCCESS else None
        return Outcome(state=state, result=result or Result.COMPLETED, status=_cut(status))


# --- leftovers of a dead scheduler ----------------------------------------------------


def kill_leftovers(run_ids: Collection[str]) -> int:
    """SIGKILL every process still carrying one of `run_ids` in its environment.

    For runs a killed scheduler left behind: their processes, in their own
    session, outlive it. Each command run has `TUISCHED_RUN_ID` in its
    environment, inherited by everything it starts, so this finds them all,
    with no race on when the pid was recorded and no risk from a recycled
    pid. Processes of other users are not readable and so never touched.
    Returns how many processes were killed.
    """
    wanted = {f"TUISCHED_RUN_ID={run_id}".encode() for run_id in run_ids}
    killed = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environment = set((entry / "environ").read_bytes().split(b"\0"))
        except OSError:
            continue
        if wanted & environment:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(entry.name), signal.SIGKILL)
                killed += 1
    return killed
