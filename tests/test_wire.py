"""Events and views turn into JSON and back (the control seam's wire format)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import MappingProxyType
from zoneinfo import ZoneInfo

import pytest

from tuisched.domain import events as ev
from tuisched.domain.config.diff import ConfigDiff, FieldChange, JobChange
from tuisched.domain.errors import Problem, WireError
from tuisched.domain.runs import Result, RunRecord, RunState, Trigger
from tuisched.domain.views import (
    AuditChunk,
    ConfigEdit,
    GroupStatus,
    HistoryQuery,
    JobPlan,
    JobState,
    JobStatus,
    OutputChunk,
    Pause,
    PauseKind,
    PendingEdit,
    RunStatus,
    SchedulerState,
    SchedulerStatus,
)
from tuisched.domain.wire import decode, encode, event_from_json, event_to_json, event_types

BERLIN = ZoneInfo("Europe/Berlin")
AT = datetime(2026, 3, 29, 3, 30, 15, 123456, tzinfo=BERLIN)
"""Just after Berlin's spring-forward gap: an offset that is not UTC's."""
PATH = Path("/etc/tuisched/tuisched.yaml")

FINISHED = RunRecord(
    run_id="3f2a9c0b1d2e", job="backup", slot=AT, trigger=Trigger.SCHEDULE,
    state=RunState.FAILED, queued_at=AT, result=Result.COMPLETED, status="exit 3: disk full",
    exit_code=3, started_at=AT + timedelta(seconds=1), ended_at=AT + timedelta(minutes=2),
    pid=4242, node="ops1", reason="", output_tail="line one\nline two ✓", attempt=1,
)  # fmt: skip
MANUAL = RunRecord(
    run_id="000000000001", job="rebuild", slot=None, trigger=Trigger.MANUAL,
    state=RunState.QUEUED, queued_at=AT.astimezone(UTC),
)  # fmt: skip
DIFF = ConfigDiff(
    added=("new-job",),
    removed=("old-job",),
    changed=(
        JobChange(
            name="backup",
            fields=(FieldChange(field="schedule", before="every 1 hour", after="every 2 hours"),),
            next_before=AT,
            next_after=None,
        ),
    ),
    groups=("nightly",),
    sections=("settings",),
)
PROBLEMS = (
    Problem(file=PATH, line=12, message="unknown key 'scheduel'", job="backup"),
    Problem(file=PATH, line=3, message="bad zone", group="nightly"),
)

SAMPLES: dict[type[ev.Event], ev.Event] = {
    ev.SchedulerStarted: ev.SchedulerStarted(at=AT, node="ops1", config_path=PATH, jobs=12),
    ev.SchedulerStopping: ev.SchedulerStopping(at=AT, reason="signal", running=2),
    ev.SchedulerStopped: ev.SchedulerStopped(at=AT),
    ev.ConfigLoaded: ev.ConfigLoaded(
        at=AT, path=PATH, jobs=3, groups=1, origin="reload", diff=DIFF
    ),
    ev.ConfigChangedOnDisk: ev.ConfigChangedOnDisk(at=AT, path=PATH, diff=None, problems=PROBLEMS),
    ev.ConfigRejected: ev.ConfigRejected(at=AT, path=PATH, problems=PROBLEMS),
    ev.RunQueued: ev.RunQueued(at=AT, run=MANUAL),
    ev.RunStarted: ev.RunStarted(at=AT, run=FINISHED),
    ev.RunOutputWritten: ev.RunOutputWritten(at=AT, run=FINISHED, lines=("a", "[bold]b")),
    ev.RunFinished: ev.RunFinished(
        at=AT,
        run=FINISHED,
        final=False,
        message_data=MappingProxyType(
            {
                "rows": 12,
                "ratio": 0.5,
                "ok": True,
                "none": None,
                "names": ["a", "b"],
                "nested": {"k": "v"},
            }
        ),
    ),
    ev.RunNotStarted: ev.RunNotStarted(at=AT, run=MANUAL, final=True),
    ev.RunConcluded: ev.RunConcluded(at=AT, run=FINISHED),
    ev.RunWaiting: ev.RunWaiting(at=AT, run=MANUAL),
    ev.SlotMissed: ev.SlotMissed(at=AT, run=FINISHED),
    ev.RunAbandoned: ev.RunAbandoned(at=AT, run=FINISHED),
    ev.PauseChanged: ev.PauseChanged(at=AT, kind="group", name="nightly", paused=True),
    ev.AlertSent: ev.AlertSent(
        at=AT,
        job="backup",
        run_id="3f2a",
        alert="failed",
        to=("ops@example.org",),
        subject="backup failed",
    ),
    ev.AlertFailed: ev.AlertFailed(
        at=AT,
        job="backup",
        run_id="3f2a",
        alert="failed",
        to=("a@b.c", "d@e.f"),
        error="connection refused",
        attempts=3,
        final=True,
    ),
    ev.HistoryDamaged: ev.HistoryDamaged(
        at=AT, database="/var/lib/tuisched/history.db", error="the history database is damaged"
    ),
}


def test_every_event_type_has_a_sample() -> None:
    """A new event type must join the round trip below."""
    concrete = {cls for cls in event_types().values() if cls not in (ev.RunEvent,)}
    assert concrete == set(SAMPLES)


@pytest.mark.parametrize("event", list(SAMPLES.values()), ids=lambda e: type(e).__name__)
def test_every_event_survives_json_and_back(event: ev.Event) -> None:
    object.__setattr__(event, "seq", 41)
    text = json.dumps(event_to_json(event))
    back = event_from_json(json.loads(text))
    assert type(back) is type(event)
    assert back == event
    assert back.seq == 41
    assert back.at.utcoffset() == AT.utcoffset()  # the offset is kept, not just the instant


def test_the_wire_form_is_what_people_can_read() -> None:
    data = event_to_json(SAMPLES[ev.RunFinished])
    assert data["type"] == "RunFinished"
    run = data["run"]
    assert isinstance(run, dict)
    assert run["state"] == "FAILED"
    assert run["slot"] == "2026-03-29T03:30:15.123456+02:00"
    assert run["slot"] == AT.isoformat()
    assert data["message_data"] == {
        "rows": 12, "ratio": 0.5, "ok": True, "none": None, "names": ["a", "b"],
        "nested": {"k": "v"},
    }  # fmt: skip


def test_message_data_that_json_cannot_hold_becomes_text() -> None:
    event = ev.RunFinished(
        at=AT, run=FINISHED, message_data={"when": AT, "path": PATH, "obj": object}
    )
    data = event_to_json(event)["message_data"]
    assert data == {"when": AT.isoformat(), "path": str(PATH), "obj": str(object)}
    back = event_from_json(json.loads(json.dumps(event_to_json(event))))
    assert isinstance(back, ev.RunFinished)
    assert dict(back.message_data) == data
    assert isinstance(back.message_data, MappingProxyType)  # read-only, as published


VIEWS = [
    JobStatus(
        name="backup",
        kind="command",
        trigger="every hour",
        groups=("nightly",),
        timezone="Europe/Berlin",
        state=JobState.PAUSED,
        scheduled=True,
        requires=("export",),
        next_fire=AT,
        last=FINISHED,
        paused_by=(Pause(kind=PauseKind.ALL), Pause(kind=PauseKind.GROUP, name="nightly")),
        running=1,
        waiting=0,
    ),
    GroupStatus(name="nightly", jobs=("backup", "export"), paused=True),
    RunStatus(run=MANUAL, live_status="42%", waits_for=("export slot 2026-05-07T01:30:00+02:00",)),
    SchedulerStatus(
        config_path=PATH,
        node="ops1",
        timezone="Europe/Berlin",
        state=SchedulerState.RUNNING,
        jobs=3,
        groups=1,
        running=1,
        queued=0,
        waiting=2,
        pauses=(Pause(kind=PauseKind.ALL),),
        offline_edit=True,
        can_undo=True,
        last_seq=99,
    ),
    HistoryQuery(
        job="backup",
        limit=5,
        offset=10,
        states=(RunState.FAILED,),
        triggers=(Trigger.MANUAL,),
        since=AT,
        until=None,
    ),
    OutputChunk(run_id="r", job="j", lines=("x",), offset=3, next_offset=5, running=True),
    AuditChunk(lines=("a | b | c | d | e",), next_offset=100),
    PendingEdit(present=True, valid=False, lines=("bad",)),
    JobPlan(job="j", slots=(AT,), notes=("paused",), waits=("w",)),
    ConfigEdit.replace_job("backup", {"command": ["/bin/true"], "retries": "2"}),
    DIFF,
    timedelta(minutes=90, microseconds=5),
]


@pytest.mark.parametrize("view", VIEWS, ids=lambda v: type(v).__name__)
def test_views_survive_json_and_back(view: object) -> None:
    back = decode(type(view), json.loads(json.dumps(encode(view))))
    assert back == view


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "an event must be a JSON object, not list"),
        ({"type": "Nope"}, "unknown event type 'Nope'"),
        ({"type": "SchedulerStopped"}, "SchedulerStopped: 'at' is missing"),
        ({"type": "SchedulerStopped", "at": "yesterday"}, "not an ISO 8601 date-time"),
        (
            {"type": "PauseChanged", "at": AT.isoformat(), "kind": "job", "name": 3,
             "paused": True},
            "PauseChanged.name: expected str, got int",
        ),
        (
            {"type": "RunQueued", "at": AT.isoformat(), "run": {**encode(MANUAL), "state": "X"}},  # type: ignore[dict-item]
            "RunQueued.run.state: 'X' is not a RunState",
        ),
    ],
)  # fmt: skip
def test_data_that_does_not_fit_is_a_wire_error_that_says_where(data: object, message: str) -> None:
    with pytest.raises(WireError, match=message.replace("[", r"\[").replace("(", r"\(")):
        event_from_json(data)


def test_unknown_keys_are_ignored_for_newer_peers() -> None:
    data = {"type": "SchedulerStopped", "at": AT.isoformat(), "added_later": 1}
    assert event_from_json(data) == ev.SchedulerStopped(at=AT)
