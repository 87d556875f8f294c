"""Fork servers, the scheduler's side: a python run's process is a fork of an interpreter
that has the job's module imported already (the server itself is `forkserver.py`).

`ForkServer` is one server process: started off the loop, followed on the
loop (its control socket is read by a reader callback, never awaited in a
blocking call), and replaced rather than waited for when it ends or stops
answering. `ForkServers` keeps one server per job module (and Python path and
base environment), a started spare for the next module that needs one, and
retires servers that have been idle for a while.

What a run gets from a server is a `Forked`: its pid (once recorded in the
server's journal and let go), then its wait status. When a server ends with
runs still going, their process groups are killed and their status is None:
nothing could report it any more, and no run may go on unsupervised.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import socket
import sys
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tuisched.domain.errors import LaunchError, StaleServerError, StateError
from tuisched.runtime.clock import Clock, SystemClock, Timer
from tuisched.runtime.execution.command import _exit_words
from tuisched.runtime.execution.descendants import helper_ended, helper_started
from tuisched.runtime.execution.spawn import Child, spawn
from tuisched.runtime.privatefiles import private_folder
from tuisched.runtime.threads import Lane, in_thread

log = logging.getLogger(__name__)

SERVER = Path(__file__).with_name("forkserver.py")
_BOOT = "import runpy, sys; runpy.run_path(sys.argv.pop(1), run_name='__main__')"
READY_SECONDS = 20.0
"""A server not ready this long after its start is killed (the run fails, saying so)."""
LOAD_SECONDS = 60.0
"""A module still importing after this long is given up on: its runs import it themselves."""
ANSWER_SECONDS = 5.0
"""A fork request not answered this long is a hung server: it is killed and replaced."""
IDLE_SECONDS = 120.0
"""A server that forked nothing this long (and has no run going) is retired."""
MAX_SERVERS = 8
"""Servers kept at most (besides the spare); the least recently used idle one makes room."""
PER_RUN = ("TUISCHED_JOB", "TUISCHED_RUN_ID", "TUISCHED_SLOT", "TUISCHED_NODE", "TUISCHED_FENCE")
"""Variables that differ between runs: sent with each fork, never part of a server's
environment (the rest of a run's environment is the server's)."""
RUN_ID_BLANKS = " " * 64
"""The server's `TUISCHED_RUN_ID` (see forkserver.RUN_ID_ROOM)."""
_RECEIVE_BYTES = 65536


class Forked:
    """One run's process, as its server reports it."""

    def __init__(self, loop: asyncio.AbstractEventLoop, asked: float) -> None:
        self.pid: asyncio.Future[int] = loop.create_future()
        """Its pid once it is recorded and let go; LaunchError if there is none."""
        self.status: asyncio.Future[int | None] = loop.create_future()
        """Its wait status once it has ended (None: its server ended first, and it was
        killed)."""
        self.lost = ""
        """Why the status is None."""
        self.asked = asked


class ForkServer:
    """One fork server process and its control socket, on the loop's thread."""

    def __init__(
        self, child: Child, control: socket.socket, env: Mapping[str, str], clock: Clock
    ) -> None:
        self._child = child
        self._control = control
        self.env = dict(env)
        """Its environment (that of every run it forks, but for `PER_RUN`)."""
        self._clock = clock
        self._loop = asyncio.get_running_loop()
        self.pid = child.pid
        helper_started(child.pid)  # not an orphan of a run (its runs are followed as runs)
        self.module: str | None = None
        """The module it imported (None: each run imports its own)."""
        self.last_used = clock.monotonic()
        self._ready: asyncio.Future[None] = self._loop.create_future()
        self._loading: asyncio.Future[str] | None = None
        self._asked: dict[int, Forked] = {}
        self._runs: dict[int, Forked] = {}
        self._numbers = 0
        self._retired = False
        self._outbox: deque[tuple[bytes, tuple[int, ...]]] = deque()
        self._answers: Timer | None = None
        self.gone: asyncio.Future[str] = self._loop.create_future()
        """How the server ended, once it has."""
        self._said: deque[str] = deque(maxlen=1)
        self._loop.add_reader(control.fileno(), self._receive)
        child.exited.add_done_callback(self._ended)

    @classmethod
    async def start(cls, env: Mapping[str, str], journals: Path | None, clock: Clock) -> ForkServer:
        """Start a server with `env` (off the loop) and wait until it is ready.

        Raises:
            LaunchError: it could not be started, or was not ready in time.
        """
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        said: deque[str] = deque(maxlen=1)
        argv = [sys.executable, "-u", "-c", _BOOT, str(SERVER), str(theirs.fileno()),
                str(os.getpid()), str(journals or "")]  # fmt: skip
        try:
            child = await spawn(
                argv, env={**env, "TUISCHED_RUN_ID": RUN_ID_BLANKS}, cwd=None,
                on_output=lambda data: _heard(said, data), pass_fds=(theirs.fileno(),),
            )  # fmt: skip
        except OSError as error:
            ours.close()
            raise LaunchError(
                f"cannot start a python process: {error.strerror or error}"
            ) from error
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        ours.setblocking(False)
        server = cls(child, ours, env, clock)
        server._said = said
        try:
            await server._ready_in_time()
        except asyncio.CancelledError:  # nobody needs it any more (the scheduler stops)
            server.kill("no longer needed", warn=False)
            await _settled(server.gone)
            raise
        except BaseException:
            server.kill("it was not ready")
            await _settled(server.gone)  # its socket and pipe are closed once it is reaped
            raise
        return server

    async def _ready_in_time(self) -> None:
        timer = self._clock.call_later(READY_SECONDS, self.kill, "it was not ready in time")
        try:
            await self._ready
        finally:
            timer.cancel()

    @property
    def usable(self) -> bool:
        """Whether it takes runs: alive and not retired."""
        return not self.gone.done() and not self._retired

    @property
    def busy(self) -> bool:
        """Whether it has a run going or a fork request unanswered."""
        return bool(self._runs or self._asked)

    async def load(self, module: str | None, path: Sequence[str]) -> str:
        """Give it `path` as the Python path and have it import `module` (None: each run
        imports its own); "" once done, else why it could not (it has then ended)."""
        loading: asyncio.Future[str] = self._loop.create_future()
        self._loading = loading
        self._send(b"L" + json.dumps({"load": module, "path": list(path)}).encode())
        timer = self._clock.call_later(LOAD_SECONDS, self.kill, "its import took too long")
        try:
            why = await loading
        finally:
            timer.cancel()
        if not why:
            self.module = module
        return why

    def fork(
        self, run_id: str, target: str, env: Mapping[str, str], pipes: tuple[int, int]
    ) -> Forked:
        """Ask for a process for run `run_id`; `pipes` (its output and reports pipes' write
        ends) are handed over and closed here."""
        self._numbers += 1
        forked = Forked(self._loop, self._clock.monotonic())
        self.last_used = forked.asked
        fields = "\0".join([target, *(part for pair in env.items() for part in pair)])
        why = "" if self.usable else self._gone_words()
        if "\0" in run_id or "\n" in run_id or fields.count("\0") != 2 * len(env):
            why = "a variable of the run holds a NUL byte"
        if why:
            for fd in pipes:
                os.close(fd)
            forked.pid.set_exception(LaunchError(why))
            return forked
        self._asked[self._numbers] = forked
        self._send(f"F{self._numbers:08d} {run_id}\n{fields}".encode(), pipes)
        if self._answers is None:
            self._answers = self._clock.call_later(ANSWER_SECONDS, self._check_answers)
        return forked

    def retire(self) -> None:
        """Take no more runs; the server leaves once its runs have ended."""
        if self.usable:
            self._retired = True
            self._send(b"R")

    def kill(self, why: str, *, warn: bool = True) -> None:
        """End the server now (it is hung, or must go): its runs are killed with it."""
        if not self.gone.done():
            if warn:
                log.warning("python fork server %d: %s; it is stopped", self.pid, why)
            self._said.append(why)
            self._retired = True
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)

    # --- the control socket, on the loop ---------------------------------------------

    def _send(self, message: bytes, fds: tuple[int, ...] = ()) -> None:
        self._outbox.append((message, fds))
        if len(self._outbox) == 1:
            self._flush()

    def _flush(self) -> None:
        """Send what waits, in order, as far as the socket takes it now."""
        while self._outbox:
            data, fds = self._outbox[0]
            try:
                if fds:
                    socket.send_fds(self._control, [data], list(fds))
                else:
                    self._control.send(data)
            except BlockingIOError:
                self._loop.add_writer(self._control.fileno(), self._flush)
                return
            except OSError:
                self._close_outbox()
                return
            self._outbox.popleft()
            for fd in fds:
                os.close(fd)
        with contextlib.suppress(ValueError):  # closed meanwhile
            self._loop.remove_writer(self._control.fileno())

    def _close_outbox(self) -> None:
        while self._outbox:
            _, fds = self._outbox.popleft()
            for fd in fds:
                os.close(fd)

    def _receive(self) -> None:
        while True:
            try:
                data = self._control.recv(_RECEIVE_BYTES)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                self._loop.remove_reader(self._control.fileno())
                return
            try:
                self._take(json.loads(data))
            except (ValueError, KeyError, TypeError):
                log.exception("python fork server %d said something unexpected: %r", self.pid, data)

    def _take(self, message: dict[str, Any]) -> None:
        if "exited" in message:
            for pid, status in message["exited"]:
                forked = self._runs.pop(int(pid), None)
                if forked is not None:
                    forked.status.set_result(int(status))
        elif "forked" in message:
            forked = self._asked.pop(int(message["forked"]))
            pid = int(message["pid"])
            self._runs[pid] = forked
            forked.pid.set_result(pid)
        elif "refused" in message:
            forked = self._asked.pop(int(message["refused"]))
            why = str(message["why"])
            error = StaleServerError(why) if why == "stale" else LaunchError(why)
            forked.pid.set_exception(error)
        elif "ready" in message:
            _resolve(self._ready, None)
        elif "loaded" in message:
            if self._loading is not None:
                _resolve(self._loading, "")
        elif "not_loaded" in message and self._loading is not None:
            _resolve(self._loading, str(message["not_loaded"]))

    def _check_answers(self) -> None:
        """A request unanswered for ANSWER_SECONDS means a hung server."""
        self._answers = None
        if not self._asked:
            return
        waited = self._clock.monotonic() - min(f.asked for f in self._asked.values())
        if waited >= ANSWER_SECONDS:
            self.kill(f"it did not answer a fork request within {ANSWER_SECONDS:g}s")
        else:
            self._answers = self._clock.call_later(ANSWER_SECONDS - waited, self._check_answers)

    # --- its end ---------------------------------------------------------------------

    def _ended(self, _: object) -> None:
        """The server process ended: fail what waits on it, kill the runs it leaves."""
        words = _exit_words(self._child.returncode or 0, "")
        said = self._said[-1] if self._said else ""
        reason = f"the python fork server ended ({words}{': ' + said if said else ''})"
        _resolve(self.gone, reason)
        if self._answers is not None:
            self._answers.cancel()
        with contextlib.suppress(ValueError):
            self._loop.remove_reader(self._control.fileno())
            self._loop.remove_writer(self._control.fileno())
        self._close_outbox()
        self._control.close()
        self._child.close()
        helper_ended(self.pid)
        for future in (self._ready, self._loading):
            if future is not None and not future.done():
                future.set_exception(LaunchError(reason))
        for forked in self._asked.values():
            forked.pid.set_exception(LaunchError(reason))
        for pid, forked in self._runs.items():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            forked.lost = reason
            forked.status.set_result(None)
        self._asked.clear()
        self._runs.clear()

    def _gone_words(self) -> str:
        return self.gone.result() if self.gone.done() else "the python fork server was retired"


async def _settled(future: asyncio.Future[str]) -> None:
    """Wait for `future`, even in a task being cancelled (only a further cancel ends it)."""
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.shield(future)


def _heard(said: deque[str], data: bytes) -> None:
    """What a server prints (a module that prints at import, its own failure): logged."""
    for line in data.decode("utf-8", "replace").splitlines():
        if line.strip():
            said.append(line)
            log.info("python fork server: %s", line)


def _resolve(future: asyncio.Future[object] | asyncio.Future[None] | asyncio.Future[str],
             value: object) -> None:  # fmt: skip
    if not future.done():
        future.set_result(value)  # type: ignore[arg-type]


Key = tuple[str, tuple[str, ...], frozenset[tuple[str, str]]]


class ForkServers:
    """The fork servers of one event loop: one per job module, a spare, idle ones retired.

    `journals` is the folder the servers keep their journals in (None: not
    kept, as for `tuisched run JOB`); it is made when the first server starts.
    """

    def __init__(self, journals: Path | None = None, clock: Clock | None = None) -> None:
        self._journals = journals
        self._clock = clock or SystemClock()
        self._servers: dict[Key, ForkServer] = {}
        """The server of each job module (and Python path and environment)."""
        self._alive: set[ForkServer] = set()
        """Every server not ended yet: those above, the spare, retired ones with runs."""
        self._opening: dict[Key, asyncio.Future[ForkServer]] = {}
        self._spare: asyncio.Future[ForkServer] | None = None
        self._sweeper: Timer | None = None
        self._folder_made = journals is None
        self._closed = False

    async def server_for(
        self, target: str, env: Mapping[str, str], path: Sequence[str]
    ) -> ForkServer:
        """The server that forks runs of `target` with `env` (a run's) and `path`.

        Raises:
            LaunchError: no server could be started.
        """
        module = target.partition(":")[0]
        base = {name: value for name, value in env.items() if name not in PER_RUN}
        key: Key = (module, tuple(path), frozenset(base.items()))
        server = self._servers.get(key)
        if server is not None and server.usable:
            return server
        opening = self._opening.get(key)
        if opening is None:
            opening = asyncio.ensure_future(self._open(key, module, base, path))
            self._opening[key] = opening
            opening.add_done_callback(lambda _: self._opening.pop(key, None))
        try:
            return await asyncio.shield(opening)
        except asyncio.CancelledError:
            if opening.cancelled():  # closed under it, not the run cancelled
                raise LaunchError("the scheduler is stopping") from None
            raise

    def drop(self, server: ForkServer) -> None:
        """Stop giving runs to `server` (its module was edited): it leaves once idle."""
        for key, known in list(self._servers.items()):
            if known is server:
                del self._servers[key]
        server.retire()

    async def _open(
        self, key: Key, module: str, env: Mapping[str, str], path: Sequence[str]
    ) -> ForkServer:
        if self._closed:
            raise LaunchError("the scheduler is stopping")
        server = await self._take_spare(env)
        try:
            why = await server.load(module, path)
        except LaunchError as error:  # it died importing (a crash, or too slow): killed
            why = str(error)
        if why:  # tried again when this server is retired: an edit may have changed that
            log.info("the module %s is imported by each of its runs: %s", module, why)
            server = await self._take_spare(env)
            await server.load(None, path)
        self._servers[key] = server
        server.gone.add_done_callback(lambda _: self._forget(key, server))
        self._make_room()
        self._sweep_soon()
        return server

    async def _take_spare(self, env: Mapping[str, str]) -> ForkServer:
        """A started server with `env` (the spare when it has that environment); a new
        spare is started meanwhile."""
        if self._closed:
            raise LaunchError("the scheduler is stopping")
        spare, self._spare = self._spare, None
        server: ForkServer | None = None
        if spare is not None:
            with contextlib.suppress(LaunchError):
                server = await spare
            if server is not None and (server.env != env or not server.usable):
                server.retire()
                server = None
        if server is None:
            server = await self._start(env)
        if not self._closed:
            self._spare = asyncio.ensure_future(self._start(env))
            self._spare.add_done_callback(_retrieved)
        return server

    async def _start(self, env: Mapping[str, str]) -> ForkServer:
        if not self._folder_made and self._journals is not None:
            try:
                await in_thread(Lane.PROCESSES, private_folder, self._journals)
            except StateError as error:
                raise LaunchError(str(error)) from error
            self._folder_made = True
        server = await ForkServer.start(env, self._journals, self._clock)
        self._alive.add(server)
        server.gone.add_done_callback(lambda _: self._alive.discard(server))
        return server

    def _forget(self, key: Key, server: ForkServer) -> None:
        if self._servers.get(key) is server:
            del self._servers[key]

    def _make_room(self) -> None:
        """Retire the least recently used idle servers beyond MAX_SERVERS."""
        idle = sorted((s for s in self._servers.values() if not s.busy), key=lambda s: s.last_used)
        for server in idle[: max(0, len(self._servers) - MAX_SERVERS)]:
            self.drop(server)

    def _sweep_soon(self) -> None:
        if self._sweeper is None and not self._closed:
            self._sweeper = self._clock.call_later(IDLE_SECONDS / 2, self._sweep)

    def _sweep(self) -> None:
        """Retire servers idle for IDLE_SECONDS."""
        self._sweeper = None
        now = self._clock.monotonic()
        for server in list(self._servers.values()):
            if not server.busy and now - server.last_used >= IDLE_SECONDS:
                self.drop(server)
        if self._servers:
            self._sweep_soon()

    async def close(self, grace: float = 5.0) -> None:
        """Start no more servers, retire every one and wait for them to leave (each is
        killed after `grace` seconds). A server still starting is waited for, not
        abandoned: its process must be reaped by this loop."""
        self._closed = True
        if self._sweeper is not None:
            self._sweeper.cancel()
        self._servers.clear()
        timers: dict[ForkServer, Timer] = {}
        self._retire_all(timers, grace)
        starting = [*self._opening.values(), *([self._spare] if self._spare else [])]
        self._spare = None
        await asyncio.gather(*starting, return_exceptions=True)  # bounded by their deadlines
        self._retire_all(timers, grace)  # those that finished starting meanwhile
        try:
            await asyncio.gather(*(server.gone for server in timers))
        finally:
            for timer in timers.values():
                timer.cancel()

    def _retire_all(self, timers: dict[ForkServer, Timer], grace: float) -> None:
        for server in self._alive - timers.keys():
            server.retire()
            timers[server] = self._clock.call_later(grace, server.kill, "it did not leave in time")


def _retrieved(future: asyncio.Future[ForkServer]) -> None:
    """A spare that could not start is started again when needed (and says why then)."""
    if not future.cancelled():
        future.exception()


_SERVERS: dict[asyncio.AbstractEventLoop, ForkServers] = {}
_USERS: dict[asyncio.AbstractEventLoop, int] = {}
"""How many runtimes opened the fork servers of each loop (tests run several on one)."""


def open_fork_servers(journals: Path | None, clock: Clock) -> None:
    """Give the running loop its fork servers, journaled in `journals` (at a runtime's
    start). A second runtime on the same loop shares the first one's."""
    loop = asyncio.get_running_loop()
    _USERS[loop] = _USERS.get(loop, 0) + 1
    if _USERS[loop] == 1 or loop not in _SERVERS:
        _SERVERS[loop] = ForkServers(journals, clock)


def fork_servers() -> ForkServers:
    """The fork servers of the running loop (unjournaled ones if none were opened)."""
    loop = asyncio.get_running_loop()
    servers = _SERVERS.get(loop)
    if servers is None:
        for old in [old for old in _SERVERS if old.is_closed()]:
            del _SERVERS[old]
            _USERS.pop(old, None)
        servers = _SERVERS[loop] = ForkServers()
    return servers


async def close_fork_servers() -> None:
    """Stop the running loop's fork servers (at the stop of the last runtime that opened
    them, once no run is going)."""
    loop = asyncio.get_running_loop()
    users = _USERS.pop(loop, 1) - 1
    if users > 0:
        _USERS[loop] = users
        return
    servers = _SERVERS.pop(loop, None)
    if servers is not None:
        await servers.close()
