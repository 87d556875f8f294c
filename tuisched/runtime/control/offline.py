"""The control seam with no scheduler running: what the files and the history say.

`tuisched jobs` and `tuisched history` read a configuration and the state a
scheduler left (pauses, runs, output, the audit log) without starting one.
Every command raises `SchedulerNotRunningError`. Reading never creates a
history database that was never made.

Every command line reader builds it through `offline_control`, which first
checks that a `postgresql://` history can be read (PostgreSQL's driver is
installed), so each says so the same way: one line, exit 78.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from datetime import datetime
from typing import TypeVar

from tuisched.domain import backfill
from tuisched.domain.errors import SchedulerNotRunningError, UnknownRunError
from tuisched.domain.events import Event
from tuisched.domain.model import Config
from tuisched.domain.reasons import JobFacts
from tuisched.domain.runs import RunRecord
from tuisched.domain.schedule.describe import (
    holding_pauses,
    job_status,
    pause_views,
)
from tuisched.domain.schedule.simulate import simulate
from tuisched.domain.schedule.slots import next_slot
from tuisched.domain.views import (
    AuditChunk,
    BackfillPlan,
    ConfigChange,
    ConfigEdit,
    EditImpact,
    GroupStatus,
    HistoryQuery,
    HistoryStats,
    JobPlan,
    JobStatus,
    MissedChoice,
    MissedSlots,
    NodeView,
    OutputChunk,
    OutputMatch,
    OutputPage,
    Pause,
    PendingEdit,
    RunStatus,
    SchedulerState,
    SchedulerStatus,
    Simulation,
    StatsQuery,
)
from tuisched.runtime.clock import Clock, SystemClock
from tuisched.runtime.control.cluster import cluster_nodes
from tuisched.runtime.control.reading import (
    audit_chunk,
    job_plan,
    output_chunk,
    output_line,
    output_page,
    output_search,
)
from tuisched.runtime.control.seam import (
    AUDIT_LINES,
    OUTPUT_CHUNK_BYTES,
    PAGE_LINES,
    Subscription,
)
from tuisched.runtime.pgdriver import require_driver
from tuisched.runtime.store import HistoryStore
from tuisched.runtime.store.history import has_history, open_history
from tuisched.runtime.store.stats import read_stats
from tuisched.runtime.threads import Lane, in_thread

T = TypeVar("T")


class _NoSubscription:
    """Nothing is ever published without a scheduler."""

    def unsubscribe(self) -> None:
        """Nothing to stop."""


class OfflineQueries:
    """`SchedulerQueries` over the files a stopped (or absent) scheduler left."""

    def __init__(self, config: Config, text: str, *, clock: Callable[[], datetime]) -> None:
        self._config = config
        self._text = text
        self._clock = clock

    def _read(self, query: Callable[[HistoryStore], T], empty: T) -> T:
        """Run `query` on the history (blocking), or `empty` when there is none."""
        if not has_history(self._config):
            return empty
        store = open_history(self._config)
        try:
            return query(store)
        finally:
            store.close()

    async def _ask(self, query: Callable[[HistoryStore], T], empty: T) -> T:
        return await in_thread(Lane.FILES, self._read, query, empty)

    async def _pauses(self) -> set[tuple[str, str]]:
        empty: set[tuple[str, str]] = set()
        return await self._ask(lambda store: store.pauses(), empty)

    async def status(self) -> SchedulerStatus:
        pauses = await self._pauses()
        return SchedulerStatus(
            config_path=self._config.path, node="", timezone=self._config.settings.timezone.key,
            state=SchedulerState.STOPPED, jobs=len(self._config.jobs),
            groups=len(self._config.groups), running=0, queued=0, waiting=0,
            pauses=pause_views(pauses),
        )  # fmt: skip

    async def jobs(self, names: Collection[str] | None = None) -> tuple[JobStatus, ...]:
        pauses = await self._pauses()
        none: dict[str, RunRecord] = {}
        last = await self._ask(lambda store: store.last_runs(), none)
        jobs = self._config.jobs
        selected = jobs.values() if names is None else [jobs[n] for n in names if n in jobs]
        now = self._clock()
        statuses = []
        for job in selected:
            held = bool(holding_pauses(job, pauses))
            schedule = job.schedule
            fires = job.enabled and not held and schedule is not None
            upcoming = next_slot(schedule, now) if fires and schedule is not None else None
            facts = JobFacts(now=now, paused_by=holding_pauses(job, pauses), next_fire=upcoming)
            statuses.append(
                job_status(
                    job, pauses=pauses, next_fire=upcoming, last=last.get(job.name), facts=facts
                )
            )
        return tuple(statuses)

    async def groups(self) -> tuple[GroupStatus, ...]:
        pauses = await self._pauses()
        return tuple(
            GroupStatus(name=name, jobs=group.jobs, paused=("group", name) in pauses)
            for name, group in self._config.groups.items()
        )

    async def runs(self) -> tuple[RunStatus, ...]:
        return ()

    async def nodes(self) -> tuple[NodeView, ...]:
        if self._config.settings.cluster is None:
            return ()
        return await cluster_nodes(self._config)

    async def history(self, query: HistoryQuery) -> tuple[RunRecord, ...]:
        return tuple(await self._ask(lambda store: store.page(query), []))

    async def failures_since(self, since: datetime) -> tuple[datetime, ...]:
        return tuple(await self._ask(lambda store: store.failures_since(since), []))

    async def output(
        self, run_id: str, *, offset: int | None = None, limit: int = OUTPUT_CHUNK_BYTES
    ) -> OutputChunk:
        run = await self._ask(lambda store: store.get(run_id), None)
        if run is None:
            raise UnknownRunError([run_id])
        state_dir = self._config.settings.state_dir
        return await output_chunk(state_dir, run, running=False, offset=offset, limit=limit)

    async def audit(self, *, offset: int | None = None, lines: int = AUDIT_LINES) -> AuditChunk:
        path = self._config.settings.state_dir / "audit.log"
        return await audit_chunk(path, offset=offset, lines=lines)

    async def config_text(self) -> str:
        return self._text

    async def pending_edit(self) -> PendingEdit:
        return PendingEdit()

    async def job_definition(self, name: str) -> Mapping[str, object] | None:
        from tuisched.runtime.document import ConfigDocument  # noqa: PLC0415  (ruamel.yaml: only here)

        text, path = self._text, self._config.path
        return await in_thread(Lane.CONFIG, lambda: ConfigDocument(text, path).job(name))

    async def plan(self, name: str, *, count: int = 10, after: datetime | None = None) -> JobPlan:
        job = self._config.job(name)
        paused = bool(holding_pauses(job, await self._pauses()))
        return job_plan(job, now=after or self._clock(), count=count, paused=paused)

    async def preview(self, edit: ConfigEdit) -> tuple[str, ...]:
        raise SchedulerNotRunningError("previewing an edit needs a running scheduler")

    async def last_change(self) -> ConfigChange | None:
        return None  # changes are undone while the scheduler that made them runs

    def subscribe(
        self, callback: Callable[[Event], object], *, after: int | None = None
    ) -> Subscription:
        return _NoSubscription()

    # --- the output viewer ---------------------------------------------------------------

    async def _run(self, run_id: str) -> RunRecord:
        run = await self._ask(lambda store: store.get(run_id), None)
        if run is None:
            raise UnknownRunError([run_id])
        return run

    async def output_page(
        self, run_id: str, *, offset: int | None = None, before: bool = False,
        lines: int = PAGE_LINES,
    ) -> OutputPage:  # fmt: skip
        run, state_dir = await self._run(run_id), self._config.settings.state_dir
        return await output_page(
            state_dir, run, running=False, offset=offset, before=before, lines=lines
        )

    async def search_output(
        self, run_id: str, text: str, *, offset: int = 0, backward: bool = False
    ) -> OutputMatch:
        run, state_dir = await self._run(run_id), self._config.settings.state_dir
        return await output_search(state_dir, run, text, offset=offset, backward=backward)

    async def output_line_number(self, run_id: str, offset: int) -> int | None:
        run = await self._run(run_id)
        return await output_line(self._config.settings.state_dir, run, offset)

    # --- the downtime ledger (SPEC R25) ---

    async def missed(self) -> tuple[MissedSlots, ...]:
        raise SchedulerNotRunningError("the missed slots are listed by a running scheduler")

    # --- seeing ahead (R25) ---------------------------------------------------------------

    async def simulate(
        self, start: datetime, end: datetime, *, jobs: tuple[str, ...] = (), limit: int = 10_000
    ) -> Simulation:
        config, pauses = self._config, await self._pauses()
        paused = [job.name for job in config.jobs.values() if holding_pauses(job, pauses)]
        return await in_thread(
            Lane.FILES, lambda: simulate(config, start, end, jobs=jobs, limit=limit, paused=paused)
        )

    # --- the edit form's impact preview (SPEC R25) ---

    async def impact(self, edit: ConfigEdit) -> EditImpact:
        raise SchedulerNotRunningError("previewing an edit needs a running scheduler")

    # --- history stats (issue 16) ---

    async def stats(self, query: StatsQuery) -> HistoryStats:
        empty = HistoryStats(since=query.since, until=query.until)
        return await self._ask(lambda store: read_stats(store, query), empty)


class OfflineControl(OfflineQueries):
    """`SchedulerControl` with no scheduler running: every command says it needs one."""

    async def run_now(self, job: str, *, key: str | None = None, queue: bool = False) -> RunRecord:
        raise SchedulerNotRunningError(f"running {job} needs a running scheduler")

    async def stop_run(self, run_id: str, *, kill: bool = False) -> None:
        raise SchedulerNotRunningError("no scheduler is running: nothing to stop")

    async def set_paused(self, pause: Pause, *, paused: bool) -> None:
        raise SchedulerNotRunningError("pausing needs a running scheduler")

    async def edit(self, edit: ConfigEdit) -> None:
        raise SchedulerNotRunningError("editing through tuisched needs a running scheduler")

    async def undo(self, *, change: int | None = None) -> None:
        raise SchedulerNotRunningError("undo needs a running scheduler")

    async def reload(self) -> bool:
        raise SchedulerNotRunningError("no scheduler is running: nothing to reload")

    async def shutdown(self, *, grace: float | None = None, reason: str = "shutdown") -> None:
        raise SchedulerNotRunningError("no scheduler is running: nothing to stop")

    async def hurry(self) -> None:
        raise SchedulerNotRunningError("no scheduler is running: nothing to stop")

    # --- the downtime ledger (SPEC R25) ---

    async def decide_missed(self, job: str | None, choice: MissedChoice) -> tuple[MissedSlots, ...]:
        raise SchedulerNotRunningError("deciding missed slots needs a running scheduler")

    # --- backfill of a window (SPEC R24) ---

    async def backfill(
        self, job: str, start: datetime, end: datetime, *, dry_run: bool = False
    ) -> BackfillPlan:
        """A dry run reads the history the scheduler left; a backfill needs a running one."""
        if not dry_run:
            raise SchedulerNotRunningError(
                f"backfilling {job} needs a running scheduler (tuisched --no-ui); "
                "--dry-run lists the slots without one"
            )
        found, now = self._config.job(job), self._clock()
        none: list[RunRecord] = []
        held = await self._ask(lambda store: store.runs_of_slots(job, start, min(end, now)), none)
        workers = self._config.settings.max_workers
        return await in_thread(
            Lane.FILES, lambda: backfill.plan(
                found, start, end, now=now, runs=held, dry_run=True, max_workers=workers
            ),
        )  # fmt: skip


def offline_control(config: Config, text: str, *, clock: Clock | None = None) -> OfflineControl:
    """The seam over what the scheduler of `config` (read from `text`) left, once its
    history is known to be readable.

    Blocking (an import): call it before the event loop, or off it.

    Raises:
        DriverMissingError: the history is in PostgreSQL and its driver is not installed
            (its one problem names the setting's line and what to install).
    """
    require_driver(config, cluster=False)  # a postgresql:// history is read with psycopg
    return OfflineControl(config, text, clock=(clock or SystemClock()).now)
