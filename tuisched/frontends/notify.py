"""Telling systemd how the headless scheduler is doing (`Type=notify` units).

The protocol is one datagram per message to the Unix socket named by
`$NOTIFY_SOCKET` (a leading `@` names the abstract namespace): `READY=1`
once the scheduler fires, `STATUS=...` lines for `systemctl status`,
`WATCHDOG=1` keep-alives and `STOPPING=1` when it drains. It is spoken here
rather than through a library: python-systemd is a C extension that needs
libsystemd's headers to build, and sdnotify (last released 2017) uses a
blocking socket and hides every error; the protocol itself is one `sendto`.

The socket is non-blocking, so a service manager that does not read can
never stall the event loop: a message that does not fit is dropped. The
keep-alives are sent by a task on the event loop itself, so a loop that
stalls stops them and systemd (`WatchdogSec=`) restarts the service.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass

log = logging.getLogger(__name__)

NOTIFY_VARIABLES = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")
"""What systemd sets for a notify service (taken out of the environment jobs inherit)."""
STATUS_EVERY = 10.0
"""Seconds between STATUS updates when systemd asks for no watchdog."""


@dataclass(frozen=True)
class Notifier:
    """A connection to the service manager's notification socket.

    `watchdog` is the keep-alive period systemd asked for ($WATCHDOG_USEC, in
    seconds), or None when it asked for none (or asked another process).
    """

    address: str
    watchdog: float | None
    _socket: socket.socket

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> Notifier | None:
        """The notifier systemd set up for this process, or None when none did."""
        name = environ.get("NOTIFY_SOCKET", "")
        if not name or name[0] not in "/@":
            return None  # no service manager (or a vsock address we do not speak)
        address = "\0" + name[1:] if name.startswith("@") else name
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        sock.setblocking(False)
        return cls(address, _watchdog_period(environ), sock)

    def send(self, *fields: str) -> None:
        """Send one message (`KEY=value` fields, one per line); never blocks or raises."""
        message = "\n".join(fields).encode("utf-8", "replace")
        try:
            self._socket.sendto(message, self.address)
        except OSError as error:  # full queue, manager gone: the next message may pass
            log.debug("systemd notification not sent: %s", error)

    def close(self) -> None:
        """Close the socket."""
        self._socket.close()


def _watchdog_period(environ: Mapping[str, str]) -> float | None:
    """$WATCHDOG_USEC in seconds, when it is meant for this process ($WATCHDOG_PID)."""
    pid = environ.get("WATCHDOG_PID", "")
    if pid and pid != str(os.getpid()):
        return None
    usec = environ.get("WATCHDOG_USEC", "")
    if not (usec.isascii() and usec.isdigit()) or int(usec) == 0:
        return None
    return int(usec) / 1_000_000


@contextlib.asynccontextmanager
async def notifying(
    notifier: Notifier | None, status: Callable[[], Awaitable[str]]
) -> AsyncIterator[Callable[[], None]]:
    """Send READY=1 with the first status now, then keep-alives and status lines from
    a task on this loop (twice per watchdog period), until the block ends. Yields the
    function that says STOPPING=1 (call it when draining starts)."""
    if notifier is None:
        yield lambda: None
        return
    notifier.send("READY=1", f"STATUS={await status()}", f"MAINPID={os.getpid()}")
    beat = asyncio.create_task(_keep_alive(notifier, status))
    try:
        yield lambda: notifier.send("STOPPING=1", "STATUS=draining: no new runs")
    finally:
        beat.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await beat
        notifier.close()


async def _keep_alive(notifier: Notifier, status: Callable[[], Awaitable[str]]) -> None:
    period = notifier.watchdog / 2 if notifier.watchdog else STATUS_EVERY
    while True:
        await asyncio.sleep(period)
        fields = [f"STATUS={await status()}"]
        if notifier.watchdog:
            fields.insert(0, "WATCHDOG=1")
        notifier.send(*fields)
