"""The jobs pane's index (no Textual): always what a plain sort and filter would show."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from tuisched.domain.runs import Result, RunRecord, RunState, Trigger
from tuisched.domain.views import JobState, JobStatus
from tuisched.frontends.tui.jobindex import SORTS, JobIndex, haystack, sort_key

BASE = datetime(2026, 5, 7, 9, 0, tzinfo=UTC)
NAMES = [f"job{i:02d}" for i in range(12)]


def _last(failed: bool | None) -> RunRecord | None:
    if failed is None:
        return None
    state = RunState.FAILED if failed else RunState.SUCCESS
    return RunRecord(
        run_id="r", job="x", slot=None, trigger=Trigger.MANUAL, state=state,
        queued_at=BASE, result=Result.COMPLETED,
    )  # fmt: skip


statuses = st.builds(
    lambda name, state, minutes, failed, groups, kind: JobStatus(
        name=name,
        kind=kind,
        trigger="manual",
        state=state,
        groups=groups,
        next_fire=None if minutes is None else BASE + timedelta(minutes=minutes),
        last=_last(failed),
    ),
    st.sampled_from(NAMES),
    st.sampled_from(list(JobState)),
    st.none() | st.integers(0, 5),  # few values: many ties, broken by name
    st.none() | st.booleans(),
    st.sampled_from([(), ("nightly",), ("nightly", "reports")]),
    st.sampled_from(["command", "python", "wait_for"]),
)
operations = st.one_of(
    st.tuples(st.just("replace"), st.lists(statuses, max_size=10)),
    st.tuples(st.just("update"), st.lists(statuses, max_size=4)),
    st.tuples(st.just("order"), st.sampled_from(SORTS)),
    st.tuples(st.just("filter"), st.sampled_from(["", "job0", "nightly", "paused", "py", "1"])),
)


class Naive:
    """What the pane showed before the index: every job sorted and filtered anew."""

    def __init__(self) -> None:
        self.jobs: dict[str, JobStatus] = {}
        self.order, self.needle = SORTS[0], ""

    def apply(self, operation: str, value: object) -> None:
        if operation == "replace":
            self.jobs = {s.name: s for s in value}  # type: ignore[attr-defined]
        elif operation == "update":
            self.jobs.update((s.name, s) for s in value)  # type: ignore[attr-defined]
        elif operation == "order":
            self.order = str(value)
        else:
            self.needle = str(value)

    def shown(self) -> list[str]:
        positions = {name: i for i, name in enumerate(self.jobs)}
        ordered = sorted(
            self.jobs.values(), key=lambda s: sort_key(self.order, s, positions[s.name])
        )
        return [s.name for s in ordered if self.needle.lower() in haystack(s)]


def _apply(index: JobIndex, operation: str, value: object) -> None:
    if operation == "replace":
        index.replace(value)  # type: ignore[arg-type]
    elif operation == "update":
        index.update(value)  # type: ignore[arg-type]
    elif operation == "order":
        index.set_order(str(value))
    else:
        index.set_filter(str(value))


@settings(max_examples=150, deadline=None)
@given(st.lists(operations, max_size=25))
def test_the_index_shows_what_a_plain_sort_and_filter_would(
    steps: list[tuple[str, object]],
) -> None:
    index, naive = JobIndex(), Naive()
    for operation, given_value in steps:
        value = given_value
        if operation in ("replace", "update"):
            # one status per name in a batch, as the control seam gives them
            value = list({s.name: s for s in given_value}.values())  # type: ignore[attr-defined]
        _apply(index, operation, value)
        naive.apply(operation, value)
        shown = index.shown()
        assert shown == naive.shown()
        assert index.total == len(naive.jobs)
        assert all(index.row_of(name) == row for row, name in enumerate(shown))


def test_a_big_change_is_sorted_again_and_a_small_one_moved_in_place() -> None:
    jobs = [JobStatus(name=f"j{i:04d}", kind="command", trigger="manual") for i in range(1000)]
    index = JobIndex()
    index.replace(jobs)
    index.set_order("state")
    assert index.shown()[:2] == ["j0000", "j0001"]
    paused = JobStatus(name="j0500", kind="command", trigger="manual", state=JobState.PAUSED)
    assert index.update([paused]) == ["j0500"]
    assert index.shown()[0] == "j0500"  # paused comes before active
    assert index.update([paused]) == []  # the same status again changes nothing
    index.replace(reversed(jobs))  # every job moved in the file: all sorted again
    index.set_order("file order")
    assert index.shown()[0] == "j0999"
    assert index.row_of("j0500") == 499
