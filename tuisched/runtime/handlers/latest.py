"""What front ends show beside the engine's own state: each job's newest run, each run's last line.

A bus subscriber. The newest finished run of every job is read from the
history once at start and then kept up to date from the run events; the last
output line of each run in progress comes from its output events and is
forgotten when the run ends. Both are read on the loop thread.
"""

from __future__ import annotations

from collections.abc import Mapping

from tuisched.domain.bus import EventBus, Subscription
from tuisched.domain.events import RunEvent, RunOutputWritten
from tuisched.domain.runs import RunRecord


class LatestRuns:
    """The newest finished run per job and the last output line per running run."""

    def __init__(self) -> None:
        self._last: dict[str, RunRecord] = {}
        self._lines: dict[str, str] = {}

    def subscribe(self, bus: EventBus) -> list[Subscription]:
        """Follow the run events of `bus`, a turn's at once (subscribe before reading the
        history: see `merge`)."""
        return [bus.subscribe_batch(RunEvent, self._on_runs)]

    def merge(self, from_history: Mapping[str, RunRecord]) -> None:
        """Take the history's newest runs, keeping a newer one an event already brought."""
        for job, run in from_history.items():
            seen = self._last.get(job)
            if seen is None or _ended(seen) < _ended(run):
                self._last[job] = run

    def last_run(self, job: str) -> RunRecord | None:
        """The newest finished run of `job`, if it ever ran."""
        return self._last.get(job)

    def last_line(self, run_id: str) -> str:
        """The last output line of a run in progress ("" before any)."""
        return self._lines.get(run_id, "")

    def _on_runs(self, events: list[RunEvent]) -> None:
        last, lines = self._last, self._lines
        for event in events:
            run = event.run
            if isinstance(event, RunOutputWritten):
                if event.lines:
                    lines[run.run_id] = event.lines[-1]
            elif run.state.terminal:
                last[run.job] = run
                if lines:
                    lines.pop(run.run_id, None)


def _ended(run: RunRecord) -> float:
    return run.ended_at.timestamp() if run.ended_at is not None else float("-inf")
