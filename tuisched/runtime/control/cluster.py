"""What front ends read of a cluster straight from its database: the nodes, the runs.

`tuisched nodes` and `tuisched history` in cluster mode ask the database,
not one node: every node's runs are in it, and it answers while any node
(or none) runs. Each call opens the database, reads, and closes it.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime

from tuisched.domain.errors import TuischedError
from tuisched.domain.model import ClusterSettings, Config
from tuisched.domain.runs import Result, RunRecord, RunState, Trigger
from tuisched.domain.views import HistoryQuery, NodeView
from tuisched.runtime.cluster.database import ClusterDatabase, read_password
from tuisched.runtime.cluster.link import node_views
from tuisched.runtime.cluster.store import ClusterStore
from tuisched.runtime.threads import Lane, in_thread

_STATES = {
    "due": RunState.QUEUED, "running": RunState.RUNNING, "success": RunState.SUCCESS,
    "failed": RunState.FAILED, "not_started": RunState.NOT_STARTED,
    "abandoned": RunState.ABANDONED, "missed": RunState.MISSED,
}  # fmt: skip


def _settings(config: Config) -> ClusterSettings:
    if config.settings.cluster is None:
        raise TuischedError(f"{config.path}: no settings.cluster: this scheduler is one node")
    return config.settings.cluster


@asynccontextmanager
async def _store(config: Config) -> AsyncIterator[ClusterStore]:
    settings = _settings(config)
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
    async with _store(config) as store:
        rows = await store.history(limit=query.limit, job=query.job)
    return tuple(_record(row) for row in reversed(rows))


def _record(row: dict[str, object]) -> RunRecord:
    def when(key: str) -> datetime | None:
        value = row[key]
        return value if isinstance(value, datetime) else None

    result = str(row["result"] or "")
    queued = when("due_at") or when("created_at")
    assert queued is not None  # noqa: S101  (NOT NULL columns)
    return RunRecord(
        run_id=str(row["run_id"]), job=str(row["job"]), slot=when("slot"),
        trigger=Trigger(str(row["trigger"])), state=_STATES.get(str(row["state"]),
        RunState.FAILED), queued_at=queued,
        result=Result(result) if result in Result._value2member_map_ else None,
        status=str(row["status"] or ""),
        exit_code=int(str(row["exit_code"])) if row["exit_code"] is not None else None,
        started_at=when("started_at"), ended_at=when("ended_at"), node=str(row["node"] or ""),
        attempt=int(str(row["attempt"])),
        fence=int(str(row["fence"])) if row["fence"] is not None else None,
    )  # fmt: skip
