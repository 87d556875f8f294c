"""Real SMTP servers on loopback (aiosmtpd), for the mailer and alert tests.

`smtp_server(...)` starts a server in its own thread on a free port and
yields a `Server` whose `handler` records what arrived. Variants: STARTTLS or
implicit TLS with trustme certificates, AUTH checked against one user name and
password, a handler that refuses some recipients, and one that hangs up.
"""

from __future__ import annotations

import base64
import email
import errno
import socket
import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from email.message import EmailMessage
from email.policy import default as default_policy
from typing import Any

import trustme
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP as SMTPServer
from aiosmtpd.smtp import AuthResult, Envelope, LoginPassword, Session

HOST = "127.0.0.1"


def free_port() -> int:
    """A TCP port free on loopback now (aiosmtpd's Controller cannot take port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        port: int = probe.getsockname()[1]
    return port


class Recording:
    """An aiosmtpd handler that keeps every message and who sent it how."""

    def __init__(self) -> None:
        self.envelopes: list[Envelope] = []

    @property
    def messages(self) -> list[EmailMessage]:
        """The messages received, parsed."""
        return [_parse(envelope) for envelope in self.envelopes]

    async def handle_DATA(self, server: SMTPServer, session: Session, envelope: Envelope) -> str:
        self.envelopes.append(envelope)
        return "250 OK"


class Refusing(Recording):
    """Refuses every recipient at `refused_domain` with a 550; takes the others."""

    def __init__(self, refused_domain: str = "refused.example") -> None:
        super().__init__()
        self.refused_domain = refused_domain

    async def handle_RCPT(
        self,
        server: SMTPServer,
        session: Session,
        envelope: Envelope,
        address: str,
        rcpt_options: list[str],
    ) -> str:
        if address.endswith("@" + self.refused_domain):
            return "550 5.1.1 no such user here"
        envelope.rcpt_tos.append(address)
        return "250 OK"


class HangingUp(Recording):
    """Drops the connection in the middle of the first `times` sessions (after MAIL FROM)."""

    def __init__(self, times: int) -> None:
        super().__init__()
        self.times = times

    async def handle_MAIL(
        self,
        server: SMTPServer,
        session: Session,
        envelope: Envelope,
        address: str,
        mail_options: list[str],
    ) -> str:
        if self.times > 0:
            self.times -= 1
            assert server.transport is not None
            server.transport.close()
            return "421 going away"
        envelope.mail_from = address
        return "250 OK"


def _parse(envelope: Envelope) -> EmailMessage:
    content = envelope.original_content or b""
    message = email.message_from_bytes(content, policy=default_policy)
    assert isinstance(message, EmailMessage)
    return message


class Credentials:
    """An aiosmtpd authenticator that accepts exactly one user name and password."""

    def __init__(self, username: str, password: str) -> None:
        self.username = username.encode()
        self.password = password.encode()
        self.accepted: list[bytes] = []
        """User names logged in with."""

    def __call__(
        self, server: SMTPServer, session: Session, envelope: Envelope, mechanism: str, data: Any
    ) -> AuthResult:
        if not isinstance(data, LoginPassword):
            return AuthResult(success=False, handled=False)
        ok = data.login == self.username and data.password == self.password
        if ok:
            self.accepted.append(data.login)
        return AuthResult(success=ok, handled=False)


class Echoing(Credentials):
    """Refuses every login, echoing what it was sent back in its reply, as AUTH PLAIN
    carries it (base64 of NUL, user, NUL, password) and as AUTH LOGIN does."""

    def __call__(
        self, server: SMTPServer, session: Session, envelope: Envelope, mechanism: str, data: Any
    ) -> AuthResult:
        if not isinstance(data, LoginPassword):
            return AuthResult(success=False, handled=False)
        plain = base64.b64encode(b"\0" + data.login + b"\0" + data.password).decode()
        login = base64.b64encode(data.password).decode()
        said = f"535 5.7.8 no such pair: {plain} {login}"
        return AuthResult(success=False, handled=False, message=said)


@dataclass
class Server:
    """A running test server: where it is, and what it received."""

    host: str
    port: int
    handler: Recording


@dataclass
class Certificates:
    """A test CA and a server certificate for 127.0.0.1 and localhost."""

    ca: trustme.CA
    server: ssl.SSLContext

    def client(self) -> ssl.SSLContext:
        """A client context that trusts the test CA (and only it)."""
        context = ssl.create_default_context()
        self.ca.configure_trust(context)
        return context


def certificates() -> Certificates:
    """Fresh test certificates."""
    ca = trustme.CA()
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(HOST, "localhost").configure_cert(server)
    return Certificates(ca=ca, server=server)


@contextmanager
def smtp_server(
    handler: Recording | None = None,
    *,
    starttls: ssl.SSLContext | None = None,
    tls: ssl.SSLContext | None = None,
    auth: Credentials | None = None,
) -> Iterator[Server]:
    """An SMTP server on loopback for the duration of the block.

    Args:
        handler: records (and maybe refuses); default a plain `Recording`.
        starttls: the server's TLS context; STARTTLS is then required.
        tls: the server's TLS context for implicit TLS (SMTPS).
        auth: require AUTH with these credentials (only over TLS).
    """
    handler = handler or Recording()
    options: dict[str, Any] = {}
    if starttls is not None:
        options.update(tls_context=starttls, require_starttls=True)
    if auth is not None:
        options.update(authenticator=auth, auth_required=True, auth_require_tls=True)
    controller, port = _started(handler, tls, options)
    try:
        yield Server(HOST, port, handler)
    finally:
        controller.stop()


def _started(
    handler: Recording, tls: ssl.SSLContext | None, options: dict[str, Any]
) -> tuple[Controller, int]:
    """A started controller on a free port, and the port.

    The port is free when probed, but a parallel test worker may bind it before the
    controller does: then another one is tried."""
    tries = 3
    while True:
        port = free_port()
        controller = Controller(handler, hostname=HOST, port=port, ssl_context=tls, **options)
        try:
            controller.start()
        except OSError as error:
            tries -= 1
            if error.errno != errno.EADDRINUSE or tries == 0:
                raise
        else:
            return controller, port
