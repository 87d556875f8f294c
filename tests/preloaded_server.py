"""The preloaded interpreter of `tests/preloaded.py` (run as a script, not imported).

It imports what a headless start imports, then forks a child for each request read
from the socket given as fd `argv[1]`: a JSON line `{"argv", "env", "cwd"}` with the
child's stdin, stdout and stderr passed along (SCM_RIGHTS). It answers the child's pid,
and later its exit status (`{"pid", "status"}`, `status` as `Popen.returncode` has it).
It exits when the socket closes. The child runs `python -m tuisched` as a fresh
interpreter would, and exits through the interpreter's own shutdown.
"""

from __future__ import annotations

import array
import json
import os
import runpy
import selectors
import signal
import socket
import sys
import threading
from pathlib import Path

# What a headless start (a cluster node too) imports; the rest loads in the child.
import tuisched.frontends.cli
import tuisched.frontends.headless
import tuisched.frontends.serving
import tuisched.runtime.cluster.database
import tuisched.runtime.control.server
import tuisched.runtime.runtime
import tuisched.runtime.webhook

PRELOADED = (
    tuisched.frontends.cli,
    tuisched.frontends.headless,
    tuisched.frontends.serving,
    tuisched.runtime.cluster.database,
    tuisched.runtime.control.server,
    tuisched.runtime.runtime,
    tuisched.runtime.webhook,
)
FDS = 3  # stdin, stdout, stderr


def _receive(sock: socket.socket) -> tuple[dict[str, object], list[int]] | None:
    """One request and its descriptors, None once the socket closed."""
    fds = array.array("i")
    data, ancillary, _, _ = sock.recvmsg(1 << 20, socket.CMSG_SPACE(FDS * fds.itemsize))
    if not data:
        return None
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    return json.loads(data), list(fds)


def _send(sock: socket.socket, message: dict[str, int]) -> None:
    sock.sendall(json.dumps(message).encode() + b"\n")


def _become(request: dict[str, object], fds: list[int], sock: socket.socket) -> list[str]:
    """In the child: take the request's descriptors, folder and environment; the
    argv to run."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.set_wakeup_fd(-1)
    sock.close()
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    os.closerange(FDS, 1 << 16)  # as Popen's close_fds
    os.chdir(str(request["cwd"]))
    sys.path[0] = str(Path.cwd())  # as `python -m` has it
    env = request["env"]
    assert isinstance(env, dict)
    os.environ.clear()
    os.environ.update(env)
    argv = request["argv"]
    assert isinstance(argv, list)
    return [str(arg) for arg in argv]


def serve(sock: socket.socket) -> list[str] | None:
    """Fork a child per request until the socket closes: in the child, the argv to run
    (None in this process, at the end)."""
    assert threading.active_count() == 1, "a fork with threads running"
    wakeup_read, wakeup_write = os.pipe()
    os.set_blocking(wakeup_write, False)
    signal.set_wakeup_fd(wakeup_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    selector = selectors.DefaultSelector()
    selector.register(sock, selectors.EVENT_READ)
    selector.register(wakeup_read, selectors.EVENT_READ)
    children: set[int] = set()
    while True:
        for key, _ in selector.select():
            if key.fileobj is sock:
                received = _receive(sock)
                if received is None:
                    return None
                request, fds = received
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    selector.close()
                    os.close(wakeup_read)
                    os.close(wakeup_write)
                    return _become(request, fds, sock)
                for fd in fds:
                    os.close(fd)
                children.add(pid)
                _send(sock, {"pid": pid})
            else:
                os.read(wakeup_read, 512)
            for pid in list(children):
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    children.discard(pid)
                    _send(sock, {"pid": pid, "status": os.waitstatus_to_exitcode(status)})


def main() -> None:
    argv = serve(socket.socket(fileno=int(sys.argv[1])))
    if argv is None:
        return
    sys.argv = ["-m", *argv]  # argv[0] becomes the module's file, as with `python -m`
    runpy.run_module("tuisched", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
