"""The downtime ledger (SPEC R25): missed slots listed per job; the operator decides once.

The slots a job missed (while the scheduler was down, too late to run, or
while the job was paused) are MISSED rows of the history. The ledger lists
the rows nobody decided about yet, per job, and carries out a decision:

    latest   one catch-up run for the newest slot; the older ones are skipped
    all      one catch-up run per slot, in slot order: queued at once for an
             `overlap: allow` job (max_workers still bounds them), else each
             after the one before has ended, so the overlap rule never drops one
    skip     no run

A decision writes its words into the rows' `status` (see `domain.ledger`), so
the history keeps it and a second console finds the slots decided. Decisions
are taken one at a time: the rows are read and rewritten under one lock, so
the same slots are never decided twice.

Cluster mode is not served yet: there the missed rows and their decision
belong in the cluster's table, which no node can rewrite today.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime

from tuisched.domain import ledger
from tuisched.domain.bus import EventBus
from tuisched.domain.errors import JobActionError
from tuisched.domain.events import RunConcluded
from tuisched.domain.model import Config, Job, Overlap
from tuisched.domain.runs import RunRecord, RunState, Trigger
from tuisched.domain.views import HistoryQuery, MissedChoice, MissedSlots
from tuisched.runtime.store import AsyncHistory

LEDGER_ROWS = 5000
"""The newest MISSED rows the ledger reads (20 per job at most are recorded per downtime)."""
NOT_IN_CLUSTER = (
    "the downtime ledger is not in cluster mode yet: the missed slots are in the cluster's "
    "table; see `tuisched history`"
)

Submit = Callable[[Job, datetime], RunRecord]
"""Queues a catch-up run of a job for a slot (the engine's `submit`, trigger `catchup`)."""


@dataclass(slots=True)
class _InOrder:
    """A job's missed slots still to be made up, one after another."""

    job: str
    rows: deque[tuple[RunRecord, str]] = field(default_factory=deque)
    """The rows whose catch-up run has not been queued yet, oldest first, with who
    decided so."""
    current: datetime | None = None
    """The slot whose catch-up run is in progress."""


class Ledger:
    """Lists each job's undecided missed slots and carries out the operator's decisions."""

    def __init__(
        self,
        *,
        config: Callable[[], Config],
        history: AsyncHistory,
        bus: EventBus,
        now: Callable[[], datetime],
        submit: Submit,
        clustered: bool,
        since: datetime,
    ) -> None:
        """`since`: when the scheduler started; slots `misfire: once` decided since then
        are listed as decided by policy."""
        self._config = config
        self._history = history
        self._now = now
        self._submit = submit
        self._clustered = clustered
        self._since = since
        self._lock = asyncio.Lock()
        self._decided: dict[str, MissedSlots] = {}
        """Entries decided by an operator since start, by job (shown as decided)."""
        self._in_order: dict[str, _InOrder] = {}
        self._subscription = bus.subscribe(RunConcluded, self._concluded)

    def close(self) -> None:
        """Stop following catch-up runs (the slots left stay "to be made up")."""
        self._subscription.unsubscribe()

    # --- the list ------------------------------------------------------------------------

    async def entries(self) -> tuple[MissedSlots, ...]:
        """Every job with missed slots: undecided, decided since start, or by policy.

        Raises:
            JobActionError: cluster mode (not served yet).
        """
        if self._clustered:
            raise JobActionError(NOT_IN_CLUSTER)
        rows = await self._rows(None)
        by_job: dict[str, list[RunRecord]] = {}
        for row in rows:
            by_job.setdefault(row.job, []).append(row)
        found = []
        for job in self._jobs():
            listed = self._entry(job, by_job.get(job.name, []))
            if listed is not None:
                found.append(listed)
        return tuple(found)

    def _entry(self, job: Job, rows: list[RunRecord]) -> MissedSlots | None:
        pending = [row for row in rows if ledger.undecided(row)]
        if pending:
            return ledger.entry(job, pending)
        if job.name in self._decided:
            return self._decided[job.name]
        recent = [row for row in rows if (row.ended_at or row.queued_at) >= self._since]
        by_policy = [row for row in recent if ledger.POLICY in row.status]
        return ledger.entry(job, by_policy) if by_policy else None

    def _jobs(self) -> list[Job]:
        """The jobs whose missed slots can be decided: enabled, with a schedule."""
        return [j for j in self._config().jobs.values() if j.enabled and j.schedule is not None]

    async def _rows(self, job: str | None) -> list[RunRecord]:
        query = HistoryQuery(job=job, states=(RunState.MISSED,), limit=LEDGER_ROWS)
        return await self._history.call(lambda store: store.page(query))

    # --- decisions -----------------------------------------------------------------------

    async def decide(
        self, job: str | None, choice: MissedChoice, *, actor: str
    ) -> tuple[MissedSlots, ...]:
        """Decide the undecided missed slots of `job` (None: of every job) as `choice`.

        Returns the entries decided, with what was done in `decided`.

        Raises:
            JobActionError: nothing waits for a decision (decided already, maybe by
                another console), the job cannot be decided, or cluster mode.
            UnknownJobError: no such job.
        """
        if self._clustered:
            raise JobActionError(NOT_IN_CLUSTER)
        async with self._lock:  # read and rewrite as one: a decision is made once
            jobs = self._chosen(job)
            rows = [row for row in await self._rows(job) if ledger.undecided(row)]
            pending = {j.name: [r for r in rows if r.job == j.name and r.slot] for j in jobs}
            pending = {name: found for name, found in pending.items() if found}
            if not pending:
                raise JobActionError(self._nothing_to_decide(job))
            now, updates, done = self._now(), [], []
            for name, found in pending.items():
                decided, changed = self._decide_job(self._config().jobs[name], found, choice,
                                                    actor, now)  # fmt: skip
                updates += changed
                done.append(decided)
            await self._history.call(lambda store: store.write_many([], updates))
            for decided in done:
                self._decided[decided.job] = decided
            return tuple(done)

    def _chosen(self, job: str | None) -> list[Job]:
        if job is None:
            return self._jobs()
        chosen = self._config().job(job)  # UnknownJobError
        if chosen not in self._jobs():
            raise JobActionError(f"job '{job}' is disabled or has no schedule: nothing to make up")
        return [chosen]

    def _nothing_to_decide(self, job: str | None) -> str:
        if job is None:
            return "no missed slots wait for a decision"
        earlier = self._decided.get(job)
        if earlier is not None:
            return f"the missed slots of {job} were decided already: {earlier.decided}"
        return f"no missed slots of {job} wait for a decision"

    def _decide_job(
        self, job: Job, rows: list[RunRecord], choice: MissedChoice, actor: str, now: datetime
    ) -> tuple[MissedSlots, list[RunRecord]]:
        """Carry out `choice` for `job`; its entry as decided, and its rewritten rows."""
        rows = sorted(rows, key=lambda row: row.slot or now)
        listed = ledger.entry(job, rows)
        if choice is MissedChoice.SKIP:
            text = ledger.skipped(actor, now, job)
            changed = [replace(row, status=text) for row in rows]
            return replace(listed, decided=text), changed
        if choice is MissedChoice.LATEST:
            run = self._submit(job, _slot(rows[-1]))
            older = ledger.skipped(actor, now, job) + "; the latest was made up"
            changed = [replace(row, status=older) for row in rows[:-1]]
            changed.append(replace(rows[-1], status=ledger.made_up(run.run_id, actor, now, job)))
            text = f"{ledger.summary(choice, listed.count, [run.run_id])} by {actor}"
            return replace(listed, decided=text), changed
        changed = self._all_in_order(job, rows, actor, now)
        text = f"{ledger.summary(choice, len(rows), [])} by {actor}"
        if listed.earlier:
            text += f" (the {listed.earlier} earlier, only counted, are not run)"
        return replace(listed, decided=text), changed

    def _all_in_order(
        self, job: Job, rows: list[RunRecord], actor: str, now: datetime
    ) -> list[RunRecord]:
        """Queue a catch-up run per slot: all at once under `overlap: allow`, else the
        first now and each next one when the one before has concluded."""
        if job.overlap is Overlap.ALLOW:
            made = [self._submit(job, _slot(row)) for row in rows]
            return [
                replace(row, status=ledger.made_up(run.run_id, actor, now, job))
                for row, run in zip(rows, made, strict=True)
            ]
        waiting = [replace(row, status=ledger.to_be_made_up(actor, now, job)) for row in rows]
        going = self._in_order.get(job.name)
        if going is not None:  # its earlier slots are being made up: these follow in order
            merged = [*going.rows, *((row, actor) for row in waiting)]
            going.rows = deque(sorted(merged, key=lambda pair: _slot(pair[0])))
            return waiting
        order = _InOrder(job=job.name, rows=deque((row, actor) for row in waiting))
        first = self._next(order, now)
        self._in_order[job.name] = order
        return [first, *(row for row, _ in order.rows)]

    def _next(self, order: _InOrder, now: datetime) -> RunRecord:
        """Queue the catch-up run of the oldest slot left; its row, rewritten."""
        row, actor = order.rows.popleft()
        job = self._config().jobs[order.job]
        order.current = _slot(row)
        run = self._submit(job, order.current)
        return replace(row, status=ledger.made_up(run.run_id, actor, now, job))

    def _concluded(self, event: RunConcluded) -> None:
        """A catch-up run ended: the next slot of its job's sequence goes."""
        run = event.run
        order = self._in_order.get(run.job)
        if order is None or run.trigger is not Trigger.CATCHUP or run.slot != order.current:
            return
        job = self._config().jobs.get(run.job)
        if not order.rows or job is None or not job.enabled:
            del self._in_order[run.job]  # done, or the job went away: the rest stays unrun
            return
        self._history.update_soon(self._next(order, self._now()))


def _slot(row: RunRecord) -> datetime:
    assert row.slot is not None  # noqa: S101  (missed rows always have their slot)
    return row.slot
