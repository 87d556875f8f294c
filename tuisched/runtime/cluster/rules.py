"""The cluster's pure rules, and its rows as the engine and front ends see them.

    hashes      a job's definition and a configuration, hashed (drift)
    drift       which jobs a node defines unlike most live nodes
    preference  which live node a new run prefers (a rendezvous hash)
    views       nodes and runs of the shared tables as `NodeView` and `RunRecord`,
                and the database's state as the status line says it

Nothing here touches the database or the event loop.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from tuisched.domain.model import Config, Job
from tuisched.domain.runs import Result, RunRecord, RunState, Trigger
from tuisched.domain.views import NodeView

if TYPE_CHECKING:  # the store imports psycopg: rules serve single-node code too
    from tuisched.runtime.cluster.store import NodeRow


class DatabaseState(StrEnum):
    CONNECTING = "connecting"
    """Not connected yet since the start."""
    CONNECTED = "connected"
    RECONNECTING = "reconnecting"
    """It answered before and does not now."""
    READ_ONLY = "read-only"
    """It answers but takes no writes (a standby, `default_transaction_read_only`): the
    node runs nothing new until it does."""


@dataclass(frozen=True, slots=True)
class ClusterView:
    """What front ends show of the cluster: the database's state and the node's."""

    database: str
    """The URL, without a password."""
    state: DatabaseState
    since: datetime
    """When `state` began (by this node's clock)."""
    node_id: str
    node_state: str
    trouble: str | None
    drifted: tuple[str, ...]
    """Jobs this node defines differently from the cluster (it does not claim them)."""


def job_hash(job: Job) -> str:
    """A job's definition, hashed (where it sits in the file left out)."""
    text = repr(dataclasses.replace(job, line=0))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def config_hashes(config: Config) -> tuple[str, dict[str, str]]:
    """The configuration's hash (node-local settings and secrets left out), and each job's."""
    jobs = {name: job_hash(job) for name, job in sorted(config.jobs.items())}
    whole = repr((sorted(jobs.items()), sorted(config.groups), str(config.settings.timezone)))
    return hashlib.sha256(whole.encode()).hexdigest()[:16], jobs


def drifted_jobs(own: str, nodes: Collection[NodeRow]) -> tuple[str, ...]:
    """The jobs node `own` defines differently from the cluster: from the definition most
    live nodes hold (a tie goes to the oldest node's)."""
    alive = sorted((n for n in nodes if n.state == "alive"), key=lambda n: n.started_at)
    mine = next((n for n in alive if n.node_id == own), None)
    if mine is None:
        return ()
    return tuple(sorted(job for job, digest in mine.job_hashes.items()
                        if digest != _leading(job, alive)))  # fmt: skip


def _leading(job: str, alive: Sequence[NodeRow]) -> str | None:
    """The definition of `job` most of `alive` hold, oldest first (None: most of them do not
    define it)."""
    votes = Counter(n.job_hashes.get(job) for n in alive)
    best = max(votes.values())
    return next(n.job_hashes.get(job) for n in alive if votes[n.job_hashes.get(job)] == best)


def unrun_jobs(jobs: Collection[str], nodes: Collection[NodeRow]) -> list[str]:
    """Those of `jobs` that no live node runs: most live nodes do not define them, so the
    nodes that do differ from the cluster and claim nothing of them (none when no node is
    alive: nothing is known then)."""
    alive = sorted((n for n in nodes if n.state == "alive"), key=lambda n: n.started_at)
    return sorted(job for job in jobs if alive and _leading(job, alive) is None)


def node_views(rows: Collection[NodeRow]) -> tuple[NodeView, ...]:
    """The nodes as front ends show them, each with the jobs it defines differently."""
    return tuple(
        NodeView(
            node_id=row.node_id, name=row.name, host=row.host, pid=row.pid,
            started_at=row.started_at, heartbeat_age=row.age.total_seconds(), state=row.state,
            running=row.running, capacity=row.capacity, config_hash=row.config_hash,
            drifted=drifted_jobs(row.node_id, rows),
        )
        for row in rows
    )  # fmt: skip


def cluster_text(view: ClusterView) -> str:
    """The database's state as the status line says it: `db connected`, `db reconnecting
    since 14:02:07`, `fenced` while the node claims nothing, and `drifted: JOB, ...` for
    the jobs it defines differently from the cluster (it runs none of them)."""
    text = f"db {view.state}"
    if view.state is not DatabaseState.CONNECTED:
        text += f" since {view.since.strftime('%H:%M:%S')}"
    if view.node_state == "fenced":
        text += " fenced"
    if view.drifted:
        text += f", drifted: {', '.join(view.drifted)}"
    return text


def preferred_node(
    job: str, slot: datetime | None, nodes: Collection[NodeRow], *, index: int | None = None
) -> str | None:
    """The live node a new run prefers. With `index`, the job's place among all jobs in
    name order, the jobs of one slot are dealt out in turn (each node gets as many);
    without it, a rendezvous hash of the job, its slot and the node chooses. Every
    node that knows the same nodes picks the same one. The nodes' free workers are
    not weighed: the count is a heartbeat old, and a node that happened to be busy at
    its heartbeat would lose a whole slot's share; a node too busy to take what it
    is preferred for leaves it to the others after `steal_after`."""
    alive = sorted((n for n in nodes if n.state == "alive"), key=lambda n: n.node_id)
    if not alive:
        return None

    if index is not None:
        turn = int(slot.timestamp()) if slot is not None else 0
        return alive[(index + turn) % len(alive)].node_id

    def rank(node: NodeRow) -> str:
        key = f"{job}|{slot.isoformat() if slot else ''}|{node.node_id}"
        return hashlib.sha256(key.encode()).hexdigest()

    return max(alive, key=rank).node_id


RUN_STATES = {
    "due": RunState.QUEUED, "running": RunState.RUNNING, "success": RunState.SUCCESS,
    "failed": RunState.FAILED, "not_started": RunState.NOT_STARTED,
    "abandoned": RunState.ABANDONED, "missed": RunState.MISSED,
}  # fmt: skip
"""A row's state as the engine names it."""
DB_STATES: dict[RunState, tuple[str, ...]] = {
    state: tuple(db for db, run_state in RUN_STATES.items() if run_state is state)
    for state in RunState
}


def run_of_row(row: dict[str, object]) -> RunRecord:
    """A row of `ClusterStore.history` as a run record (with its node and fence)."""

    def when(key: str) -> datetime | None:
        value = row[key]
        return value if isinstance(value, datetime) else None

    result = str(row["result"] or "")
    queued = when("due_at") or when("created_at")
    if queued is None:  # both are NOT NULL in the schema: a row from elsewhere
        raise TypeError(f"run {row['run_id']} has no due_at or created_at timestamp")
    return RunRecord(
        run_id=str(row["run_id"]), job=str(row["job"]), slot=when("slot"),
        trigger=Trigger(str(row["trigger"])),
        state=RUN_STATES.get(str(row["state"]), RunState.FAILED), queued_at=queued,
        result=Result(result) if result in Result._value2member_map_ else None,
        status=str(row["status"] or ""), reason=str(row.get("reason") or ""),
        exit_code=int(str(row["exit_code"])) if row["exit_code"] is not None else None,
        started_at=when("started_at"), ended_at=when("ended_at"), node=str(row["node"] or ""),
        attempt=int(str(row["attempt"])),
        fence=int(str(row["fence"])) if row["fence"] is not None else None,
    )  # fmt: skip


def last_attempt(
    run_id: str, rows: Collection[dict[str, Any]], *, retries: int, retry_wait: timedelta,
    now: datetime,
) -> dict[str, Any] | None:  # fmt: skip
    """The row that concludes run `run_id` among `rows` (the runs of its job, slot and
    trigger, as `ClusterStore.slot_runs` gives them), or None while it goes on.

    Its retries are attempts after it (a higher `attempt`, made no earlier). The newest of
    them concludes once it has ended, unless it failed by itself with retries left and
    its retry may still come (within `retry_wait` of its end, by the database's `now`).
    """
    mine = next((row for row in rows if row["run_id"] == run_id), None)
    if mine is None:
        return None
    chain = [row for row in rows if row is mine or (
        row["attempt"] > mine["attempt"] and row["created_at"] >= mine["created_at"])]  # fmt: skip
    last = max(chain, key=lambda row: (row["attempt"], row["created_at"]))
    if last["state"] in ("due", "running"):
        return None
    retrying = last["state"] == "failed" and last["result"] == "completed"
    ended = last["ended_at"]
    if retrying and last["attempt"] < retries and (ended is None or now - ended < retry_wait):
        return None
    return last


def elsewhere_run(row: tuple[object, ...], names: Mapping[str, str]) -> RunRecord:
    """A run of another node (run_id, job, slot, trigger, attempt, state, owner, fence,
    due_at, started_at) as the running pane shows it: its node by name (`names`, by
    node id), or by id when the node is not known yet."""
    run_id, job, slot, trigger, attempt, state, owner, fence, due_at, started_at = row
    if not isinstance(due_at, datetime):  # NOT NULL in the schema: a row from elsewhere
        raise TypeError(f"run {run_id} has no due_at timestamp: {due_at!r}")
    return RunRecord(
        run_id=str(run_id), job=str(job), slot=slot if isinstance(slot, datetime) else None,
        trigger=Trigger(str(trigger)),
        state=RunState.RUNNING if state == "running" else RunState.QUEUED,
        queued_at=due_at,
        started_at=started_at if isinstance(started_at, datetime) else None,
        node=names.get(str(owner), str(owner)) if owner else "", attempt=int(str(attempt)),
        fence=int(str(fence)) if fence is not None else None,
    )  # fmt: skip


def state_of(run: RunRecord) -> str:
    """The state a run's row takes at its end."""
    return {RunState.SUCCESS: "success", RunState.FAILED: "failed"}.get(
        run.state, run.state.value.lower()
    )
