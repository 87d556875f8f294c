"""`/metrics` and `/healthz` over HTTP, on threads of their own (SPEC R23, R24).

A scrape renders every series (one per job and outcome, at 10,000 jobs a
few megabytes of text): done on the loop it would hold up the slots due
meanwhile. So the server is the standard library's threading HTTP server,
and its handlers only read what the loop keeps up to date (prometheus_client's
metrics are thread-safe). A slow or silent client holds one handler thread
until its socket times out, never the loop.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import re
import socket
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from tuisched.domain.errors import MetricsListenError
from tuisched.domain.model import MetricsSettings

log = logging.getLogger(__name__)

CLIENT_TIMEOUT = 10.0
"""Seconds a client may take to send its request before its connection is closed."""

Health = Callable[[], str | None]
"""None while the scheduler fires on time, else why not (one line)."""


class MetricsServer:
    """Serves `registry` at `/metrics` and `health` at `/healthz` on `settings.listen`."""

    def __init__(
        self, settings: MetricsSettings, registry: CollectorRegistry, health: Health
    ) -> None:
        self.settings = settings
        self._registry = registry
        self._health = health
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The port listened on (the system's pick for port 0); 0 before `start`."""
        return self._server.server_address[1] if self._server is not None else 0

    def start(self) -> None:
        """Listen and serve from a thread; MetricsListenError (one line) when the address
        cannot be listened on. Binding is immediate: safe on the loop."""
        try:
            server = _server_class(self.settings.host)(
                (self.settings.host, self.settings.port), _handler(self._registry, self._health)
            )
        except OSError as error:
            raise MetricsListenError(_why(self.settings, error)) from error
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, name="tuisched-metrics", daemon=True
        )
        self._thread.start()
        host = self.settings.listen.rpartition(":")[0]
        log.info("metrics at http://%s:%d/metrics, health at /healthz", host, self.port)

    async def stop(self) -> None:
        """Stop listening; answers being written are cut (their threads are daemons)."""
        server, self._server = self._server, None
        if server is None:
            return
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        # shutdown() waits up to the serve loop's poll interval: not on the loop.
        threading.Thread(
            target=_close, args=(server, done), name="tuisched-metrics-stop", daemon=True
        ).start()
        await done


def _close(server: ThreadingHTTPServer, done: asyncio.Future[None]) -> None:
    try:
        server.shutdown()
        server.server_close()
    finally:
        done.get_loop().call_soon_threadsafe(_settle, done)


def _settle(done: asyncio.Future[None]) -> None:
    if not done.done():
        done.set_result(None)


def _why(settings: MetricsSettings, error: OSError) -> str:
    what = f"settings.metrics.listen {settings.listen}"
    if error.errno == errno.EADDRINUSE:
        return f"{what}: the port is in use (another tuisched, or another program)"
    if error.errno == errno.EADDRNOTAVAIL:
        return f"{what}: the address is not one of this machine's"
    if error.errno == errno.EACCES:
        return f"{what}: not allowed (ports below 1024 need privileges)"
    return f"{what}: {error.strerror or error}"


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = socket.SOMAXCONN
    """Connections the kernel holds until they are accepted. socketserver's 5 filled
    while one thread accepted a burst (silent clients, a scanner): each further one
    waited for its SYN to be sent again, a second or more, scrapes too."""

    def handle_error(self, request: object, client_address: object) -> None:
        """A scraper that hung up or fell silent: one debug line, not a traceback on
        stderr (socketserver's way), which a port scanner would fill."""
        log.debug("metrics: a connection from %s failed: %s", client_address,
                  sys.exc_info()[1])  # fmt: skip


class _Server6(_Server):
    address_family = socket.AF_INET6


def _server_class(host: str) -> type[ThreadingHTTPServer]:
    return _Server6 if ":" in host else _Server


_VERSION = re.compile(r"\s*version\s*=(.*)")
_DOTTED = re.compile(r"[0-9]{1,9}(\.[0-9]{1,9})*")


def _encoder(accept: str) -> tuple[Callable[[CollectorRegistry], bytes], str] | None:
    """The exposition format `accept` asks for (prometheus_client's choice), or None
    when it names a version that is not dotted numbers (the library fails on it)."""
    for part in accept.split(";"):
        found = _VERSION.fullmatch(part)
        version = found.group(1).strip() if found is not None else ""
        if version and not _DOTTED.fullmatch(version):  # none at all: the default one
            return None
    try:
        return choose_encoder(accept)
    except (TypeError, ValueError):
        return None


def _shown(text: str, limit: int = 200) -> str:
    """A client's header as one printable line of at most `limit` characters."""
    line = "".join(char if char.isprintable() else "?" for char in text)
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _handler(registry: CollectorRegistry, health: Health) -> type[BaseHTTPRequestHandler]:
    """A request handler class bound to `registry` and `health`."""

    class Handler(BaseHTTPRequestHandler):
        timeout = CLIENT_TIMEOUT
        server_version = "tuisched"
        # A refused request (a bad request line, too many headers, an unknown method) is
        # told why in one plain line, not http.server's page of HTML.
        error_message_format = "%(code)d %(message)s\n"
        error_content_type = "text/plain; charset=utf-8"
        # What a request is answered as until its own version is read: http.server's
        # HTTP/0.9 sends a refusal (of `HTTP/2.0`, `HTTP/1.a`...) without a status line.
        default_request_version = "HTTP/1.0"

        def do_GET(self) -> None:
            path = self.path.partition("?")[0]
            if path == "/metrics":
                accept = self.headers.get("Accept", "")
                chosen = _encoder(accept)
                if chosen is None:
                    body = f"cannot read the Accept header: {_shown(accept)}\n".encode()
                    self._answer(400, "text/plain; charset=utf-8", body)
                    return
                encoder, content_type = chosen
                self._answer(200, content_type, encoder(registry))
            elif path == "/healthz":
                reason = health()
                status, text = (200, "ok") if reason is None else (503, reason)
                self._answer(status, "text/plain; charset=utf-8", f"{text}\n".encode())
            else:
                body = b"not found: try /metrics or /healthz\n"
                self._answer(404, "text/plain; charset=utf-8", body)

        def do_HEAD(self) -> None:
            self.do_GET()

        def _answer(self, status: int, content_type: str, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            """Scrapes every 15 s would flood the log: logged at debug level only."""
            log.debug("metrics: %s %s", self.address_string(), format % args)

    return Handler
