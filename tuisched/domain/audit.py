"""The audit line of a run (SPEC R15): one line, five fields, safe for any tool to split.

Each line has five fields separated by `" | "`::

    job name | launch time | stop time | scheduler result | job status

Times are ISO 8601 with the offset of the scheduler's zone, to the second, and
`-` where a run has none. Fields never contain a newline, a control character
or a `|` (replaced by spaces and `¦`), so a line always splits into five.
"""

from __future__ import annotations

import math
import unicodedata
from datetime import datetime
from zoneinfo import ZoneInfo

from tuisched.domain.runs import RunRecord, RunState

SEPARATOR = " | "
ABSENT = "-"
"""A field with nothing to say."""
MAX_FIELD = 1000
"""Characters kept of a field (a job's last output line can be huge); the cut ends in `…`."""

_NO_LAUNCH = (RunState.NOT_STARTED, RunState.MISSED)
_BLANKED = frozenset({"Cc", "Zl", "Zp"})
"""Unicode categories that would break a line: control characters, line and paragraph separators."""


def _clean(text: str) -> str:
    """`text` made safe for one field: no line breaks or control characters, no `|`."""
    if not text.isprintable() or "|" in text:
        blanked = (" " if unicodedata.category(char) in _BLANKED else char for char in text)
        text = "".join(blanked).replace("|", "¦")
    text = text.strip() or ABSENT
    return text if len(text) <= MAX_FIELD else text[: MAX_FIELD - 1] + "…"


_SECONDS_KEPT = 512
"""Seconds whose text `_time` remembers: the runs of a burst end in the same few seconds."""
_seconds: dict[tuple[ZoneInfo, int], str] = {}


def _time(moment: datetime | None, tz: ZoneInfo) -> str:
    """`moment` in `tz`, ISO 8601 to the second, or `-`.

    The text of a second is remembered: a zone's `astimezone` is most of a
    line's cost, and a burst's thousands of runs share a few seconds.
    """
    if moment is None:
        return ABSENT
    key = (tz, math.floor(moment.timestamp()))
    text = _seconds.get(key)
    if text is None:
        if len(_seconds) >= _SECONDS_KEPT:
            _seconds.clear()
        text = _seconds[key] = moment.astimezone(tz).isoformat(timespec="seconds")
    return text


def _status(run: RunRecord, tz: ZoneInfo) -> str:
    """What the job said: its status, else the scheduler's reason; a missed slot names itself."""
    if run.state is RunState.MISSED and run.slot is not None:
        return f"missed slot {_time(run.slot, tz)}"
    return run.status.strip() or run.reason.strip() or ABSENT


def audit_line(run: RunRecord, tz: ZoneInfo) -> str:
    """The audit line of `run`, without a line break.

    A run that never launched (NOT_STARTED, MISSED) has `-` as its launch time
    even if the engine noted one. The result is `run.result.value`, `-` if unset.
    """
    launched = None if run.state in _NO_LAUNCH else run.started_at
    fields = (
        _clean(run.job),
        # Our own texts: ISO times and result names need no cleaning.
        _time(launched, tz),
        _time(run.ended_at, tz),
        ABSENT if run.result is None else run.result.value,
        _clean(_status(run, tz)),
    )
    return SEPARATOR.join(fields)
