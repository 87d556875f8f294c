"""One line that says what to fix, for a PostgreSQL connection that failed.

Shared by the cluster's store and a single node's history in PostgreSQL
(`settings.history: postgresql://...`). libpq's messages are matched on
their stable English wording; anything else is passed on in its first line.
The URL shown never holds a password.
"""

from __future__ import annotations

import os
import socket
from urllib.parse import urlsplit, urlunsplit

CONNECT_SECONDS = 5
"""How long one connection attempt may take (a silent host, a blackhole)."""


def redacted(url: str) -> str:
    """`url` as it may be shown: never with a password."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


_EXPLAINED = (
    ("password authentication failed", "the database at {shown} refused the password of role "
     "'{user}': check {password}"),
    ("no password supplied", "the database at {shown} asks for a password: set {password}"),
    ("does not exist", "the database server at {host}:{port} says: {said}; fix {setting}, or "
     "create what is missing"),
    ("connection refused", "nothing accepts connections at {host}:{port}: is PostgreSQL "
     "running there, and listening on TCP?"),
    ("could not translate host name", "unknown host '{host}' in {setting}"),
    ("failed to resolve host", "unknown host '{host}' in {setting}"),
    ("timeout expired", "no answer from the database at {host}:{port} within {seconds} s: "
     "check the host, the port and any firewall"),
)  # fmt: skip


def explain(said: str, url: str, *, setting: str, password: str) -> str:
    """What to fix, for the driver's message `said` about a connection to `url`;
    `setting` names where the URL is set, `password` where the password comes from."""
    lowered = said.lower()
    parts = urlsplit(url)
    fatal = said.rsplit("FATAL:", 1)[-1].strip().splitlines()[0] if "FATAL:" in said else ""
    fields = {
        "shown": redacted(url), "user": parts.username or os.environ.get("USER", ""),
        "host": parts.hostname or socket.gethostname(), "port": parts.port or 5432,
        "seconds": CONNECT_SECONDS, "said": fatal, "setting": setting, "password": password,
    }  # fmt: skip
    for needle, template in _EXPLAINED:
        if needle in lowered:
            return template.format(**fields)
    first = said.strip().splitlines()[0] if said.strip() else "unknown error"
    return f"cannot connect to the database at {redacted(url)}: {first}"
