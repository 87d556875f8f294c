"""Posting alerts to webhooks: the `WebhookPoster` protocol and its aiohttp client.

`HttpPoster` sends one POST per call on the event loop with aiohttp, each bounded
by the webhook's `timeout` (connecting, sending and reading the answer
together), and never more than `max_in_flight` at once: more wait their turn.
Host names are resolved in the webhook lane's threads, not in asyncio's default
pool, so a silent DNS server holds only this lane (TRAPS: "one default pool").

The secret (`secret_env` or `secret_file`) is read at each post, so a rotated
file applies at once. It is presented as a bearer token or as an HMAC-SHA256
signature (`WebhookAuth`) of the post's timestamp and body, so a receiver that
checks the timestamp's age refuses a captured post sent again (as Stripe and
Slack sign theirs); it never appears in an error message
or a log line; neither does the URL, which for many services is itself a
credential: errors name the webhook instead.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from tuisched.domain.errors import WebhookError
from tuisched.domain.model import WebhookAuth, WebhookSettings
from tuisched.runtime.threads import Lane, in_thread

if TYPE_CHECKING:  # aiohttp's client is imported at the first post (a start without webhooks
    import aiohttp  # never pays for it)
    from aiohttp.abc import AbstractResolver

MAX_IN_FLIGHT = 4
"""Posts under way at once, over all webhooks."""
MAX_SECRET_BYTES = 64 * 1024
SIGNATURE_HEADER = "X-Tuisched-Signature"
"""`v1=HEX`: the HMAC-SHA256, keyed by the secret, of `f"{timestamp}.".encode() + body`."""
TIMESTAMP_HEADER = "X-Tuisched-Timestamp"
"""When the post was sent, in whole seconds since the epoch (UTC); signed with the body."""
SIGNATURE_VERSION = "v1"
"""The scheme's name in the signature (`sha256=` signed the body alone, before issue 27)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WebhookPost:
    """One request to make: everything needed, built off the loop."""

    hook: WebhookSettings
    body: bytes
    sent_at: datetime
    """When this attempt is sent: each retry is signed with its own time."""
    secret: str | None = None


class WebhookPoster(Protocol):
    """Delivers one post, or raises `WebhookError`."""

    async def post(self, request: WebhookPost) -> None:
        """Send `request`; return once the server answered with a 2xx status."""

    async def close(self) -> None:
        """Let go of connections (further posts may open new ones)."""


def read_secret(hook: WebhookSettings, env: Mapping[str, str]) -> str | None:
    """The webhook's secret (blocking: may read a file), or None when it names none.

    Raises:
        WebhookError: the variable is not set, or the file cannot be read, is
            not a regular file, is too large or is empty.
    """
    if hook.secret_env is not None:
        value = env.get(hook.secret_env)
        if not value:
            raise WebhookError(f"webhook {hook.name}: secret_env {hook.secret_env} is not set")
        return value
    if hook.secret_file is not None:
        return _secret_from_file(hook.name, hook.secret_file)
    return None


def _secret_from_file(name: str, path: Path) -> str:
    try:
        if not path.is_file():  # a FIFO would block the read forever
            raise WebhookError(f"webhook {name}: secret_file {path} is not a regular file")
        with path.open("rb") as file:
            data = file.read(MAX_SECRET_BYTES + 1)
    except OSError as error:
        raise WebhookError(
            f"webhook {name}: cannot read secret_file {path}: {error.strerror}"
        ) from None
    secret = data.decode("utf-8", "replace").strip()
    if len(data) > MAX_SECRET_BYTES or not secret:
        raise WebhookError(f"webhook {name}: secret_file {path} is empty or too large")
    return secret


def request_headers(request: WebhookPost) -> dict[str, str]:
    """The headers of `request`: content type, the webhook's own, then the secret's."""
    hook = request.hook
    headers = {"Content-Type": hook.content_type, "User-Agent": "tuisched", **hook.headers}
    if request.secret is not None and hook.auth is WebhookAuth.BEARER:
        headers["Authorization"] = f"Bearer {request.secret}"
    elif request.secret is not None:
        timestamp = str(int(request.sent_at.timestamp()))
        headers[TIMESTAMP_HEADER] = timestamp
        headers[SIGNATURE_HEADER] = signature(request.secret, timestamp, request.body)
    return headers


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """`v1=HEX`: HMAC-SHA256 keyed by `secret` over `{timestamp}.{body}` (see docs/webhooks.md)."""
    signed = timestamp.encode("ascii") + b"." + body
    digest = hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()
    return f"{SIGNATURE_VERSION}={digest}"


@cache
def _lane_resolver() -> type[AbstractResolver]:
    """The resolver class, made at the first post (in the webhook lane's thread, not on
    the loop): defining it imports aiohttp's client."""
    from aiohttp.abc import AbstractResolver, ResolveResult  # noqa: PLC0415  (all of aiohttp)

    class LaneResolver(AbstractResolver):
        """Resolves host names in the webhook lane's threads (never the default pool)."""

        async def resolve(
            self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
        ) -> list[ResolveResult]:
            infos = await in_thread(
                Lane.WEBHOOK, socket.getaddrinfo, host, port, family, socket.SOCK_STREAM
            )
            return [
                ResolveResult(hostname=host, host=str(address[0]), port=int(address[1]),
                              family=family_, proto=proto, flags=socket.AI_NUMERICHOST)
                for family_, _, proto, _, address in infos
            ]  # fmt: skip

        async def close(self) -> None:
            """Nothing to release."""

    return LaneResolver


@dataclass(slots=True)
class HttpPoster:
    """Posts with one aiohttp session, opened at the first post on the running loop; each
    webhook has `max_in_flight` posts at a time of its own, so a silent receiver holds
    only its own posts back, never another webhook's."""

    max_in_flight: int = MAX_IN_FLIGHT
    _session: aiohttp.ClientSession | None = None
    _slots: dict[str, asyncio.Semaphore] = field(default_factory=dict)

    async def post(self, request: WebhookPost) -> None:
        """See `WebhookPoster.post`: redirects are not followed (a 3xx is a failure)."""
        if self._session is None:  # the first post loads the client off the loop
            await in_thread(Lane.WEBHOOK, _lane_resolver)
        import aiohttp  # noqa: PLC0415  (loaded by now: only a lookup)

        session = self._open()
        hook = request.hook
        slots = self._slots.get(hook.name)
        if slots is None:
            slots = self._slots[hook.name] = asyncio.Semaphore(self.max_in_flight)
        timeout = aiohttp.ClientTimeout(total=hook.timeout.total_seconds())
        async with slots:
            try:
                async with session.post(
                    hook.url, data=request.body, headers=request_headers(request),
                    timeout=timeout, allow_redirects=False,
                ) as response:  # fmt: skip
                    status, reason = response.status, response.reason or ""
            except TimeoutError:
                seconds = f"{hook.timeout.total_seconds():g}s"
                raise WebhookError(f"webhook {hook.name}: no answer within {seconds}") from None
            except aiohttp.ClientError as error:
                raise WebhookError(f"webhook {hook.name}: {_scrubbed(error, hook)}") from None
        if not 200 <= status < 300:
            raise WebhookError(f"webhook {hook.name}: HTTP {status} {reason}".rstrip())

    async def close(self) -> None:
        """Close the session; a later post opens a new one."""
        session, self._session = self._session, None
        self._slots = {}
        if session is not None:
            await session.close()

    def _open(self) -> aiohttp.ClientSession:
        import aiohttp  # noqa: PLC0415

        if self._session is None or self._session.closed:
            # No limit across webhooks: each one's semaphore bounds its own connections.
            connector = aiohttp.TCPConnector(limit=0, resolver=_lane_resolver()())
            self._session = aiohttp.ClientSession(connector=connector)
            self._slots = {}
        return self._session


def _scrubbed(error: aiohttp.ClientError, hook: WebhookSettings) -> str:
    """`error` in words, with the URL (which may hold a token) replaced by the name."""
    import aiohttp  # noqa: PLC0415

    if isinstance(error, aiohttp.ClientConnectorError):
        cause = error.os_error
        why = os.strerror(cause.errno) if cause.errno else cause.strerror or type(cause).__name__
        return f"cannot connect to {error.host}:{error.port} ({why})"
    text = str(error).replace(hook.url, hook.name) or type(error).__name__
    return f"{type(error).__name__}: {text}"
