"""Whether every python job's target imports and can be called, checked as a run would
import it, but in a child process: no job's code is imported into the process that asks.

The child (`execution/importprobe.py`) gets what a run's process gets: the
scheduler's environment without its secrets, this interpreter and its Python
path with the configuration's folder added (`runtime.add_config_folder_to_path`),
the current working directory. It imports each module once, however many
jobs name it, and looks up every target's attribute; nothing is called. A
module whose import takes longer than the time limit (a hang, a wait for the
network) is reported as such, and the check goes on in a new child with the
modules after it; one that ends the process at import (`os._exit`, a crash)
likewise.

This is `tuisched validate`'s. The scheduler does not run it at start or
reload: importing job code has side effects and may take long, and a run
that cannot import its target already fails with the reason, as a launch
failure, in the history, the audit log and the alerts.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tuisched.domain.errors import Problem
from tuisched.domain.model import Config, PythonSpec
from tuisched.runtime.secrets import secret_names

IMPORT_SECONDS = 20.0
"""How long one module's import may take before it is reported as hanging."""
PROBE = Path(__file__).with_name("execution") / "importprobe.py"
_BOOT = "import runpy, sys; runpy.run_path(sys.argv.pop(1), run_name='__main__')"
"""Run by path without its folder on `sys.path` (as `forking.py` starts its servers)."""
_READ_BYTES = 65536

Modules = Mapping[str, Sequence[str]]
"""Each module, and the targets (`module:attr`) of the jobs that name it."""


def python_job_problems(config: Config, *, limit: float = IMPORT_SECONDS) -> list[Problem]:
    """One problem per python job whose target would not import or cannot be called,
    located on its `python:` line, in the file's order."""
    jobs = [job for job in config.jobs.values() if isinstance(job.kind, PythonSpec)]
    modules: dict[str, list[str]] = {}
    for job in jobs:
        assert isinstance(job.kind, PythonSpec)  # noqa: S101  (the filter above)
        named = modules.setdefault(job.kind.target.partition(":")[0], [])
        if job.kind.target not in named:
            named.append(job.kind.target)
    if not modules:
        return []
    hidden = secret_names(config)
    env = {name: value for name, value in os.environ.items() if name not in hidden}
    path = [*sys.path, *([] if str(config.path.parent) in sys.path else [str(config.path.parent)])]
    found = _probe(modules, path, env, limit)
    problems = [
        Problem(file=config.path, line=job.kind.line or job.line, job=job.name, message=message)
        for job in jobs
        if isinstance(job.kind, PythonSpec) and (message := found.get(job.kind.target))
    ]
    return sorted(problems, key=lambda problem: problem.line)


def _probe(modules: Modules, path: list[str], env: dict[str, str], limit: float) -> dict[str, str]:
    """Each target's problem (targets without one are left out), from as many children
    as it takes: each one that hangs or ends on a module leaves the rest to the next."""
    pending = dict(modules)
    found: dict[str, str] = {}
    while pending:
        heard = _Child(pending, path, env, limit).answer()
        found.update({target: problem for target, problem in heard.problems.items() if problem})
        current = heard.importing
        if current is None:  # it stopped before importing anything: no child can say more
            why = heard.why or f"did not answer within {limit:g}s"
            for targets in pending.values():
                found.update(dict.fromkeys(targets, f"cannot check it: python {why}"))
            break
        if heard.why or heard.hung:
            said = (
                f"did not finish within {limit:g}s (it hangs, or waits for something, "
                "when imported)" if heard.hung else f"ended the process importing it ({heard.why})"
            )  # fmt: skip
            for target in pending[current]:
                found.setdefault(target, f"importing '{current}' {said}")
        done = {module for module, targets in pending.items()
                if all(target in heard.problems for target in targets)}  # fmt: skip
        pending = {module: targets for module, targets in pending.items()
                   if module not in done and module != current}  # fmt: skip
    return found


@dataclass
class _Heard:
    """What one child said before it was done, hung or ended."""

    problems: dict[str, str | None] = field(default_factory=dict)
    importing: str | None = None
    """The module it was importing last."""
    hung: bool = False
    """True when it said nothing more within the time limit (it was killed)."""
    why: str = ""
    """How it ended before it was done (`exit 3`, `signal 11`, or why it did not start)."""


class _Child:
    """One run of `importprobe.py` over `modules`, read until done, hung or ended."""

    def __init__(self, modules: Modules, path: list[str], env: dict[str, str], limit: float):
        self._request = json.dumps({"path": path, "modules": modules}).encode()
        self._env = env
        self._limit = limit
        self.heard = _Heard()

    def answer(self) -> _Heard:
        read_end, write_end = os.pipe()
        try:
            process = subprocess.Popen(  # noqa: S603  (this interpreter, our own file)
                [sys.executable, "-c", _BOOT, str(PROBE), str(write_end)],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                env=self._env, pass_fds=(write_end,), start_new_session=True,
            )  # fmt: skip
        except OSError as error:
            os.close(read_end)
            self.heard.why = f"did not start: {error.strerror or error}"
            return self.heard
        finally:
            os.close(write_end)
        try:
            self._send(process)
            done = self._read(read_end)
        finally:
            os.close(read_end)
            with contextlib.suppress(ProcessLookupError):  # what a module started goes too
                os.killpg(process.pid, signal.SIGKILL)
            status = process.wait()
        if not done and not self.heard.hung:
            self.heard.why = f"signal {-status}" if status < 0 else f"exit {status}"
        return self.heard

    def _send(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stdin is not None  # noqa: S101  (stdin=PIPE)
        try:  # it reads the request before anything else: no wait beyond its start
            process.stdin.write(self._request)
            process.stdin.close()
        except BrokenPipeError:
            pass  # it ended at once: its reports say so (none)

    def _read(self, fd: int) -> bool:
        """Read reports until `done` (True), the end of the pipe, or a module over the
        time limit (`hung`)."""
        buffer = b""
        deadline = time.monotonic() + self._limit
        while (left := deadline - time.monotonic()) > 0:
            if not select.select([fd], [], [], left)[0]:
                continue
            data = os.read(fd, _READ_BYTES)
            if not data:
                return False
            *lines, buffer = (buffer + data).split(b"\n")
            for line in lines:
                try:
                    report = json.loads(line)
                except ValueError:
                    continue  # not the probe's: a module wrote on the descriptor it found
                if report.get("done"):
                    return True
                if "importing" in report:
                    self.heard.importing = report["importing"]
                    deadline = time.monotonic() + self._limit
                else:
                    self.heard.problems[report["target"]] = report["problem"]
        self.heard.hung = True
        return False
