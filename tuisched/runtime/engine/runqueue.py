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

_Entry = tuple[datetime, int, str, int, RunRecord]
"""(when, negated priority: higher sorts first, job, sequence number, run): a plain tuple,
compared in C; the unique sequence number means the run itself is never compared."""


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
        heapq.heappush(self._heap, (when, -priority, run.job, next(self._seq), run))
        self._ids.add(run.run_id)

    def pop(self) -> RunRecord | None:
        """The next run to start, or None when empty."""
        while self._heap:
            run = heapq.heappop(self._heap)[-1]
            if run.run_id in self._removed:
                self._removed.discard(run.run_id)
                continue
            self._ids.discard(run.run_id)
            return run
        return None

    def remove(self, run_id: str) -> RunRecord | None:
        """Take `run_id` out of the queue; returns its record if it was queued."""
        if run_id not in self._ids:
            return None
        self._ids.discard(run_id)
        self._removed.add(run_id)
        return next(entry[-1] for entry in self._heap if entry[-1].run_id == run_id)

    def runs(self) -> list[RunRecord]:
        """Every queued run, in leaving order."""
        return [entry[-1] for entry in sorted(self._heap) if entry[-1].run_id in self._ids]

    def __len__(self) -> int:
        return len(self._ids)
