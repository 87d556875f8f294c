"""Runs followed to their end, wherever they ran: what backfill and the ledger wait for.

A backfill or a ledger decision queues a run per slot and starts the next
when one has ended. On one node that end is a `RunConcluded` on the bus (its
retries included). In cluster mode another node may have run it (or its
retry): that end is read from the cluster's table (`ClusterLink.watch`).
Whichever is heard first, the follower is told once.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from tuisched.domain.bus import EventBus
from tuisched.domain.events import RunConcluded
from tuisched.domain.model import Job
from tuisched.domain.runs import RunRecord, RunState, Trigger

if TYPE_CHECKING:  # cluster mode only: it imports psycopg (the `postgres` extra)
    from tuisched.runtime.cluster.link import ClusterLink

Ended = Callable[[RunRecord], None]
"""Told the run that concludes a followed one (its last attempt)."""

_Key = tuple[str, datetime, Trigger]
_GOING = (RunState.QUEUED, RunState.WAITING, RunState.RUNNING)


class RunEnds:
    """Follows runs of a slot (one per job, slot and trigger at a time) to their end."""

    def __init__(self, bus: EventBus, cluster: ClusterLink | None) -> None:
        self._cluster = cluster
        self._following: dict[_Key, tuple[object, Ended]] = {}
        self._subscription = bus.subscribe(RunConcluded, self._concluded)

    def close(self) -> None:
        """Stop following (nobody is told any more)."""
        self._subscription.unsubscribe()
        for token, _ in self._following.values():
            if isinstance(token, str) and self._cluster is not None:
                self._cluster.unwatch(token)
        self._following.clear()

    def follow(
        self, job: Job, slot: datetime, trigger: Trigger, submit: Callable[[], RunRecord],
        ended: Ended,
    ) -> RunRecord:  # fmt: skip
        """Queue a run of `job`'s `slot` with `submit` and tell `ended` when it concludes
        (at once, when it cannot start: the scheduler is stopping, say)."""
        key = (job.name, slot, trigger)
        token = object()
        self._following[key] = (token, ended)
        run = submit()
        if self._following.get(key, (None,))[0] is not token:
            return run  # concluded within `submit`: told already
        if run.state not in _GOING:
            del self._following[key]
            ended(run)
        elif self._cluster is not None:
            self._following[key] = (run.run_id, ended)
            self._cluster.watch(run, job, lambda last: self._elsewhere(key, run.run_id, last))
        return run

    def _concluded(self, event: RunConcluded) -> None:
        run = event.run
        if run.slot is None:
            return
        found = self._following.pop((run.job, run.slot, run.trigger), None)
        if found is None:
            return
        token, ended = found
        if isinstance(token, str) and self._cluster is not None:
            self._cluster.unwatch(token)
        ended(run)

    def _elsewhere(self, key: _Key, run_id: str, last: RunRecord) -> None:
        found = self._following.get(key)
        if found is None or found[0] != run_id:
            return
        del self._following[key]
        found[1](last)
