"""History stats read from one history store (see `domain.stats` for what they mean)."""

from __future__ import annotations

from tuisched.domain.stats import stats_by_job
from tuisched.domain.views import HistoryStats, StatsQuery
from tuisched.runtime.store.database import HistoryStore


def read_stats(store: HistoryStore, query: StatsQuery) -> HistoryStats:
    """The stats `query` asks for. Blocking: call it off the loop (the writer thread, a lane).

    The database filters the window and the states and orders the slowest
    runs; only the narrow rows of counted runs come back for the percentiles.
    """
    return HistoryStats(
        since=query.since,
        until=query.until,
        jobs=stats_by_job(store.stat_rows(query)),
        slowest=tuple(store.slowest(query)),
    )
