"""How the command line tells a refused run: `trigger`, with or without `--wait`.

Its own module so that `operations` (the plain verbs) and `following` (`trigger
--wait`, which `operations` opens lazily) both say it without importing each other.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

from tuisched.domain.errors import RunRefusedError, one_line

if TYPE_CHECKING:
    from zoneinfo import ZoneInfo


def say_refused(error: RunRefusedError, zone: ZoneInfo | None, *, queued: bool) -> int:
    """Tell a refused trigger: one line on stderr (naming `--queue` when it would be
    taken that way), or with a `zone` (`history --json`'s) a JSON object on stdout; the
    exit status (1)."""
    refusal = error.refusal
    if zone is None:
        hint = "; --queue starts it once that run ends" if refusal.queueable and not queued else ""
        print(f"tuisched: {one_line(str(error))}{hint}", file=sys.stderr)
        return 1
    blocking = None
    if refusal.run_id:
        since = refusal.since.astimezone(zone).isoformat() if refusal.since else None
        blocking = {"run_id": refusal.run_id, "since": since}
    answer = {"job": refusal.job, "refused": refusal.reason, "blocking_run": blocking,
              "queueable": refusal.queueable and not queued}  # fmt: skip
    print(json.dumps(answer))
    return 1
