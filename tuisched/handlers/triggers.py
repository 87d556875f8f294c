"""Trigger dependencies (SPEC R8): `after: {job, on, delay}` as a bus subscriber.

When a run reaches its final outcome (retries exhausted), each job `after`
it is started once, `delay` later, if the outcome matches its `on`; if it
does not match, the dependant is recorded NOT_STARTED, naming the run that
decided it, and that NOT_STARTED cascades down the chain the same way.

Outcomes: SUCCESS is a success; FAILED, and a launch failure, are failures;
any other NOT_STARTED (skipped, stopped, shut down, a dependency of its own)
matches nothing and cascades. A paused dependant is NOT_STARTED ("paused").
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Callable

from tuisched.bus import EventBus, Subscription
from tuisched.engine import Engine
from tuisched.events import RunFinished, RunNotStarted
from tuisched.model import Config, Job, Outcome
from tuisched.runs import Result, RunRecord, RunState, Trigger

log = logging.getLogger(__name__)


def outcome_of(run: RunRecord) -> Outcome | None:
    """The `on:` a finished run matches (`success`/`failure`), or None (it cascades)."""
    if run.state is RunState.SUCCESS:
        return Outcome.SUCCESS
    if run.state is RunState.FAILED or run.result is Result.LAUNCH_FAILED:
        return Outcome.FAILURE
    return None


def dependants(config: Config) -> dict[str, list[Job]]:
    """Jobs `after` each job, by upstream name."""
    found: defaultdict[str, list[Job]] = defaultdict(list)
    for job in config.jobs.values():
        if job.after is not None and job.enabled:
            found[job.after.job].append(job)
    return found


class DependencyTrigger:
    """Starts (or records as NOT_STARTED) the dependants of every finished run."""

    def __init__(self, engine: Engine, config: Callable[[], Config]) -> None:
        self._engine = engine
        self._config = config
        self._index: tuple[Config, dict[str, list[Job]]] | None = None
        self._timers: set[asyncio.TimerHandle] = set()

    def subscribe(self, bus: EventBus) -> list[Subscription]:
        """Listen for final outcomes."""
        return [
            bus.subscribe(RunFinished, self._on_finished),
            bus.subscribe(RunNotStarted, self._on_not_started),
        ]

    def stop(self) -> None:
        """Forget the delayed starts still pending (at shutdown)."""
        for timer in self._timers:
            timer.cancel()
        if self._timers:
            log.info("%d delayed dependant start(s) dropped at shutdown", len(self._timers))
        self._timers.clear()

    def _on_finished(self, event: RunFinished) -> None:
        if event.final:
            self._follow(event.run)

    def _on_not_started(self, event: RunNotStarted) -> None:
        if event.final:
            self._follow(event.run)

    def _dependants_of(self, job: str) -> list[Job]:
        config = self._config()
        if self._index is None or self._index[0] is not config:
            self._index = (config, dependants(config))
        return self._index[1].get(job, [])

    def _follow(self, run: RunRecord) -> None:
        outcome = outcome_of(run)
        for job in self._dependants_of(run.job):
            assert job.after is not None  # noqa: S101  (dependants() selects them)
            if outcome is not None and job.after.on in (outcome, Outcome.BOTH):
                self._start_later(job, run)
            else:
                self._not_started(job, run, _reason(run, outcome))

    def _start_later(self, job: Job, parent: RunRecord) -> None:
        assert job.after is not None  # noqa: S101
        delay = job.after.delay.total_seconds()
        if delay <= 0:
            self._start(job.name, parent)
            return

        def fire() -> None:
            self._timers.discard(handle)
            self._start(job.name, parent)

        handle = asyncio.get_running_loop().call_later(delay, fire)
        self._timers.add(handle)

    def _start(self, name: str, parent: RunRecord) -> None:
        job = self._config().jobs.get(name)
        if job is None or not job.enabled:
            return  # deleted or disabled during the delay
        if self._engine.is_paused(job):
            self._not_started(job, parent, "the job is paused")
            return
        self._engine.submit(job, slot=parent.slot, trigger=Trigger.DEPENDENCY)

    def _not_started(self, job: Job, parent: RunRecord, reason: str) -> None:
        self._engine.record_not_started(
            job, slot=parent.slot, trigger=Trigger.DEPENDENCY, result=Result.DEPENDENCY,
            reason=reason,
        )  # fmt: skip


def _reason(parent: RunRecord, outcome: Outcome | None) -> str:
    if outcome is None and parent.result is Result.DEPENDENCY and parent.reason:
        return parent.reason  # a cascade names the run that decided it, up the chain
    word = parent.state.value if outcome is not None else f"{parent.state.value} ({parent.result})"
    return f"{parent.job}#{parent.run_id} {word}"
