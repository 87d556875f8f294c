"""Retries (SPEC R2): a run that failed by itself is tried again `retry_delay` later.

Only a run the job itself failed (FAILED, completed) is retried, at most
`retries` times; a stopped, timed-out or unlaunchable run is not. The retry
is a new run of the same slot and trigger, `attempt` one higher. When a
retry will not come (its job was deleted or disabled, or the scheduler is
stopping), the failed attempt is the run's conclusion.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from tuisched.domain.model import Config, Job
from tuisched.domain.runs import Result, RunRecord, RunState
from tuisched.runtime.clock import Clock, Timer
from tuisched.runtime.engine.outcomes import Outcomes

log = logging.getLogger(__name__)

Resubmit = Callable[[Job, RunRecord], object]
"""Queues the next attempt of a failed run."""


class Retries:
    """Pending retries, each a timer on the runtime's clock."""

    def __init__(
        self,
        *,
        clock: Clock,
        config: Callable[[], Config],
        outcomes: Outcomes,
        resubmit: Resubmit,
        accepting: Callable[[], bool],
    ) -> None:
        self._clock = clock
        self._config = config
        self._outcomes = outcomes
        self._resubmit = resubmit
        self._accepting = accepting
        self._pending: dict[Timer, tuple[RunRecord, Mapping[str, object]]] = {}
        """The failed attempt (and its message_data) each pending retry follows."""

    def __len__(self) -> int:
        return len(self._pending)

    def schedule(self, job: Job, run: RunRecord, data: Mapping[str, object]) -> bool:
        """Schedule a retry of `run` if the job allows one; True if it did."""
        retryable = run.state is RunState.FAILED and run.result is Result.COMPLETED
        if not retryable or run.attempt >= job.retries or not self._accepting():
            return False
        timer: Timer | None = None

        def retry() -> None:
            assert timer is not None  # noqa: S101  (armed before it can fire)
            self._pending.pop(timer, None)
            current = self._config().jobs.get(job.name)
            if current is None or not current.enabled:
                log.info("retry of %s dropped: the job was deleted or disabled", job.name)
                self._outcomes.conclude(run, data)
                return
            self._resubmit(current, run)

        timer = self._clock.call_later(job.retry_delay.total_seconds(), retry)
        self._pending[timer] = (run, data)
        return True

    def drop_all(self) -> None:
        """Cancel every pending retry: each failed attempt is then its run's conclusion."""
        for timer, (failed, data) in list(self._pending.items()):
            timer.cancel()
            self._outcomes.conclude(failed, data)
        self._pending.clear()
