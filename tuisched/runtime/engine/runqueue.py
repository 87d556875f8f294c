"""The run queue (SPEC R12): who runs next when workers are scarce.

Queued runs leave in order of (scheduled time, higher priority first, job
name); a manual run's scheduled time is when it was queued. Pure data, but
shared: the loop pushes and pops, and a job thread pops the next run itself
when that run can start on it (see `lane`), so every operation holds the
lock it is given.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TypeVar

from tuisched.domain.model import Job
from tuisched.domain.runs import RunRecord

H = TypeVar("H")

_Entry = tuple[datetime, int, str, int, RunRecord, Job, int]
"""(when, negated priority: higher sorts first, job name, sequence number, run, job, history
ticket of its row): a plain tuple, compared in C; the unique sequence number means the run
itself is never compared."""
Queued = tuple[RunRecord, Job, int]
"""A run taken out of the queue, the job it was queued as, and the ticket of its row."""


@dataclass(slots=True)
class RunQueue:
    """A priority queue of QUEUED runs, with removal by run id; safe from any thread."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    """Held by every operation (a job thread pops under it too)."""
    _heap: list[_Entry] = field(default_factory=list)
    _removed: set[str] = field(default_factory=set)
    _ids: set[str] = field(default_factory=set)
    _seq: itertools.count[int] = field(default_factory=itertools.count)

    def push(self, run: RunRecord, job: Job, ticket: int) -> None:
        """Queue `run` of `job` (its priority: higher leaves first); `ticket` is the history's
        ticket of its row (0: written already)."""
        when = run.slot if run.slot is not None else run.queued_at
        entry = (when, -job.priority, run.job, next(self._seq), run, job, ticket)
        with self.lock:
            heapq.heappush(self._heap, entry)
            self._ids.add(run.run_id)

    def push_many(self, queued: list[Queued]) -> None:
        """`push` each of `queued` (run, job, ticket), under one hold of the lock."""
        seq = self._seq
        entries = [
            (run.slot if run.slot is not None else run.queued_at, -job.priority, run.job,
             next(seq), run, job, ticket)
            for run, job, ticket in queued
        ]  # fmt: skip
        with self.lock:
            heap = self._heap
            for entry in entries:
                heapq.heappush(heap, entry)
            self._ids.update(entry[4].run_id for entry in entries)

    def pop(self) -> Queued | None:
        """The next run to start, or None when empty."""
        with self.lock:
            entry = self._head()
            if entry is None:
                return None
            self._take_head(entry)
            return entry[4], entry[5], entry[6]

    def pop_if(self, take: Callable[[RunRecord, Job, int], H | None]) -> H | None:
        """`take(run, job, ticket)` of the next run to start, which leaves the queue if that
        is not None; the queue is left as it was otherwise. The caller holds `lock`."""
        entry = self._head()
        if entry is None:
            return None
        taken = take(entry[4], entry[5], entry[6])
        if taken is not None:
            self._take_head(entry)
        return taken

    def _head(self) -> _Entry | None:
        heap, removed = self._heap, self._removed
        while heap:
            entry = heap[0]
            if entry[4].run_id not in removed:
                return entry
            heapq.heappop(heap)
            removed.discard(entry[4].run_id)
        return None

    def _take_head(self, entry: _Entry) -> None:
        heapq.heappop(self._heap)
        self._ids.discard(entry[4].run_id)

    def remove(self, run_id: str) -> RunRecord | None:
        """Take `run_id` out of the queue; returns its record if it was queued."""
        with self.lock:
            if run_id not in self._ids:
                return None
            self._ids.discard(run_id)
            self._removed.add(run_id)
            return next(entry[4] for entry in self._heap if entry[4].run_id == run_id)

    def runs(self) -> list[RunRecord]:
        """Every queued run, in leaving order."""
        with self.lock:
            entries = sorted(self._heap)
            ids = set(self._ids)
        return [entry[4] for entry in entries if entry[4].run_id in ids]

    def __len__(self) -> int:
        return len(self._ids)
