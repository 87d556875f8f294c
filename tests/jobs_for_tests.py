"""Python jobs the execution tests run by import target (`tests.jobs_for_tests:NAME`)."""

from __future__ import annotations

import sys
import threading

RELEASE = threading.Event()
"""Set by the tests to free threads left running by jobs that ignore stop()."""

STARTED = threading.Event()
"""Set by `Stoppable.run` once it is running (and its status says so)."""


def succeed() -> None:
    """A plain callable that does nothing and succeeds."""


def fail() -> None:
    """A plain callable that raises."""
    raise ValueError("bad input")


def exit_two() -> None:
    """A plain callable that calls sys.exit: the run fails, the scheduler does not."""
    sys.exit(2)


def ignore_stop() -> None:
    """A plain callable that nothing can interrupt (until the tests release it)."""
    RELEASE.wait(30)


NOT_CALLABLE = 42


class Reporter:
    """A class job that reports a status and message data."""

    def __init__(self) -> None:
        self.status = "starting"
        self.message_data: dict[str, object] = {}

    def run(self) -> None:
        self.message_data = {"files": 3, "folder": "/data"}
        self.status = "processed 3 files"

    def stop(self) -> None:
        pass


class Stoppable:
    """A class job that runs until stop() is called."""

    def __init__(self) -> None:
        self.status = "idle"
        self._stopped = threading.Event()

    def run(self) -> None:
        self.status = "working"
        STARTED.set()
        self._stopped.wait(30)
        self.status = "stopped by request"

    def stop(self) -> None:
        self._stopped.set()


class StopRaises:
    """A class job whose stop() raises (and whose run() therefore never ends)."""

    def run(self) -> None:
        RELEASE.wait(30)

    def stop(self) -> None:
        raise RuntimeError("cannot stop now")


class BrokenStatus:
    """A class job whose status and message_data properties raise."""

    @property
    def status(self) -> str:
        raise RuntimeError("no status")

    @property
    def message_data(self) -> dict[str, object]:
        raise RuntimeError("no data")

    def run(self) -> None:
        pass


class NoRun:
    """A class without run(): cannot be started."""


class FailsInInit:
    """A class whose constructor raises: cannot be started."""

    def __init__(self) -> None:
        raise OSError("no database")

    def run(self) -> None:
        pass


# --- for python jobs in a process of their own ---------------------------------------


def talk() -> None:
    """Prints to stdout and stderr, and says which run it is."""
    import os

    print(f"hello from run {os.environ['TUISCHED_RUN_ID']}")
    print("and a warning", file=sys.stderr)


def hard_exit() -> None:
    """Leaves the interpreter at once, as a careless job might."""
    import os

    os._exit(3)


def segfault() -> None:
    """Crashes the interpreter."""
    import ctypes

    ctypes.string_at(0)


def deaf() -> None:
    """Ignores SIGTERM (as some C libraries do) and sleeps: only SIGKILL ends it."""
    import os
    import signal
    import time
    from pathlib import Path

    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    Path(os.environ["TUISCHED_TEST_OUT"]).touch()  # deaf from now on
    time.sleep(300)


def quick() -> None:
    """Returns after half a second."""
    import time

    time.sleep(0.5)


class Counting:
    """A class job that counts, reporting its status and data, until stopped."""

    def __init__(self) -> None:
        self.status = "starting"
        self.message_data: dict[str, object] = {"count": 0}
        self._stopped = threading.Event()

    def run(self) -> None:
        count = 0
        while not self._stopped.wait(0.05):
            count += 1
            self.status = f"counted {count}"
            self.message_data = {"count": count, "unit": "sheep"}

    def stop(self) -> None:
        self._stopped.set()


# --- for python jobs forked by a fork server -------------------------------------------

IMPORTED_IN = __import__("os").getpid()
"""The process that imported this module (a fork server, for a forked run)."""
COUNTER = 0


def describe_process() -> None:
    """Prints, as JSON, what a forked run's process is: its pid and parent, the process
    that imported this module, its run id in `os.environ` and in /proc/self/environ."""
    import json
    import os
    from pathlib import Path

    run_id = os.environ.get("TUISCHED_RUN_ID", "")
    proc = Path("/proc/self/environ").read_bytes().split(b"\0")
    seen = {
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "imported_in": IMPORTED_IN,
        "run_id": run_id,
        "in_proc_environ": f"TUISCHED_RUN_ID={run_id}".encode() in proc,
        "session_leader": os.getsid(0) == os.getpid(),
        "stdin": str(Path("/proc/self/fd/0").readlink()),
    }
    print(json.dumps(seen))


def count_up() -> None:
    """Adds one to a module-level counter and prints it: a run's own copy says 1."""
    global COUNTER  # noqa: PLW0603  (the module's state is what is tested)
    COUNTER += 1
    print(COUNTER)


def until_gate() -> None:
    """Blocks until the file `$TUISCHED_TEST_GATE` exists (30 s at most)."""
    import os
    import time
    from pathlib import Path

    gate = Path(os.environ["TUISCHED_TEST_GATE"])
    deadline = time.monotonic() + 30
    while not gate.exists() and time.monotonic() < deadline:
        time.sleep(0.02)


def until_gate_leaving_a_child() -> None:
    """As `until_gate`, with a forked child left behind that keeps the run's output open."""
    import os
    import time

    if os.fork() == 0:
        time.sleep(120)
        os._exit(0)
    until_gate()


def with_children() -> None:
    """Starts a program (`sleep`, exec'd) and a forked copy of itself, writes the three
    pids (its own first) to `$TUISCHED_TEST_OUT.<run id>`, and sleeps."""
    import os
    import subprocess
    import time
    from pathlib import Path

    program = subprocess.Popen(["sleep", "300"])
    forked = os.fork()
    if forked == 0:
        time.sleep(300)
        os._exit(0)
    out = Path(f"{os.environ['TUISCHED_TEST_OUT']}.{os.environ['TUISCHED_RUN_ID']}")
    out.write_text(f"{os.getpid()} {program.pid} {forked}\n")
    time.sleep(300)


def proc_environment_to_file() -> None:
    """Writes what /proc/self/environ shows of this process to `$TUISCHED_TEST_OUT`."""
    import os
    from pathlib import Path

    out = Path(os.environ["TUISCHED_TEST_OUT"])
    out.write_bytes(Path("/proc/self/environ").read_bytes().replace(b"\0", b"\n"))


def escaping_sleeper() -> None:
    """Starts a program in a session of its own with an empty environment (nothing of
    the run's is left on it), writes its own pid and that program's to
    `$TUISCHED_TEST_OUT.<run id>`, and sleeps."""
    import os
    import subprocess
    import time
    from pathlib import Path

    escaped = subprocess.Popen(["/bin/sleep", "300"], env={}, start_new_session=True)
    out = Path(f"{os.environ['TUISCHED_TEST_OUT']}.{os.environ['TUISCHED_RUN_ID']}")
    out.write_text(f"{os.getpid()} {escaped.pid}\n")
    time.sleep(300)
