"""Trigger dependencies (SPEC R8): `after: {job, on, delay}` as a bus subscriber.

When a run concludes (its last attempt, or a dropped retry), each job
`after` it is started once, `delay` later, if the outcome matches its `on`;
if it does not match, the dependant is recorded NOT_STARTED, naming the run
that decided it, and that NOT_STARTED cascades down the chain the same way.

Outcomes: SUCCESS is a success; FAILED, and a launch failure, are failures;
a NOT_STARTED for a dependency of its own matches nothing and cascades. A run
that did not start for the scheduler's own reasons (skipped by `overlap`,
stopped while queued, shut down, missed) did not finish: its dependants are
left alone. A paused dependant is NOT_STARTED ("the job is paused"); at
shutdown, dependants whose delay had not run out are NOT_STARTED too.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable

from tuisched.domain.bus import EventBus, Subscription
from tuisched.domain.events import RunConcluded
from tuisched.domain.model import Config, Job, Outcome
from tuisched.domain.runs import Result, RunRecord, RunState, Trigger
from tuisched.runtime.clock import Clock, Timer
from tuisched.runtime.engine.engine import Engine

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

    def __init__(self, engine: Engine, config: Callable[[], Config], clock: Clock) -> None:
        self._engine = engine
        self._config = config
        self._clock = clock
        self._index: tuple[Config, dict[str, list[Job]]] | None = None
        self._timers: dict[Timer, tuple[Job, RunRecord]] = {}
        self._subscriptions: list[Subscription] = []

    def subscribe(self, bus: EventBus) -> list[Subscription]:
        """Listen for runs' conclusions."""
        self._subscriptions = [bus.subscribe(RunConcluded, self._on_concluded)]
        return self._subscriptions

    @property
    def pending(self) -> int:
        """Dependants whose delay has not run out yet."""
        return len(self._timers)

    def stop(self) -> None:
        """Stop following (at shutdown); delayed starts still pending are NOT_STARTED."""
        for subscription in self._subscriptions:
            subscription.unsubscribe()
        for timer, (job, parent) in self._timers.items():
            timer.cancel()
            self._not_started(job, parent, "the scheduler shut down during the delay")
        self._timers.clear()

    def _on_concluded(self, event: RunConcluded) -> None:
        if event.run.result not in _DID_NOT_FINISH:
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
                self._not_started(job, run, not_started_reason(run, outcome))

    def _start_later(self, job: Job, parent: RunRecord) -> None:
        assert job.after is not None  # noqa: S101
        delay = job.after.delay.total_seconds()
        if delay <= 0:
            self._start(job.name, parent)
            return

        timer: Timer | None = None

        def fire() -> None:
            assert timer is not None  # noqa: S101  (armed before it can fire)
            self._timers.pop(timer, None)
            self._start(job.name, parent)

        timer = self._clock.call_later(delay, fire)
        self._timers[timer] = (job, parent)

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


def not_started_reason(parent: RunRecord, outcome: Outcome | None) -> str:
    """Why a dependant of `parent` did not start: the deciding run, named up the chain.

    `a#3f2a FAILED` for a direct upstream; `b not started (a#3f2a FAILED)` one
    link further down, and so on.
    """
    if outcome is None and parent.result is Result.DEPENDENCY and parent.reason:
        return f"{parent.job} not started ({parent.reason})"
    word = parent.state.value if outcome is not None else f"{parent.state.value} ({parent.result})"
    return f"{parent.job}#{parent.run_id} {word}"


_DID_NOT_FINISH = frozenset({Result.SKIPPED, Result.SHUTDOWN, Result.STOPPED, Result.MISSED})
"""Not-started results that are the scheduler's own business, not an upstream outcome."""
