"""The run queue (SPEC R12): who runs next when workers are scarce.

Queued runs leave in order of (scheduled time, higher priority first, job
name); a manual run's scheduled time is when it was queued. Pure data: the
engine owns the workers and the clock.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field
from datetime import datetime

from tuisched.domain.runs import RunRecord


@dataclass(order=True, frozen=True, slots=True)
class _Entry:
    when: datetime
    priority: int  # negated: higher priority sorts first
    job: str
    seq: int
    run: RunRecord = field(compare=False)


@dataclass(slots=True)
class RunQueue:
    """A priority queue of QUEUED runs, with removal by run id."""

    _heap: list[_Entry] = field(default_factory=list)
    _removed: set[str] = field(default_factory=set)
    _ids: set[str] = field(default_factory=set)
    _seq: itertools.count[int] = field(default_factory=itertools.count)

    def push(self, run: RunRecord, priority: int) -> None:
        """Queue `run`; `priority` is the job's (higher leaves first)."""
        when = run.slot if run.slot is not None else run.queued_at
        heapq.heappush(self._heap, _Entry(when, -priority, run.job, next(self._seq), run))
        self._ids.add(run.run_id)

    def pop(self) -> RunRecord | None:
        """The next run to start, or None when empty."""
        while self._heap:
            entry = heapq.heappop(self._heap)
            if entry.run.run_id in self._removed:
                self._removed.discard(entry.run.run_id)
                continue
            self._ids.discard(entry.run.run_id)
            return entry.run
        return None

    def remove(self, run_id: str) -> RunRecord | None:
        """Take `run_id` out of the queue; returns its record if it was queued."""
        if run_id not in self._ids:
            return None
        self._ids.discard(run_id)
        self._removed.add(run_id)
        return next(e.run for e in self._heap if e.run.run_id == run_id)

    def runs(self) -> list[RunRecord]:
        """Every queued run, in leaving order."""
        return [e.run for e in sorted(self._heap) if e.run.run_id in self._ids]

    def __len__(self) -> int:
        return len(self._ids)
