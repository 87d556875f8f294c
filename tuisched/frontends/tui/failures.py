"""Failed runs told as one notice per burst, not one per run.

No widgets here. A scheduler whose database went away fails a dozen jobs in
the same second; a notice each would cover the screen and push each other
away before they can be read. `FailureNotices` holds the failures heard
within `WINDOW` seconds of the first and tells them in one line: the one
failure as before (`backup failed: exit 1`), or `12 runs failed: backup,
report, ... - 3: the audit log`, the audit pane holding a line for each.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

WINDOW = 1.5
"""Seconds a burst is gathered for, from its first failure."""
NAMED = 5
"""How many job names a burst's notice lists."""
WHERE = "3: the audit log"
"""Where the operator finds every failure of the burst."""


@dataclass(frozen=True, slots=True)
class Failure:
    """One run that failed: its job and the job's own words (`exit 1`, a reason)."""

    job: str
    words: str


@dataclass(slots=True)
class FailureNotices:
    """Gathers failures into bursts; the caller tells `due()` when the window ends."""

    _held: list[Failure] = field(default_factory=list)

    def add(self, failures: list[Failure]) -> bool:
        """Hold `failures`; True when they begin a burst (the caller then waits WINDOW)."""
        began = not self._held and bool(failures)
        self._held.extend(failures)
        return began

    def due(self) -> str | None:
        """The burst's notice (None if nothing was held); the next failure begins anew."""
        told = self.take()
        return None if told is None else told[0]

    def take(self) -> tuple[str, str | None] | None:
        """The burst's notice and its job when it is about one job (a mute then applies);
        None if nothing was held. The next failure begins anew."""
        held, self._held = self._held, []
        if not held:
            return None
        if len(held) == 1:
            return self.told(held[0]), held[0].job
        # By name, not by the order they failed in: the same jobs failing together again
        # give the same notice, which then counts on its line instead of adding one.
        jobs = sorted({failure.job for failure in held}, key=_natural)
        named = ", ".join(jobs[:NAMED]) + (", ..." if len(jobs) > NAMED else "")
        return f"{len(held)} runs failed: {named} - {WHERE}", jobs[0] if len(jobs) == 1 else None

    @staticmethod
    def told(failure: Failure) -> str:
        """How one failure is told."""
        return f"{failure.job} failed: {failure.words}"


def _natural(name: str) -> list[str | int]:
    """Sorts `job2` before `job10`: the runs of ASCII digits compare as numbers."""
    parts: list[str | int] = re.split(r"([0-9]+)", name)
    return [int(part) if n % 2 else part for n, part in enumerate(parts)]
