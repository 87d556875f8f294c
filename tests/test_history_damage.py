"""A SQLite history damaged while the scheduler runs (issue 26): noticed, said once in
one ERROR line, and the runs go on with their records kept in memory."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tuisched.domain.errors import HistoryDamagedError
from tuisched.domain.events import HistoryDamaged, RunFinished
from tuisched.domain.runs import RunState
from tuisched.frontends.tui.state import ConsoleState
from tuisched.runtime import runtime as runtime_module
from tuisched.runtime.clock import ManualClock
from tuisched.runtime.store import HistoryStore
from tuisched.runtime.store import damage as damage_module
from tuisched.runtime.store.damage import CHECK_EVERY_SECONDS, check_sqlite_file

from .runtime_fixtures import running, write_config

WITHIN = 15.0
"""Seconds any one wait of these tests may take (a busy machine)."""


def _overwrite_pages(database: Path) -> None:
    """Put garbage over every page of `database` but the first (the file header stays,
    so SQLite opens it and finds the damage when it reads the tables)."""
    with contextlib.closing(sqlite3.connect(database)) as connection:
        (busy, _, _) = connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        (page,) = connection.execute("PRAGMA page_size").fetchone()
    assert busy == 0  # every write is in the file itself now
    size = database.stat().st_size
    assert size > page
    with database.open("r+b") as file:
        file.seek(page)
        file.write(b"\xa5" * (size - page))


class _Errors(logging.Handler):
    """Tells the test's loop of each ERROR record (the writer and the lanes log from
    their own threads)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self._loop = asyncio.get_running_loop()
        self.said = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self._loop.call_soon_threadsafe(self.said.set)


@contextlib.contextmanager
def _hearing_errors() -> Iterator[_Errors]:
    errors = _Errors()
    logging.getLogger().addHandler(errors)
    try:
        yield errors
    finally:
        logging.getLogger().removeHandler(errors)


@pytest.mark.parametrize("found_by", ["the check", "a write"])
async def test_damage_while_running_is_said_once_and_runs_go_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch,
    found_by: str,
) -> None:  # fmt: skip
    if found_by == "the check":  # no heartbeat writes meanwhile: only the check can find it
        monkeypatch.setattr(runtime_module, "HEARTBEAT_SECONDS", 10 * CHECK_EVERY_SECONDS)
        step = CHECK_EVERY_SECONDS
    else:  # no check: the heartbeat's write meets the damage
        monkeypatch.setattr(damage_module, "CHECK_EVERY_SECONDS", 10 * CHECK_EVERY_SECONDS)
        step = runtime_module.HEARTBEAT_SECONDS
    path = write_config(tmp_path, "hello: {command: [/bin/true], schedule: manual}\n")
    database = tmp_path / "state" / "history.db"
    clock = ManualClock(datetime.now(UTC))
    with _hearing_errors() as errors:
        async with running(path, clock=clock) as (runtime, events):
            runtime.actions.run_now("hello")
            await events.wait_for(RunFinished, within=WITHIN)
            await runtime.history.flush()
            _overwrite_pages(database)
            await clock.advance(step)  # the next look at the file, or the next heartbeat
            async with asyncio.timeout(WITHIN):
                await errors.said.wait()
            for count in (2, 3):  # one after the other: they would not overlap
                runtime.actions.run_now("hello")
                finished = await events.wait_for(RunFinished, count=count, within=WITHIN)
            await clock.advance(CHECK_EVERY_SECONDS)  # found already: not said again
            await runtime.history.flush()
            assert runtime.unwritten[0] > 0  # kept in memory, not written to the file
            said = [r for r in caplog.records if r.levelno >= logging.ERROR]
            (event,) = await events.wait_for(HistoryDamaged, within=WITHIN)
    assert [run.run.state for run in finished] == [RunState.SUCCESS] * 3
    (line,) = said
    text = line.getMessage()
    assert text.startswith(f"history: the history database {database} is damaged (")
    assert f"sqlite3 {database} .recover" in text  # what to do, as at start
    assert "runs go on" in text
    assert not [r for r in caplog.records if r.exc_info]
    assert "Traceback" not in caplog.text
    assert (event.database, event.error) == (str(database), text.removeprefix("history: "))
    assert len(events.of(HistoryDamaged)) == 1
    (notice,) = ConsoleState().digest([event]).notices  # what the console shows
    assert (notice.severity, notice.text) == ("error", event.error)


def _store_with_runs(tmp_path: Path) -> tuple[HistoryStore, Path]:
    database = tmp_path / "history.db"
    store = HistoryStore.open_sqlite(database)
    store.set_pause("job", "hello", paused=True, at=datetime.now(UTC))
    return store, database


def test_a_read_that_meets_damage_tells_it_once(tmp_path: Path) -> None:
    store, database = _store_with_runs(tmp_path)
    told: list[HistoryDamagedError] = []
    store.on_damage = told.append
    with store:
        _overwrite_pages(database)
        store._engine.dispose()  # a fresh connection next: no pages cached
        for _ in range(3):
            with pytest.raises(HistoryDamagedError, match=f"{database} is damaged"):
                store.recent()
    (damage,) = told
    assert "Stop tuisched, then repair it" in str(damage)


def test_without_a_listener_the_error_itself_says_what_to_do(tmp_path: Path) -> None:
    store, database = _store_with_runs(tmp_path)
    with store:
        _overwrite_pages(database)
        store._engine.dispose()
        with pytest.raises(HistoryDamagedError, match="move it away to start an empty history"):
            store.recent()


def test_the_file_check_finds_damage_and_nothing_else(tmp_path: Path) -> None:
    store, database = _store_with_runs(tmp_path)
    with store:
        assert check_sqlite_file(database) is None  # healthy, while the store is open
        _overwrite_pages(database)
        found = check_sqlite_file(database)
    assert found is not None
    assert "\n" not in found
    header = tmp_path / "header.db"
    header.write_bytes(b"not a database at all" * 400)
    assert check_sqlite_file(header) == "file is not a database"
    assert check_sqlite_file(tmp_path / "missing.db") is None
