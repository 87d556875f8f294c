"""Backfill of a window (SPEC R24): the slots of a window with no successful run, run in order.

`Backfills.plan` lists what a backfill would run (see `domain.backfill`);
`Backfills.start` queues it. The runs carry trigger `backfill` and their
slot, so `requires` is honoured as for a scheduled run (a run whose
upstream slots did not succeed WAITs for them), and `overlap` and
`max_workers` as for any run.

Runs are queued without flooding the queue, as the downtime ledger's "all in
order" does: an `overlap: allow` job keeps up to `max_workers` of its
backfill runs queued or running, any other job one, the next slot going when
one ends. A second backfill of a job whose backfill is under way joins it:
its slots are merged in slot order, and a slot already on the way is not
taken twice.

In cluster mode the plan reads the cluster's table, the runs may be taken by
any node (the end of each is read back from the table: `RunEnds`), and a
slot is offered only while no run of it is due, running or successful
(`ClusterStore.offer_backfill`), so two backfills of a window started on two
nodes at once run each slot once; the node that started a backfill carries
its sequence (if it stops, the slots not queued yet stay unrun).

A slot waiting in the downtime ledger (a MISSED row nobody decided about)
that a backfill runs is decided by it: "made up by backfill (who, when)".
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from tuisched.domain import backfill, ledger
from tuisched.domain.bus import EventBus
from tuisched.domain.errors import JobActionError
from tuisched.domain.model import Config, Job
from tuisched.domain.runs import Result, RunRecord, RunState, Trigger
from tuisched.domain.views import BackfillPlan, HistoryQuery, LeftOutSlot
from tuisched.runtime.engine.ends import RunEnds
from tuisched.runtime.engine.ledger import LEDGER_ROWS
from tuisched.runtime.store import AsyncHistory
from tuisched.runtime.threads import Lane, in_thread

if TYPE_CHECKING:  # cluster mode only: it imports psycopg (the `postgres` extra)
    from tuisched.runtime.cluster.link import ClusterLink

Submit = Callable[[Job, datetime], RunRecord]
"""Queues a backfill run of a job for a slot (the engine's `submit`, trigger `backfill`)."""
SlotRuns = Callable[[str, datetime, datetime], Awaitable[list[RunRecord]]]
"""The runs of a job whose slot lies in a window that succeeded or are in progress."""


@dataclass(slots=True)
class _Sequence:
    """One job's backfill under way: the slots still to queue and those on the way."""

    job: str
    to_queue: list[datetime] = field(default_factory=list)
    """Slots not queued yet, oldest first (UTC)."""
    on_the_way: set[datetime] = field(default_factory=set)
    """Slots whose run is queued, waiting or running (UTC)."""


class Backfills:
    """Plans backfills and carries them out, a few runs at a time per job."""

    def __init__(
        self,
        *,
        config: Callable[[], Config],
        history: AsyncHistory,
        bus: EventBus,
        now: Callable[[], datetime],
        submit: Submit,
        cluster: ClusterLink | None = None,
    ) -> None:
        """In cluster mode (`cluster`) the runs that leave slots out, and the missed slots
        a backfill decides, are the cluster's."""
        self._config = config
        self._history = history
        self._now = now
        self._submit = submit
        self._cluster = cluster
        self._slot_runs = cluster.runs_of_slots if cluster is not None else self._local_runs
        self._lock = asyncio.Lock()
        self._sequences: dict[str, _Sequence] = {}
        self._ends = RunEnds(bus, cluster)

    def close(self) -> None:
        """Stop following backfill runs (the slots not queued yet stay unrun)."""
        self._ends.close()

    async def _local_runs(self, job: str, start: datetime, end: datetime) -> list[RunRecord]:
        return await self._history.call(lambda store: store.runs_of_slots(job, start, end))

    async def plan(self, name: str, start: datetime, end: datetime) -> BackfillPlan:
        """What a backfill of job `name` over the window would run; nothing is queued.

        Raises:
            UnknownJobError: no such job. JobActionError: the job cannot be backfilled.
            ScheduleError: the window is empty or too wide.
        """
        return await self._plan(name, start, end, dry_run=True)

    async def start(
        self, name: str, start: datetime, end: datetime, *, actor: str = ""
    ) -> BackfillPlan:
        """Queue the backfill of job `name` over the window, as `actor` asked; what it runs.

        Raises:
            JobActionError: nothing to run; as `plan` besides.
            ClusterDatabaseError: in cluster mode, the database did not answer.
        """
        async with self._lock:  # read and queue as one: a slot is never taken twice
            found = await self._plan(name, start, end, dry_run=False)
            going = self._sequences.get(name)
            taken = set() if going is None else {*going.to_queue, *going.on_the_way}
            slots = [slot for slot in found.slots if slot.astimezone(UTC) not in taken]
            if not slots:
                raise JobActionError(_nothing(found))
            job = self._config().jobs[name]
            await self._settle_missed(job, slots, actor)
            self._go(job, [slot.astimezone(UTC) for slot in slots])
            joined = [
                LeftOutSlot(slot=slot, reason="on the way already (a backfill under way)")
                for slot in found.slots if slot.astimezone(UTC) in taken
            ]  # fmt: skip
            left_out = tuple(sorted((*found.left_out, *joined), key=lambda left: left.slot))
            return replace(found, slots=tuple(slots), left_out=left_out)

    async def _plan(
        self, name: str, start: datetime, end: datetime, *, dry_run: bool
    ) -> BackfillPlan:
        config = self._config()
        job = config.job(name)  # UnknownJobError
        now = self._now()
        held = await self._slot_runs(name, start, min(end, now))
        workers = config.settings.max_workers
        return await in_thread(  # up to 10,000 slots of a cron schedule: off the loop
            Lane.FILES, lambda: backfill.plan(
                job, start, end, now=now, runs=held, dry_run=dry_run, max_workers=workers
            ),
        )  # fmt: skip

    def _go(self, job: Job, slots: list[datetime]) -> None:
        """Add `slots` to the job's sequence and queue as many as may be on the way."""
        sequence = self._sequences.setdefault(job.name, _Sequence(job=job.name))
        sequence.to_queue = sorted({*sequence.to_queue, *slots})
        self._fill(sequence, job)

    async def _settle_missed(self, job: Job, slots: list[datetime], actor: str) -> None:
        """The missed slots among `slots` that wait in the downtime ledger: decided, made up
        by this backfill."""
        status = ledger.backfilled(actor or "an operator", self._now(), job)
        if self._cluster is not None:
            await self._cluster.settle_missed(job.name, slots, status)
            return
        wanted = {slot.astimezone(UTC) for slot in slots}
        query = HistoryQuery(job=job.name, states=(RunState.MISSED,), limit=LEDGER_ROWS)
        rows = await self._history.call(lambda store: store.page(query))
        settled = [
            replace(row, status=status) for row in rows
            if ledger.undecided(row) and row.slot and row.slot.astimezone(UTC) in wanted
        ]  # fmt: skip
        if settled:
            await self._history.call(lambda store: store.write_many([], settled))

    def _fill(self, sequence: _Sequence, job: Job) -> None:
        width = backfill.in_flight(job, self._config().settings.max_workers)
        while sequence.to_queue and len(sequence.on_the_way) < width:
            slot = sequence.to_queue.pop(0)
            sequence.on_the_way.add(slot)
            local = slot.astimezone(job.timezone)
            submit = functools.partial(self._submit, job, local)
            self._ends.follow(job, local, Trigger.BACKFILL, submit, self._concluded)

    def _concluded(self, run: RunRecord) -> None:
        """A backfill run ended (here or on another node): the next slots of its job's
        sequence go."""
        sequence = self._sequences.get(run.job)
        if sequence is None or run.slot is None:
            return
        sequence.on_the_way.discard(run.slot.astimezone(UTC))
        job = self._config().jobs.get(run.job)
        if job is None or not job.enabled or run.result is Result.SHUTDOWN:
            sequence.to_queue.clear()  # the job went away, or the scheduler: the rest stays unrun
        else:
            self._fill(sequence, job)
        if not sequence.to_queue and not sequence.on_the_way:
            self._sequences.pop(run.job, None)  # (a run that ended within `_fill` did already)

    def under_way(self) -> dict[str, int]:
        """Slots not run yet per job with a backfill under way (queued, on the way)."""
        return {
            name: len(sequence.to_queue) + len(sequence.on_the_way)
            for name, sequence in self._sequences.items()
        }


def _nothing(found: BackfillPlan) -> str:
    """Why a backfill queued nothing."""
    where = f"{found.job} from {found.start.isoformat()} to {found.end.isoformat()}"
    if found.slots:
        return f"every slot of {where} to run is already on the way"
    if found.left_out:
        return f"no slot of {where} needs a run: {len(found.left_out)} left out (see --dry-run)"
    return f"{where} holds no past slot of the job"
