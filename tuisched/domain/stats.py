"""History stats and retention, as pure functions of rows and `now`.

The stores read the rows (only the columns these need) and the database does
the filtering; what is left here is what SQLite cannot do portably:
percentiles. Durations use the nearest-rank method, so a p95 is always the
duration of a real run.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from tuisched.domain.errors import TuischedError
from tuisched.domain.runs import RunRecord, RunState
from tuisched.domain.schedule.duration import parse_duration
from tuisched.domain.schedule.slots import localize
from tuisched.domain.views import HistoryQuery, HistoryStats, JobStats, StatsQuery

COUNTED = (RunState.SUCCESS, RunState.FAILED, RunState.ABANDONED)
"""The states of the runs stats count: they started, then ended."""
FAILED = (RunState.FAILED, RunState.ABANDONED)
DEFAULT_WINDOW = timedelta(days=7)
"""The window of `tuisched stats` when `--since` is not given."""


@dataclass(frozen=True, slots=True)
class StatRow:
    """The columns of one counted run that stats need."""

    job: str
    run_id: str
    state: RunState
    result: str | None
    duration: timedelta | None
    """How long it ran (never negative), or None."""
    ended_at: datetime | None
    """When it ended (the stores fill it in for failures only: nothing else reads it)."""


def percentile(ordered: Sequence[timedelta], share: float) -> timedelta | None:
    """The nearest-rank percentile of sorted `ordered` (share 0.5 = median), or None."""
    if not ordered:
        return None
    rank = max(1, math.ceil(share * len(ordered)))
    return ordered[rank - 1]


def job_stats(job: str, rows: Iterable[StatRow]) -> JobStats:
    """The stats of `job` from its counted `rows` (any order)."""
    listed = list(rows)
    timed = sorted(
        ((row.duration, row.run_id) for row in listed if row.duration is not None),
        key=lambda pair: pair[0],
    )
    durations = [duration for duration, _ in timed]
    failures = [row for row in listed if row.state in FAILED]
    last = max(failures, key=_ended, default=None)
    return JobStats(
        job=job,
        runs=len(listed),
        successes=sum(row.state is RunState.SUCCESS for row in listed),
        failures=len(failures),
        p50=percentile(durations, 0.5),
        p95=percentile(durations, 0.95),
        slowest_run=timed[-1][1] if timed else None,
        slowest=timed[-1][0] if timed else None,
        last_failure_at=last.ended_at if last else None,
        last_failure=_failure_words(last) if last else "",
    )


def stats_by_job(rows: Iterable[StatRow]) -> tuple[JobStats, ...]:
    """Each job's stats (jobs with a counted run only), by job name."""
    grouped: dict[str, list[StatRow]] = {}
    for row in rows:
        grouped.setdefault(row.job, []).append(row)
    return tuple(job_stats(job, grouped[job]) for job in sorted(grouped))


def _ended(row: StatRow) -> datetime:
    return row.ended_at or datetime.min.replace(tzinfo=UTC)


def _failure_words(row: StatRow) -> str:
    return f"{row.state.value} ({row.result})" if row.result else row.state.value


# --- reading instants on the command line ----------------------------------------------------

_RELATIVE = re.compile(r"[0-9][0-9a-z]*")


def parse_instant(text: str, now: datetime, tz: ZoneInfo, option: str) -> datetime:
    """An ISO 8601 date-time (without offset: read in `tz`), a duration such as `7d` or
    `1h30m` meaning that long before `now`, or `now`.

    Raises:
        TuischedError: none of these (one line naming `option`).
    """
    given = text.strip()
    if given.lower() == "now":
        return now
    if _RELATIVE.fullmatch(given) and not given.isdigit():
        try:
            return now - parse_duration(given)
        except (ValueError, TuischedError):
            pass
    try:
        moment = datetime.fromisoformat(given)
    except ValueError:
        raise TuischedError(
            f"{option}: bad time '{text}'; write a date-time like 2026-05-07T09:10 "
            "or a duration before now like 7d or 12h, or now"
        ) from None
    return localize(moment, tz) if moment.tzinfo is None else moment


# --- stats of runs already read (the cluster's table) ---------------------------------------


def row_of(run: RunRecord) -> StatRow:
    """The stats columns of `run`."""
    result = run.result.value if run.result is not None else None
    return StatRow(run.job, run.run_id, run.state, result, run.duration, run.ended_at)


def stats_of_runs(runs: Iterable[RunRecord], query: StatsQuery) -> HistoryStats:
    """The stats `query` asks for, from runs read already (any states, any order)."""
    counted = [run for run in runs if run.state in COUNTED]
    timed = [run for run in counted if run.duration is not None]
    timed.sort(key=lambda run: (-(run.duration or timedelta(0)), run.run_id))
    return HistoryStats(
        since=query.since,
        until=query.until,
        jobs=stats_by_job(row_of(run) for run in counted),
        slowest=tuple(timed[: query.slowest]),
    )


STATS_RUNS_MAX = 100_000
"""Runs read at most for stats where the database cannot sum them itself (the cluster's
table is read through its history query); the newest are kept."""


def stats_history_query(query: StatsQuery) -> HistoryQuery:
    """The history page holding the runs `query` counts (the newest STATS_RUNS_MAX)."""
    return HistoryQuery(
        job=query.job, limit=STATS_RUNS_MAX, states=COUNTED, since=query.since, until=query.until
    )
