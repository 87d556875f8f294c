"""`make_runner`: the runner for one run of a job's kind (see the package's docstring).

Its own module, so that the engine loads every runner at its start, while a reader of
output files (`tuisched logs`) loads none.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from tuisched.domain.model import CommandSpec, JobKind, PythonSpec, WaitForSpec
from tuisched.runtime.clock import Clock
from tuisched.runtime.execution.base import Runner
from tuisched.runtime.execution.command import CommandRunner
from tuisched.runtime.execution.output import OutputCapture
from tuisched.runtime.execution.pyprocess import ProcessPythonRunner
from tuisched.runtime.execution.python import PythonRunner
from tuisched.runtime.execution.waitfor import WaitForRunner


def make_runner(
    kind: JobKind,
    *,
    env: Mapping[str, str],
    output: OutputCapture,
    kill_grace: float = 5.0,
    clock: Clock | None = None,
    held: Callable[[int], None] | None = None,
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
        held: Told of a command's process in the thread that spawned it, as soon as it
            exists (the run keeper); the loop tells it of the other kinds' processes.
    """
    match kind:
        case CommandSpec():
            return CommandRunner(
                kind, env=env, output=output, kill_grace=kill_grace, clock=clock, held=held
            )
        case PythonSpec(in_thread=True):
            return PythonRunner(kind, output=output, kill_grace=kill_grace, clock=clock)
        case PythonSpec():
            return ProcessPythonRunner(
                kind, env=env, output=output, kill_grace=kill_grace, clock=clock
            )
        case WaitForSpec():
            return WaitForRunner(kind, output=output)
