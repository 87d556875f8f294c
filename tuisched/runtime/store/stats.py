"""History stats read from one history store (see `domain.stats` for what they mean).

The queries of the stats are here, not in `HistoryStore`: the database
filters the window and the states, works out each duration and orders the
slowest runs; only the narrow rows of counted runs come back for the
percentiles.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import Select, case, func, select

from tuisched.domain.runs import RunRecord, RunState
from tuisched.domain.stats import COUNTED, StatRow, stats_by_job
from tuisched.domain.views import HistoryStats, StatsQuery
from tuisched.runtime.store.database import HistoryStore
from tuisched.runtime.store.schema import runs

_COUNTED = tuple(state.value for state in COUNTED)


def read_stats(store: HistoryStore, query: StatsQuery) -> HistoryStats:
    """The stats `query` asks for. Blocking: call it off the loop (the writer thread, a lane)."""
    return HistoryStats(
        since=query.since,
        until=query.until,
        jobs=stats_by_job(stat_rows(store, query)),
        slowest=tuple(slowest(store, query)),
    )


def stat_rows(store: HistoryStore, query: StatsQuery) -> list[StatRow]:
    """The counted runs (see `JobStats`) queued in the query's window, narrow rows only:
    the database works out each duration, and the end only of failures."""
    failed = runs.c.state != RunState.SUCCESS.value
    columns = (runs.c.job, runs.c.run_id, runs.c.state, runs.c.result,
               _seconds(store.dialect).label("took"),
               case((failed, runs.c.ended_at), else_=None).label("ended"))  # fmt: skip
    select_rows = _in_window(select(*columns), query).where(runs.c.state.in_(_COUNTED))
    with store.transaction() as connection:
        return [
            StatRow(job, run_id, RunState(state), result, _seconds_of(took), ended)
            for job, run_id, state, result, took, ended in connection.execute(select_rows)
        ]


def slowest(store: HistoryStore, query: StatsQuery) -> list[RunRecord]:
    """The `query.slowest` longest counted runs of the window, longest first."""
    if query.slowest < 1:
        return []
    took = _seconds(store.dialect)
    select_runs = (
        _in_window(select(runs), query)
        .where(runs.c.state.in_(_COUNTED), runs.c.started_at.is_not(None),
               runs.c.ended_at.is_not(None))
        .order_by(took.desc(), runs.c.run_id)
        .limit(query.slowest)
    )  # fmt: skip
    return store.records(select_runs)


def _in_window(query: Select[Any], stats: StatsQuery) -> Select[Any]:
    """`query` limited to the runs of `stats.job` queued in [since, until)."""
    if stats.job is not None:
        query = query.where(runs.c.job == stats.job)
    if stats.since is not None:
        query = query.where(runs.c.queued_at >= stats.since)
    if stats.until is not None:
        query = query.where(runs.c.queued_at < stats.until)
    return query


def _seconds(dialect: str) -> Any:
    """How long a run took, in seconds (None until it ended), as the database says it."""
    if dialect == "sqlite":
        return (func.julianday(runs.c.ended_at) - func.julianday(runs.c.started_at)) * 86_400.0
    return func.extract("epoch", runs.c.ended_at - runs.c.started_at)


def _seconds_of(took: object) -> timedelta | None:
    """A duration the database gave in seconds (never negative: clocks were set back)."""
    if took is None:
        return None
    # SQLite's julianday keeps about a millisecond: round it away.
    return timedelta(seconds=max(0.0, round(float(took), 3)))  # type: ignore[arg-type]
