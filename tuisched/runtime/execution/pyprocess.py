"""Python jobs in child processes of their own (the default), forked by a fork server.

Each run gets a fresh process: a fork of a server that has the job's module
imported (`forking.py`, `forkserver.py`), so a run starts in about the time
of a fork instead of an interpreter's start and an import. Like a command, it
runs in its own session and process group: what the job prints is captured
like a command's output; stopping it sends SIGTERM to the group (which calls
its `stop()`) and SIGKILL after the grace period; a job that calls
`os._exit`, crashes the interpreter or blocks in C code ends or is killed
without touching the scheduler. The job's `status` and `message_data` come
back over a pipe of their own (`pyjob.py`).

A run whose module was edited since its server imported it is forked by a
new server (the old one is retired), so an edit takes effect at the next run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import Callable, Coroutine, Mapping
from types import MappingProxyType
from typing import Any, TypeVar

from tuisched.domain.errors import LaunchError, StaleServerError
from tuisched.domain.model import PythonSpec
from tuisched.domain.runs import Outcome, Result, RunState
from tuisched.runtime.clock import Clock, SystemClock, Timer
from tuisched.runtime.execution import forking
from tuisched.runtime.execution.base import (
    _EOF_GRACE,
    _KILLED_DRAIN,
    _cut,
    _not_started,
    _resolve,
    _StopRequest,
    _within,
)
from tuisched.runtime.execution.command import _exit_words
from tuisched.runtime.execution.forking import (
    PER_RUN,
    Forked,
    ForkServer,
    fork_servers,
)
from tuisched.runtime.execution.output import OutputCapture

T = TypeVar("T")
_READ_BYTES = 65536


class _Pipe:
    """The loop's end of one pipe from a run's process; `write_end` goes to the server."""

    def __init__(self, loop: asyncio.AbstractEventLoop, on_data: Callable[[bytes], None]) -> None:
        self._loop = loop
        self._on_data = on_data
        self._fd, self.write_end = os.pipe()
        os.set_blocking(self._fd, False)
        self.closed: asyncio.Future[None] = loop.create_future()
        """Resolved at the pipe's end (every writer closed it) or when closed here."""
        loop.add_reader(self._fd, self._read)

    def _read(self) -> None:
        try:
            data = os.read(self._fd, _READ_BYTES)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            self._on_data(data)
        else:
            self.close()

    def close(self) -> None:
        """Stop reading (idempotent)."""
        if self._fd >= 0:
            self._loop.remove_reader(self._fd)
            os.close(self._fd)
            self._fd = -1
        _resolve(self.closed)


class _Reports:
    """JSON lines from the job's process (see `pyjob`)."""

    def __init__(self, on_message: Callable[[dict[str, Any]], None]) -> None:
        self._buffer = b""
        self._on_message = on_message
        self.messages: list[dict[str, Any]] = []

    def feed(self, data: bytes) -> None:
        self._buffer += data
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            try:
                message = json.loads(line)
            except ValueError:
                continue  # not ours: a job cannot write here, but never trust a pipe
            if isinstance(message, dict):
                self.messages.append(message)
                self._on_message(message)


class ProcessPythonRunner:
    """Runs `package.module:attr` in a child process of its own (see the module)."""

    def __init__(
        self,
        spec: PythonSpec,
        *,
        env: Mapping[str, str],
        output: OutputCapture,
        kill_grace: float = 5.0,
        clock: Clock | None = None,
    ) -> None:
        self._target = spec.target
        self._env = env
        self._output = output
        self._kill_grace = kill_grace
        self._clock = clock or SystemClock()
        self._server: ForkServer | None = None
        self._forked: Forked | None = None
        self._exited: asyncio.Future[int | None] | None = None
        """The process's wait status once it has ended (None: unknown, see `_lost`)."""
        self._lost = ""
        """Why the exit status is unknown: the server ended while the run was going."""
        self._pid: int | None = None
        self._reported_pid: asyncio.Future[int] | None = None
        """The pid the process gives itself in its first report."""
        self._pipes: tuple[_Pipe, _Pipe] | None = None
        self._reports = _Reports(self._on_report)
        self._stop: _StopRequest | None = None
        self._stopped: asyncio.Future[None] | None = None
        self._killer: Timer | None = None
        self._ended = False
        self._status = ""
        self._data: Mapping[str, object] = MappingProxyType({})
        self._launched: asyncio.Future[str | None] | None = None
        self._importing = False
        """Stopped while its module was being imported (a run that began, as when a
        process of its own imported it)."""

    @property
    def status(self) -> str:
        """The job's last reported `status`."""
        return _cut(self._status)

    @property
    def message_data(self) -> Mapping[str, object]:
        """The job's last reported `message_data`."""
        return self._data

    async def start(self) -> int | None:
        """Have a fork server make the run's process; return its pid once the target is
        imported and instantiated there.

        Raises:
            LaunchError: the target cannot be imported or instantiated, or no process
                could be made (the message says why).
        """
        loop = asyncio.get_running_loop()
        self._stopped = loop.create_future()
        self._launched = loop.create_future()
        self._reported_pid = loop.create_future()
        for _ in range(2):  # a second time when the first server's module was edited
            if self._stop is not None:
                return None
            server = await self._unless_stopped(
                fork_servers().server_for(self._target, self._env, sys.path)
            )
            if server is None:  # stopped while a server started and imported its module
                self._importing = True
                return None
            self._server = server
            try:
                pid = await self._fork(server, loop)
            except StaleServerError:
                fork_servers().drop(server)
                continue
            return await self._launch(pid)
        raise LaunchError("its module kept changing while a process was made for it")

    async def _unless_stopped(self, work: Coroutine[Any, Any, T]) -> T | None:
        """`work`'s result, or None if the run is stopped first (`work` goes on alone)."""
        task = asyncio.ensure_future(work)
        assert self._stopped is not None  # noqa: S101  (made in start)
        await _first({task, self._stopped})
        if task.done():
            return task.result()
        task.add_done_callback(lambda done: done.cancelled() or done.exception())
        return None

    async def _fork(self, server: ForkServer, loop: asyncio.AbstractEventLoop) -> int:
        """The run's process from `server`, its output and reports read here."""
        output, reports = _Pipe(loop, self._output.write), _Pipe(loop, self._reports.feed)
        self._pipes = (output, reports)
        per_run = {name: self._env[name] for name in PER_RUN if name in self._env}
        run_id = self._env.get("TUISCHED_RUN_ID", "")
        forked = server.fork(run_id, self._target, per_run, (output.write_end, reports.write_end))
        try:
            pid = await forked.pid  # answered in a millisecond, or the server is killed
        except StaleServerError:
            self._close_pipes()
            raise
        except LaunchError as error:
            pid = await self._orphan(str(error), reports)
        else:
            self._forked, self._exited = forked, forked.status
        self._pid = pid
        return pid

    async def _orphan(self, why: str, reports: _Pipe) -> int:
        """The server failed the request: if it made the process all the same (it died
        just after), that process holds the reports pipe and names itself there first.
        It is killed, and the run ends with `why`; else `why` is a launch failure."""
        named = self._reported_pid
        assert named is not None  # noqa: S101  (made in start)
        await _first({named, reports.closed}, self._clock, within=forking.ANSWER_SECONDS)
        if not named.done():
            self._close_pipes()
            raise LaunchError(why)
        self._lost = why
        self._exited = asyncio.get_running_loop().create_future()
        self._exited.set_result(None)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(named.result(), signal.SIGKILL)
        return named.result()

    async def _launch(self, pid: int) -> int:
        """Wait for the target to be imported and instantiated in the run's process."""
        assert self._exited is not None and self._launched is not None  # noqa: S101, PT018
        if self._stop is not None:  # stop() came while the process was being made
            self._apply_stop(self._stop)
        launched, exited = self._launched, self._exited
        await _first({launched, exited})
        failed = launched.result() if launched.done() else None
        if failed is None and not launched.done() and self._stop is None:
            failed = self._ended_early()
        if failed is not None:
            await _within(asyncio.ensure_future(_settled(exited)), _EOF_GRACE)
            self._finish()
            raise LaunchError(failed)
        return pid

    def _ended_early(self) -> str:
        if self._why_lost():
            return self._why_lost()
        code = self._exit_code()
        return f"the python process ended before the job started ({code})"

    def _on_report(self, message: dict[str, Any]) -> None:
        if "pid" in message:
            if self._reported_pid is not None and not self._reported_pid.done():
                self._reported_pid.set_result(int(message["pid"]))
        elif "launched" in message:
            self._set_launched(None)
        elif "launch_error" in message:
            self._set_launched(str(message["launch_error"]))
        elif isinstance(message.get("status"), str):
            self._status = message["status"]
        elif isinstance(message.get("data"), dict):
            self._data = MappingProxyType(message["data"])

    def _set_launched(self, error: str | None) -> None:
        if self._launched is not None and not self._launched.done():
            self._launched.set_result(error)

    async def wait(self) -> Outcome:
        """Wait for the process and its pipes; then kill what is left of its group."""
        exited, pipes = self._exited, self._pipes
        launched = self._launched
        if self._importing and self._stop is not None:
            self._finish()
            status = "stopped while its module was being imported"
            return Outcome(state=RunState.FAILED, result=self._stop.result, status=status)
        if (
            exited is None
            or pipes is None
            or self._pid is None
            or (launched is not None and not launched.done() and self._stop is None)
        ):
            self._finish()
            return _not_started(self._stop.result if self._stop else Result.ERROR)
        output, reports = pipes
        try:
            await self._exit_status(exited, output)
            if not await _within(output.closed, _EOF_GRACE):
                self._signal(signal.SIGKILL)
                await _within(output.closed, _KILLED_DRAIN)
            await _within(reports.closed, _KILLED_DRAIN)
        finally:
            self._finish()
        return self._outcome()

    async def _exit_status(self, exited: asyncio.Future[int | None], output: _Pipe) -> None:
        """Wait for the exit status, which the server sends as the process ends.

        A process whose output closed has usually just ended: if the status is
        then late, the process is watched, and a server still silent
        ANSWER_SECONDS after it ended is hung, and killed (the run then ends
        saying so). A process that closed its output and runs on is waited for.
        """
        # The process's end counts too: a server hung before it closed its copy of the
        # output pipe (right after the fork) keeps the output open after the process
        # ended, and would never report the status either.
        ended = _end_of(self._pid) if self._pid is not None else None
        try:
            await _first({exited, output.closed, *([ended] if ended is not None else [])})
            if not exited.done():
                await _first({exited}, self._clock, within=forking.ANSWER_SECONDS)
            if exited.done() or self._server is None or self._pid is None:
                await asyncio.shield(exited)
                return
            if ended is not None:
                await ended
            await _first({exited}, self._clock, within=forking.ANSWER_SECONDS)
            if not exited.done():
                why = f"it did not report the end of process {self._pid}"
                self._server.kill(f"{why} within {forking.ANSWER_SECONDS:g}s")
            await asyncio.shield(exited)
        finally:
            if ended is not None:
                ended.cancel()  # (its pidfd is closed either way)

    def stop(self, result: Result, *, kill: bool = False) -> None:
        """SIGTERM the process group (the job's `stop()`), SIGKILL after `kill_grace`."""
        if self._ended or (self._exited is not None and self._exited.done()):
            return
        if self._stop is None:
            self._stop = _StopRequest(result, kill)
            if self._stopped is not None:
                _resolve(self._stopped)
        self._stop.kill = self._stop.kill or kill
        if self._pid is not None:
            self._apply_stop(self._stop)

    def _apply_stop(self, stop: _StopRequest) -> None:
        if stop.kill:
            self._signal(signal.SIGKILL)
        elif self._killer is None:
            self._signal(signal.SIGTERM)
            self._killer = self._clock.call_later(self._kill_grace, self._signal, signal.SIGKILL)

    def _signal(self, signum: int) -> None:
        if self._pid is not None:
            # As for a command: the group's id is not reused while any member lives.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._pid, signum)

    def _finish(self) -> None:
        if self._ended:
            return
        self._ended = True
        if self._killer is not None:
            self._killer.cancel()
        self._signal(signal.SIGKILL)  # whatever the job left in its group
        self._close_pipes()
        self._output.close()

    def _close_pipes(self) -> None:
        if self._pipes is not None:
            for pipe in self._pipes:
                pipe.close()

    def _why_lost(self) -> str:
        return self._lost or (self._forked.lost if self._forked is not None else "")

    def _exit_code(self) -> int:
        exited = self._exited
        status = exited.result() if exited is not None and exited.done() else None
        return -1 if status is None else os.waitstatus_to_exitcode(status)

    def _outcome(self) -> Outcome:
        code = self._exit_code()
        messages = self._reports.messages
        ended = [m["ended"] for m in messages if "ended" in m]
        stop_errors = [str(m["stop_error"]) for m in messages if "stop_error" in m]
        reason = stop_errors[0] if stop_errors else ""
        if self._why_lost():
            status = f"{self._why_lost()}; the run was stopped"
            result = self._stop.result if self._stop is not None else Result.ERROR
            return Outcome(state=RunState.FAILED, result=result, status=_cut(status),
                           exit_code=code, reason=reason)  # fmt: skip
        if self._stop is not None:
            status = self._status or ("stopped" if ended else _exit_words(code, ""))
            return Outcome(state=RunState.FAILED, result=self._stop.result,
                           status=_cut(status), exit_code=code, reason=reason)  # fmt: skip
        if not ended:  # os._exit, a crash, a signal: the job never returned
            words = _exit_words(code, self._output.last_line())
            status = f"the job's process ended without returning: {words}"
            return Outcome(state=RunState.FAILED, result=Result.COMPLETED,
                           status=_cut(status), exit_code=code)  # fmt: skip
        if ended[0] is not None:
            return Outcome(state=RunState.FAILED, result=Result.COMPLETED,
                           status=_cut(str(ended[0])), exit_code=code)  # fmt: skip
        return Outcome(state=RunState.SUCCESS, result=Result.COMPLETED,
                       status=_cut(self._status), exit_code=code)  # fmt: skip


def _end_of(pid: int) -> asyncio.Future[None] | None:
    """Done once process `pid` has ended (exited, or gone), as its pidfd says; None where
    pidfds do not work (then nothing can be known here)."""
    loop = asyncio.get_running_loop()
    ended: asyncio.Future[None] = loop.create_future()
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:  # gone already
        ended.set_result(None)
        return ended
    except OSError:
        return None
    loop.add_reader(pidfd, _resolve, ended)

    def close(_: object) -> None:
        loop.remove_reader(pidfd)
        os.close(pidfd)

    ended.add_done_callback(close)
    return ended


async def _first(
    futures: set[asyncio.Future[Any]], clock: Clock | None = None, *, within: float = 0.0
) -> None:
    """Return once one of `futures` is done, or after `within` seconds on `clock` (when
    a clock is given); cancel none."""
    timer: Timer | None = None
    if clock is not None:
        late: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        timer = clock.call_later(within, _resolve, late)
        futures = {*futures, late}
    try:
        await asyncio.wait(futures, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if timer is not None:
            timer.cancel()


async def _settled(future: asyncio.Future[T]) -> None:
    """Wait for `future` without taking its result or its exception."""
    await asyncio.wait({future})
