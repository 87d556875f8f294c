"""One python function per job, for bursts of thousands of jobs: `tests.burst_jobs:j00042`.

Each function appends one line to the file named by `$TUISCHED_BURST_OUT` when it runs:
its job's name, the scheduler's pid and the time, so a test can count how often each job
ran and in which process, whatever the history says. The module makes the functions as
they are asked for (a module `__getattr__`): a plain function of a module imported
already, the kind a job thread starts by itself.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

RUN_SECONDS = 0.002
"""How long each run takes: 10,000 runs on 8 workers last a few seconds."""

_out: int | None = None


def _append(line: str) -> None:
    global _out  # noqa: PLW0603  (opened once per process, at the first run)
    if _out is None:
        _out = os.open(os.environ["TUISCHED_BURST_OUT"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    os.write(_out, line.encode())  # one write under O_APPEND: lines never interleave


def __getattr__(name: str) -> Callable[[], None]:
    if not name.startswith("j"):
        raise AttributeError(name)

    def run() -> None:
        _append(f"{name} {os.getpid()} {time.time():.6f}\n")
        time.sleep(RUN_SECONDS)

    run.__name__ = run.__qualname__ = name
    return run
