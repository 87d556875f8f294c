"""The run history store: schema, round trips, queries, the writer thread, durability."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from tuisched.domain.errors import (
    DuplicateRunError,
    HistoryUnavailableError,
    StateError,
    TuischedError,
)
from tuisched.domain.runs import Result, RunRecord, RunState, Trigger
from tuisched.runtime.clock import ManualClock
from tuisched.runtime.store import (
    ABANDONED_REASON,
    AsyncHistory,
    HistoryError,
    HistoryStore,
    UnknownRunError,
    prepare_state_dir,
)
from tuisched.runtime.store.writer import CLOSE_TRIES_SECONDS, OUTAGE_PAUSES

REPO = Path(__file__).resolve().parent.parent
T0 = datetime(2026, 5, 7, 12, 30, tzinfo=UTC)
PARIS = ZoneInfo("Europe/Paris")


def make_run(run_id: str, job: str = "backup", minutes: int = 0, **changes: object) -> RunRecord:
    """A QUEUED scheduled run queued `minutes` after T0."""
    run = RunRecord(
        run_id=run_id,
        job=job,
        slot=T0 + timedelta(minutes=minutes),
        trigger=Trigger.SCHEDULE,
        state=RunState.QUEUED,
        queued_at=T0 + timedelta(minutes=minutes),
        node="n1",
    )
    return replace(run, **changes)  # type: ignore[arg-type]


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "history.db"


@pytest.fixture
def store(db_path: Path) -> Iterator[HistoryStore]:
    with HistoryStore.open_sqlite(db_path) as opened:
        yield opened


def sqlite_query(path: Path, sql: str) -> list[tuple[object, ...]]:
    """Rows of `sql` read with the plain sqlite3 module (connection closed after)."""
    with contextlib.closing(sqlite3.connect(path)) as connection:
        return connection.execute(sql).fetchall()


# --- round trips ---------------------------------------------------------------------


def test_every_field_round_trips(store: HistoryStore) -> None:
    run = RunRecord(
        run_id="a1b2c3d4e5f6",
        job="backup",
        slot=datetime(2026, 5, 7, 14, 30, 15, 123456, tzinfo=PARIS),
        trigger=Trigger.CATCHUP,
        state=RunState.FAILED,
        queued_at=datetime(2026, 5, 7, 14, 30, 16, tzinfo=PARIS),
        result=Result.TIMED_OUT,
        status="exit 1: disk full",
        exit_code=1,
        started_at=datetime(2026, 5, 7, 8, 31, tzinfo=timezone(timedelta(hours=-4))),
        ended_at=datetime(2026, 5, 7, 12, 45, tzinfo=UTC),
        pid=4242,
        node="node-a",
        reason="timeout of 10m exceeded",
        output_tail="line 1\nligne 2 \ufffd\n",
        attempt=2,
    )
    store.insert(run)
    back = store.get(run.run_id)
    assert back == run  # aware datetimes compare as instants
    assert back is not None
    assert back.slot is not None
    assert back.slot.tzinfo is UTC
    assert back.slot.microsecond == 123456
    assert isinstance(back.state, RunState)
    assert isinstance(back.trigger, Trigger)
    assert isinstance(back.result, Result)


def test_absent_fields_round_trip_as_none(store: HistoryStore) -> None:
    run = make_run("manual1", slot=None, trigger=Trigger.MANUAL)
    store.insert(run)
    back = store.get("manual1")
    assert back == run
    assert back is not None
    assert (back.slot, back.result, back.started_at, back.ended_at, back.pid) == (None,) * 5
    assert back.exit_code is None


def test_get_unknown_run_is_none(store: HistoryStore) -> None:
    assert store.get("nope") is None


def test_times_are_stored_as_naive_utc_in_sqlite(store: HistoryStore, db_path: Path) -> None:
    store.insert(make_run("r1", queued_at=datetime(2026, 5, 7, 14, 30, tzinfo=PARIS)))
    [(queued_at,)] = sqlite_query(db_path, "SELECT queued_at FROM runs")
    assert queued_at == "2026-05-07 12:30:00.000000"


def test_naive_datetime_is_refused(store: HistoryStore) -> None:
    with pytest.raises(Exception, match="naive datetime"):
        store.insert(make_run("r1", queued_at=datetime(2026, 5, 7, 12, 30)))
    assert store.get("r1") is None


def test_update_replaces_the_whole_row(store: HistoryStore) -> None:
    run = make_run("r1")
    store.insert(run)
    done = replace(
        run, state=RunState.SUCCESS, result=Result.COMPLETED, started_at=T0, ended_at=T0, pid=7
    )
    store.update(done)
    assert store.get("r1") == done


def test_update_of_an_unknown_run_raises(store: HistoryStore) -> None:
    with pytest.raises(UnknownRunError, match="ghost") as caught:
        store.update(make_run("ghost"))
    assert isinstance(caught.value, LookupError)


def test_duplicate_insert_raises(store: HistoryStore) -> None:
    store.insert(make_run("r1"))
    with pytest.raises(DuplicateRunError, match="the history refused a run: UNIQUE"):
        store.insert(make_run("r1"))


def test_write_many_is_one_transaction(store: HistoryStore) -> None:
    store.insert(make_run("old"))
    with pytest.raises(UnknownRunError):
        store.write_many(
            [make_run("new1"), make_run("new2")],
            [make_run("old", state=RunState.RUNNING), make_run("ghost")],
        )
    assert store.get("new1") is None
    assert store.get("new2") is None
    old = store.get("old")
    assert old is not None
    assert old.state is RunState.QUEUED


def test_write_many_applies_updates_in_order(store: HistoryStore) -> None:
    run = make_run("r1")
    running = replace(run, state=RunState.RUNNING, started_at=T0)
    done = replace(running, state=RunState.SUCCESS, result=Result.COMPLETED, ended_at=T0)
    store.write_many([run, make_run("r2")], [running, done])
    assert store.get("r1") == done
    assert store.get("r2") is not None


# --- queries ------------------------------------------------------------------------------


def test_recent_is_newest_first_and_filters_by_job(store: HistoryStore) -> None:
    store.write_many(
        [
            make_run("b", minutes=5),
            make_run("a", minutes=5),
            make_run("c", minutes=1),
            make_run("d", job="report", minutes=9),
            make_run("e", minutes=7),
        ],
        [],
    )
    assert [r.run_id for r in store.recent()] == ["d", "e", "b", "a", "c"]
    assert [r.run_id for r in store.recent("backup", limit=3)] == ["e", "b", "a"]
    assert [r.run_id for r in store.recent("report")] == ["d"]
    assert store.recent("unknown") == []


def test_unfinished_lists_queued_waiting_and_running(store: HistoryStore) -> None:
    store.write_many(
        [
            make_run("q", minutes=1),
            make_run("w", minutes=2, state=RunState.WAITING),
            make_run("r", minutes=3, state=RunState.RUNNING),
            make_run("s", minutes=4, state=RunState.SUCCESS),
            make_run("x", minutes=5, state=RunState.RUNNING, node="n2"),
            make_run("m", minutes=6, state=RunState.MISSED),
        ],
        [],
    )
    assert [r.run_id for r in store.unfinished()] == ["q", "w", "r", "x"]
    assert [r.run_id for r in store.unfinished("n1")] == ["q", "w", "r"]
    assert [r.run_id for r in store.unfinished("n2")] == ["x"]


def test_close_abandoned_closes_running_and_queued_of_the_node(store: HistoryStore) -> None:
    store.write_many(
        [
            make_run("q", minutes=1),
            make_run("w", minutes=2, state=RunState.WAITING),
            make_run("r", minutes=3, state=RunState.RUNNING, started_at=T0, pid=99),
            make_run("s", minutes=4, state=RunState.SUCCESS),
            make_run("other", minutes=5, state=RunState.RUNNING, node="n2"),
        ],
        [],
    )
    now = T0 + timedelta(hours=1)
    closed = store.close_abandoned("n1", now)
    assert [r.run_id for r in closed] == ["q", "r"]
    for run in closed:
        assert run.state is RunState.ABANDONED
        assert run.result is Result.ABANDONED
        assert run.ended_at == now
        assert run.reason == ABANDONED_REASON
        assert store.get(run.run_id) == run
    running = store.get("r")
    assert running is not None
    assert (running.started_at, running.pid) == (T0, 99)
    assert [r.run_id for r in store.unfinished()] == ["w", "other"]
    assert store.close_abandoned("n1", now) == []


def test_slots_since_lists_recorded_slots(store: HistoryStore) -> None:
    store.write_many(
        [
            make_run("a", minutes=0),
            make_run("b", minutes=30, state=RunState.MISSED),
            make_run("c", job="report", minutes=60),
            make_run("m", minutes=90, slot=None, trigger=Trigger.MANUAL),
        ],
        [],
    )
    since = T0 + timedelta(minutes=30)
    assert store.slots_since(since) == {
        ("backup", T0 + timedelta(minutes=30)),
        ("report", T0 + timedelta(minutes=60)),
    }


def test_mark_alive_and_last_alive(store: HistoryStore, db_path: Path) -> None:
    assert store.last_alive("n1") is None
    store.mark_alive("n1", T0, pid=100)
    later = T0 + timedelta(seconds=30)
    store.mark_alive("n1", later.astimezone(PARIS), pid=100)
    assert store.last_alive("n1") == later
    assert store.last_alive("n2") is None
    [(pid, started_at)] = sqlite_query(db_path, "SELECT pid, started_at FROM nodes")
    assert (pid, started_at) == (100, "2026-05-07 12:30:00.000000")


def test_a_new_process_restarts_the_node_row(store: HistoryStore, db_path: Path) -> None:
    store.mark_alive("n1", T0, pid=100)
    restart = T0 + timedelta(hours=2)
    assert store.last_alive("n1") == T0  # read before the new instance's first heartbeat
    store.mark_alive("n1", restart, pid=200)
    [(pid, started_at)] = sqlite_query(db_path, "SELECT pid, started_at FROM nodes")
    assert (pid, started_at) == (200, "2026-05-07 14:30:00.000000")


# --- opening, closing, schema -----------------------------------------------------------


def test_reopen_after_close_keeps_data(db_path: Path) -> None:
    with HistoryStore.open_sqlite(db_path) as store:
        store.insert(make_run("r1"))
        store.mark_alive("n1", T0, pid=1)
    with HistoryStore.open_sqlite(db_path) as store:
        assert store.get("r1") == make_run("r1")
        assert store.last_alive("n1") == T0


def test_closed_store_refuses_work(db_path: Path) -> None:
    store = HistoryStore.open_sqlite(db_path)
    store.close()
    store.close()  # idempotent
    with pytest.raises(HistoryError, match="closed"):
        store.get("r1")


def test_newer_schema_version_is_refused(db_path: Path) -> None:
    HistoryStore.open_sqlite(db_path).close()
    with contextlib.closing(sqlite3.connect(db_path)) as connection, connection:
        connection.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(TuischedError, match=r"schema version 99, newer than this tuisched"):
        HistoryStore.open_sqlite(db_path)
    [(version,)] = sqlite_query(db_path, "SELECT value FROM meta")
    assert version == "99"  # untouched


def test_schema_has_the_indexes(store: HistoryStore, db_path: Path) -> None:
    indexes = {row[1] for row in sqlite_query(db_path, "PRAGMA index_list(runs)")}
    assert {"ix_runs_job_queued_at", "ix_runs_state", "ix_runs_job_state_slot"} <= indexes
    columns = [row[2] for row in sqlite_query(db_path, "PRAGMA index_info(ix_runs_job_state_slot)")]
    assert columns == ["job", "state", "slot"]


def test_sqlite_pragmas(store: HistoryStore, db_path: Path) -> None:
    assert sqlite_query(db_path, "PRAGMA journal_mode") == [("wal",)]


def test_open_by_url(db_path: Path) -> None:
    with HistoryStore.open(f"sqlite:///{db_path}") as store:
        store.insert(make_run("r1"))
    with HistoryStore.open_sqlite(db_path) as store:
        assert store.get("r1") is not None


def test_in_memory_database_is_shared_across_threads() -> None:
    async def scenario() -> RunRecord | None:
        history = AsyncHistory(HistoryStore.open("sqlite://"))
        history.start()
        await history.insert(make_run("r1"))
        found = await history.call(lambda store: store.get("r1"))
        await history.close()
        return found

    assert asyncio.run(scenario()) == make_run("r1")


def test_missing_folder_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(HistoryError, match="is missing"):
        HistoryStore.open_sqlite(tmp_path / "nowhere" / "history.db")


@pytest.mark.parametrize(
    ("url", "message"),
    [
        (
            "nosuchdb://user:secret@host/db",
            "cannot open history database nosuchdb://user@host/db",  # never the password
        ),
        ("not a url", "malformed database URL"),
        ("sqlite:////nonexistent/folder/history.db", "unable to open database file"),
    ],
)
def test_unusable_url_is_a_clear_error(url: str, message: str) -> None:
    with pytest.raises(HistoryError, match=message) as caught:
        HistoryStore.open(url)
    assert "secret" not in str(caught.value)


# --- privacy ------------------------------------------------------------------------------


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_database_files_are_private(db_path: Path) -> None:
    previous = os.umask(0o022)
    try:
        with HistoryStore.open_sqlite(db_path) as store:
            store.insert(make_run("r1"))
            wal = db_path.with_name("history.db-wal")
            shm = db_path.with_name("history.db-shm")
            assert (mode(db_path), mode(wal), mode(shm)) == (0o600, 0o600, 0o600)
    finally:
        os.umask(previous)


def test_existing_database_file_is_made_private(db_path: Path) -> None:
    HistoryStore.open_sqlite(db_path).close()
    db_path.chmod(0o644)
    HistoryStore.open_sqlite(db_path).close()
    assert mode(db_path) == 0o600


def test_prepare_state_dir_creates_private_folders(tmp_path: Path) -> None:
    state = tmp_path / "a" / "b" / "state"
    previous = os.umask(0o022)
    try:
        prepare_state_dir(state)
    finally:
        os.umask(previous)
    assert mode(state) == 0o700
    assert mode(tmp_path / "a") == 0o700
    assert mode(tmp_path / "a" / "b") == 0o700


def test_prepare_state_dir_narrows_an_existing_folder(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o755)
    state.chmod(0o755)
    prepare_state_dir(state)
    assert mode(state) == 0o700


def test_prepare_state_dir_refuses_a_folder_of_another_user(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o755)
    monkeypatch.setattr(os, "geteuid", lambda: state.stat().st_uid + 1)
    with pytest.raises(StateError, match="belongs to another user"):
        prepare_state_dir(state)


def test_prepare_state_dir_refuses_a_file(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.write_text("")
    with pytest.raises(StateError, match="not a directory"):
        prepare_state_dir(state)


# --- the writer thread --------------------------------------------------------------------


def run_async(db_path: Path, scenario: object) -> object:
    """Run `scenario(history)` with a started AsyncHistory on `db_path`, closed afterwards."""

    async def main() -> object:
        history = AsyncHistory(HistoryStore.open_sqlite(db_path))
        history.start()
        try:
            return await scenario(history)  # type: ignore[operator]
        finally:
            await history.close()

    return asyncio.run(main())


def test_insert_then_updates_end_in_the_last_state(db_path: Path) -> None:
    run = make_run("r1")
    running = replace(run, state=RunState.RUNNING, started_at=T0, pid=5)
    done = replace(running, state=RunState.SUCCESS, result=Result.COMPLETED, ended_at=T0)

    async def scenario(history: AsyncHistory) -> RunRecord | None:
        history.insert_soon(run)
        history.update_soon(running)
        history.update_soon(done)
        await history.flush()
        return await history.call(lambda store: store.get("r1"))

    assert run_async(db_path, scenario) == done


def test_ordering_holds_across_many_runs(db_path: Path) -> None:
    async def one(history: AsyncHistory, index: int) -> None:
        run = make_run(f"r{index:04}", minutes=index)
        await history.insert(run)
        history.update_soon(replace(run, state=RunState.RUNNING, started_at=T0))
        await history.update(replace(run, state=RunState.SUCCESS, result=Result.COMPLETED))

    async def scenario(history: AsyncHistory) -> list[RunRecord]:
        await asyncio.gather(*(one(history, index) for index in range(300)))
        return await history.call(lambda store: store.recent(limit=1000))

    runs = run_async(db_path, scenario)
    assert isinstance(runs, list)
    assert len(runs) == 300
    assert {run.state for run in runs} == {RunState.SUCCESS}


def test_a_batch_is_coalesced_and_committed_together(db_path: Path) -> None:
    run = make_run("r1")
    done = replace(run, state=RunState.SUCCESS, result=Result.COMPLETED)

    async def main() -> tuple[RunRecord | None, RunRecord | None]:
        history = AsyncHistory(HistoryStore.open_sqlite(db_path))
        # Queued before the thread starts: the thread takes them as one batch.
        insert = asyncio.ensure_future(history.insert(run))
        update = asyncio.ensure_future(history.update(done))
        other = asyncio.ensure_future(history.insert(make_run("r2")))
        await asyncio.sleep(0)  # let the three tasks queue their writes
        history.start()
        await asyncio.gather(insert, update, other)
        found = await history.call(lambda store: (store.get("r1"), store.get("r2")))
        await history.close()
        return found

    assert asyncio.run(main()) == (done, make_run("r2"))


def test_writes_of_one_loop_turn_are_one_transaction(db_path: Path) -> None:
    """Fire-and-forget writes wake the writer once per turn of the loop, not once each:
    two turns of 3,000 runs each are two transactions, whatever the thread's timing."""
    store = HistoryStore.open_sqlite(db_path)
    batches: list[int] = []
    land = store.land

    def counting(runs: Sequence[RunRecord]) -> None:
        batches.append(len(runs))
        land(runs)

    store.land = counting  # type: ignore[method-assign]

    async def main() -> int:
        history = AsyncHistory(store)
        history.start()
        for turn in range(2):
            for index in range(3000):
                history.insert_soon(make_run(f"t{turn}-{index:04}", minutes=index))
            await history.flush()  # the turn ends here; the next turn's writes come after
        count = await history.call(lambda store: len(store.recent(limit=10_000)))
        await history.close()
        return count

    assert asyncio.run(main()) == 6000
    assert batches == [3000, 3000]


def test_writes_land_when_the_loop_turn_ends(db_path: Path) -> None:
    """Nobody waits for a fire-and-forget write: the end of its loop turn sends it."""
    store = HistoryStore.open_sqlite(db_path)
    land = store.land

    landed: list[str] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        written = asyncio.Event()

        def noting(runs: Sequence[RunRecord]) -> None:
            land(runs)
            landed.extend(run.run_id for run in runs)
            loop.call_soon_threadsafe(written.set)

        store.land = noting  # type: ignore[method-assign]
        history = AsyncHistory(store)
        history.start()
        history.insert_soon(make_run("r1"))
        async with asyncio.timeout(5):  # no flush, no close: the turn's end sends it
            await written.wait()
        await history.close()

    asyncio.run(main())
    assert landed == ["r1"]


def test_a_failing_write_fails_alone_and_the_thread_goes_on(
    db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    naive = make_run("naive", queued_at=datetime(2026, 5, 7, 9, 0))  # a naive time: the fault

    async def main() -> list[object]:
        history = AsyncHistory(HistoryStore.open_sqlite(db_path))
        writes = [
            asyncio.ensure_future(history.insert(make_run("a"))),
            asyncio.ensure_future(history.insert(naive)),
            asyncio.ensure_future(history.insert(make_run("b"))),
        ]
        history.update_soon(replace(naive, run_id="naive2"))  # fire-and-forget: logged only
        await asyncio.sleep(0)
        history.start()  # all in one batch: the batch fails, then each write alone
        results: list[object] = list(await asyncio.gather(*writes, return_exceptions=True))
        await history.insert(make_run("c"))  # the thread is alive
        results.append(await history.call(lambda store: [r.run_id for r in store.recent()]))
        await history.close()
        return results

    first, bad, second, stored = asyncio.run(main())
    assert first is None
    assert isinstance(bad, ValueError)
    assert second is None
    assert sorted(stored) == ["a", "b", "c"]  # type: ignore[call-overload]
    assert "could not update run naive2" in caplog.text


def test_the_latest_state_lands_whether_the_row_exists_or_not(db_path: Path) -> None:
    async def main() -> list[RunRecord]:
        history = AsyncHistory(HistoryStore.open_sqlite(db_path))
        history.start()
        await history.update(make_run("never-inserted", state=RunState.SUCCESS))
        await history.insert(make_run("twice"))
        await history.insert(make_run("twice", state=RunState.FAILED))
        runs = await history.call(lambda store: store.recent())
        await history.close()
        return runs

    states = {run.run_id: run.state for run in asyncio.run(main())}
    assert states == {"never-inserted": RunState.SUCCESS, "twice": RunState.FAILED}


def test_a_transient_failure_is_retried(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tuisched.runtime.store.writer

    monkeypatch.setattr(tuisched.runtime.store.writer, "OUTAGE_PAUSES", (0, 0))
    # The batch fails, then the write alone fails twice more before the database frees up.
    failures = iter([HistoryUnavailableError("history database: database is locked")] * 3)
    real_write_many = HistoryStore.write_many
    real_land = HistoryStore.land

    def flaky(store: HistoryStore, inserts: list[RunRecord], updates: list[RunRecord]) -> None:
        failure = next(failures, None)
        if failure is not None:
            raise failure
        real_write_many(store, inserts, updates)

    def flaky_batch(store: HistoryStore, runs: list[RunRecord]) -> None:
        failure = next(failures, None)
        if failure is not None:
            raise failure
        real_land(store, runs)

    monkeypatch.setattr(HistoryStore, "write_many", flaky)
    monkeypatch.setattr(HistoryStore, "land", flaky_batch)

    async def main() -> RunRecord | None:
        history = AsyncHistory(HistoryStore.open_sqlite(db_path))
        history.start()
        await history.insert(make_run("patient"))
        stored = await history.call(lambda store: store.get("patient"))
        await history.close()
        return stored

    stored = asyncio.run(main())
    assert stored is not None
    assert stored.run_id == "patient"


class _Locked:
    """A SQLite history whose batches fail as a locked database's do while `down`; each
    try's size is in `tries`."""

    def __init__(self, db_path: Path) -> None:
        self.store = HistoryStore.open_sqlite(db_path)
        self.tries: list[int] = []
        self.down = True
        self._land = self.store.land
        self.store.land = self._flaky  # type: ignore[method-assign]

    def _flaky(self, runs: Sequence[RunRecord]) -> None:
        self.tries.append(len(runs))
        if self.down:
            raise HistoryUnavailableError("history database: database is locked")
        self._land(runs)


def test_the_outage_pauses_and_its_length_are_on_the_clock(
    db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Held writes are tried again when the clock passes the pause, not before; the
    line that ends the outage says how long it lasted on that clock."""
    flaky = _Locked(db_path)
    store, tries = flaky.store, flaky.tries
    clock = ManualClock(T0)

    async def main() -> RunRecord | None:
        history = AsyncHistory(store, clock=clock)
        history.start()
        history.insert_soon(make_run("held"))
        await history.flush()
        assert history.in_outage
        assert tries == [1]
        await history.flush()  # the first pause is not over: no try
        assert tries == [1]
        await clock.advance(OUTAGE_PAUSES[0])
        await history.flush()
        assert tries == [1, 1]
        await clock.advance(OUTAGE_PAUSES[1] - 0.01)  # the second pause is longer
        await history.flush()
        assert tries == [1, 1]
        flaky.down = False
        await clock.advance(40)
        await history.flush()
        assert tries == [1, 1, 1]
        assert not history.in_outage
        stored = await history.call(lambda store: store.get("held"))
        await history.close()
        return stored

    with caplog.at_level(logging.WARNING, logger="tuisched"):
        stored = asyncio.run(main())
    assert stored is not None
    assert "writing works again after 41 s" in caplog.text


def test_close_tries_held_writes_at_once_whatever_the_pause(db_path: Path) -> None:
    """An outage long enough that its pause outlasts the close's moment, then over just
    before the close (a lock let go, then SIGTERM): the close tries, and the row lands."""
    flaky = _Locked(db_path)
    store, tries = flaky.store, flaky.tries
    clock = ManualClock(T0)

    async def main() -> AsyncHistory:
        history = AsyncHistory(store, clock=clock)
        history.start()
        history.insert_soon(make_run("held"))
        await history.flush()
        for pause in OUTAGE_PAUSES[:3]:
            await clock.advance(pause)
            await history.flush()
        assert len(tries) == 4  # the next pause is longer than the close's moment
        assert OUTAGE_PAUSES[3] > CLOSE_TRIES_SECONDS
        flaky.down = False
        await history.close()
        return history

    history = asyncio.run(main())
    assert history.left_unwritten == 0
    assert len(tries) == 5
    reopened = HistoryStore.open_sqlite(db_path)
    try:
        assert reopened.get("held") is not None
    finally:
        reopened.close()


def test_a_failing_query_does_not_kill_the_thread(db_path: Path) -> None:
    def boom(store: HistoryStore) -> None:
        raise ZeroDivisionError

    async def scenario(history: AsyncHistory) -> RunRecord | None:
        with pytest.raises(ZeroDivisionError):
            await history.call(boom)
        await history.insert(make_run("r1"))
        return await history.call(lambda store: store.get("r1"))

    assert run_async(db_path, scenario) == make_run("r1")


def test_close_flushes_pending_writes_and_is_idempotent(db_path: Path) -> None:
    async def main() -> None:
        history = AsyncHistory(HistoryStore.open_sqlite(db_path))
        history.start()
        for index in range(50):
            history.insert_soon(make_run(f"r{index}"))
        await asyncio.gather(history.close(), history.close())
        await history.close()
        with pytest.raises(HistoryError, match="closed"):
            history.update_soon(make_run("r1"))
        with pytest.raises(HistoryError, match="closed"):
            await history.insert(make_run("late"))

    asyncio.run(main())
    with HistoryStore.open_sqlite(db_path) as store:
        assert len(store.recent(limit=100)) == 50


def test_close_without_start_still_writes(db_path: Path) -> None:
    async def main() -> None:
        history = AsyncHistory(HistoryStore.open_sqlite(db_path))
        history.insert_soon(make_run("r1"))
        await history.close()

    asyncio.run(main())
    with HistoryStore.open_sqlite(db_path) as store:
        assert store.get("r1") is not None


def test_update_soon_from_another_thread(db_path: Path) -> None:
    async def scenario(history: AsyncHistory) -> RunRecord | None:
        await history.insert(make_run("r1"))
        done = make_run("r1", state=RunState.SUCCESS)
        await asyncio.to_thread(history.update_soon, done)
        await history.flush()
        return await history.call(lambda store: store.get("r1"))

    assert run_async(db_path, scenario) == make_run("r1", state=RunState.SUCCESS)


# --- durability ---------------------------------------------------------------------------

WRITER = textwrap.dedent(
    """
    import sys
    from datetime import UTC, datetime, timedelta
    from pathlib import Path

    from tuisched.domain.runs import Result, RunRecord, RunState, Trigger
    from tuisched.runtime.store import HistoryStore

    t0 = datetime(2026, 5, 7, tzinfo=UTC)
    store = HistoryStore.open_sqlite(Path(sys.argv[1]))
    store.insert(RunRecord(
        run_id="long", job="long", slot=None, trigger=Trigger.MANUAL,
        state=RunState.RUNNING, queued_at=t0, started_at=t0, pid=4242, node="n1",
    ))
    index = 0
    while True:
        queued = [
            RunRecord(
                run_id=f"r{index}-{k}", job="tick", slot=t0 + timedelta(seconds=index),
                trigger=Trigger.SCHEDULE, state=RunState.QUEUED,
                queued_at=t0 + timedelta(seconds=index), node="n1",
                output_tail="x" * 2000,
            )
            for k in range(20)
        ]
        done = [
            RunRecord(
                run_id=f"r{index - 1}-{k}", job="tick", slot=t0 + timedelta(seconds=index - 1),
                trigger=Trigger.SCHEDULE, state=RunState.SUCCESS, result=Result.COMPLETED,
                queued_at=t0 + timedelta(seconds=index - 1), node="n1",
            )
            for k in range(20) if index > 0
        ]
        store.write_many(queued, done)
        index += 1
        if index == 50:
            print("written", flush=True)
    """
)


def test_a_killed_writer_leaves_an_intact_database(db_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-c", WRITER, str(db_path)]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env) as writer:
        assert writer.stdout is not None
        try:
            said = writer.stdout.readline()
        finally:
            writer.kill()  # SIGKILL, mid-stream: it never stops writing by itself
        assert writer.wait() == -signal.SIGKILL
    assert said == "written\n"
    assert sqlite_query(db_path, "PRAGMA integrity_check") == [("ok",)]
    now = T0 + timedelta(days=1)
    with HistoryStore.open_sqlite(db_path) as store:
        assert len(store.recent("tick", limit=10_000)) >= 50 * 20
        closed = store.close_abandoned("n1", now)
        assert "long" in [run.run_id for run in closed]
        long_run = store.get("long")
        assert long_run is not None
        assert (long_run.state, long_run.result, long_run.ended_at) == (
            RunState.ABANDONED,
            Result.ABANDONED,
            now,
        )


def test_last_runs_and_failures_for_the_console(db_path: Path) -> None:
    base = datetime(2026, 5, 7, 9, 0, tzinfo=UTC)
    with HistoryStore.open_sqlite(db_path) as store:
        for index, (job, state) in enumerate(
            [("a", RunState.FAILED), ("a", RunState.SUCCESS), ("b", RunState.FAILED)]
        ):
            ended = base + timedelta(minutes=index)
            result = Result.COMPLETED
            store.insert(make_run(f"r{index}", job, state=state, result=result, ended_at=ended))
        store.insert(make_run("running", "a", state=RunState.RUNNING))
        last = store.last_runs()
        assert {job: run.run_id for job, run in last.items()} == {"a": "r1", "b": "r2"}
        store.insert(make_run("stopped", "b", state=RunState.FAILED, result=Result.STOPPED,
                              ended_at=base + timedelta(minutes=5)))  # fmt: skip
        assert store.failures_since(base) == [base, base + timedelta(minutes=2)]
        assert store.failures_since(base + timedelta(minutes=1)) == [base + timedelta(minutes=2)]


def test_a_committed_write_is_told_before_a_slow_call_queued_after_it_runs() -> None:
    """A run waits for its row; a prune batch queued behind that row must not hold it."""

    async def scenario() -> None:
        history = AsyncHistory(HistoryStore.open("sqlite://"))
        history.start()
        entered, busy, slow = threading.Event(), threading.Event(), threading.Event()

        def hold(event: threading.Event) -> bool:
            entered.set()
            return event.wait(10)

        first = asyncio.ensure_future(history.call(lambda store: hold(busy)))
        assert await asyncio.to_thread(entered.wait, 5)  # the writer is in the first call
        written = asyncio.ensure_future(history.insert(make_run("r1")))
        later = asyncio.ensure_future(history.call(lambda store: slow.wait(10)))
        await asyncio.sleep(0)  # both queued: the writer takes them as one batch
        busy.set()
        try:
            await asyncio.wait_for(written, 5)  # while the slow call still runs
            assert not later.done()
        finally:
            slow.set()
            await asyncio.gather(first, later)
            await history.close()

    asyncio.run(scenario())


# --- landing a batch: many rows to a statement, new rows first (R26) ------------------------


@pytest.mark.parametrize("count", [1, 2, 1500])
def test_land_inserts_new_rows_and_replaces_known_ones_in_statements_of_many(
    store: HistoryStore, count: int
) -> None:
    """`land` writes each run in the state given, whether its row exists or not, across
    statements of up to ROWS_PER_STATEMENT rows (1,500 runs take two)."""
    known = [make_run(f"k{i:04}", minutes=i) for i in range(count)]
    store.write_many(known, [])
    done = [replace(run, state=RunState.SUCCESS, result=Result.COMPLETED) for run in known]
    new = [make_run(f"n{i:04}", job="other", minutes=i) for i in range(count)]
    store.land([*done, *new])
    assert [store.get(run.run_id) for run in [*done, *new]] == [*done, *new]


def test_a_batchs_new_rows_land_before_the_rest_of_it(db_path: Path) -> None:
    """A run waits for its row only: in a batch of new rows and updates, the new rows land
    first, and `landed` tells them before `committed` tells the whole batch."""
    store = HistoryStore.open_sqlite(db_path)
    seen: list[tuple[list[str], bool, bool]] = []
    land = store.land
    tickets: dict[str, int] = {}

    def noting(runs: Sequence[RunRecord]) -> None:
        if tickets:
            landed = history.landed(tickets["new"])
            seen.append(([run.run_id for run in runs], landed, history.committed(tickets["old"])))
        land(runs)

    async def main() -> None:
        await history.insert(make_run("old"))
        store.land = noting  # type: ignore[method-assign]
        # One turn of the loop: one batch of the writer, with an update and a new row.
        tickets["old"] = history.update_soon(make_run("old", state=RunState.RUNNING))
        tickets["new"] = history.insert_soon(make_run("new"))
        await history.flush()
        assert history.landed(tickets["new"])
        assert history.committed(tickets["old"])
        await history.close()

    history = AsyncHistory(store)
    history.start()
    asyncio.run(main())
    assert seen == [(["new"], False, False), (["old"], True, False)]


def test_a_thread_waits_for_a_row_to_land(db_path: Path) -> None:
    async def main() -> tuple[bool, bool]:
        history = AsyncHistory(HistoryStore.open_sqlite(db_path))
        ticket = history.insert_soon(make_run("r1"))
        waited = asyncio.get_running_loop().run_in_executor(None, history.wait_landed, ticket, 30.0)
        early = history.wait_landed(ticket, 0.0)  # the writer is not started: not yet
        history.start()
        landed = await waited
        await history.close()
        return early, landed

    assert asyncio.run(main()) == (False, True)


def test_a_runs_start_and_end_keep_every_other_field() -> None:
    """`started` and `finished` are spelled out for speed: they must change only what they
    say, whatever fields RunRecord gains."""
    from dataclasses import fields

    from tuisched.domain.runs import Outcome

    run = make_run(
        "full", status="s", exit_code=3, reason="r", output_tail="t", attempt=2, fence=9,
        result=Result.ERROR, started_at=T0, ended_at=T0, pid=7,
    )  # fmt: skip
    later = T0 + timedelta(minutes=1)
    started = run.started(later, pid=42)
    assert started == replace(run, state=RunState.RUNNING, started_at=later, pid=42)
    outcome = Outcome(state=RunState.FAILED, result=Result.COMPLETED, status="x", exit_code=1)
    finished = run.finished(outcome, later, "tail")
    changed = {"state", "result", "status", "exit_code", "reason", "ended_at", "output_tail"}
    for field in fields(RunRecord):
        if field.name not in changed:
            assert getattr(finished, field.name) == getattr(run, field.name), field.name
    assert (finished.state, finished.ended_at, finished.output_tail) == (
        RunState.FAILED, later, "tail",
    )  # fmt: skip
