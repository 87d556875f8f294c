"""Headless schedulers for the tests, forked from a preloaded interpreter.

A `tuisched --no-ui` start spends nearly all of its CPU importing (about 0.65 s on the
suite's 2-core machine: SQLAlchemy, aiohttp, APScheduler, the configuration's model),
and the suite starts a few hundred. `spawn` forks each one from an interpreter that
imported those modules once per test worker (`tests/preloaded_server.py`, as
multiprocessing's forkserver does). The child is a process of its own: its own pid,
signals, descriptors, folder and environment, running `python -m tuisched` from `main`
on and leaving through the interpreter's shutdown. What differs from an exec is the
interpreter's start (its flags, hash seed and the modules already loaded) and its parent
(the preloaded interpreter, which reaps it and reports its exit status).

The tests of a start itself (what it imports, a start under faketime or with another
environment for Python) exec as before: `spawn` execs whenever its arguments ask for
more than `python -m tuisched ARGS`, and `TUISCHED_TEST_EXEC=1` makes every start exec.
"""

from __future__ import annotations

import array
import atexit
import json
import os
import queue
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

SERVER = Path(__file__).with_name("preloaded_server.py")
EXEC_VARIABLE = "TUISCHED_TEST_EXEC"
REPLY_SECONDS = 30.0
# What an interpreter reads at its start: a child that differs here is exec'd.
AT_START = ("PYTHON", "LD_", "TZ", "LANG", "LC_", "FAKETIME")

File = IO[Any] | int | None


class ForkedProcess:
    """The `subprocess.Popen` surface the tests use, for a child of the preloaded
    interpreter."""

    def __init__(self, args: list[str], pid: int, server: _Server,
                 files: tuple[IO[Any] | None, IO[Any] | None, IO[Any] | None]) -> None:  # fmt: skip
        self.args = args
        self.pid = pid
        self.returncode: int | None = None
        self.stdin, self.stdout, self.stderr = files
        self._server = server

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._server.status(self.pid, 0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = self._server.status(self.pid, timeout)
            if self.returncode is None:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:  # (as Popen: never a signal to a reaped pid)
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(15)

    def kill(self) -> None:
        self.send_signal(9)

    def communicate(
        self, input: str | bytes | None = None, timeout: float | None = None
    ) -> tuple[Any, Any]:
        """`input` written to the child's stdin (then closed); what the child wrote to
        its pipes until it closed them; then its end."""
        deadline = None if timeout is None else time.monotonic() + timeout
        read: dict[str, Any] = {}
        if self.stdin is not None:
            stdin = self.stdin
            threading.Thread(target=_feed, args=(stdin, input), daemon=True).start()
            self.stdin = None
        readers = [
            threading.Thread(target=lambda n, f: read.__setitem__(n, f.read()), args=(n, f),
                             daemon=True)
            for n, f in (("stdout", self.stdout), ("stderr", self.stderr)) if f is not None
        ]  # fmt: skip
        for reader in readers:
            reader.start()
        for reader in readers:
            reader.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if reader.is_alive():
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
        for file in (self.stdin, self.stdout, self.stderr):
            if file is not None:
                file.close()
        self.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return read.get("stdout"), read.get("stderr")

    def __enter__(self) -> ForkedProcess:
        return self

    def __exit__(self, *_: object) -> None:
        for file in (self.stdin, self.stdout, self.stderr):
            if file is not None:
                file.close()
        self.wait()


def _feed(stdin: IO[Any], data: str | bytes | None) -> None:
    """Write `data` to a child's stdin and close it (a child that left early is fine)."""
    try:
        if data:
            stdin.write(data)
        stdin.close()
    except BrokenPipeError:
        pass


class _Server:
    """This worker's preloaded interpreter, and what it reported."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.process = subprocess.Popen(
            [sys.executable, str(SERVER), str(theirs.fileno())], pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, cwd=SERVER.parent.parent,
        )  # fmt: skip
        theirs.close()
        self._socket = ours
        self._lock = threading.Lock()  # one request and its reply at a time
        self._pids: queue.Queue[int | None] = queue.Queue()
        self._ended = threading.Condition()
        self._statuses: dict[int, int] = {}
        self._gone = False
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        with self._socket.makefile("rb") as lines:
            for line in lines:
                message = json.loads(line)
                if "status" in message:
                    with self._ended:
                        self._statuses[message["pid"]] = message["status"]
                        self._ended.notify_all()
                else:
                    self._pids.put(message["pid"])
        with self._ended:
            self._gone = True
            self._ended.notify_all()
        self._pids.put(None)

    def fork(self, argv: list[str], env: Mapping[str, str], cwd: str, fds: list[int]) -> int:
        request = json.dumps({"argv": argv, "env": dict(env), "cwd": cwd}).encode()
        with self._lock:
            self._socket.sendmsg([request], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                              array.array("i", fds).tobytes())])  # fmt: skip
            pid = self._pids.get(timeout=REPLY_SECONDS)
        if pid is None:
            raise RuntimeError(f"the preloaded interpreter ended ({self.process.poll()})")
        return pid

    def status(self, pid: int, timeout: float | None) -> int | None:
        """The exit status of `pid`, once reported within `timeout` seconds."""
        with self._ended:
            self._ended.wait_for(lambda: pid in self._statuses or self._gone, timeout)
            if pid not in self._statuses and self._gone:
                raise RuntimeError(f"the preloaded interpreter ended ({self.process.poll()})")
            return self._statuses.get(pid)

    def close(self) -> None:
        self._socket.close()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)


_SERVERS: list[_Server] = []  # this worker's, started at its first fork
_STARTING = threading.Lock()


def _preloaded() -> _Server:
    with _STARTING:
        if not _SERVERS or _SERVERS[-1].process.poll() is not None:
            _SERVERS.append(_Server())
            atexit.register(_SERVERS[-1].close)
        return _SERVERS[-1]


def _forkable(env: Mapping[str, str]) -> bool:
    """Whether a child with `env` starts as the preloaded interpreter did."""
    if os.environ.get(EXEC_VARIABLE):
        return False
    changed = env.keys() ^ os.environ.keys()
    changed |= {k for k in env.keys() & os.environ.keys() if env[k] != os.environ[k]}
    return not any(name.startswith(AT_START) for name in changed)


def spawn(
    args: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    stdin: File = None,
    stdout: File = None,
    stderr: File = None,
    text: bool = False,
) -> ForkedProcess | subprocess.Popen[Any]:
    """`python -m tuisched ARGS` with these streams, as `subprocess.Popen` takes them:
    forked from the preloaded interpreter when it can be, exec'd otherwise."""
    environment = dict(os.environ if env is None else env)
    folder = str(cwd if cwd is not None else Path.cwd())
    if not _forkable(environment):
        return subprocess.Popen(
            [sys.executable, "-m", "tuisched", *args], env=environment, cwd=folder,
            stdin=stdin, stdout=stdout, stderr=stderr, text=text,
        )  # fmt: skip
    opened: list[int] = []  # the child's ends, closed here once it has them
    ours: list[IO[Any] | None] = [None, None, None]
    fds: list[int] = []
    for index, spec in enumerate((stdin, stdout, stderr)):
        if spec is None:
            fds.append(index)
        elif spec == subprocess.DEVNULL:
            fd = os.open(os.devnull, os.O_RDWR)
            opened.append(fd)
            fds.append(fd)
        elif spec == subprocess.STDOUT:
            fds.append(fds[1])
        elif spec == subprocess.PIPE:
            read, write = os.pipe()
            child, parent = (read, write) if index == 0 else (write, read)
            opened.append(child)
            fds.append(child)
            mode = ("w" if index == 0 else "r") + ("" if text else "b")
            ours[index] = os.fdopen(parent, mode)  # (closed by its owner)
        else:
            fds.append(spec if isinstance(spec, int) else spec.fileno())
    server = _preloaded()
    try:
        pid = server.fork(list(args), environment, folder, fds)
    except BaseException:
        for file in ours:
            if file is not None:
                file.close()
        raise
    finally:
        for fd in opened:
            os.close(fd)
    return ForkedProcess([sys.executable, "-m", "tuisched", *args], pid, server,
                         (ours[0], ours[1], ours[2]))  # fmt: skip


def run(
    args: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    input: str | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    """`subprocess.run([python, -m, tuisched, *args], capture_output=True, text=True)`,
    forked from the preloaded interpreter when it can be."""
    child = spawn(args, env=env, cwd=cwd, text=True, stdout=subprocess.PIPE,
                  stderr=subprocess.PIPE,
                  stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL)  # fmt: skip
    try:
        out, err = child.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait(timeout)
        raise
    assert child.returncode is not None
    return subprocess.CompletedProcess(list(child.args), child.returncode, out, err)
