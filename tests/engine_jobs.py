"""Python jobs for the engine tests, steered through module-level gates."""

from __future__ import annotations

import os
import threading
import time
from collections import defaultdict
from pathlib import Path

GATES: defaultdict[str, threading.Event] = defaultdict(threading.Event)
"""Tests set GATES[name] to let a Blocker called `name` finish."""
STARTED: list[str] = []
"""Order in which Recorder jobs ran."""


class Blocker:
    """Runs until its gate opens or it is stopped."""

    gate = "blocker"

    def __init__(self) -> None:
        self._stopped = threading.Event()
        self.status = "blocking"

    def run(self) -> None:
        while not self._stopped.is_set() and not GATES[self.gate].wait(0.02):
            pass

    def stop(self) -> None:
        self._stopped.set()


def record_a() -> None:
    STARTED.append("a")


def record_b() -> None:
    STARTED.append("b")


def record_c() -> None:
    STARTED.append("c")


def noop() -> None:
    """Succeeds at once."""


def boom() -> None:
    raise RuntimeError("boom")


def fail() -> None:
    raise RuntimeError("failed on purpose")


def environment_to_file() -> None:
    """Writes the environment a python job sees to `$TUISCHED_TEST_OUT`."""
    out = Path(os.environ["TUISCHED_TEST_OUT"])
    out.write_text("".join(f"{key}={value}\n" for key, value in os.environ.items()))


def wait_for_gate() -> None:
    """A plain function that blocks until GATES["plain"] opens (10 s at most); it cannot
    be stopped, like any plain callable."""
    GATES["plain"].wait(10)


TICKS: list[float] = []
"""When each `tick` ran (time.monotonic), in order."""


def tick() -> None:
    """Notes when it ran, in TICKS."""
    TICKS.append(time.monotonic())
