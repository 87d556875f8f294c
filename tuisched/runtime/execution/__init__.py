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

Processes: a command, or a python job's process (a fork of a fork server,
`forking.py`), runs in its own session and process group, with stdin from
/dev/null and stderr merged into stdout. Stopping signals the whole group
(SIGTERM, then SIGKILL after the grace period), and when a run ends anything
left in its group is killed, so no process outlives its run.
"""

from __future__ import annotations

from collections.abc import Mapping

from tuisched.domain.errors import LaunchError
from tuisched.domain.model import CommandSpec, JobKind, PythonSpec, WaitForSpec
from tuisched.runtime.clock import Clock
from tuisched.runtime.execution.base import (
    STATUS_MAX_CHARS,
    Runner,
    install_child_watcher,
)
from tuisched.runtime.execution.command import CommandRunner
from tuisched.runtime.execution.forking import close_fork_servers, open_fork_servers
from tuisched.runtime.execution.leftovers import kill_forked, kill_left_behind
from tuisched.runtime.execution.output import OutputCapture
from tuisched.runtime.execution.pyprocess import ProcessPythonRunner
from tuisched.runtime.execution.python import PythonRunner
from tuisched.runtime.execution.waitfor import WaitForRunner, watch_root

__all__ = [
    "STATUS_MAX_CHARS",
    "CommandRunner",
    "LaunchError",
    "ProcessPythonRunner",
    "PythonRunner",
    "Runner",
    "WaitForRunner",
    "close_fork_servers",
    "install_child_watcher",
    "kill_forked",
    "kill_left_behind",
    "make_runner",
    "open_fork_servers",
    "watch_root",
]


def make_runner(
    kind: JobKind,
    *,
    env: Mapping[str, str],
    output: OutputCapture,
    kill_grace: float = 5.0,
    clock: Clock | None = None,
) -> Runner:
    """The runner for one run of a job of `kind`.

    Args:
        kind: What to run.
        env: The complete environment of a command or of a python job in a
            process of its own (the engine has merged the job's env over the
            scheduler's, secrets removed). Unused by the other kinds: a python
            job on a thread shares the scheduler's process.
        output: Where the run's output goes; the runner closes it in `wait()`.
        kill_grace: Seconds between SIGTERM and SIGKILL for a command or a
            python job's process, or between `stop()` and giving up on a python
            job's thread.
        clock: The clock those seconds are counted on (default: real time).
    """
    match kind:
        case CommandSpec():
            return CommandRunner(kind, env=env, output=output, kill_grace=kill_grace, clock=clock)
        case PythonSpec(in_thread=True):
            return PythonRunner(kind, output=output, kill_grace=kill_grace, clock=clock)
        case PythonSpec():
            return ProcessPythonRunner(
                kind, env=env, output=output, kill_grace=kill_grace, clock=clock
            )
        case WaitForSpec():
            return WaitForRunner(kind, output=output)
