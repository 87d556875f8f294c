"""The run side of a python job in a process of its own. It imports nothing but the
standard library, and not `threading`: the fork server (`forkserver.py`) loads it by
path, and every run's process would pay for that module's after-fork hook. The thread
runner imports its two loaders.

In a process the fork server made for one run, `run(target, reports_fd)`
imports the target (usually imported already by the server) and runs it: a
plain callable, or a class whose instance has `run()` and may have `stop()`,
`status` and `message_data`. What the job prints goes to stdout and stderr,
which the scheduler captures like a command's output. What the scheduler
needs to know goes back as JSON lines on `reports_fd`:

    {"pid": PID}                       this process (before anything of the job runs)
    {"launched": true}                 imported and instantiated
    {"launch_error": "..."}            could not be (the process then exits 2)
    {"status": "..."}                  the instance's `status`, when it changes
    {"data": {...}}                    its `message_data`, when it changes
    {"stop_error": "..."}              its `stop()` raised
    {"ended": null | "Error: text"}    run() returned, or raised (exit 0 or 1)

SIGTERM calls the instance's `stop()` (a plain callable, which has none, is
ended with SystemExit); the scheduler sends SIGKILL after its grace period.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # no stubs; see where it is used
import _thread
import contextlib
import importlib
import json
import os
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

WATCH_SECONDS = 0.2
"""How often the instance's `status` and `message_data` are looked at."""
MAX_STATUS = 200


def describe(exc: BaseException) -> str:
    """`ValueError: message`."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def load_target(target: str) -> Callable[[], object]:
    """Import `package.module:attr` (attr may be dotted) and check it can be called."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise ImportError("expected 'package.module:attr'")
    obj: Any = sys.modules.get(module_name)
    if obj is None or getattr(getattr(obj, "__spec__", None), "_initializing", False):
        obj = importlib.import_module(module_name)  # not imported yet (or being imported)
    for name in attr.split("."):
        obj = getattr(obj, name)
    if not callable(obj):
        raise TypeError(f"{attr} is not callable")
    return obj  # type: ignore[no-any-return]


def prepare_target(job: Callable[[], object]) -> tuple[object | None, Callable[[], object]]:
    """The instance (for a class) and what to call: its `run`, or the callable itself."""
    if not isinstance(job, type):
        return None, job
    instance = job()
    run = getattr(instance, "run", None)
    if not callable(run):
        raise TypeError(f"{job.__name__} has no run() method")
    return instance, run


class _Reports:
    """JSON lines to the scheduler, from any thread of this process, each in one write."""

    LAUNCHED = b'{"launched": true}\n'
    ENDED = b'{"ended": null}\n'

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._lock = _thread.allocate_lock()
        self._status: object = None
        self._data: object = None

    def send(self, **message: object) -> None:
        self.write(json.dumps(message, default=str).encode() + b"\n")

    def write(self, line: bytes) -> None:
        # The scheduler may be gone (OSError): the job goes on regardless.
        with self._lock, contextlib.suppress(OSError):
            while line:
                line = line[os.write(self._fd, line) :]

    def look(self, instance: object) -> None:
        """Send the instance's `status` and `message_data` if they changed."""
        if instance is None:
            return
        try:
            status = getattr(instance, "status", None)
            text = status if isinstance(status, str) or status is None else str(status)
        except Exception:
            text = None
        if text is not None and text != self._status:
            self._status = text
            self.send(status=text[:MAX_STATUS])
        try:
            data = getattr(instance, "message_data", None)
            plain = (
                json.loads(json.dumps(dict(data), default=str))
                if isinstance(data, Mapping)
                else None
            )
        except Exception:  # changed while copied, or not a mapping of plain values
            plain = None
        if plain is not None and plain != self._data:
            self._data = plain
            self.send(data=plain)


def run(target: str, reports_fd: int) -> int:
    """Run the job `target` in this process; the exit code its process should end with."""
    reports = _Reports(reports_fd)
    reports.write(b'{"pid": %d}\n' % os.getpid())  # first: the scheduler knows us by it
    try:
        instance, call = prepare_target(load_target(target))
    except BaseException as exc:  # SystemExit at import too: a launch failure, not a run
        verb = "import" if isinstance(exc, ImportError | AttributeError) else "start"
        reports.send(launch_error=f"cannot {verb} '{target}': {describe(exc)}")
        return 2
    stopping: list[bool] = []  # not an Event: what a run touches, its process copies

    def on_sigterm(_signum: int, _frame: object) -> None:
        if stopping:
            return
        stopping.append(True)
        stop = getattr(instance, "stop", None)
        if not callable(stop):
            raise SystemExit("stopped")  # a plain callable has no other way to end
        try:
            stop()
        except Exception as exc:
            reports.send(stop_error=f"stop() raised {describe(exc)}")

    _signal.signal(_signal.SIGTERM, on_sigterm)  # before the scheduler may send it
    reports.write(reports.LAUNCHED)
    if instance is not None:  # ends with the process (which never waits for threads)
        _thread.start_new_thread(_watch, (reports, instance))
    try:
        call()
    except SystemExit as exc:
        if not stopping:  # the job's own sys.exit() fails its run
            _print_traceback()
        reports.look(instance)
        reports.send(ended=describe(exc))
        return 1
    except BaseException as exc:  # the job's failure fails its run
        _print_traceback()
        reports.look(instance)
        reports.send(ended=describe(exc))
        return 1
    reports.look(instance)
    reports.write(reports.ENDED)
    return 0


def _print_traceback() -> None:
    import traceback  # noqa: PLC0415  (only a failing run needs it)

    traceback.print_exc()


def _watch(reports: _Reports, instance: object) -> None:
    while True:
        reports.look(instance)
        time.sleep(WATCH_SECONDS)
