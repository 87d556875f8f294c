"""Command jobs: a program in its own session, its output read without deadlock."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable, Mapping
from pathlib import Path

from tuisched.domain.errors import LaunchError
from tuisched.domain.model import CommandSpec
from tuisched.domain.runs import Outcome, Result, RunState
from tuisched.runtime.clock import Clock, SystemClock, Timer
from tuisched.runtime.execution.base import (
    _EOF_GRACE,
    _KILLED_DRAIN,
    _NO_PROPS,
    _cut,
    _not_started,
    _StopRequest,
    _within,
)
from tuisched.runtime.execution.output import OutputCapture
from tuisched.runtime.execution.spawn import Child, spawn

# --- commands ----------------------------------------------------------------


class CommandRunner:
    """Runs an external program in its own session and process group (SPEC R13, R14)."""

    def __init__(
        self,
        spec: CommandSpec,
        *,
        env: Mapping[str, str],
        output: OutputCapture,
        kill_grace: float = 5.0,
        clock: Clock | None = None,
        held: Callable[[int], None] | None = None,
    ) -> None:
        """Prepare a run of `spec` with exactly the environment `env`.

        `kill_grace` (on `clock`) is the time between SIGTERM and SIGKILL. `held(pid)`
        is told of the process in the spawning thread, as soon as it exists (the run
        keeper: see `spawn`).
        """
        self._held = held
        self._spec = spec
        self._env = dict(env)
        self._output = output
        self._kill_grace = kill_grace
        self._clock = clock or SystemClock()
        self._child: Child | None = None
        self._pgid: int | None = None
        self._stop: _StopRequest | None = None
        self._killer: Timer | None = None
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
        try:
            self._child = await spawn(
                argv, env=self._env, cwd=cwd, on_output=self._output.write, on_started=self._held
            )
        except OSError as exc:
            raise LaunchError(_launch_reason(exc, argv[0], cwd)) from exc
        self._pgid = self._child.pid
        if self._stop is not None:  # stop() came while we were spawning
            self._apply_stop(self._stop)
        return self._pgid

    async def wait(self) -> Outcome:
        """Wait for the process, then for its pipe (briefly), then clean up its group."""
        child = self._child
        if child is None:
            self._output.close()
            return _not_started(self._stop.result if self._stop else Result.ERROR)
        try:
            await asyncio.shield(child.exited)
            await self._drain(child.eof)
        finally:
            self._finish()
        return self._outcome(child.returncode)

    def stop(self, result: Result, *, kill: bool = False) -> None:
        """SIGTERM the group now and SIGKILL it after `kill_grace`; `kill=True` kills at once."""
        if self._ended or (self._child is not None and self._child.exited.done()):
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
            self._killer = self._clock.call_later(
                self._kill_grace, self._signal_group, signal.SIGKILL
            )

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
        if self._child is not None:
            self._child.close()
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
