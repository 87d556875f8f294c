"""The heap job store behaves like APScheduler's MemoryJobStore, operation for operation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from apscheduler.jobstores.base import ConflictingIdError, JobLookupError
from apscheduler.jobstores.memory import MemoryJobStore
from hypothesis import given, settings
from hypothesis import strategies as st

from tuisched.runtime.engine.jobstore import HeapJobStore

BASE = datetime(2026, 5, 7, 9, 0, tzinfo=UTC)
ids = st.sampled_from([f"job{i}" for i in range(8)])
times = st.one_of(st.none(), st.integers(0, 20).map(lambda m: BASE + timedelta(minutes=m)))
operations = st.lists(
    st.tuples(st.sampled_from(["add", "update", "remove", "due"]), ids, times), max_size=60
)


def _job(job_id: str, when: datetime | None) -> SimpleNamespace:
    return SimpleNamespace(id=job_id, next_run_time=when)


def _apply(
    store: MemoryJobStore | HeapJobStore, op: str, job_id: str, when: datetime | None
) -> object:
    try:
        if op == "add":
            store.add_job(_job(job_id, when))
        elif op == "update":
            store.update_job(_job(job_id, when))
        elif op == "remove":
            store.remove_job(job_id)
        else:
            return sorted(job.id for job in store.get_due_jobs(when or BASE))
    except (ConflictingIdError, JobLookupError) as error:
        return type(error).__name__
    return None


@settings(max_examples=200, deadline=None)
@given(operations)
def test_same_answers_as_the_memory_store(ops: list[tuple[str, str, datetime | None]]) -> None:
    memory, heap = MemoryJobStore(), HeapJobStore()
    for op, job_id, when in ops:
        assert _apply(heap, op, job_id, when) == _apply(memory, op, job_id, when)
        assert heap.get_next_run_time() == memory.get_next_run_time()
        assert [j.id for j in heap.get_all_jobs()] == [j.id for j in memory.get_all_jobs()]
        assert heap.lookup_job(job_id) is memory.lookup_job(job_id) or (
            heap.lookup_job(job_id).next_run_time == memory.lookup_job(job_id).next_run_time
        )


def test_a_job_updated_back_to_an_old_time_is_due_once() -> None:
    store = HeapJobStore()
    store.add_job(_job("a", BASE))
    store.update_job(_job("a", BASE + timedelta(minutes=5)))
    store.update_job(_job("a", BASE))
    assert [job.id for job in store.get_due_jobs(BASE)] == ["a"]


def test_errors_match_the_contract() -> None:
    store = HeapJobStore()
    store.add_job(_job("a", BASE))
    with pytest.raises(ConflictingIdError):
        store.add_job(_job("a", BASE))
    with pytest.raises(JobLookupError):
        store.update_job(_job("b", BASE))
    with pytest.raises(JobLookupError):
        store.remove_job("b")
    store.shutdown()
    assert store.get_all_jobs() == []
