"""The record of what operators did: every action that changes something.

One line per action in `state_dir/actions.log` (0600), appended:
`2026-05-07T09:30:00+02:00 | root@ops1 (console) | pause | job backup`.
Run outcomes stay in the audit log; this says who asked for what.
"""

from __future__ import annotations

import getpass
import os
import socket
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from tuisched.domain.text import plain_text
from tuisched.runtime.handlers.appendfile import AppendFile


def who(origin: str) -> str:
    """`user@host (origin)` for the person at this process."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()} ({origin})"


class ActionLog:
    """Appends one line per operator action (see `AppendFile`). Safe from any thread."""

    def __init__(self, path: Path, tz: ZoneInfo) -> None:
        self.path = path
        self.tz = tz
        self._file: AppendFile | None = None

    def write(self, at: datetime, actor: str, action: str, subject: str) -> None:
        """Record that `actor` did `action` to `subject` at `at` (written off the loop).

        Raises:
            StateError: the file cannot be opened (the first time).
        """
        fields = [at.astimezone(self.tz).isoformat(timespec="seconds"), actor, action, subject]
        line = " | ".join(plain_text(f).replace("\n", " ").replace("|", "¦") for f in fields)
        if self._file is None:
            self._file = AppendFile(self.path, f"the actions log {self.path}")
        self._file.add(line)

    def close(self) -> None:
        """Write what is pending and close the file (blocking). Idempotent."""
        if self._file is not None:
            self._file.close()
