"""The fork server: one interpreter that forks a process for each python run. Run by path;
it imports nothing but the standard library and `pyjob.py` beside it.

    python -u -c BOOT forkserver.py CONTROL_FD SCHEDULER_PID [JOURNALS]

Starting an interpreter costs about 15 ms of CPU, importing a job's module
often more; a fork costs well under a millisecond. So the scheduler starts
this server once, has it import the job's module once (`load`), and asks it
for a process per run (`fork`). Each run's process is a copy of the server:
its own process in its own session and process group, its own copy of the
module's state, its own environment, stdin from /dev/null, and stdout and
stderr on the run's own output pipe. `pyjob.run` then runs the job in it and
reports on the run's reports pipe, its pid first.

The server talks to the scheduler over CONTROL_FD, a SOCK_SEQPACKET socket,
one message each:

    scheduler -> server
    L{"load": "package.module" | null, "path": [...]}
                                  once: the Python path, and the job's module to import
    F<N, 8 digits> RUN_ID\nTARGET\0NAME\0VALUE\0NAME\0VALUE...
                                  fork N for run RUN_ID, with two descriptors attached:
                                  the write ends of the run's output and reports pipes;
                                  the variables are what the run's environment adds to
                                  the server's. Only the run's process reads them: the
                                  server's own work between two forks stays small
    R                             retire: exit once every run process has ended

    server -> scheduler (JSON)
    {"ready": PID}                started; dies with the scheduler
    {"loaded": N}                 imported (N files are watched for edits)
    {"not_loaded": "why"}         importing it here could harm its runs; the server exits
    {"forked": N, "pid": PID}     the process for fork N
    {"refused": N, "why": "..."}  no process for fork N: "stale" when a watched file
                                  changed since the import, else why the fork failed
    {"exited": [[PID, WAITSTATUS], ...]}    run processes that ended

Promises the scheduler builds on:

- The server dies with the scheduler: PR_SET_PDEATHSIG (SIGKILL when the
  thread that started it ends; the scheduler starts it from a thread that
  lives as long as the process), checked against SCHEDULER_PID right after it
  is set in case the scheduler was already gone. It also leaves when the
  control socket closes, once its last run process has ended.
- It forks from its one thread with no lock held: it never starts a thread
  (nor imports `threading`, whose after-fork hook would cost every run), and a
  module whose import leaves a thread running is not kept (`not_loaded`).
- A run's process runs nothing of the job before its pid is in the server's
  journal, `JOURNALS/SERVER_PID.runs` (one line `RUN_ID PID START`, START in
  clock ticks after boot as in /proc/PID/stat): it appends the line itself,
  then runs only if the server is still alive (and so the scheduler, whose
  next start reads the journals). The next start of a scheduler that was
  killed stops every process the journals name.
- `TUISCHED_RUN_ID` shows in /proc/PID/environ of a run's process, as it does
  for a command: the server starts with the variable holding blanks, and each
  run's process writes its run id over them in its own copy of the memory
  /proc reads. Processes the run forks without exec carry it too.
- A module imported by `load` is watched: every file it brought in (outside
  the standard library) is checked before each fork, and a change refuses the
  fork as "stale", so that the scheduler replaces the server and the edit
  takes effect at that very run.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # no stubs; see where it is used
import _socket
import _thread
import array
import contextlib
import ctypes
import gc
import importlib
import importlib.util
import json
import os
import select
import signal
import sys
from types import ModuleType

RUN_ID = "TUISCHED_RUN_ID"
RUN_ID_ROOM = 64
"""Bytes kept for the run id in the server's initial environment (ids are 12 characters)."""
_PR_SET_PDEATHSIG = 1
_MESSAGE_BYTES = 1 << 16
_FDS_SPACE = _socket.CMSG_SPACE(2 * array.array("i").itemsize)
_COMPACT_EVERY = 1024
"""Forks between two rewrites of the journal that keep only the live processes."""
_LIBC = ctypes.CDLL(None, use_errno=True)  # this process's own symbols, libc's among them


def _harness() -> ModuleType:
    """`pyjob.py`, under a name no job's module can take."""
    path = os.path.join(os.path.dirname(__file__), "pyjob.py")  # noqa: PTH118, PTH120
    spec = importlib.util.spec_from_file_location("_tuisched_pyjob", path)
    assert spec is not None  # noqa: S101  (a file beside this one)
    assert spec.loader is not None  # noqa: S101
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _prctl(option: int, value: int) -> bool:
    try:
        return bool(_LIBC.prctl(option, value, 0, 0, 0) == 0)
    except AttributeError:  # no prctl (not Linux): nothing to set
        return False


def _started(pid: int | str) -> int:
    """When process `pid` started, in clock ticks after boot (0 if it cannot be read).

    Read with `os` calls, not `open()`: each run's process calls it, and every
    object it touches is a page copied.
    """
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
        try:
            data = os.read(fd, 4096)
        finally:
            os.close(fd)
        return int(data[data.rfind(b")") + 2 :].split()[19])
    except (OSError, ValueError, IndexError):
        return 0


def _threads() -> int:
    """How many threads this process has (native ones too, where /proc tells)."""
    try:
        return len(os.listdir("/proc/self/task"))  # noqa: PTH208
    except OSError:
        return 1 + _thread._count()


def _stamp_address() -> int | None:
    """Where the blanks of `TUISCHED_RUN_ID` are in this process's initial environment
    block (the memory /proc/PID/environ reads), or None when they cannot be found."""
    try:
        with open("/proc/self/stat", "rb") as stat:  # noqa: PTH123
            data = stat.read()
        fields = data[data.rfind(b")") + 2 :].split()
        start, end = int(fields[47]), int(fields[48])  # env_start, env_end (fields 50, 51)
        with open("/proc/self/environ", "rb") as environ:  # noqa: PTH123
            block = environ.read()
    except (OSError, ValueError, IndexError):
        return None
    entry = f"{RUN_ID}=".encode() + b" " * RUN_ID_ROOM
    at = block.find(b"\0" + entry + b"\0")
    at = at + 1 if at >= 0 else (0 if block.startswith(entry + b"\0") else -1)
    if at < 0 or start + len(block) > end + 1:
        return None
    address = start + at + len(RUN_ID) + 1
    if ctypes.string_at(address, RUN_ID_ROOM) != b" " * RUN_ID_ROOM:
        return None
    return address


def _stamp(address: int | None, run_id: str) -> None:
    """Write `run_id` over the blanks (in this process's copy of the block)."""
    value = run_id.encode()
    if address is not None and len(value) < RUN_ID_ROOM:
        ctypes.memmove(address, value.ljust(RUN_ID_ROOM, b"\0"), RUN_ID_ROOM)


class Journal:
    """The run processes of this server, one line each, for the next start after a kill.

    Each run's process appends its own line (one write to a file opened for
    appending is one piece); the server writes the first line, rewrites the
    file now and then with only the live processes, and removes it when it
    leaves with no process left.
    """

    def __init__(self, folder: str) -> None:
        self._path = os.path.join(folder, f"{os.getpid()}.runs")  # noqa: PTH118
        self.fd = self._open(self._path)
        self._forks = 0
        self._write(self.fd, [f"server {os.getpid()} {_started('self')}\n"])

    @staticmethod
    def _open(path: str) -> int:
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
        return os.open(path, flags, 0o600)

    def forked(self, live: dict[int, bytes]) -> None:
        """A process was forked; now and then keep only the `live` ones (pid -> run id)."""
        self._forks += 1
        if self._forks % _COMPACT_EVERY:
            return
        lines = [f"server {os.getpid()} {_started('self')}\n"]
        lines += [f"{run_id.decode()} {pid} {_started(pid)}\n" for pid, run_id in live.items()]
        new = self._path + ".new"
        try:
            fd = self._open(new)
            self._write(fd, lines)
            os.replace(new, self._path)  # noqa: PTH105
        except OSError as error:
            _complain(f"cannot rewrite the journal {self._path}: {error.strerror}")
            return
        os.close(self.fd)
        self.fd = fd

    def _write(self, fd: int, lines: list[str]) -> None:
        try:
            os.write(fd, "".join(lines).encode())
        except OSError as error:
            _complain(f"cannot write the journal {self._path}: {error.strerror}")

    def remove(self) -> None:
        """Nothing left to find: the journal goes."""
        with contextlib.suppress(OSError):
            os.unlink(self._path)  # noqa: PTH108


def _complain(text: str) -> None:
    """Say it on stderr, which the scheduler logs."""
    print(text, file=sys.stderr)


class Watched:
    """The files a `load` brought in, as they were then."""

    STDLIB = os.path.dirname(os.__file__) + os.sep  # noqa: PTH120
    """Where the standard library is: its files change only with Python itself."""

    def __init__(self, before: set[str]) -> None:
        self._files: dict[str, tuple[int, int, int]] = {}
        for name in set(sys.modules) - before:
            try:
                path = getattr(sys.modules[name], "__file__", None)
            except Exception:  # noqa: S112  (a module with a strange __getattr__: no file)
                continue
            if isinstance(path, str) and not self._in_stdlib(path):
                with contextlib.suppress(OSError):
                    self._files[path] = self._look(path)

    @classmethod
    def _in_stdlib(cls, path: str) -> bool:
        """Under the standard library's folder, but not in a site-packages inside it
        (where an installation without a venv keeps third-party packages)."""
        return path.startswith(cls.STDLIB) and "-packages" + os.sep not in path

    def __len__(self) -> int:
        return len(self._files)

    @staticmethod
    def _look(path: str) -> tuple[int, int, int]:
        info = os.stat(path)  # noqa: PTH116  (before each fork: the cheapest way)
        return info.st_mtime_ns, info.st_size, info.st_ino

    def changed(self) -> bool:
        """Whether any file was edited, replaced or removed since the import."""
        for path, seen in self._files.items():
            try:
                if self._look(path) != seen:
                    return True
            except OSError:
                return True
        return False


def _receive(control: _socket.socket) -> tuple[bytes, list[int]]:
    """One message and the descriptors that came with it, without waiting.

    (`socket.recv_fds` of Python 3.11 drops its `flags`, so it would wait. And
    `_socket`, not `socket`: that module and its enums would add a few hundred
    kilobytes for every fork to copy.)
    """
    data, ancillary, _, _ = control.recvmsg(_MESSAGE_BYTES, _FDS_SPACE, _socket.MSG_DONTWAIT)
    fds = array.array("i")
    for level, kind, payload in ancillary:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    return data, list(fds)


class Server:
    """The loop: messages from the scheduler, forks, and the ends of run processes."""

    def __init__(self, control: _socket.socket, journal: Journal | None) -> None:
        self._control = control
        self._journal = journal
        self._harness = _harness()
        self._stamp = _stamp_address()
        self._watched: Watched | None = None
        self._live: dict[int, bytes] = {}
        """Run processes not reaped yet: pid -> run id."""
        self._pid = os.getpid()
        self._listening = True
        self._devnull = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        self._wakeup_r, self._wakeup_w = os.pipe()
        os.set_blocking(self._wakeup_w, False)
        self._poll = select.poll()

    def serve(self) -> None:
        """Serve until told to leave (or the scheduler's end closed) and no run is left."""
        signal.set_wakeup_fd(self._wakeup_w, warn_on_full_buffer=False)
        signal.signal(signal.SIGCHLD, lambda _signum, _frame: None)
        self._poll.register(self._control.fileno(), select.POLLIN)
        self._poll.register(self._wakeup_r, select.POLLIN)
        self._settle()
        self._send(b'{"ready": %d}' % os.getpid())
        while self._listening or self._live:
            for fd, _ in self._poll.poll():
                if fd == self._wakeup_r:
                    with contextlib.suppress(BlockingIOError):
                        os.read(self._wakeup_r, 4096)
                    self._reap()
                else:
                    self._take_message()
        if self._journal is not None:
            self._journal.remove()

    @staticmethod
    def _settle() -> None:
        """Keep the collector off what exists now: after each fork, every page this
        process writes is copied, and a collection would write them all."""
        gc.collect()
        gc.freeze()
        gc.disable()

    def _send(self, message: bytes) -> None:
        with contextlib.suppress(OSError):  # the scheduler is gone: nobody to tell
            self._control.send(message)

    def _take_message(self) -> None:
        """One message (the next `poll` tells of the next: no exception per batch)."""
        try:
            data, fds = _receive(self._control)
        except BlockingIOError:
            return
        except OSError:
            data, fds = b"", []
        try:
            self._handle(data, fds)
        finally:
            for fd in fds:
                os.close(fd)

    def _handle(self, data: bytes, fds: list[int]) -> None:
        kind = data[:1]
        if kind == b"F":
            self._fork(data, fds)
        elif kind == b"L":
            message = json.loads(data[1:])
            self._load(message["load"], message["path"])
        elif kind == b"R" or not data:  # retired, or the scheduler closed its end
            self._listening = False
            self._poll.unregister(self._control.fileno())
        else:
            _complain(f"a message could not be read ({len(data)} bytes)")
            raise SystemExit(1)

    def _load(self, module: str | None, path: list[str]) -> None:
        sys.path[:] = path
        before = set(sys.modules)
        if module is not None:
            try:
                importlib.import_module(module)
            except BaseException as exc:  # SystemExit at import too: each run imports it
                self._leave(f"importing it failed ({self._harness.describe(exc)})")
            if _threads() > 1:
                self._leave("importing it started a thread, and a process with threads cannot fork")
        self._watched = Watched(before)
        self._settle()
        self._send(json.dumps({"loaded": len(self._watched)}).encode())

    def _leave(self, why: str) -> None:
        """Leave at once: what the import left behind must not reach a run."""
        self._send(json.dumps({"not_loaded": why}).encode())
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(0)

    def _fork(self, data: bytes, fds: list[int]) -> None:
        """Fork the process of one run. Kept to a few calls: every page the server
        writes between two forks is copied once more."""
        header, _, payload = data.partition(b"\n")
        number = int(header[1:9])
        if len(fds) != 2:
            self._refuse(number, "no pipes came with the request")
        elif self._watched is not None and self._watched.changed():
            self._refuse(number, "stale")
        else:
            try:
                pid = os.fork()
            except OSError as error:
                self._refuse(number, f"cannot fork: {error.strerror}")
                return
            if pid == 0:
                self._become_run(header[10:].decode(), payload, fds)
            self._live[pid] = header[10:]
            self._send(b'{"forked": %d, "pid": %d}' % (number, pid))
            if self._journal is not None:
                self._journal.forked(self._live)

    def _refuse(self, number: int, why: str) -> None:
        self._send(json.dumps({"refused": number, "why": why}).encode())

    def _become_run(self, run_id: str, payload: bytes, fds: list[int]) -> None:
        """In the forked process: record itself, become the run, never return."""
        code = 70
        try:
            code = self._run(run_id, payload.decode().split("\0"), fds)
        finally:
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            os._exit(code)  # daemon threads of the job must not hold the exit

    def _run(self, run_id: str, request: list[str], fds: list[int]) -> int:
        output, reports = fds
        os.setsid()
        # `_signal`, not `signal`: its wrappers' enums would touch (and so copy) many pages.
        _signal.set_wakeup_fd(-1)
        _signal.signal(_signal.SIGCHLD, _signal.SIG_DFL)
        if not self._record(run_id):
            return 0  # the server died before we were recorded: run nothing
        os.dup2(self._devnull, 0)
        os.dup2(output, 1)
        os.dup2(output, 2)
        os.set_inheritable(reports, False)  # programs the job starts must not hold it open
        os.closerange(3, reports)
        os.closerange(reports + 1, os.sysconf("SC_OPEN_MAX"))
        _stamp(self._stamp, run_id)
        target, *variables = request
        for name, value in zip(variables[::2], variables[1::2], strict=True):
            os.environ[name] = value
        gc.enable()
        return int(self._harness.run(target, reports))

    def _record(self, run_id: str) -> bool:
        """Put this process in the journal; False if the server is gone by then.

        The server dies with the scheduler, so a process that finds it alive
        after writing its line was recorded before any next start could read
        the journal; one that finds it gone runs nothing.
        """
        if self._journal is not None:
            with contextlib.suppress(OSError):  # a full disk: the run goes on (see Journal)
                line = f"{run_id} {os.getpid()} {_started('self')}\n"
                os.write(self._journal.fd, line.encode())
        return os.getppid() == self._pid

    def _reap(self) -> None:
        """Collect the run processes that ended; tell the scheduler in one message."""
        ended: list[tuple[int, int]] = []
        while self._live:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            self._live.pop(pid, None)
            ended.append((pid, status))
        if ended:  # by hand: the json module's encoder is many pages to copy
            self._send(b'{"exited": [%s]}' % b", ".join(b"[%d, %d]" % each for each in ended))


def _die_with(scheduler: int) -> None:
    """SIGKILL when the scheduler dies; exit now if it already has."""
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != scheduler:
        os._exit(0)


def _journal(folder: str) -> Journal | None:
    """The journal in `folder`; None (and a line on stderr) if it cannot be written there:
    the runs go on, only a kill -9 of the scheduler would then miss their processes."""
    try:
        return Journal(folder)
    except OSError as error:
        _complain(f"cannot keep a journal in {folder}: {error.strerror}")
        return None


def main() -> None:
    """Serve the scheduler named on the command line."""
    control = _socket.socket(fileno=int(sys.argv[1]))
    control.setblocking(True)
    _die_with(int(sys.argv[2]))
    journal = _journal(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[3] else None
    server = Server(control, journal)
    os.environ.pop(RUN_ID, None)  # a module imported by `load` sees no run id of blanks
    server.serve()


if __name__ == "__main__":
    main()
    sys.stdout.flush()
    os._exit(0)
