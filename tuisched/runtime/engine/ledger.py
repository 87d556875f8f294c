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

In cluster mode the missed rows are the cluster's (one per slot, whichever
nodes recorded it). A decision is written on them first, fenced: only while
every one of them is still undecided, so two nodes deciding at once decide
once (the later one is told). The catch-up runs then go to the cluster like
any run, and their ends are read back from its table (`RunEnds`); the node
that decided carries an "all in slot order" sequence (if it stops, the slots
not made up yet stay "to be made up").
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING

from tuisched.domain import ledger
from tuisched.domain.bus import EventBus
from tuisched.domain.errors import JobActionError, TuischedError
from tuisched.domain.model import Config, Job, Overlap
from tuisched.domain.runs import RunRecord, RunState, Trigger, new_run_id
from tuisched.domain.views import HistoryQuery, MissedChoice, MissedSlots
from tuisched.runtime.engine.ends import RunEnds
from tuisched.runtime.store import AsyncHistory

if TYPE_CHECKING:  # cluster mode only: it imports psycopg (the `postgres` extra)
    from tuisched.runtime.cluster.link import ClusterLink

log = logging.getLogger(__name__)

LEDGER_ROWS = 5000
"""The newest MISSED rows the ledger reads (20 per job at most are recorded per downtime)."""

Submit = Callable[[Job, datetime, str], RunRecord]
"""Queues a catch-up run of a job for a slot, with its run id (the engine's `submit`,
trigger `catchup`)."""
Start = Callable[[], object]
"""Queues what a decision runs, once it is written."""


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
        since: datetime,
        cluster: ClusterLink | None = None,
    ) -> None:
        """`since`: when the scheduler started; slots `misfire: once` decided since then
        are listed as decided by policy. In cluster mode (`cluster`) the missed rows are
        the cluster's."""
        self._config = config
        self._history = history
        self._now = now
        self._submit = submit
        self._cluster = cluster
        self._since = since
        self._lock = asyncio.Lock()
        self._decided: dict[str, MissedSlots] = {}
        """Entries decided by an operator since start, by job (shown as decided)."""
        self._in_order: dict[str, _InOrder] = {}
        self._ends = RunEnds(bus, cluster)
        self._writes: set[asyncio.Task[None]] = set()

    def close(self) -> None:
        """Stop following catch-up runs (the slots left stay "to be made up")."""
        self._ends.close()

    # --- the list ------------------------------------------------------------------------

    async def entries(self) -> tuple[MissedSlots, ...]:
        """Every job with missed slots: undecided, decided since start, or by policy.

        Raises:
            ClusterDatabaseError: in cluster mode, the database did not answer.
        """
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
        if by_policy:
            return ledger.entry(job, by_policy)
        elsewhere = [row for row in recent if row.status]  # by another node, or a backfill
        if elsewhere:
            newest = max(elsewhere, key=_slot)
            return ledger.entry(job, elsewhere, decided=newest.status)
        return None

    def _jobs(self) -> list[Job]:
        """The jobs whose missed slots can be decided: enabled, with a schedule."""
        return [j for j in self._config().jobs.values() if j.enabled and j.schedule is not None]

    async def _rows(self, job: str | None) -> list[RunRecord]:
        query = HistoryQuery(job=job, states=(RunState.MISSED,), limit=LEDGER_ROWS)
        if self._cluster is not None:
            return list(await self._cluster.history(query))
        return await self._history.call(lambda store: store.page(query))

    # --- decisions -----------------------------------------------------------------------

    async def decide(
        self, job: str | None, choice: MissedChoice, *, actor: str
    ) -> tuple[MissedSlots, ...]:
        """Decide the undecided missed slots of `job` (None: of every job) as `choice`.

        Returns the entries decided, with what was done in `decided`.

        Raises:
            JobActionError: nothing waits for a decision (decided already, maybe by
                another console or node), or the job cannot be decided.
            UnknownJobError: no such job.
            ClusterDatabaseError: in cluster mode, the database did not answer.
        """
        async with self._lock:  # read and rewrite as one: a decision is made once
            jobs = self._chosen(job)
            every = await self._rows(job)
            rows = [row for row in every if ledger.undecided(row)]
            pending = {j.name: [r for r in rows if r.job == j.name and r.slot] for j in jobs}
            pending = {name: found for name, found in pending.items() if found}
            if not pending:
                raise JobActionError(self._nothing_to_decide(job, every))
            now = self._now()
            updates: list[RunRecord] = []
            starts: list[Start] = []
            done: list[MissedSlots] = []
            for name, found in pending.items():
                decided, changed, start = self._decide_job(
                    self._config().jobs[name], found, choice, actor, now
                )
                updates += changed
                starts.append(start)
                done.append(decided)
            await self._write(updates, job)
            for start in starts:  # written first: a decision another node took runs nothing
                start()
            for decided in done:
                self._decided[decided.job] = decided
            return tuple(done)

    async def _write(self, rows: list[RunRecord], job: str | None) -> None:
        """Write the decided rows: in cluster mode only while none was decided elsewhere."""
        if self._cluster is None:
            await self._history.call(lambda store: store.write_many([], rows))
            return
        decisions = [(row.run_id, row.status) for row in rows]
        if not await self._cluster.decide_missed(decisions):
            whose = f"of {job} " if job else ""
            raise JobActionError(
                f"the missed slots {whose}were decided meanwhile on another node: "
                "see `tuisched missed`"
            )

    def _chosen(self, job: str | None) -> list[Job]:
        if job is None:
            return self._jobs()
        chosen = self._config().job(job)  # UnknownJobError
        if chosen not in self._jobs():
            raise JobActionError(f"job '{job}' is disabled or has no schedule: nothing to make up")
        return [chosen]

    def _nothing_to_decide(self, job: str | None, rows: list[RunRecord]) -> str:
        if job is None:
            return "no missed slots wait for a decision"
        earlier = self._decided.get(job)
        if earlier is not None:
            return f"the missed slots of {job} were decided already: {earlier.decided}"
        newest = max(rows, key=lambda row: row.slot or row.queued_at, default=None)
        if newest is not None and newest.status:  # by another console, node, or a backfill
            return f"no missed slots of {job} wait for a decision; the newest was decided: " + (
                newest.status)  # fmt: skip
        return f"no missed slots of {job} wait for a decision"

    def _decide_job(
        self, job: Job, rows: list[RunRecord], choice: MissedChoice, actor: str, now: datetime
    ) -> tuple[MissedSlots, list[RunRecord], Start]:
        """Carry out `choice` for `job`: its entry as decided, its rewritten rows, and what
        queues its catch-up runs once the rows are written (their run ids are in them)."""
        rows = sorted(rows, key=lambda row: row.slot or now)
        listed = ledger.entry(job, rows)
        if choice is MissedChoice.SKIP:
            text = ledger.skipped(actor, now, job)
            changed = [replace(row, status=text) for row in rows]
            return replace(listed, decided=text), changed, lambda: None
        if choice is MissedChoice.LATEST:
            run_id, slot = new_run_id(), _slot(rows[-1])
            older = ledger.skipped(actor, now, job) + "; the latest was made up"
            changed = [replace(row, status=older) for row in rows[:-1]]
            changed.append(replace(rows[-1], status=ledger.made_up(run_id, actor, now, job)))
            text = f"{ledger.summary(choice, listed.count, [run_id])} by {actor}"
            return replace(listed, decided=text), changed, lambda: self._submit(job, slot, run_id)
        changed, start = self._all_in_order(job, rows, actor, now)
        text = f"{ledger.summary(choice, len(rows), [])} by {actor}"
        if listed.earlier:
            text += f" (the {listed.earlier} earlier, only counted, are not run)"
        return replace(listed, decided=text), changed, start

    def _all_in_order(
        self, job: Job, rows: list[RunRecord], actor: str, now: datetime
    ) -> tuple[list[RunRecord], Start]:
        """Queue a catch-up run per slot: all at once under `overlap: allow`, else the
        first now and each next one when the one before has concluded."""
        if job.overlap is Overlap.ALLOW:
            made = [(row, new_run_id()) for row in rows]

            def start_all() -> None:
                for row, run_id in made:
                    self._submit(job, _slot(row), run_id)

            changed = [replace(row, status=ledger.made_up(run_id, actor, now, job))
                       for row, run_id in made]  # fmt: skip
            return changed, start_all
        waiting = [replace(row, status=ledger.to_be_made_up(actor, now, job)) for row in rows]
        going = self._in_order.get(job.name)
        if going is not None:  # its earlier slots are being made up: these follow in order

            def join() -> None:
                merged = [*going.rows, *((row, actor) for row in waiting)]
                going.rows = deque(sorted(merged, key=lambda pair: _slot(pair[0])))

            return waiting, join
        first_id = new_run_id()
        first = replace(waiting[0], status=ledger.made_up(first_id, actor, now, job))
        order = _InOrder(job=job.name, rows=deque((row, actor) for row in waiting[1:]))

        def begin() -> None:
            self._in_order[job.name] = order
            self._catch_up(order, _slot(first), first_id)

        return [first, *waiting[1:]], begin

    def _catch_up(self, order: _InOrder, slot: datetime, run_id: str) -> None:
        """Queue the catch-up run of `slot`, the current one of `order`, and follow it."""
        job = self._config().jobs[order.job]
        order.current = slot
        self._ends.follow(job, slot, Trigger.CATCHUP, lambda: self._submit(job, slot, run_id),
                          self._concluded)  # fmt: skip

    def _next(self, order: _InOrder, now: datetime) -> None:
        """Queue the catch-up run of the oldest slot left, and write so on its row."""
        row, actor = order.rows.popleft()
        job = self._config().jobs[order.job]
        run_id = new_run_id()
        self._rewrite(replace(row, status=ledger.made_up(run_id, actor, now, job)))
        self._catch_up(order, _slot(row), run_id)

    def _rewrite(self, row: RunRecord) -> None:
        """Write a row's new status (the slot's catch-up run goes now), in the background."""
        if self._cluster is None:
            self._history.update_soon(row)
            return
        cluster = self._cluster

        async def write() -> None:
            try:
                await cluster.decide_missed([(row.run_id, row.status)], fenced=False)
            except TuischedError as error:
                log.warning("missed slot %s of %s: its status not written: %s",
                            row.slot, row.job, error)  # fmt: skip

        task = asyncio.get_running_loop().create_task(write())
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    def _concluded(self, run: RunRecord) -> None:
        """A catch-up run ended (here or on another node): the next slot of its job's
        sequence goes."""
        order = self._in_order.get(run.job)
        if order is None or run.slot != order.current:
            return
        job = self._config().jobs.get(run.job)
        if not order.rows or job is None or not job.enabled:
            del self._in_order[run.job]  # done, or the job went away: the rest stays unrun
            return
        self._next(order, self._now())


def _slot(row: RunRecord) -> datetime:
    assert row.slot is not None  # noqa: S101  (missed rows always have their slot)
    return row.slot
