"""A console that loses its terminal goes on as quietly as `--no-ui` (SPEC R22).

Each way a hosting console can lose its terminal is played with the real
`tuisched`: tmux killed under a console that is its session's leader (as
`ssh -t host tuisched` runs it: only that process hears the hang-up) and
under a shell, SIGHUP alone, `q` then `d`, a terminal that ends with no
SIGHUP at all, and one whose output fails first (EIO on write) while its
input still works. Then every detached scheduler and a `--no-ui` one with
the same two idle jobs are measured over the same 10 seconds from
/proc/PID/stat. Each may use at most what the headless one used plus 5% of
a core. Side by side in one window the comparison holds on a busy machine
too: a thread that spins on a dead terminal takes a whole core on an idle
machine and still its share of one on a busy machine, far above the margin
either way.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import select
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tuisched.domain.errors import SchedulerNotRunningError
from tuisched.domain.views import SchedulerStatus
from tuisched.runtime.control import RemoteControl, socket_path

from .conftest import REPO
from .runtime_fixtures import write_config
from .test_console_tmux import Tmux, pytestmark  # noqa: F401  (skipped without tmux)

IDLE_JOBS = """
a: {command: [/bin/true], schedule: {every: 1h, start: 2026-01-01T00:00}}
b: {command: [/bin/true], schedule: {every: 2h, start: 2026-01-01T00:00}}
"""
TUISCHED = f"{sys.executable} -m tuisched"
WINDOW = 10.0
"""Seconds of CPU measured, as an operator's `top` would watch them."""
MARGIN = 0.05
"""What a detached console may use beyond `--no-ui`, in cores."""
CLOSED = "console closed ("
"""What the host logs once its console has gone and the scheduler runs on headless."""

Undo = list[Callable[[], object]]


def _eventually(condition: Callable[[], object], what: str = "", within: float = 60) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.1)  # watching other processes: bounded by `within`


def _status(config: Path) -> SchedulerStatus | None:
    """The status of the scheduler of `config`, through its control socket (None: none)."""

    async def ask() -> SchedulerStatus | None:
        remote = RemoteControl(socket_path(config.parent / "state"), client="test")
        try:
            await remote.connect()
            return await remote.status()
        except SchedulerNotRunningError:
            return None
        finally:
            await remote.close()

    return asyncio.run(ask())


def _log(config: Path) -> str:
    path = config.parent / "state" / "tuisched.log"
    return path.read_text() if path.exists() else ""


def _cpu_seconds(pid: int) -> float:
    """User plus system time of `pid`, from /proc (fields 14 and 15, after the name)."""
    fields = _stat(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str]:
    """/proc/PID/stat's fields after the process's name (state first)."""
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()


def _terminal_files(pid: int) -> list[str]:
    """What `pid` still holds open of any terminal."""
    held = (str(fd.readlink()) for fd in Path(f"/proc/{pid}/fd").iterdir())
    return [path for path in held if path.startswith(("/dev/pts/", "/dev/tty"))]


def _stop_all(configs: list[Path]) -> None:
    """SIGTERM every scheduler still running on `configs`, then wait until all have gone."""
    pids = [status.pid for status in map(_status, configs) if status is not None]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    _eventually(lambda: not any(map(_alive, pids)))


def _alive(pid: int) -> bool:
    """Whether `pid` still runs (a zombie has ended: only its parent's wait is missing)."""
    try:
        return _stat(pid)[0] != "Z"
    except FileNotFoundError:
        return False


class _Terminal:
    """A pseudo-terminal of the test's own, 80x24: what the console draws is read and
    kept until `hang_up` closes the far end, as a dropped SSH link does. No session has
    it as its terminal, so its end comes with no SIGHUP to anyone."""

    def __init__(self) -> None:
        self._far, self.near = os.openpty()
        fcntl.ioctl(self.near, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
        self.drawn = bytearray()
        self._hung_up = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        try:
            while not self._hung_up.is_set():
                if select.select([self._far], [], [], 0.05)[0]:
                    try:
                        self.drawn += os.read(self._far, 65536)
                    except OSError:  # EIO: nothing holds the near end any more
                        return
        finally:
            os.close(self._far)

    def hang_up(self) -> None:
        self._hung_up.set()
        self._reader.join(timeout=10)


@dataclass
class _Console:
    """One hosting console, and how its terminal is taken from it."""

    name: str
    config: Path
    ready: Callable[[], bool]
    """Whether the console is up (its jobs pane drawn)."""
    drop: Callable[[], object]


@pytest.fixture
def undo() -> Iterator[Undo]:
    """What to undo at the end (schedulers, terminals, tmux servers), last first."""
    steps: Undo = []
    yield steps
    for step in reversed(steps):
        step()


def _in_tmux(folder: Path, command: str, undo: Undo) -> tuple[Tmux, Path]:
    config = write_config(folder, IDLE_JOBS)
    tmux = Tmux()
    undo.append(tmux.close)
    tmux("new-session", "-d", "-s", "t", "-x", "80", "-y", "24", "-c", str(REPO),
         command.format(config=config))  # fmt: skip
    return tmux, config


def _drawn(tmux: Tmux) -> Callable[[], bool]:
    return lambda: "1 Jobs" in tmux.screen()


def _tmux_killed(folder: Path, undo: Undo, *, leader: bool) -> _Console:
    """tmux killed, as an SSH link drops; the console `exec`'d as its session's leader,
    or started from a shell (which hears the hang-up and passes it on)."""
    command = f"exec {TUISCHED} -c {{config}}" if leader else f"{TUISCHED} -c {{config}}; sleep 60"
    tmux, config = _in_tmux(folder, command, undo)
    return _Console(folder.name, config, _drawn(tmux), lambda: tmux("kill-server"))


def _sighup(folder: Path, undo: Undo) -> _Console:
    """SIGHUP to the process the terminal started, the terminal itself still there."""
    tmux, config = _in_tmux(folder, f"exec {TUISCHED} -c {{config}}", undo)
    started = int(tmux("display-message", "-p", "-t", "t", "#{pane_pid}"))
    return _Console(
        folder.name, config, _drawn(tmux), lambda: os.kill(started, signal.SIGHUP)
    )  # fmt: skip


def _quit_detach(folder: Path, undo: Undo) -> _Console:
    """`q`, then `d`: the operator detaches, and the shell gets its prompt back."""
    tmux, config = _in_tmux(folder, f"{TUISCHED} -c {{config}}; echo EXIT=$?; sleep 60", undo)

    def detach() -> None:
        tmux.press("q", then="Leave the console")
        tmux.press("d", then="EXIT=0")

    return _Console(folder.name, config, _drawn(tmux), detach)


def _own_terminals(folder: Path, undo: Undo, *, output_fails_first: bool) -> _Console:
    """The console on terminals of the test's own, in a session with no terminal of its
    own (so nothing sends SIGHUP): the whole terminal ends, or only its output does
    (EIO on write) while its input works on."""
    config = write_config(folder, IDLE_JOBS)
    keys = _Terminal()
    screen = _Terminal() if output_fails_first else keys
    host = subprocess.Popen(
        [sys.executable, "-m", "tuisched", "-c", str(config)], cwd=REPO,
        env={**os.environ, "TERM": "xterm-256color"},
        stdin=keys.near, stdout=screen.near, stderr=screen.near, start_new_session=True,
    )  # fmt: skip
    undo.append(lambda: host.wait(timeout=30))
    for terminal in {keys, screen}:
        os.close(terminal.near)  # the console's copies are the only ones now
        undo.append(terminal.hang_up)
    return _Console(folder.name, config, lambda: b"Jobs" in screen.drawn, screen.hang_up)


@pytest.mark.timeout(240)
def test_a_console_that_lost_its_terminal_is_as_quiet_as_no_ui(tmp_path: Path, undo: Undo) -> None:
    folders = {
        name: tmp_path / name
        for name in ("tmux-killed-leader", "tmux-killed-shell", "sighup", "q-d",
                     "no-sighup", "eio-on-write", "no-ui")
    }  # fmt: skip
    for folder in folders.values():
        folder.mkdir()
    reference = write_config(folders["no-ui"], IDLE_JOBS)
    headless = subprocess.Popen(
        [sys.executable, "-m", "tuisched", "--no-ui", "-c", str(reference)], cwd=REPO,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    undo.append(lambda: headless.wait(timeout=30))
    consoles = [
        _tmux_killed(folders["tmux-killed-leader"], undo, leader=True),
        _tmux_killed(folders["tmux-killed-shell"], undo, leader=False),
        _sighup(folders["sighup"], undo),
        _quit_detach(folders["q-d"], undo),
        _own_terminals(folders["no-sighup"], undo, output_fails_first=False),
        _own_terminals(folders["eio-on-write"], undo, output_fails_first=True),
    ]
    undo.append(lambda: _stop_all([reference, *(console.config for console in consoles)]))
    for console in consoles:
        _eventually(console.ready, f"{console.name}: the console is drawn")
    for console in consoles:
        console.drop()
    for console in consoles:
        closed = f"{console.name}: the console closed and the scheduler runs on headless"
        _eventually(lambda config=console.config: CLOSED in _log(config), closed)
    statuses = {console.name: _status(console.config) for console in consoles}
    _eventually(lambda: _status(reference) is not None)
    pids = {name: status.pid for name, status in statuses.items() if status is not None}
    pids["--no-ui"] = headless.pid

    before = {name: _cpu_seconds(pid) for name, pid in pids.items()}
    time.sleep(WINDOW)  # the measurement itself: CPU used over a fixed window
    used = {name: _cpu_seconds(pid) - before[name] for name, pid in pids.items()}

    table = "\n".join(f"  {name:<20} {used[name] / WINDOW:6.1%} of a core" for name in pids)
    print(f"CPU over {WINDOW:.0f} s after the terminal went:\n{table}")
    assert pids.keys() == {*statuses, "--no-ui"}  # every scheduler runs on
    limit = used["--no-ui"] + MARGIN * WINDOW
    assert {name: seconds for name, seconds in used.items() if seconds > limit} == {}, table
    for console in consoles:
        assert _terminal_files(pids[console.name]) == [], console.name
        assert "terminal threads still run" not in _log(console.config), console.name
