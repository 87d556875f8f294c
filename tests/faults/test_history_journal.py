"""A slot that started is never offered again, whatever the history's disk did meanwhile.

While the history takes no writes (a full disk, a lock another process holds), the
writes it keeps in memory also go to the journal (`state_dir/history.journal`), on
disk, before each run goes on. A kill -9 then, or a stop before the disk has room
again, loses none of them: the next start lands them first, and so sees the slots
that ran. Each test's job writes its own executions (slot and run id) to a file, and
that file is what says whether a slot ran twice; the history is compared with it.

A full disk is made without root: a small tmpfs in a user and mount namespace of
the test's own (`SmallDisk`), which the schedulers join and the test fills up. (A file
size limit would not do: RLIMIT_FSIZE refuses writes past an offset, even into bytes
a file holds already, which a full disk takes.) The job's own record of its executions
is on the usual disk.
"""

from __future__ import annotations

import collections
import errno
import itertools
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import BinaryIO

import pytest

from tuisched.domain.runs import RunRecord, RunState, Trigger
from tuisched.runtime.store.journal import JOURNAL_BYTES, Journal, Kept

from ..runtime_fixtures import Scheduler, write_config

EXECUTIONS = "executions.txt"
START_MARGIN = timedelta(seconds=8)
"""How far ahead of a scheduler's start a test puts a slot it must not miss."""
DISK_SIZE = "32m"
JOB = """
tick:
  command: echo "$TUISCHED_SLOT $TUISCHED_RUN_ID" >> {out}
  schedule: {{every: 1s, start: 2026-01-01T00:00}}
  misfire: once
"""


def _run(run_id: str, state: RunState = RunState.QUEUED) -> RunRecord:
    at = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
    return RunRecord(run_id=run_id, job="tick", slot=at, trigger=Trigger.SCHEDULE,
                     state=state, queued_at=at)  # fmt: skip


class SmallDisk:
    """A small file system (tmpfs in a user and mount namespace of our own: no root
    needed) that the test fills up and empties again.

    A process holds the namespace; schedulers started with `scheduler` join it and
    see the file system at `inside`; the test reaches it at `outside` (through the
    holder's root in /proc).
    """

    def __init__(self, folder: Path) -> None:
        self.inside = folder
        folder.mkdir()
        missing = [tool for tool in ("unshare", "nsenter") if shutil.which(tool) is None]
        if missing:
            pytest.skip(f"no {' or '.join(missing)} here (util-linux)")
        self._holder = subprocess.Popen(
            ["unshare", "-rm", "sh", "-c",
             f"mount -t tmpfs -o size={DISK_SIZE} none {folder} && echo ready && exec sleep 600"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self._holder.stdout is not None
        if self._holder.stdout.readline() != "ready\n":
            self._holder.wait(10)
            assert self._holder.stderr is not None
            pytest.skip(f"no user namespaces here: {self._holder.stderr.read().strip()}")
        self.outside = Path(f"/proc/{self._holder.pid}/root") / str(folder).lstrip("/")

    def scheduler(self, config: Path) -> Scheduler:
        """A headless scheduler that sees the small disk."""
        enter = ["nsenter", "-U", "-m", "--preserve-credentials", "-t", str(self._holder.pid)]
        return Scheduler(config, argv=[*enter, sys.executable, "-m", "tuisched", "--no-ui",
                                       "-c", str(config)])  # fmt: skip

    @contextmanager
    def full(self) -> Iterator[None]:
        """The disk is full until the block ends."""
        filler = self.outside / "filler"
        block = bytes(1 << 20)
        with filler.open("wb") as out:
            while _took(out, block):
                pass
        try:
            yield
        finally:
            filler.unlink()

    def close(self) -> None:
        self._holder.kill()
        self._holder.wait(10)
        for pipe in (self._holder.stdout, self._holder.stderr):
            if pipe is not None:
                pipe.close()


def _took(out: BinaryIO, block: bytes) -> bool:
    """Write `block` to `out`; False once the disk is full."""
    try:
        out.write(block)
        out.flush()
    except OSError as error:
        if error.errno != errno.ENOSPC:
            raise
        return False
    return True


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[SmallDisk]:
    disk = SmallDisk(tmp_path / "small")
    yield disk
    disk.close()


# --- the journal file --------------------------------------------------------------------


def test_a_journal_gives_back_what_it_kept_in_order(tmp_path: Path) -> None:
    path = tmp_path / "history.journal"
    journal, kept = Journal.open(path)
    assert kept == []
    assert path.stat().st_size == JOURNAL_BYTES  # made at its size: a full disk cannot refuse it
    writes = [Kept("insert", _run("a")), Kept("update", _run("a", RunState.RUNNING)),
              Kept("insert", _run("b"))]  # fmt: skip
    journal.append(writes[:2])
    journal.append(writes[2:])
    journal.close()
    again, kept = Journal.open(path)
    assert kept == writes
    assert not again.empty
    again.clear()  # everything landed
    again.append([Kept("insert", _run("c"))])
    again.close()
    assert Journal.open(path)[1] == [Kept("insert", _run("c"))]  # the older lines are gone


def test_a_torn_append_and_what_follows_it_are_not_read(tmp_path: Path) -> None:
    path = tmp_path / "history.journal"
    journal, _ = Journal.open(path)
    journal.append([Kept("insert", _run("a")), Kept("insert", _run("b"))])
    journal.close()
    data = path.read_bytes()
    second = data.index(b"\n[", data.index(b"\n[") + 1) + 1
    torn = data[:second] + data[second : second + 40]  # the second line cut short by a crash
    path.write_bytes(torn + bytes(len(data) - len(torn)))
    journal, kept = Journal.open(path)
    assert kept == [Kept("insert", _run("a"))]
    journal.append([Kept("insert", _run("c"))])  # written over the torn line
    journal.close()
    assert Journal.open(path)[1] == [Kept("insert", _run("a")), Kept("insert", _run("c"))]


def test_a_journal_that_is_not_one_is_ignored_with_one_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "history.journal"
    path.write_bytes(b"\x1b[31mnot a journal\n" * 3)
    journal, kept = Journal.open(path)
    assert kept == []
    journal.close()
    assert [r.getMessage() for r in caplog.records] == [
        f"history: {path} is not a journal tuisched wrote; it is ignored"
    ]
    assert Journal.open(path)[1] == []  # it is one now


def test_a_journal_reached_through_a_link_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("precious\n")
    (tmp_path / "history.journal").symlink_to(target)
    with pytest.raises(Exception, match="symbolic link"):
        Journal.open(tmp_path / "history.journal")
    assert target.read_text() == "precious\n"


def test_a_full_disk_does_not_refuse_the_journal(small_disk: SmallDisk) -> None:
    """Appends overwrite bytes the file holds already: a full disk does not stop them."""
    journal, _ = Journal.open(small_disk.outside / "history.journal")
    with small_disk.full():
        with pytest.raises(OSError, match="No space left"):
            (small_disk.outside / "other").write_bytes(b"x" * 4096)
        for i in range(2000):
            journal.append([Kept("insert", _run(f"r{i}"))])
    journal.close()
    kept = Journal.open(small_disk.outside / "history.journal")[1]
    assert [write.run.run_id for write in kept] == [f"r{i}" for i in range(2000)]


# --- a scheduler through a full disk or a lock, killed or stopped -----------------------


def _executions(out: Path) -> list[tuple[str, str]]:
    """(slot, run id) of each execution the job wrote down."""
    return [tuple(line.split()) for line in out.read_text().splitlines()]  # type: ignore[misc]


def _rows(db: Path) -> dict[str, tuple[str, str]]:
    """run id -> (slot, state) of every row of the job `tick`."""
    return _rows_of(db, "tick")


def _rows_of(db: Path, job: str) -> dict[str, tuple[str, str]]:
    """run id -> (slot, state) of every row of `job` (read from a copy of the stopped
    scheduler's files: SQLite resolves the link a path through /proc/PID/root is)."""
    with tempfile.TemporaryDirectory() as folder:
        for name in (db.name, f"{db.name}-wal"):
            if (db.parent / name).exists():
                shutil.copyfile(db.parent / name, Path(folder) / name)
        with sqlite3.connect(Path(folder) / db.name) as connection:
            query = "SELECT run_id, slot, state FROM runs WHERE job = ?"
            found = connection.execute(query, (job,))
            return {run_id: (slot, state) for run_id, slot, state in found}


def _until(done: Callable[[], bool], within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not done():
        assert time.monotonic() < deadline, f"{what} within {within} s"
        time.sleep(0.02)


def _more_executions(out: Path, than: int, scheduler: Scheduler) -> Callable[[], bool]:
    def more() -> bool:
        assert scheduler.process.poll() is None, "".join(scheduler.lines)
        return out.exists() and len(_executions(out)) >= than

    return more


@contextmanager
def _locked(db: Path) -> Iterator[None]:
    """Another process holds the history file locked until the block ends."""
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sqlite3, sys\n"
         f"c = sqlite3.connect({str(db)!r}, isolation_level=None)\n"
         "c.execute('BEGIN EXCLUSIVE'); print('locked', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "locked\n"
        yield
    finally:
        holder.kill()
        holder.wait(10)
        for pipe in (holder.stdin, holder.stdout):
            if pipe is not None:
                pipe.close()


class _Place:
    """Where a test's scheduler keeps its state, and how its history's outage is made:
    a full small disk, or a lock on a file on the usual disk."""

    def __init__(self, kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
        out = self.out = tmp_path / EXECUTIONS
        self.disk: SmallDisk | None = None
        if kind == "full disk":
            self.disk = request.getfixturevalue("small_disk")
            self.state = self.disk.outside
            settings = f"state_dir: {self.disk.inside}"
        else:
            self.state, settings = tmp_path / "state", ""
        self.config = write_config(tmp_path, JOB.format(out=out), settings=settings)
        self.db = self.state / "history.db"

    def scheduler(self) -> Scheduler:
        return self.disk.scheduler(self.config) if self.disk else Scheduler(self.config)

    def outage(self) -> AbstractContextManager[None]:
        return self.disk.full() if self.disk else _locked(self.db)


def _through_an_outage(
    place: _Place, schedulers: list[Scheduler], *, more: int, then: signal.Signals
) -> tuple[Scheduler, int, int]:
    """A scheduler that ran the job, then `more` times during an outage, then was sent
    `then` before the outage ended: it, the executions before the outage, its exit status."""
    out = place.out
    first = place.scheduler()
    schedulers.append(first)
    _until(_more_executions(out, 2, first), 30, "the job did not run")
    with place.outage():
        first.wait_for_line("history: cannot write")
        before = len(_executions(out))
        _until(_more_executions(out, before + more, first), 30, "the job stopped running")
        first.process.send_signal(then)
        status = first.finish()
    return first, before, status


def _each_slot_once(out: Path, db: Path) -> list[tuple[str, str]]:
    """The executions; asserts that none repeats a slot and that the history has each."""
    executions = _executions(out)
    slots = collections.Counter(slot for slot, _ in executions)
    assert [slot for slot, n in slots.items() if n > 1] == [], executions
    rows = _rows(db)
    unrecorded = [run_id for _, run_id in executions if run_id not in rows]
    assert unrecorded == [], (executions, rows)
    ran = {datetime.fromisoformat(slot) for slot, _ in executions}
    missed = {datetime.fromisoformat(slot) for slot, state in rows.values() if state == "MISSED"}
    assert ran.isdisjoint(missed), sorted(ran & missed)
    return executions


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["full disk", "lock"])
def test_a_kill_during_an_outage_runs_no_slot_twice(
    tmp_path: Path, schedulers: list[Scheduler], request: pytest.FixtureRequest, kind: str
) -> None:
    out = tmp_path / EXECUTIONS
    place = _Place(kind, tmp_path, request)
    db = place.db
    first, before, _ = _through_an_outage(place, schedulers, more=3, then=signal.SIGKILL)
    killed = len(_executions(out))
    assert (place.state / "history.journal").stat().st_size >= JOURNAL_BYTES

    second = place.scheduler()
    schedulers.append(second)
    second.wait_for_line("since the last run: they land first")
    _until(_more_executions(out, killed + 2, second), 30, "the job did not run again")
    second.process.send_signal(signal.SIGTERM)
    assert second.finish() == 0, "".join(second.lines)
    executions = _each_slot_once(out, db)
    # The runs of the outage were recorded as they went, not taken for missed ones.
    rows = _rows(db)
    outage = [rows[run_id] for _, run_id in executions[before:killed]]
    assert {state for _, state in outage} <= {"SUCCESS", "ABANDONED"}, outage
    assert "Traceback" not in "".join(first.lines + second.lines)


@pytest.mark.timeout(120)
def test_a_stop_on_a_full_disk_is_a_failure_and_the_next_start_lands_the_rows(
    tmp_path: Path, schedulers: list[Scheduler], request: pytest.FixtureRequest
) -> None:
    out = tmp_path / EXECUTIONS
    place = _Place("full disk", tmp_path, request)
    db = place.db
    first, _, status = _through_an_outage(place, schedulers, more=2, then=signal.SIGTERM)
    assert status == 74, "".join(first.lines)  # a stop that left rows unwritten
    said = [line for line in first.lines if "before shutdown" in line]
    assert len(said) == 1, "".join(first.lines)
    assert "the journal" in said[0], said
    assert "land at the next start" in said[0], said

    second = place.scheduler()
    schedulers.append(second)
    second.wait_for_line("since the last run: they land first")
    stopped = len(_executions(out))
    _until(_more_executions(out, stopped + 1, second), 30, "the job did not run again")
    second.process.send_signal(signal.SIGTERM)
    assert second.finish() == 0, "".join(second.lines)
    executions = _each_slot_once(out, db)
    rows = _rows(db)
    assert {rows[run_id][1] for _, run_id in executions[:stopped]} == {"SUCCESS"}
    assert "Traceback" not in "".join(first.lines + second.lines)


def test_a_runs_start_waits_for_the_journal_not_for_the_database(tmp_path: Path) -> None:
    """The lateness of the runs started during an outage stays that of a quiet history."""
    out = tmp_path / EXECUTIONS
    config = write_config(tmp_path, JOB.format(out=out))
    db = tmp_path / "state" / "history.db"
    scheduler = Scheduler(config)
    try:
        _until(_more_executions(out, 1, scheduler), 30, "the job did not run")
        with _locked(db):
            scheduler.wait_for_line("history: cannot write")
            before = len(_executions(out))
            _until(_more_executions(out, before + 4, scheduler), 30, "the job stopped")
            during = _executions(out)[before:]
        scheduler.process.send_signal(signal.SIGTERM)
        assert scheduler.finish() == 0, "".join(scheduler.lines)
    finally:
        if scheduler.process.poll() is None:
            scheduler.process.kill()
    slots = [datetime.fromisoformat(slot) for slot, _ in during]
    # No slot of the 1 s job is skipped as "still running" while the history is locked.
    assert all(b - a == timedelta(seconds=1) for a, b in itertools.pairwise(slots)), slots
    assert "Traceback" not in "".join(scheduler.lines)
    assert _rows(db)  # the rows landed once the lock went
    assert Journal.open(tmp_path / "state" / "history.journal")[1] == []  # and it was emptied


@pytest.mark.timeout(120)
def test_a_restart_while_the_history_is_still_locked_judges_slots_from_the_journal(
    tmp_path: Path, schedulers: list[Scheduler]
) -> None:
    """The first start after the kill sees the database without the journal's rows: the
    slots that ran are not missed, the run left going is closed as abandoned, and one
    that ended during the lock keeps its end (its database row still says RUNNING)."""
    out, slow, mid = tmp_path / EXECUTIONS, tmp_path / "slow.txt", tmp_path / "mid.txt"
    # Far enough ahead that a slow start (parallel workers, a loaded machine) still finds
    # the first slot to come: a start past it would skip it, and the test would wait on.
    soon = datetime.now(UTC) + START_MARGIN
    slow_job = f"""
slow:
  command: echo "$TUISCHED_SLOT $TUISCHED_RUN_ID" >> {slow}; sleep 60
  schedule: {{every: 1h, start: "{(soon + timedelta(seconds=4)).strftime("%Y-%m-%dT%H:%M:%S")}"}}
  misfire: once
mid:
  command: echo started >> {mid}; sleep 1.5; echo ended >> {mid}
  schedule: {{every: 1h, start: "{soon.strftime("%Y-%m-%dT%H:%M:%S")}"}}
"""
    config = write_config(tmp_path, JOB.format(out=out) + slow_job)
    db = tmp_path / "state" / "history.db"
    first = Scheduler(config)
    schedulers.append(first)
    _until(_more_executions(out, 2, first), 30, "the job did not run")
    _until(lambda: "RUNNING" in {state for _, state in _rows_of(db, "mid").values()}, 30,
           "the mid job's RUNNING row did not reach the database")  # fmt: skip
    with _locked(db):
        first.wait_for_line("history: cannot write")
        _until(lambda: mid.read_text().endswith("ended\n"), 30, "the mid job did not end")
        _until(slow.exists, 30, "the slow job did not start")
        before = len(_executions(out))
        _until(_more_executions(out, before + 2, first), 30, "the job stopped running")
        first.process.send_signal(signal.SIGKILL)
        first.finish()
        killed = len(_executions(out))
        second = Scheduler(config)
        schedulers.append(second)
        second.wait_for_line("since the last run: they land first")
        _until(_more_executions(out, killed + 2, second), 30, "the job did not run again")
    second.wait_for_line("history: writing works again")
    second.process.send_signal(signal.SIGTERM)
    assert second.finish() == 0, "".join(second.lines)
    _each_slot_once(out, db)
    assert len(slow.read_text().splitlines()) == 1  # the slow run was not made up again
    ((slot, run_id),) = _executions(slow)
    assert _rows_of(db, "slow") == {run_id: (slot.replace("T", " ").replace("+00:00", ".000000"),
                                             "ABANDONED")}  # fmt: skip
    assert {state for _, state in _rows_of(db, "mid").values()} == {"SUCCESS"}
    said = "".join(second.lines)
    before_kill = {slot for slot, _ in _executions(out)[:killed]}
    missed = set(re.findall(r"tick MISSED slot (\S+):", said))
    assert missed.isdisjoint(before_kill), said  # only slots of the downtime, if any
    assert re.search(r"a dead scheduler left [1-9]\d* runs? running", said), said
    assert "Traceback" not in "".join(first.lines) + said


@pytest.mark.timeout(120)
def test_a_run_closed_as_abandoned_stays_closed_through_the_next_kill(
    tmp_path: Path, schedulers: list[Scheduler]
) -> None:
    """The journal is emptied once its writes landed and a start closed what they left
    open: the next kill's start does not bring the old RUNNING back to close it again."""
    out, slow = tmp_path / EXECUTIONS, tmp_path / "slow.txt"
    begins = (datetime.now(UTC) + START_MARGIN).strftime("%Y-%m-%dT%H:%M:%S")  # as above
    slow_job = f"""
slow:
  command: echo "$TUISCHED_RUN_ID" >> {slow}; sleep 60
  schedule: {{every: 1h, start: "{begins}"}}
"""
    config = write_config(tmp_path, JOB.format(out=out) + slow_job)
    db = tmp_path / "state" / "history.db"
    starts = []
    for _ in range(3):
        scheduler = Scheduler(config)
        schedulers.append(scheduler)
        starts.append(scheduler)
        _until(slow.exists, 30, "the slow job did not start")
        ran = len(_executions(out)) if out.exists() else 0
        _until(_more_executions(out, ran + 2, scheduler), 30, "the job did not run")
        scheduler.process.send_signal(signal.SIGKILL)
        scheduler.finish()
    (run_id,) = slow.read_text().split()
    closed = [line for s in starts for line in s.lines if f"slow#{run_id} ABANDONED" in line]
    assert len(closed) == 1, "".join(line for s in starts for line in s.lines)
    assert _rows_of(db, "slow")[run_id][1] == "ABANDONED"
