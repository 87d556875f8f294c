"""What front ends read of a cluster straight from its database: the nodes, the runs.

`tuisched nodes` and `tuisched history` in cluster mode ask the database,
not one node: every node's runs are in it, and it answers while any node
(or none) runs. Each call opens the database, reads, and closes it.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from tuisched.domain.errors import TuischedError
from tuisched.domain.model import ClusterSettings, Config
from tuisched.domain.runs import RunRecord
from tuisched.domain.stats import stats_history_query, stats_of_runs
from tuisched.domain.views import HistoryQuery, HistoryStats, NodeView, StatsQuery
from tuisched.runtime.cluster.rules import DB_STATES, node_views, run_of_row
from tuisched.runtime.pgdriver import require_driver
from tuisched.runtime.threads import Lane, in_thread

if TYPE_CHECKING:  # cluster mode only: it imports psycopg (the `postgres` extra)
    from tuisched.runtime.cluster.store import ClusterStore


def _settings(config: Config) -> ClusterSettings:
    if config.settings.cluster is None:
        raise TuischedError(f"{config.path}: no settings.cluster: this scheduler is one node")
    return config.settings.cluster


@asynccontextmanager
async def _store(config: Config) -> AsyncIterator[ClusterStore]:
    """The cluster's store, open for the time of the block.

    Raises:
        ConfigError: psycopg is not installed (the `postgres` extra).
        ClusterDatabaseError: the database cannot be used.
    """
    settings = _settings(config)
    await in_thread(Lane.FILES, require_driver, config)
    from tuisched.runtime.cluster.database import ClusterDatabase, read_password  # noqa: PLC0415
    from tuisched.runtime.cluster.store import ClusterStore  # noqa: PLC0415

    password = await in_thread(Lane.FILES, read_password, settings, os.environ)
    database = ClusterDatabase(settings.database, password=password, node="reader")
    await database.open()
    try:
        yield ClusterStore(database)
    finally:
        await database.close()


async def cluster_nodes(config: Config) -> tuple[NodeView, ...]:
    """Every node the cluster's database knows, newest first, with its drifted jobs.

    Raises:
        ClusterDatabaseError: the database cannot be used (the message says why).
    """
    async with _store(config) as store:
        return node_views(await store.nodes())


async def cluster_history(config: Config, query: HistoryQuery) -> tuple[RunRecord, ...]:
    """The newest runs of the whole cluster (of `query.job`), newest first.

    Raises:
        ClusterDatabaseError: the database cannot be used (the message says why).
    """
    states = [state for run_state in query.states for state in DB_STATES[run_state]]
    async with _store(config) as store:
        rows = await store.history(
            query.limit, query.job, offset=query.offset, states=states,
            triggers=[str(trigger) for trigger in query.triggers], since=query.since,
            until=query.until,
        )  # fmt: skip
    return tuple(run_of_row(row) for row in reversed(rows))


# --- history stats (issue 16) ---------------------------------------------------------------


async def cluster_stats(config: Config, query: StatsQuery) -> HistoryStats:
    """Each job's stats over the query's window, from every node's runs.

    Raises:
        ClusterDatabaseError: the database cannot be used (the message says why).
    """
    return stats_of_runs(await cluster_history(config, stats_history_query(query)), query)
