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

from typing import TYPE_CHECKING

from tuisched.domain.errors import LaunchError
from tuisched.runtime.lazy import lazy_names

if TYPE_CHECKING:
    from tuisched.runtime.execution.base import (
        STATUS_MAX_CHARS,
        Runner,
        install_child_watcher,
    )
    from tuisched.runtime.execution.command import CommandRunner
    from tuisched.runtime.execution.forking import close_fork_servers, open_fork_servers
    from tuisched.runtime.execution.leftovers import kill_forked, kill_left_behind
    from tuisched.runtime.execution.pyprocess import ProcessPythonRunner
    from tuisched.runtime.execution.python import PythonRunner
    from tuisched.runtime.execution.runners import make_runner
    from tuisched.runtime.execution.waitfor import WaitForRunner, watch_root

_HOMES = {
    "STATUS_MAX_CHARS": "tuisched.runtime.execution.base",
    "Runner": "tuisched.runtime.execution.base",
    "install_child_watcher": "tuisched.runtime.execution.base",
    "CommandRunner": "tuisched.runtime.execution.command",
    "close_fork_servers": "tuisched.runtime.execution.forking",
    "open_fork_servers": "tuisched.runtime.execution.forking",
    "kill_forked": "tuisched.runtime.execution.leftovers",
    "kill_left_behind": "tuisched.runtime.execution.leftovers",
    "ProcessPythonRunner": "tuisched.runtime.execution.pyprocess",
    "PythonRunner": "tuisched.runtime.execution.python",
    "WaitForRunner": "tuisched.runtime.execution.waitfor",
    "watch_root": "tuisched.runtime.execution.waitfor",
    "make_runner": "tuisched.runtime.execution.runners",
}
"""Where each name of the package lives: each loads its module when first used (PEP 562),
so a reader of the output files (`read_output`, for `tuisched logs`) loads no runner."""

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


__getattr__, __dir__ = lazy_names(__name__, _HOMES)
