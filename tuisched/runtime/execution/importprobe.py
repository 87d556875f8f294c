"""The child side of the check that python jobs import (`tuisched.runtime.importcheck`).

It runs by path in an interpreter of its own, so that no job's code is ever
imported into the process that asked; it imports nothing but the standard
library and `pyjob.py` beside it (by path too), whose `load_target` each run
uses. It reads one JSON request on stdin:

    {"path": [...], "modules": {"package.module": ["package.module:attr", ...], ...}}

sets `sys.path` to `path`, points stdin, stdout and stderr at /dev/null (what
a module prints or reads when imported is not the check's business), then
imports each module once, in turn, and looks up each target's attribute as a
run would, without calling anything. What it finds goes back as JSON lines
on the file descriptor named by its one argument:

    {"importing": "package.module"}           before each import (a hang is that one's)
    {"target": "package.module:attr", "problem": null | "cannot import ..."}
    {"done": true}                            last; then the process ends at once
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
from types import ModuleType


def _harness() -> ModuleType:
    """`pyjob.py`, under a name no job's module can take."""
    path = os.path.join(os.path.dirname(__file__), "pyjob.py")  # noqa: PTH118, PTH120
    spec = importlib.util.spec_from_file_location("_tuisched_pyjob", path)
    assert spec is not None  # noqa: S101  (a file beside this one)
    assert spec.loader is not None  # noqa: S101
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _problem(harness: ModuleType, target: str) -> str | None:
    """What a run of `target` would meet before the job's own code is called, or None."""
    try:
        job = harness.load_target(target)
    except BaseException as exc:  # SystemExit at import too, as a run's process sees it
        verb = "import" if isinstance(exc, ImportError | AttributeError) else "start"
        return f"cannot {verb} '{target}': {harness.describe(exc)}"
    if isinstance(job, type) and not callable(getattr(job, "run", None)):  # not instantiated
        return f"cannot start '{target}': TypeError: {job.__name__} has no run() method"
    return None


def _check(module: str, targets: list[str], harness: ModuleType) -> dict[str, str | None]:
    """Import `module` once; each target's problem, or None."""
    try:
        importlib.import_module(module)
    except BaseException as exc:  # a failed import is not kept: each target would re-run it
        verb = "import" if isinstance(exc, ImportError) else "start"
        return {target: f"cannot {verb} '{target}': {harness.describe(exc)}" for target in targets}
    return {target: _problem(harness, target) for target in targets}


def main() -> None:
    """Answer the request on stdin (see the module docstring)."""
    reports = int(sys.argv[1])
    request = json.loads(sys.stdin.buffer.read())
    quiet = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(quiet, fd)
    harness = _harness()
    sys.path[:] = request["path"]

    def send(**message: object) -> None:
        line = json.dumps(message).encode() + b"\n"
        while line:
            line = line[os.write(reports, line) :]

    for module, targets in request["modules"].items():
        send(importing=module)
        for target, problem in _check(module, targets, harness).items():
            send(target=target, problem=problem)
    send(done=True)


if __name__ == "__main__":
    main()
    os._exit(0)  # threads a module started at import, and its atexit hooks, are not waited for
