"""Sending alert mail: the `Mailer` protocol, SMTP, and an in-memory twin for tests.

`SmtpMailer` speaks plain SMTP, STARTTLS or implicit TLS (`email.smtp.security`)
with blocking `smtplib` in a worker thread, so the event loop never waits on
the network. The user name and password are read at each send from the
environment variables (or the password file) the configuration names, never
from the configuration itself; they never appear in an error message, a log
line or a repr (SPEC R20a).

Every delivery failure is a `MailError` (a `TuischedError`) whose message says
what went wrong in the operator's words.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import os
import socket
import ssl
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from email.utils import format_datetime, make_msgid
from typing import TYPE_CHECKING, Protocol

from tuisched.domain.errors import MailError
from tuisched.domain.model import Security, SmtpSettings
from tuisched.runtime.threads import Lane, in_thread

if TYPE_CHECKING:  # smtplib and the message class load with the first mail, not at every start
    import smtplib
    from email.message import EmailMessage

log = logging.getLogger(__name__)

SEND_STEPS = 4
"""A whole send may take this many `smtp.timeout`s (connect, greeting, login, data)."""
MAX_SUBJECT = 200
"""Characters kept of a subject; a longer one ends in `…`."""
_HIDDEN = "***"


class Mailer(Protocol):
    """Delivers one message, or raises (a `MailError` for expected failures)."""

    async def send(self, message: EmailMessage) -> None:
        """Hand `message` to the mail system; return once it is accepted."""


# --- building messages ------------------------------------------------------------


def _one_line(text: str) -> str:
    """`text` on one line (a header must not break), cut at `MAX_SUBJECT` characters."""
    line = " ".join(text.split())
    return line if len(line) <= MAX_SUBJECT else line[: MAX_SUBJECT - 1] + "…"


def build_message(
    *,
    sender: str,
    to: Sequence[str],
    subject: str,
    body: str,
    hostname: str,
    date: datetime,
) -> EmailMessage:
    """A plain-text UTF-8 mail with Date and Message-ID headers.

    Args:
        sender: the From address (`"Name <addr>"` or a bare address).
        to: the recipients, all in one To header.
        subject: its line breaks and runs of blanks become single spaces.
        body: the text; non-ASCII text is sent quoted-printable, so any server takes it.
        hostname: the domain of the Message-ID.
        date: the Date header (aware).
    """
    from email.message import EmailMessage  # noqa: PLC0415

    message = EmailMessage()
    message["From"] = sender
    message["To"] = ", ".join(to)
    message["Subject"] = _one_line(subject)
    message["Date"] = format_datetime(date)
    message["Message-ID"] = make_msgid(domain=hostname or "localhost")
    cte = None if body.isascii() else "quoted-printable"
    message.set_content(body, charset="utf-8", cte=cte)
    return message


# --- SMTP ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Login:
    """A user name and password for SMTP AUTH; the password stays out of reprs."""

    username: str
    password: str = field(repr=False)

    def hide(self, text: str) -> str:
        """`text` with the password replaced, in case a server echoed it back: as typed,
        and as AUTH PLAIN and AUTH LOGIN send it (base64)."""
        if not self.password:
            return text
        for secret in self._forms():
            text = text.replace(secret, _HIDDEN)
        return text

    def _forms(self) -> list[str]:
        """The password as a server may echo it: plain, and base64 as the AUTH exchanges
        carry it (LOGIN: the password alone; PLAIN: NUL, user, NUL, password)."""
        plain = f"\0{self.username}\0{self.password}".encode()
        encoded = [base64.b64encode(self.password.encode()), base64.b64encode(plain)]
        return [self.password, *(form.decode("ascii") for form in encoded)]


def _env_value(env: Mapping[str, str], name: str, what: str) -> str:
    value = env.get(name)
    if value is None:
        raise MailError(f"email.smtp.{what}: environment variable {name} is not set")
    return value


def _read_login(smtp: SmtpSettings, env: Mapping[str, str]) -> _Login | None:
    """The credentials the settings name, or None when no login is configured.

    Raises:
        MailError: a named variable is unset or the password file unreadable.
    """
    if smtp.username_env is None:
        if smtp.password_env is not None or smtp.password_file is not None:
            raise MailError("email.smtp: a password is configured but no username_env")
        return None
    username = _env_value(env, smtp.username_env, "username_env")
    if smtp.password_env is not None:
        return _Login(username, _env_value(env, smtp.password_env, "password_env"))
    if smtp.password_file is not None:
        try:
            return _Login(username, smtp.password_file.read_text(encoding="utf-8").strip())
        except (OSError, UnicodeDecodeError) as error:
            reason = error.strerror if isinstance(error, OSError) else "not UTF-8"
            raise MailError(f"email.smtp.password_file {smtp.password_file}: {reason}") from None
    return _Login(username, "")


def _describe(error: BaseException) -> str:
    """An operator's account of an smtplib or network failure."""
    import smtplib  # noqa: PLC0415

    if isinstance(error, smtplib.SMTPRecipientsRefused):
        refused = ", ".join(
            f"{address} ({code})" for address, (code, _) in error.recipients.items()
        )
        return f"recipients refused: {refused}"
    if isinstance(error, smtplib.SMTPResponseException):
        text = (
            error.smtp_error.decode(errors="replace")
            if isinstance(error.smtp_error, bytes)
            else str(error.smtp_error)
        )
        return f"server said {error.smtp_code} {text}"
    if isinstance(error, ssl.SSLError | ssl.CertificateError):
        return f"TLS failed: {error}"
    if isinstance(error, TimeoutError) or (
        isinstance(error, smtplib.SMTPServerDisconnected) and str(error).endswith("timed out")
    ):
        return "timed out"
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


class SmtpMailer:
    """Sends through the SMTP server of `email.smtp`, one connection per message."""

    def __init__(
        self,
        smtp: SmtpSettings,
        *,
        env: Mapping[str, str] | None = None,
        ssl_context: ssl.SSLContext | None = None,
        local_hostname: str | None = None,
    ) -> None:
        """Prepare to send; nothing is read or connected before `send`.

        Args:
            smtp: the server, its security and the names of the credentials.
            env: where `username_env`/`password_env` are looked up (default
                `os.environ`), read at each send so a rotated secret applies.
            ssl_context: for STARTTLS and TLS (default: the system's trust
                store with host name checks).
            local_hostname: the name sent in EHLO (default: this host's name).
        """
        self._smtp = smtp
        self._env = os.environ if env is None else env
        self._ssl = ssl_context or ssl.create_default_context()
        self._local_hostname = local_hostname or socket.gethostname()

    def __repr__(self) -> str:
        smtp = self._smtp
        return f"SmtpMailer({smtp.host}:{smtp.port}, security={smtp.security.value})"

    async def send(self, message: EmailMessage) -> None:
        """Deliver `message` from a mail lane thread, within `smtp.timeout` per network
        step and `SEND_STEPS` times that in all.

        Cancelling the send (the scheduler stops) or running out of time cuts
        the connection, so the lane's thread is free again at once.

        Raises:
            MailError: the credentials are missing, or the server could not be
                reached, refused the login or every recipient, went away or did
                not answer in time.
        """
        connection = _Connection()
        budget = self._smtp.timeout.total_seconds() * SEND_STEPS
        try:
            await asyncio.wait_for(in_thread(Lane.MAIL, self._send, message, connection), budget)
        except TimeoutError:
            where = f"{self._smtp.host}:{self._smtp.port}"
            raise MailError(f"SMTP {where}: no answer within {budget:g} s in all") from None
        finally:
            connection.cut()

    def _send(self, message: EmailMessage, connection: _Connection) -> None:
        import smtplib  # noqa: PLC0415

        login = _read_login(self._smtp, self._env)
        try:
            with self._client() as client:
                connection.opening(client)
                client.connect(self._smtp.host, self._smtp.port)
                self._deliver(client, message, login)
        except (smtplib.SMTPException, OSError, ValueError) as error:
            where = f"{self._smtp.host}:{self._smtp.port}"
            text = "cut short" if connection.was_cut else _describe(error)
            # from None: the chained error could carry what the server echoed of the login.
            raise MailError(f"SMTP {where}: {login.hide(text) if login else text}") from None

    def _client(self) -> smtplib.SMTP:
        """An SMTP client, not connected yet (so that its socket can be cut while it waits)."""
        import smtplib  # noqa: PLC0415

        timeout = self._smtp.timeout.total_seconds()
        client: smtplib.SMTP
        if self._smtp.security is Security.TLS:
            client = smtplib.SMTP_SSL(
                local_hostname=self._local_hostname, timeout=timeout, context=self._ssl
            )
        else:
            client = smtplib.SMTP(local_hostname=self._local_hostname, timeout=timeout)
        # The name TLS checks the certificate against; smtplib sets it only when the
        # constructor connects (`connect()` does not), and that would wait uncut.
        client._host = self._smtp.host  # type: ignore[attr-defined]
        return client

    def _deliver(self, client: smtplib.SMTP, message: EmailMessage, login: _Login | None) -> None:
        if self._smtp.security is Security.STARTTLS:
            client.starttls(context=self._ssl)
        if login is not None:
            client.login(login.username, login.password)
        refused = client.send_message(message)
        if refused:
            log.warning("SMTP server refused some recipients: %s", ", ".join(refused))


class _Connection:
    """The client of a send in progress, so that the loop can cut it short.

    `cut()` (from the loop) shuts the client's socket down: a thread blocked
    reading from a silent server wakes with an error at once. A cut that
    comes before the socket exists makes the thread stop at its next step.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._client: smtplib.SMTP | None = None
        self.was_cut = False

    def opening(self, client: smtplib.SMTP) -> None:
        with self._lock:
            if self.was_cut:
                raise OSError("cut short before connecting")
            self._client = client

    def cut(self) -> None:
        with self._lock:
            if self._client is None:
                self.was_cut = True
                return
            client, self._client = self._client, None
            self.was_cut = True
        sock = getattr(client, "sock", None)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


# --- the in-memory twin ---------------------------------------------------------------


class RecordingMailer:
    """A `Mailer` that keeps messages in `messages`; it can be told to fail.

    `fail_next(n)` makes the next `n` sends raise `MailError`; `block()` makes
    sends wait until `release()` (to test shutdown with mail in flight).
    """

    def __init__(self) -> None:
        self.messages: list[EmailMessage] = []
        """Every message accepted, in order."""
        self.attempts = 0
        """Every send, accepted or not."""
        self._failures = 0
        self._open = asyncio.Event()
        self._open.set()

    def fail_next(self, count: int = 1) -> None:
        """Make the next `count` sends fail."""
        self._failures = count

    def block(self) -> None:
        """Make sends wait until `release()`."""
        self._open.clear()

    def release(self) -> None:
        """Let waiting and later sends through."""
        self._open.set()

    async def send(self, message: EmailMessage) -> None:
        """Record `message`, or raise `MailError` if told to fail."""
        self.attempts += 1
        await self._open.wait()
        if self._failures > 0:
            self._failures -= 1
            raise MailError("refused: the recording mailer was told to fail")
        self.messages.append(message)
