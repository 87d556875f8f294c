"""The audit log: the line format, the bus subscription, privacy, rotation, the tail."""

from __future__ import annotations

import asyncio
import os
import stat
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from tuisched.domain.audit import MAX_FIELD, audit_line
from tuisched.domain.bus import EventBus
from tuisched.domain.events import (
    RunAbandoned,
    RunFinished,
    RunNotStarted,
    RunOutputWritten,
    RunQueued,
    RunStarted,
    SlotMissed,
)
from tuisched.domain.runs import Result, RunRecord, RunState, Trigger
from tuisched.runtime.handlers.appendfile import AppendFile
from tuisched.runtime.handlers.audit import AuditLog, read_tail

PARIS = ZoneInfo("Europe/Paris")
SLOT = datetime(2026, 5, 7, 10, 30, tzinfo=UTC)  # 12:30 in Paris


def make_run(**changes: object) -> RunRecord:
    run = RunRecord(
        run_id="r1",
        job="backup",
        slot=SLOT,
        trigger=Trigger.SCHEDULE,
        state=RunState.SUCCESS,
        queued_at=SLOT,
        result=Result.COMPLETED,
        status="exit 0: 12 files copied",
        exit_code=0,
        started_at=SLOT + timedelta(seconds=1, microseconds=600_000),
        ended_at=SLOT + timedelta(minutes=2, seconds=3),
        node="n1",
    )
    return replace(run, **changes)  # type: ignore[arg-type]


def fields(line: str) -> list[str]:
    return line.split(" | ")


# --- the line ----------------------------------------------------------------------------


def test_success_line() -> None:
    assert audit_line(make_run(), PARIS) == (
        "backup | 2026-05-07T12:30:01+02:00 | 2026-05-07T12:32:03+02:00 | completed"
        " | exit 0: 12 files copied"
    )


def test_times_follow_the_zone_given() -> None:
    line = audit_line(make_run(), ZoneInfo("America/New_York"))
    assert fields(line)[1:3] == ["2026-05-07T06:30:01-04:00", "2026-05-07T06:32:03-04:00"]


def test_failure_with_a_multi_line_status_containing_bars() -> None:
    run = make_run(
        state=RunState.FAILED,
        result=Result.TIMED_OUT,
        status="exit 1: a | b\nsecond\tline\r\x1b[31mred\x00",
        exit_code=1,
    )
    line = audit_line(run, PARIS)
    assert line == (
        "backup | 2026-05-07T12:30:01+02:00 | 2026-05-07T12:32:03+02:00 | timed_out"
        " | exit 1: a ¦ b second line  [31mred"
    )
    assert len(fields(line)) == 5
    assert "\n" not in line


def test_unicode_line_separators_are_blanked() -> None:
    line = audit_line(make_run(status="one\u2028two\u2029three\x85four"), PARIS)
    assert fields(line)[4] == "one two three four"


def test_a_job_name_with_a_bar_cannot_add_a_field() -> None:
    line = audit_line(make_run(job="odd|name"), PARIS)
    assert len(fields(line)) == 5
    assert fields(line)[0] == "odd¦name"


def test_not_started_launch_failure() -> None:
    run = make_run(
        state=RunState.NOT_STARTED,
        result=Result.LAUNCH_FAILED,
        status="",
        exit_code=None,
        reason="cannot execute /opt/backup.sh: No such file or directory",
        started_at=SLOT,  # noted by the engine, but nothing launched
        ended_at=SLOT + timedelta(seconds=1),
    )
    assert audit_line(run, PARIS) == (
        "backup | - | 2026-05-07T12:30:01+02:00 | launch_failed"
        " | cannot execute /opt/backup.sh: No such file or directory"
    )


def test_missed_slot_shows_the_slot() -> None:
    run = make_run(
        state=RunState.MISSED,
        result=Result.MISSED,
        status="",
        exit_code=None,
        started_at=None,
        ended_at=datetime(2026, 5, 7, 12, 5, tzinfo=UTC),
        reason="the scheduler was not running at this slot",
    )
    assert audit_line(run, PARIS) == (
        "backup | - | 2026-05-07T14:05:00+02:00 | missed | missed slot 2026-05-07T12:30:00+02:00"
    )


def test_abandoned_run() -> None:
    run = make_run(
        state=RunState.ABANDONED,
        result=Result.ABANDONED,
        status="",
        exit_code=None,
        ended_at=datetime(2026, 5, 7, 13, 0, tzinfo=UTC),
        reason="the scheduler stopped without closing this run",
    )
    assert audit_line(run, PARIS) == (
        "backup | 2026-05-07T12:30:01+02:00 | 2026-05-07T15:00:00+02:00 | abandoned"
        " | the scheduler stopped without closing this run"
    )


def test_absent_everything_is_dashes() -> None:
    run = make_run(state=RunState.RUNNING, result=None, status="", started_at=None, ended_at=None)
    assert audit_line(run, PARIS) == "backup | - | - | - | -"


def test_a_huge_status_is_cut() -> None:
    status = audit_line(make_run(status="x" * 100_000), PARIS).split(" | ")[4]
    assert len(status) == MAX_FIELD
    assert status.endswith("…")


# --- the file -----------------------------------------------------------------------------


@pytest.fixture
def log_path(tmp_path: Path) -> Path:
    return tmp_path / "audit.log"


@pytest.fixture
def audit(log_path: Path) -> Iterator[AuditLog]:
    opened = AuditLog(log_path, PARIS)
    yield opened
    opened.close()


def test_lines_are_appended_to_a_private_file(log_path: Path) -> None:
    log_path.write_text("earlier line\n")
    log_path.chmod(0o644)
    audit = AuditLog(log_path, PARIS)
    audit.write(make_run())
    audit.write(make_run(job="report"))
    audit.close()
    audit.close()  # idempotent
    assert stat.S_IMODE(log_path.stat().st_mode) == 0o600
    lines = log_path.read_text().splitlines()
    assert lines[0] == "earlier line"
    assert [fields(line)[0] for line in lines[1:]] == ["backup", "report"]


def test_a_new_file_is_created_0600(audit: AuditLog, log_path: Path) -> None:
    assert stat.S_IMODE(log_path.stat().st_mode) == 0o600


def test_lines_reach_the_file_at_once(audit: AuditLog, log_path: Path) -> None:
    audit.write(make_run())
    assert log_path.read_text() == audit_line(make_run(), PARIS) + "\n"  # line-buffered


def test_write_after_close_raises(log_path: Path) -> None:
    audit = AuditLog(log_path, PARIS)
    audit.close()
    with pytest.raises(ValueError, match="closed"):
        audit.write(make_run())


def test_rotation_starts_a_new_file(audit: AuditLog, log_path: Path) -> None:
    audit.write(make_run(job="before"))
    rotated = log_path.with_name("audit.log.1")
    log_path.rename(rotated)
    audit.write(make_run(job="after"))
    assert [fields(line)[0] for line in rotated.read_text().splitlines()] == ["before"]
    assert [fields(line)[0] for line in log_path.read_text().splitlines()] == ["after"]
    assert stat.S_IMODE(log_path.stat().st_mode) == 0o600


def test_a_deleted_file_is_recreated(audit: AuditLog, log_path: Path) -> None:
    audit.write(make_run(job="before"))
    log_path.unlink()
    audit.write(make_run(job="after"))
    assert [fields(line)[0] for line in log_path.read_text().splitlines()] == ["after"]


def test_subscription_writes_only_ended_runs(audit: AuditLog, log_path: Path) -> None:
    bus = EventBus()  # no loop bound: delivered at once, in this thread
    subscriptions = audit.subscribe(bus)
    at = SLOT
    queued = make_run(job="queued", state=RunState.QUEUED, result=None)
    bus.publish(RunQueued(at=at, run=queued))
    bus.publish(RunStarted(at=at, run=replace(queued, job="started")))
    bus.publish(RunOutputWritten(at=at, run=replace(queued, job="output"), lines=("hi",)))
    bus.publish(RunFinished(at=at, run=make_run(job="finished")))
    bus.publish(RunNotStarted(at=at, run=make_run(job="not_started")))
    bus.publish(RunAbandoned(at=at, run=make_run(job="abandoned")))
    bus.publish(SlotMissed(at=at, run=make_run(job="missed")))
    names = [fields(line)[0] for line in log_path.read_text().splitlines()]
    assert names == ["finished", "not_started", "abandoned", "missed"]
    for subscription in subscriptions:
        subscription.unsubscribe()
    bus.publish(RunFinished(at=at, run=make_run(job="late")))
    assert len(log_path.read_text().splitlines()) == 4


# --- the tail --------------------------------------------------------------------------------


def test_read_tail_returns_the_last_lines(log_path: Path) -> None:
    log_path.write_text("".join(f"line {index}\n" for index in range(10_000)))
    assert read_tail(log_path, 3) == ["line 9997", "line 9998", "line 9999"]
    assert read_tail(log_path, 1) == ["line 9999"]
    assert len(read_tail(log_path, 5000)) == 5000
    assert read_tail(log_path, 5000)[0] == "line 5000"


def test_read_tail_of_a_short_file(log_path: Path) -> None:
    log_path.write_text("one\ntwo\n")
    assert read_tail(log_path, 10) == ["one", "two"]


def test_read_tail_keeps_a_last_line_without_newline(log_path: Path) -> None:
    log_path.write_text("one\ntwo\nthree")
    assert read_tail(log_path, 2) == ["two", "three"]


def test_read_tail_edge_cases(log_path: Path, tmp_path: Path) -> None:
    assert read_tail(tmp_path / "missing.log", 5) == []
    log_path.write_text("")
    assert read_tail(log_path, 5) == []
    log_path.write_text("one\n")
    assert read_tail(log_path, 0) == []


def test_read_tail_replaces_undecodable_bytes(log_path: Path) -> None:
    log_path.write_bytes("é\n".encode() + b"bad \xff byte\n")
    assert read_tail(log_path, 2) == ["é", "bad \ufffd byte"]


def test_read_tail_reads_what_the_log_wrote(audit: AuditLog, log_path: Path) -> None:
    for index in range(100):
        audit.write(make_run(job=f"job{index}"))
    tail = read_tail(log_path, 2)
    assert [fields(line)[0] for line in tail] == ["job98", "job99"]


def test_adding_a_line_never_waits_for_a_slow_disk(
    log_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write to the disk that hangs (NFS, a dying disk) holds up the log lane only:
    `add` on the loop returns at once, and the line lands after the earlier one."""
    file = AppendFile(log_path, "the test log")
    in_write, release = threading.Event(), threading.Event()
    real_write = os.write

    def hanging_write(fd: int, data: bytes) -> int:
        if threading.current_thread().name == "slow-disk":
            in_write.set()
            release.wait(10)
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", hanging_write)
    writer = threading.Thread(target=file.add, args=("first",), name="slow-disk")
    writer.start()  # no loop on that thread: it writes at once, and hangs
    assert in_write.wait(5)

    async def add_on_the_loop() -> float:
        began = time.monotonic()
        file.add("second")
        took = time.monotonic() - began
        release.set()
        await asyncio.sleep(0)  # the turn ends: the line goes to the log lane
        await asyncio.to_thread(writer.join, 5)
        return took

    took = asyncio.run(add_on_the_loop())
    file.close()
    assert took < 2.0  # before: it waited for the hanging write (10 s)
    assert log_path.read_text() == "first\nsecond\n"
