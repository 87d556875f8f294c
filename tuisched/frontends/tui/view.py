"""What the console shows, as plain rows: formatting only, no widgets, no I/O.

Results are shown as a glyph and a word, never by colour alone.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from rich.cells import cell_len, set_cell_size

from tuisched.domain.runs import Result, RunRecord, RunState
from tuisched.domain.schedule.duration import format_elapsed
from tuisched.domain.text import plain_text
from tuisched.domain.views import JobState, JobStatus, RunStatus

RESULT_WORDS: dict[RunState, tuple[str, str]] = {
    RunState.SUCCESS: ("✔", "ok"),
    RunState.FAILED: ("✘", "failed"),
    RunState.NOT_STARTED: ("⊘", "not started"),
    RunState.MISSED: ("◌", "missed"),
    RunState.ABANDONED: ("?", "abandoned"),
    RunState.RUNNING: ("▶", "running"),
    RunState.QUEUED: ("…", "queued"),
    RunState.WAITING: ("⧗", "waiting"),
}
"""Glyph and word for each state; the word alone must be enough."""


STOPPED_WORDS: dict[Result, str] = {
    Result.STOPPED: "■ stopped",
    Result.SHUTDOWN: "■ shutdown",
    Result.TIMED_OUT: "✘ timed out",
}
"""Results that say more than the state: stopped by a person is not failed."""


def result_text(run: RunRecord | None) -> str:
    """`✔ ok`, `✘ failed`, `■ stopped`... or `-` for a job that never ran."""
    if run is None:
        return "-"
    if run.result in STOPPED_WORDS and run.state is not RunState.SUCCESS:
        return STOPPED_WORDS[run.result]
    glyph, word = RESULT_WORDS[run.state]
    return f"{glyph} {word}"


def is_failure(run: RunRecord) -> bool:
    """A failure of the job itself (not stopped by a person or a shutdown)."""
    if run.result is Result.LAUNCH_FAILED:
        return True
    return run.state is RunState.FAILED and run.result not in (Result.STOPPED, Result.SHUTDOWN)


def relative(moment: datetime | None, now: datetime) -> str:
    """`in 4m`, `in 2h05m`, `3m ago`, `now`, or `-`."""
    if moment is None:
        return "-"
    delta = moment - now
    seconds = abs(delta.total_seconds())
    if seconds < 1:
        return "now"
    text = _short(timedelta(seconds=seconds))
    return f"in {text}" if delta.total_seconds() > 0 else f"{text} ago"


def _short(span: timedelta) -> str:
    # Seconds only in the last minute: a row then changes once a minute, not every
    # second, which keeps an idle console with thousands of jobs from repainting.
    seconds = int(span.total_seconds())
    if seconds < 60:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    if hours < 10:
        return f"{hours}h{minutes:02d}m"
    if hours < 48:
        return f"{hours}h"
    return f"{hours // 24}d"


def when(moment: datetime | None, now: datetime, tz: ZoneInfo) -> str:
    """Relative and absolute: `in 4m (09:30)`; the date too when it is not today."""
    if moment is None:
        return "-"
    local = moment.astimezone(tz)
    days = (local.date() - now.astimezone(tz).date()).days
    shape = "%H:%M" if days == 0 else "%a %H:%M" if 0 < days < 7 else "%m-%d %H:%M"
    return f"{relative(moment, now)} ({local.strftime(shape)})"


MINUTES_SHAPE = "%H:%M"
SECONDS_SHAPE = "%H:%M:%S"
"""How a list of slots shows their times: to the minute, or to the second when any
slot needs it (`has_seconds`)."""


def has_seconds(moments: Iterable[datetime]) -> bool:
    """Whether a list of slots needs seconds to tell them apart or to say them right: a
    slot off the whole minute (every slot of a sub-minute schedule but one in sixty is)."""
    return any(moment.second or moment.microsecond for moment in moments)


@dataclass(frozen=True, slots=True)
class JobRow:
    """A line of the jobs pane."""

    name: str
    kind: str
    schedule: str
    next_run: str
    last: str
    state: str
    groups: str


def state_text(status: JobStatus) -> str:
    """The state word of the jobs pane: `running (2)` when more than one run is running."""
    if status.state is JobState.RUNNING and status.running > 1:
        return f"running ({status.running})"
    return status.state.value


def job_row(status: JobStatus, *, now: datetime, tz: ZoneInfo) -> JobRow:
    """The jobs pane's row for a job."""
    return JobRow(
        name=status.name,
        kind=status.kind,
        schedule=status.trigger,
        next_run=when(status.next_fire, now, tz),
        last=result_text(status.last),
        state=state_text(status),
        groups=", ".join(status.groups) or "-",
    )


@dataclass(frozen=True, slots=True)
class RunRow:
    """A line of the running pane."""

    job: str
    run_id: str
    pid: str
    started: str
    elapsed: str
    trigger: str
    last_line: str
    node: str = ""
    """The node that runs it (in cluster mode, `host:pid:random`)."""


def run_row(status: RunStatus, *, now: datetime, tz: ZoneInfo) -> RunRow:
    """The running pane's row for a run RUNNING, QUEUED or WAITING."""
    run = status.run
    started = run.started_at
    if run.state is RunState.RUNNING and started is not None:
        began, elapsed = started.astimezone(tz).strftime("%H:%M:%S"), format_elapsed(now - started)
    else:
        began, elapsed = RESULT_WORDS[run.state][1], "-"
    return RunRow(
        job=run.job,
        run_id=run.run_id,
        pid=str(run.pid) if run.pid else "-",
        started=began,
        elapsed=elapsed,
        trigger=run.trigger.value,
        last_line=plain_text(status.live_status or run.reason)[:200],
        node=plain_text(run.node),
    )


# --- short forms: a cell's text fits its column whole, or in a defined shorter form --------

ELLIPSIS = "…"
"""Ends a text shortened by dropping words (or a name cut to fit): never a silent cut."""
_SCHEDULE_SHORTER: tuple[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]], ...] = (
    (re.compile(r" \(cron [^)]*\)"), ""),  # the words say it; the expression is in the detail
    (re.compile(r" from \d{4}-\d\d-\d\d \d\d:\d\d(?::\d\d)?"), ""),
    (re.compile(r" until \d{4}-\d\d-\d\d \d\d:\d\d(?::\d\d)?"), ""),
    (re.compile(r"\b(\d+) (second|minute|hour|day|week)s\b"), lambda m: f"{m[1]}{m[2][0]}"),
    (re.compile(r"\b(Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)day\b"), lambda m: m[1][:3]),
    (re.compile(r" \(\+\w+\)$"), ""),  # after a job: its delay
    (re.compile(r" succeeds$"), ""),  # after a job: success is what `after` means unless told
)
"""Each step shortens a schedule in words a little more, keeping what matters most."""


def schedule_forms(text: str) -> list[str]:
    """A schedule in words, then ever shorter forms of it, each meaning the same job:
    `every 10 minutes from 2026-06-01 08:20` ... `every 10m`; `after 'check' succeeds
    (+10s)` ... `after 'check'`. The full text is in the job's detail."""
    forms = [text]
    for pattern, replacement in _SCHEDULE_SHORTER:
        shorter = pattern.sub(replacement, forms[-1])
        if shorter != forms[-1]:
            forms.append(shorter)
    return forms


def lead_forms(text: str) -> list[str]:
    """`in 4m (09:30)` then `in 4m`; `running (2)` then `running`: the part before the
    parenthesis says the most."""
    head = text.split(" (", maxsplit=1)[0]
    return [text, head] if head != text else [text]


def group_forms(text: str) -> list[str]:
    """`nightly, backups, db` then `nightly +2`."""
    groups = text.split(", ")
    return [text, f"{groups[0]} +{len(groups) - 1}"] if len(groups) > 1 else [text]


def whole_forms(text: str) -> list[str]:
    """A text with no shorter form."""
    return [text]


def fit(forms: Sequence[str], width: int) -> str:
    """The first of `forms` that fits `width` cells; else the last one's first words and
    `…` (a word is never cut), or `…` alone."""
    for form in forms:
        if cell_len(form) <= width:
            return form
    words = forms[-1].split(" ")
    for count in range(len(words) - 1, 0, -1):
        shown = " ".join(words[:count]) + " " + ELLIPSIS
        if cell_len(shown) <= width:
            return shown
    return ELLIPSIS if width >= 1 else ""


def fit_name(name: str, width: int) -> str:
    """A job's name in `width` cells: whole, or cut with `…` at its end (a name is one
    word, and its row needs it; the detail and the why line show it whole)."""
    if cell_len(name) <= width:
        return name
    return set_cell_size(name, max(0, width - 1)) + ELLIPSIS if width >= 1 else ""
