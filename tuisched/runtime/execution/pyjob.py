"""The process a python job runs in. Run by path; it imports nothing but the standard
library (the thread runner imports its two loaders).

A warm process starts with nothing but the standard library and waits on
stdin for one job, a JSON line::

    {"target": "package.module:attr", "env": {...}, "path": [...]}

It takes the job's environment and `sys.path`, reopens stdin on /dev/null (as
a command's), imports the target and runs it: a plain callable, or a class
whose instance has `run()` and may have `stop()`, `status` and
`message_data`. What the job prints goes to stdout and stderr, which the
scheduler captures like a command's output. What the scheduler needs to know
comes back as JSON lines on the file descriptor named by `argv[1]`:

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

import contextlib
import importlib
import json
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Mapping
from typing import Any

WATCH_SECONDS = 0.2
"""How often the instance's `status` and `message_data` are looked at."""
MAX_STATUS = 200


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def load_target(target: str) -> Callable[[], object]:
    """Import `package.module:attr` (attr may be dotted) and check it can be called."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise ImportError("expected 'package.module:attr'")
    obj: Any = importlib.import_module(module_name)
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
    """JSON lines to the scheduler, from any thread of this process."""

    def __init__(self, fd: int) -> None:
        self._file = os.fdopen(fd, "w", encoding="utf-8", buffering=1)
        self._lock = threading.Lock()
        self._status: object = None
        self._data: object = None

    def send(self, **message: object) -> None:
        line = json.dumps(message, default=str)
        # The scheduler may be gone (OSError, ValueError): the job goes on regardless.
        with self._lock, contextlib.suppress(OSError, ValueError):
            self._file.write(line + "\n")

    def look(self, instance: object) -> None:
        """Send the instance's `status` and `message_data` if they changed."""
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


def _take_job() -> dict[str, Any] | None:
    line = sys.stdin.readline()
    if not line:
        return None  # the scheduler stopped before giving this process a job
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    job: dict[str, Any] = json.loads(line)
    os.environ.clear()
    os.environ.update(job["env"])
    sys.path[:] = job["path"]
    return job


def main() -> int:
    reports = _Reports(int(sys.argv[1]))
    job = _take_job()
    if job is None:
        return 0
    target = job["target"]
    try:
        instance, call = prepare_target(load_target(target))
    except BaseException as exc:  # SystemExit at import too: a launch failure, not a run
        verb = "import" if isinstance(exc, ImportError | AttributeError) else "start"
        reports.send(launch_error=f"cannot {verb} '{target}': {_describe(exc)}")
        return 2
    stopping = threading.Event()

    def on_sigterm(_signum: int, _frame: object) -> None:
        if stopping.is_set():
            return
        stopping.set()
        stop = getattr(instance, "stop", None)
        if not callable(stop):
            raise SystemExit("stopped")  # a plain callable has no other way to end
        try:
            stop()
        except Exception as exc:
            reports.send(stop_error=f"stop() raised {_describe(exc)}")

    signal.signal(signal.SIGTERM, on_sigterm)  # before the scheduler may send it
    reports.send(launched=True)
    if instance is not None:
        threading.Thread(target=_watch, args=(reports, instance), daemon=True).start()
    try:
        call()
    except SystemExit as exc:
        if not stopping.is_set():  # the job's own sys.exit() fails its run
            traceback.print_exc()
        reports.look(instance)
        reports.send(ended=_describe(exc))
        return 1
    except BaseException as exc:  # the job's failure fails its run
        traceback.print_exc()
        reports.look(instance)
        reports.send(ended=_describe(exc))
        return 1
    reports.look(instance)
    reports.send(ended=None)
    return 0


def _watch(reports: _Reports, instance: object) -> None:
    while True:
        reports.look(instance)
        threading.Event().wait(WATCH_SECONDS)


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # daemon threads of the job must not hold the exit
