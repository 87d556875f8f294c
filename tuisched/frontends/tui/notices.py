"""Every notice the console gave, and the jobs whose notices the operator muted.

No widgets here. A notice shows for a few seconds on the notice line (the
bottom line of the screen), then lives on in the messages view (`M`): the
newest `LIMIT` of them, each once, with how many times it was given. A job
failing every nine seconds is one entry, `backup failed: exit 1 (x40)`, not
forty; muting the job keeps its notices off the notice line but not out of
the log (its failures still count on the status line and still alert).
The log lives as long as the console: a console that detaches or attaches
anew starts with an empty one, and no job muted.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from textual.notifications import SeverityLevel

LIMIT = 1_000
"""How many different notices the log keeps (the oldest go first)."""
TIMEOUTS = {"information": 5.0, "warning": 8.0, "error": 15.0}
"""Seconds a notice stays on the notice line, by severity: errors longest."""
SEVERITY_WORDS = {"information": "info", "warning": "warning", "error": "error"}
"""How the messages view names each severity (words, not only colours)."""


class Tell(Protocol):
    """Gives a notice (the console's `notify`), about a job when `job` is set."""

    def __call__(
        self, message: str, *, severity: SeverityLevel, markup: bool, job: str | None
    ) -> None: ...


@dataclass(slots=True)
class Entry:
    """One notice, and how often it was given: the last time, the first, the count."""

    text: str
    severity: str
    job: str | None
    first: datetime
    last: datetime
    count: int = 1

    @property
    def shown(self) -> str:
        """The text with its count once repeated: `backup failed: exit 1 (x5)`."""
        return self.text if self.count == 1 else f"{self.text} (x{self.count})"


class NoticeLog:
    """The console's notices, newest last, repeats collapsed; the muted jobs."""

    def __init__(self, limit: int = LIMIT) -> None:
        self._entries: OrderedDict[tuple[str, str], Entry] = OrderedDict()
        self._limit = limit
        self.muted: set[str] = set()
        """The jobs whose notices stay off the notice line (this console session)."""
        self.version = 0
        """Counts every change (a view redraws when it moved)."""

    def add(self, text: str, severity: str, at: datetime, job: str | None = None) -> Entry:
        """Log a notice; the same text at the same severity again counts on its entry,
        which becomes the newest."""
        key = (severity, text)
        entry = self._entries.pop(key, None)
        if entry is None:
            entry = Entry(text, severity, job, first=at, last=at)
        else:
            entry.count += 1
            entry.last = at
        self._entries[key] = entry
        while len(self._entries) > self._limit:
            self._entries.popitem(last=False)
        self.version += 1
        return entry

    def entries(self) -> list[Entry]:
        """Every notice kept, newest first."""
        return list(reversed(self._entries.values()))

    def silenced(self, job: str | None) -> bool:
        """Whether a notice about `job` stays off the notice line."""
        return job is not None and job in self.muted

    def toggle_mute(self, job: str) -> bool:
        """Mute `job`'s notices, or unmute them; True when they are muted now."""
        if job in self.muted:
            self.muted.discard(job)
        else:
            self.muted.add(job)
        self.version += 1
        return job in self.muted
