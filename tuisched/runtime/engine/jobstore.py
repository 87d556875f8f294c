"""An APScheduler 3.11 job store on a heap, for schedules of 100,000 jobs.

APScheduler's MemoryJobStore keeps a sorted list: each add and each update
after a fire is a Python binary search plus an O(n) insert, so loading
100,000 jobs costs O(n²). This store keeps the same contract with a heap of
(timestamp, version, id) entries: adds and updates are O(log n); an entry
whose version no longer matches its job's is stale and dropped when it
reaches the top.
"""

from __future__ import annotations

import heapq
import itertools
from datetime import datetime
from typing import Any

from apscheduler.jobstores.base import BaseJobStore, ConflictingIdError, JobLookupError
from apscheduler.util import datetime_to_utc_timestamp


class HeapJobStore(BaseJobStore):  # type: ignore[misc]  # APScheduler is untyped
    """In-memory jobs, due ones found in O(k log n)."""

    def __init__(self) -> None:
        super().__init__()
        self._jobs: dict[str, tuple[Any, int]] = {}
        """Job id -> (job, version of its live heap entry)."""
        self._heap: list[tuple[float, int, str]] = []
        self._versions = itertools.count()

    def _push(self, job: Any) -> None:
        version = next(self._versions)
        self._jobs[job.id] = (job, version)
        timestamp = datetime_to_utc_timestamp(job.next_run_time)
        if timestamp is not None:  # a paused job waits outside the heap
            heapq.heappush(self._heap, (timestamp, version, job.id))

    def _live_top(self) -> tuple[float, int, str] | None:
        while self._heap:
            top = self._heap[0]
            entry = self._jobs.get(top[2])
            if entry is not None and entry[1] == top[1]:
                return top
            heapq.heappop(self._heap)  # stale: updated or removed since
        return None

    def lookup_job(self, job_id: str) -> Any:
        entry = self._jobs.get(job_id)
        return entry[0] if entry is not None else None

    def get_due_jobs(self, now: datetime) -> list[Any]:
        now_timestamp = datetime_to_utc_timestamp(now)
        due: list[tuple[float, int, str]] = []
        while (top := self._live_top()) is not None and top[0] <= now_timestamp:
            due.append(heapq.heappop(self._heap))
        for entry in due:  # they stay until the scheduler updates or removes them
            heapq.heappush(self._heap, entry)
        return [self._jobs[job_id][0] for _, _, job_id in due]

    def take_due(self, now: datetime, limit: int) -> list[Any]:
        """Up to `limit` jobs due at `now`, in due order, out of the heap: each must be given
        back with `update_job` (with its next run time) or `remove_job` (`get_due_jobs`
        leaves them in, at the cost of pushing them all back)."""
        now_timestamp = datetime_to_utc_timestamp(now)
        heap, jobs = self._heap, self._jobs
        due: list[Any] = []
        while (
            len(due) < limit and (top := self._live_top()) is not None and top[0] <= now_timestamp
        ):
            heapq.heappop(heap)
            due.append(jobs[top[2]][0])
        return due

    def get_next_run_time(self) -> datetime | None:
        top = self._live_top()
        return self._jobs[top[2]][0].next_run_time if top is not None else None

    def get_all_jobs(self) -> list[Any]:
        def order(job: Any) -> tuple[float, str]:
            timestamp = datetime_to_utc_timestamp(job.next_run_time)
            return (float("inf") if timestamp is None else timestamp, job.id)

        return sorted((job for job, _ in self._jobs.values()), key=order)

    def add_job(self, job: Any) -> None:
        if job.id in self._jobs:
            raise ConflictingIdError(job.id)
        self._push(job)

    def update_job(self, job: Any) -> None:
        if job.id not in self._jobs:
            raise JobLookupError(job.id)
        self._push(job)

    def remove_job(self, job_id: str) -> None:
        if self._jobs.pop(job_id, None) is None:
            raise JobLookupError(job_id)

    def remove_all_jobs(self) -> None:
        self._jobs.clear()
        self._heap.clear()

    def shutdown(self) -> None:
        self.remove_all_jobs()
