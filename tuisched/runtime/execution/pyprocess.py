"""Python jobs in child processes of their own (the default), from a warm pool.

Each run gets a fresh process (`pyjob.py`, started ahead of time so a run
does not wait for an interpreter to start), in its own session and process
group like a command: what the job prints is captured like a command's
output; stopping it sends SIGTERM (which calls its `stop()`) and SIGKILL after
the grace period; a job that calls `os._exit`, crashes the interpreter or
blocks in C code ends or is killed without touching the scheduler. The job's
`status` and `message_data` come back over a pipe of their own.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from tuisched.domain.errors import LaunchError
from tuisched.domain.model import PythonSpec
from tuisched.domain.runs import Outcome, Result, RunState
from tuisched.runtime.clock import Clock, SystemClock, Timer
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
from tuisched.runtime.execution.output import OutputCapture
from tuisched.runtime.execution.spawn import Child, spawn

HARNESS = Path(__file__).with_name("pyjob.py")
_BOOT = "import runpy, sys; runpy.run_path(sys.argv.pop(1), run_name='__main__')"
WARM_PROCESSES = 2
"""Processes kept started and waiting for a python job."""


class _Output:
    """Where the process's stdout and stderr (one pipe) go.

    Output before the process is given a run (nothing, normally) is kept and
    handed to the run's capture when it gets one.
    """

    def __init__(self) -> None:
        self._early: list[bytes] = []
        self._sink: Callable[[bytes], None] = self._early.append

    def capture(self, output: OutputCapture) -> None:
        for chunk in self._early:
            output.write(chunk)
        self._early.clear()
        self._sink = output.write

    def write(self, data: bytes) -> None:
        self._sink(data)


class _Reports(asyncio.Protocol):
    """JSON lines from the job's process (see `pyjob`)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._buffer = b""
        self.messages: list[dict[str, Any]] = []
        self.changed: Callable[[dict[str, Any]], None] = lambda _: None
        self.closed: asyncio.Future[None] = loop.create_future()

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            try:
                message = json.loads(line)
            except ValueError:
                continue  # not ours: a job cannot write here, but never trust a pipe
            if isinstance(message, dict):
                self.messages.append(message)
                self.changed(message)

    def connection_lost(self, exc: Exception | None) -> None:
        _resolve(self.closed)


class _Warm:
    """One started process waiting for its job."""

    def __init__(self, child: Child, output: _Output, reports: _Reports) -> None:
        self.child = child
        self.output = output
        self.reports = reports

    @property
    def pid(self) -> int:
        return self.child.pid

    @property
    def alive(self) -> bool:
        return not self.child.exited.done()

    def give(self, job: Mapping[str, object]) -> None:
        stdin = self.child.stdin
        assert stdin is not None  # noqa: S101  (spawned with stdin=True)
        stdin.write(json.dumps(job).encode() + b"\n")
        stdin.close()

    def discard(self) -> None:
        """Stop a process that will get no job (it is reaped when it has exited)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.child.pid, signal.SIGKILL)
        self.child.close()


async def _spawn() -> _Warm:
    read_end, write_end = os.pipe()
    output = _Output()
    try:
        child = await spawn(
            [sys.executable, "-u", "-c", _BOOT, str(HARNESS), str(write_end)],
            env=None, cwd=None, on_output=output.write, stdin=True, pass_fds=(write_end,),
        )  # fmt: skip
    except BaseException:
        os.close(read_end)
        raise
    finally:
        os.close(write_end)
    reports = _Reports(asyncio.get_running_loop())
    loop = asyncio.get_running_loop()
    await loop.connect_read_pipe(lambda: reports, os.fdopen(read_end, "rb", buffering=0))
    return _Warm(child, output, reports)


class WarmPool:
    """Keeps `size` python job processes started and waiting, per event loop."""

    def __init__(self, size: int = WARM_PROCESSES) -> None:
        self._size = size
        self._idle: deque[_Warm] = deque()
        self._filling: asyncio.Task[None] | None = None
        self._closed = False

    async def take(self) -> _Warm:
        """A started process for one job (a fresh one when none is waiting)."""
        while self._idle:
            warm = self._idle.popleft()
            if warm.alive:
                self._fill_soon()
                return warm
            warm.discard()
        warm = await _spawn()
        self._fill_soon()
        return warm

    def _fill_soon(self) -> None:
        if self._closed or (self._filling is not None and not self._filling.done()):
            return
        self._filling = asyncio.get_running_loop().create_task(self._fill())

    async def _fill(self) -> None:
        while not self._closed and len(self._idle) < self._size:
            try:
                warm = await _spawn()
            except OSError:
                return  # the next run spawns its own and says why if it cannot
            if self._closed:
                warm.discard()
                return
            self._idle.append(warm)

    async def close(self) -> None:
        """Stop the waiting processes."""
        self._closed = True
        if self._filling is not None:
            self._filling.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._filling
        while self._idle:
            self._idle.popleft().discard()


_POOLS: dict[asyncio.AbstractEventLoop, WarmPool] = {}


def warm_pool() -> WarmPool:
    """The pool of the running loop."""
    loop = asyncio.get_running_loop()
    pool = _POOLS.get(loop)
    if pool is None:
        pool = _POOLS[loop] = WarmPool()
    return pool


async def close_warm_pool() -> None:
    """Stop the running loop's waiting processes (at shutdown)."""
    pool = _POOLS.pop(asyncio.get_running_loop(), None)
    if pool is not None:
        await pool.close()


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
        self._env = dict(env)
        self._output = output
        self._kill_grace = kill_grace
        self._clock = clock or SystemClock()
        self._process: _Warm | None = None
        self._stop: _StopRequest | None = None
        self._killer: Timer | None = None
        self._ended = False
        self._status = ""
        self._data: Mapping[str, object] = MappingProxyType({})
        self._launched: asyncio.Future[str | None] | None = None

    @property
    def status(self) -> str:
        """The job's last reported `status`."""
        return _cut(self._status)

    @property
    def message_data(self) -> Mapping[str, object]:
        """The job's last reported `message_data`."""
        return self._data

    async def start(self) -> int | None:
        """Hand the job to a started process; return its pid once the target is imported.

        Raises:
            LaunchError: the target cannot be imported or instantiated, or no
                process could be started.
        """
        if self._stop is not None:
            return None
        try:
            process = await warm_pool().take()
        except OSError as exc:
            raise LaunchError(f"cannot start a python process: {exc.strerror or exc}") from exc
        self._process = process
        loop = asyncio.get_running_loop()
        self._launched = launched = loop.create_future()
        process.reports.changed = self._on_report
        for message in process.reports.messages:
            self._on_report(message)
        process.output.capture(self._output)
        process.give({"target": self._target, "env": self._env, "path": sys.path})
        if self._stop is not None:  # stop() came while we were taking a process
            self._apply_stop(self._stop)
        exited = process.child.exited
        await asyncio.wait({launched, exited}, return_when=asyncio.FIRST_COMPLETED)
        failed = launched.result() if launched.done() else None
        if failed is None and not launched.done() and self._stop is None:
            code = process.child.returncode
            failed = f"the python process ended before the job started ({code})"
        if failed is not None:
            await _within(exited, _EOF_GRACE)  # it exits at once after saying why
            self._finish()
            raise LaunchError(failed)
        return process.pid

    def _on_report(self, message: dict[str, Any]) -> None:
        if "launched" in message:
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
        process = self._process
        if process is None or (self._launched is not None and not self._launched.done()
                               and self._stop is None):  # fmt: skip
            self._output.close()
            return _not_started(self._stop.result if self._stop else Result.ERROR)
        try:
            await asyncio.shield(process.child.exited)
            if not await _within(process.child.eof, _EOF_GRACE):
                self._signal(signal.SIGKILL)
                await _within(process.child.eof, _KILLED_DRAIN)
            await _within(process.reports.closed, _KILLED_DRAIN)
        finally:
            self._finish()
        return self._outcome(process)

    def stop(self, result: Result, *, kill: bool = False) -> None:
        """SIGTERM the process group (the job's `stop()`), SIGKILL after `kill_grace`."""
        if self._ended or (self._process is not None and not self._process.alive):
            return
        if self._stop is None:
            self._stop = _StopRequest(result, kill)
        self._stop.kill = self._stop.kill or kill
        if self._process is not None:
            self._apply_stop(self._stop)

    def _apply_stop(self, stop: _StopRequest) -> None:
        if stop.kill:
            self._signal(signal.SIGKILL)
        elif self._killer is None:
            self._signal(signal.SIGTERM)
            self._killer = self._clock.call_later(self._kill_grace, self._signal, signal.SIGKILL)

    def _signal(self, signum: int) -> None:
        if self._process is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._process.pid, signum)

    def _finish(self) -> None:
        self._ended = True
        if self._killer is not None:
            self._killer.cancel()
        self._signal(signal.SIGKILL)  # whatever the job left in its group
        if self._process is not None:
            self._process.child.close()
        self._output.close()

    def _outcome(self, process: _Warm) -> Outcome:
        code = process.child.returncode
        code = -1 if code is None else code
        ended = [m["ended"] for m in process.reports.messages if "ended" in m]
        stop_errors = [str(m["stop_error"]) for m in process.reports.messages if "stop_error" in m]
        reason = stop_errors[0] if stop_errors else ""
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
