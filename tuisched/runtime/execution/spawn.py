"""Starting a child process off the event loop, and following it on the loop.

Spawning blocks the thread that spawns until the child has called `exec`
(vfork), and then that thread must win the GIL back from whatever else runs:
on the loop, each spawn stalled the scheduler and the console for a
millisecond or more, and capped command runs at well under what bare asyncio
spawns. Here the spawn happens in a thread of the SPAWN lane; the loop only
reads the child's output pipe and learns of its exit through a pidfd (or,
where pidfds do not work, from a thread that waits for that one child, as
asyncio's own threaded watcher does).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from tuisched.runtime.threads import Lane, in_thread


class _Pipe(asyncio.Protocol):
    """The child's output pipe: data to `on_output`, its end to `eof`."""

    def __init__(self, on_output: Callable[[bytes], None], eof: asyncio.Future[None]) -> None:
        self._on_output = on_output
        self._eof = eof

    def data_received(self, data: bytes) -> None:
        self._on_output(data)

    def eof_received(self) -> bool:
        return False  # let the transport close itself

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._eof.done():
            self._eof.set_result(None)


class Child:
    """A child started by `spawn`: its pid, its exit and the end of its output.

    `exited` resolves once the child itself has exited and been reaped
    (`returncode` is then set, negative for a signal); `eof` once the last
    writer of its output pipe has closed it, which a grandchild can delay.
    """

    def __init__(self, process: subprocess.Popen[bytes], loop: asyncio.AbstractEventLoop) -> None:
        self._process = process  # held until reaped: an unreaped Popen's __del__ reaps it
        self.pid = process.pid
        self.exited: asyncio.Future[None] = loop.create_future()
        self.eof: asyncio.Future[None] = loop.create_future()
        self.returncode: int | None = None
        self._loop = loop
        self.stdin: asyncio.WriteTransport | None = None
        """Its standard input, when spawned with `stdin=True`."""
        self._pipe: asyncio.BaseTransport | None = None
        self._pidfd: int | None = None

    async def _follow(self, on_output: Callable[[bytes], None]) -> None:
        """Read the output pipe on the loop and watch for the exit."""
        process = self._process
        assert process.stdout is not None  # noqa: S101  (spawned with stdout=PIPE)
        self._pipe, _ = await self._loop.connect_read_pipe(
            lambda: _Pipe(on_output, self.eof), process.stdout
        )
        if process.stdin is not None:
            self.stdin, _ = await self._loop.connect_write_pipe(asyncio.Protocol, process.stdin)
        try:
            self._pidfd = os.pidfd_open(self.pid)
        except OSError:  # no pidfds in this kernel or sandbox: one thread waits for it
            threading.Thread(target=self._wait_in_thread, daemon=True).start()
        else:
            self._loop.add_reader(self._pidfd, self._reap)

    def _reap(self) -> None:
        """On the loop: the pidfd says the child exited; collect its status."""
        assert self._pidfd is not None  # noqa: S101  (added as its reader)
        self._loop.remove_reader(self._pidfd)
        os.close(self._pidfd)
        self._pidfd = None
        try:  # the pidfd is readable: the child has exited, so this returns at once
            _, status = os.waitpid(self.pid, 0)
        except ChildProcessError:  # reaped by someone else: the status is lost
            status = 255 << 8
        self._exited(status)

    def _wait_in_thread(self) -> None:
        try:
            _, status = os.waitpid(self.pid, 0)
        except ChildProcessError:
            status = 255 << 8
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            self._loop.call_soon_threadsafe(self._exited, status)

    def _exited(self, status: int) -> None:
        self.returncode = self._process.returncode = os.waitstatus_to_exitcode(status)
        if not self.exited.done():
            self.exited.set_result(None)

    def close(self) -> None:
        """Stop reading the pipe. A child still alive is the caller's to kill; it is
        reaped when it exits, as long as the loop runs."""
        if self._pipe is not None:
            self._pipe.close()
        if self.stdin is not None:
            self.stdin.close()


async def spawn(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None,
    cwd: Path | None,
    on_output: Callable[[bytes], None],
    stdin: bool = False,
    pass_fds: tuple[int, ...] = (),
    on_started: Callable[[int], None] | None = None,
) -> Child:
    """Start `argv` in a session of its own, stdout and stderr on one pipe read into
    `on_output`, stdin from /dev/null (or a pipe, `Child.stdin`, with `stdin`); the
    spawn itself happens off the loop. `env` None: the scheduler's own environment.
    `on_started(pid)` is called in the spawning thread as soon as the process exists,
    before the loop hears of it (the run keeper must hold a run before a busy loop
    gets round to it: a scheduler killed meanwhile would leave the run going).

    Raises:
        OSError: the program could not be started (missing, not executable...).
    """
    loop = asyncio.get_running_loop()
    start = functools.partial(
        _start, argv, env=env, cwd=cwd, stdin=stdin, pass_fds=pass_fds, on_started=on_started
    )
    starting = asyncio.ensure_future(in_thread(Lane.SPAWN, start))
    try:
        process = await asyncio.shield(starting)
    except asyncio.CancelledError:
        starting.add_done_callback(_kill_orphan)  # started for nobody: do not leave it
        raise
    child = Child(process, loop)
    try:
        await child._follow(on_output)
    except BaseException:
        _kill(process)
        raise
    return child


def _start(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None,
    cwd: Path | None,
    stdin: bool,
    pass_fds: tuple[int, ...],
    on_started: Callable[[int], None] | None = None,
) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(  # noqa: S603  (the job's own command, as configured)
        list(argv), stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=cwd,
        env=None if env is None else dict(env), start_new_session=True, pass_fds=pass_fds,
    )  # fmt: skip
    if on_started is not None:
        on_started(process.pid)
    return process


def _kill_orphan(starting: asyncio.Future[subprocess.Popen[bytes]]) -> None:
    if not starting.cancelled() and starting.exception() is None:
        _kill(starting.result())


def _kill(process: subprocess.Popen[bytes]) -> None:
    """Kill a child nobody follows, and reap it in a thread (its group: it is a leader)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    threading.Thread(target=process.wait, daemon=True).start()
    for pipe in (process.stdout, process.stdin):
        if pipe is not None:
            pipe.close()
