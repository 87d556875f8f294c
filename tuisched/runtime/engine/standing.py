"""Where each job stands in the engine now: the facts of its "why not running" line (R25).

`JobStanding` reads the engine once (its running runs, the queue in leaving
order, the backlogs, the waiting room, the pauses) and then answers for any
number of jobs at a dictionary lookup each, so listing 10,000 jobs costs one
pass over the runs in progress, not one per job. The wording is the domain's
(`tuisched.domain.reasons`).
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

from tuisched.domain.model import Job
from tuisched.domain.reasons import JobFacts
from tuisched.domain.runs import RunRecord
from tuisched.domain.schedule.describe import holding_pauses
from tuisched.runtime.engine.engine import Engine


class JobStanding:
    """The engine's runs and pauses at one moment, indexed by job."""

    def __init__(self, engine: Engine, now: datetime) -> None:
        self._engine = engine
        self._now = now
        self._running: defaultdict[str, list[RunRecord]] = defaultdict(list)
        for run in engine.running():
            self._running[run.job].append(run)
        queue, self._backlogs = engine.queue_parts()
        self._queued: dict[str, tuple[int, RunRecord]] = {}
        for position, run in enumerate(queue):
            self._queued.setdefault(run.job, (position, run))
        self._waiting: dict[str, RunRecord] = {}
        for run in engine.waiting():
            self._waiting.setdefault(run.job, run)
        self._pauses = engine.pauses
        self._busy = sum(len(runs) for runs in self._running.values())

    def facts(self, job: Job) -> JobFacts:
        """What the engine knows of `job` now."""
        engine, name = self._engine, job.name
        held = holding_pauses(job, self._pauses) if self._pauses else ()
        note = engine.pause_note((held[0].kind.value, held[0].name)) if held else None
        position, queued = self._queued.get(name, (0, None))
        waiting = self._waiting.get(name)
        needs = engine.waiting_room.needs(waiting.run_id) if waiting is not None else []
        return JobFacts(
            now=self._now, paused_by=held, pause_note=note,
            running=tuple(self._running.get(name, ())), queued=queued,
            queued_ahead=position, behind=self._behind(name),
            backlogged=len(self._backlogs.get(name, ())),
            workers_busy=self._busy,
            max_workers=engine.config.settings.max_workers, waiting=waiting,
            waits_for=tuple((need.job, need.slot) for need in needs),
            next_fire=engine.next_fire(name),
        )  # fmt: skip

    def _behind(self, name: str) -> str:
        """The run of `name` its backlogged run waits behind, or ""."""
        if name not in self._backlogs:
            return ""
        running = self._running.get(name)
        if running:
            return running[0].run_id
        queued = self._queued.get(name)
        return queued[1].run_id if queued is not None else ""
