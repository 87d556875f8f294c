"""The run history: every run's record, kept in SQLite (default) or PostgreSQL (cluster).

One schema and one implementation for both databases, written with SQLAlchemy
Core (no ORM, no dialect-specific SQL). Times are stored as UTC and come back
as aware UTC datetimes, whatever the database does with time zones.

Two layers:

- `HistoryStore` is synchronous and used from one thread at a time.
- `AsyncHistory` puts a store behind one writer thread for the asyncio engine:
  it takes every pending operation at once and commits them in one transaction,
  which is what keeps the history ahead of thousands of runs a second.

The state directory helpers live here too: `prepare_state_dir` makes the folder
private to the user (0700), and the files created in it are 0600 (SPEC R20a).

```
TuischedError
└── HistoryError          the history database cannot be opened or written
    └── UnknownRunError   no run by that id (LookupError too)
```
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import stat
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self, TypeVar

from sqlalchemy import (
    URL,
    Column,
    Connection,
    DateTime,
    Dialect,
    Engine,
    Index,
    Insert,
    Integer,
    MetaData,
    RowMapping,
    Select,
    String,
    Table,
    Text,
    TypeDecorator,
    Update,
    bindparam,
    create_engine,
    event,
    func,
    inspect,
    make_url,
    select,
)
from sqlalchemy.dialects import sqlite
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError, SQLAlchemyError
from sqlalchemy.pool import StaticPool
from sqlalchemy.types import TypeEngine

from tuisched.errors import HistoryError, UnknownRunError
from tuisched.runs import Result, RunRecord, RunState, Trigger

T = TypeVar("T")

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
TRANSIENT_RETRY_PAUSES = (0.1, 0.5, 2.0)
"""Seconds between tries of a write that failed for a passing reason (locked, connection lost)."""
"""The schema this code writes. A database with a newer one is refused, never changed."""

ABANDONED_REASON = "the scheduler stopped without closing this run"
"""`reason` of the runs `close_abandoned` closes."""

BUSY_TIMEOUT_MS = 5000
"""How long SQLite waits for another connection's lock (a CLI reader) before failing."""

_UNFINISHED = (RunState.QUEUED.value, RunState.WAITING.value, RunState.RUNNING.value)
_ABANDONABLE = (RunState.QUEUED.value, RunState.RUNNING.value)


# --- the state directory ------------------------------------------------------------


def prepare_state_dir(path: Path) -> None:
    """Create the state directory private to the user (0700), or make an existing one so.

    Missing parents are created 0700 as well. An existing directory owned by
    another user is refused: whoever owns it could read or replace the history.

    Raises:
        HistoryError: `path` is not a directory, or it belongs to another user.
    """
    for folder in reversed([path, *path.parents]):
        if not folder.exists():
            folder.mkdir(mode=0o700)
            folder.chmod(0o700)  # the umask may have taken bits away, never added any
    info = path.stat()
    if not stat.S_ISDIR(info.st_mode):
        raise HistoryError(f"state directory {path} is not a directory")
    if info.st_uid != os.geteuid():
        raise HistoryError(f"state directory {path} belongs to another user (uid {info.st_uid})")
    if stat.S_IMODE(info.st_mode) != 0o700:
        path.chmod(0o700)


def create_private_file(path: Path) -> None:
    """Make sure `path` exists and is readable by its owner only (0600).

    A file created here is 0600 from its first byte; an existing one of ours
    with a wider mode is narrowed.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        info = os.fstat(fd)
        if info.st_uid == os.geteuid() and stat.S_IMODE(info.st_mode) != 0o600:
            os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


# --- the schema -----------------------------------------------------------------------


class _SQLiteUTCText(sqlite.DATETIME):
    """DATETIME in SQLite's DDL, converted by `UTCDateTime` alone (one step per value, not three).

    The text is SQLAlchemy's own SQLite format, `YYYY-MM-DD HH:MM:SS.ffffff`,
    so values sort as they compare and SQLite's date functions read them.
    """

    def bind_processor(self, dialect: Dialect) -> None:
        """None: `UTCDateTime.process_bind_param` has made the text already."""

    def result_processor(self, dialect: Dialect, coltype: object) -> None:
        """None: `UTCDateTime.process_result_value` reads the text."""


class UTCDateTime(TypeDecorator[datetime]):
    """An aware datetime stored as UTC: naive UTC text in SQLite, timestamptz in PostgreSQL.

    Binding a naive datetime raises ValueError: an instant without a zone is a bug.
    Values always come back aware, in UTC.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        """SQLite's DATETIME without its converters; the generic type elsewhere."""
        if dialect.name == "sqlite":
            # SQLAlchemy's dialect types have untyped constructors.
            return dialect.type_descriptor(_SQLiteUTCText())  # type: ignore[no-untyped-call]
        return dialect.type_descriptor(DateTime(timezone=True))

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | str | None:
        """UTC; as naive text where the database cannot keep a zone."""
        if value is None:
            return None
        if value.utcoffset() is None:
            raise ValueError(f"naive datetime {value.isoformat()} cannot be stored")
        moment = value.astimezone(UTC)
        if dialect.name == "sqlite":
            return moment.replace(tzinfo=None).isoformat(" ", "microseconds")
        return moment

    def process_result_value(self, value: object, dialect: Dialect) -> datetime | None:
        """Aware UTC, whatever the driver returned."""
        if value is None:
            return None
        moment = datetime.fromisoformat(value) if isinstance(value, str) else value
        if not isinstance(moment, datetime):
            raise TypeError(f"not a date-time in the history: {value!r}")
        if moment.tzinfo is None:
            return moment.replace(tzinfo=UTC)
        return moment.astimezone(UTC)


metadata = MetaData()

meta = Table(
    "meta",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)
"""Key/value facts about the database itself; `schema_version` is the one that matters."""

runs = Table(
    "runs",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("job", Text, nullable=False),
    Column("slot", UTCDateTime, nullable=True),
    Column("trigger", String(32), nullable=False),
    Column("state", String(32), nullable=False),
    Column("result", String(32), nullable=True),
    Column("status", Text, nullable=False),
    Column("exit_code", Integer, nullable=True),
    Column("queued_at", UTCDateTime, nullable=False),
    Column("started_at", UTCDateTime, nullable=True),
    Column("ended_at", UTCDateTime, nullable=True),
    Column("pid", Integer, nullable=True),
    Column("node", Text, nullable=False),
    Column("reason", Text, nullable=False),
    Column("output_tail", Text, nullable=False),
    Column("attempt", Integer, nullable=False),
    Index("ix_runs_job_queued_at", "job", "queued_at"),
    Index("ix_runs_state", "state"),
    # "Has job X a SUCCESS for slot >= S" (the `requires` checks).
    Index("ix_runs_job_state_slot", "job", "state", "slot"),
)
"""One row per run; enums are stored as their `.value` text."""

pauses = Table(
    "pauses",
    metadata,
    Column("kind", String(8), primary_key=True),  # job, group or all
    Column("name", Text, primary_key=True),
    Column("since", UTCDateTime, nullable=False),
)

nodes = Table(
    "nodes",
    metadata,
    Column("name", Text, primary_key=True),
    Column("pid", Integer, nullable=False),
    Column("host", Text, nullable=False),
    Column("started_at", UTCDateTime, nullable=False),
    Column("last_alive", UTCDateTime, nullable=False),
)
"""One row per scheduler node: which process it is and when it last said it was alive."""

_RUN_COLUMNS = tuple(column.name for column in runs.columns)
_UPDATE_RUN = runs.update().where(runs.c.run_id == bindparam("b_run_id"))
"""Every column but the key is SET (the parameters say which); `b_run_id` picks the row."""


def _row(run: RunRecord) -> dict[str, Any]:
    """The column values of `run`."""
    return {
        "run_id": run.run_id,
        "job": run.job,
        "slot": run.slot,
        "trigger": run.trigger.value,
        "state": run.state.value,
        "result": None if run.result is None else run.result.value,
        "status": run.status,
        "exit_code": run.exit_code,
        "queued_at": run.queued_at,
        "started_at": run.started_at,
        "ended_at": run.ended_at,
        "pid": run.pid,
        "node": run.node,
        "reason": run.reason,
        "output_tail": run.output_tail,
        "attempt": run.attempt,
    }


def _update_params(run: RunRecord) -> dict[str, Any]:
    """The parameters of `_UPDATE_RUN` for `run`: every column but the key is SET."""
    params = _row(run)
    params["b_run_id"] = params.pop("run_id")
    return params


def _record(row: RowMapping) -> RunRecord:
    """The run a `runs` row holds."""
    return RunRecord(
        run_id=row["run_id"],
        job=row["job"],
        slot=row["slot"],
        trigger=Trigger(row["trigger"]),
        state=RunState(row["state"]),
        result=None if row["result"] is None else Result(row["result"]),
        status=row["status"],
        exit_code=row["exit_code"],
        queued_at=row["queued_at"],
        started_at=row["started_at"],
        ended_at=row["ended_at"],
        pid=row["pid"],
        node=row["node"],
        reason=row["reason"],
        output_tail=row["output_tail"],
        attempt=row["attempt"],
    )


@dataclass(frozen=True, slots=True)
class _BatchStatement:
    """A Core statement compiled once for one dialect, for executemany of many rows.

    SQLAlchemy prepares executemany parameters row by row, which costs the
    writer thread more than SQLite's own work. This compiles the statement once
    and converts values with the dialect's own bind processors, so the SQL is
    still Core's (dialect-neutral) at about half the cost per row.
    """

    sql: str
    names: tuple[str, ...]
    processed: tuple[tuple[int, Callable[[Any], Any]], ...]
    """(position, bind processor) of the parameters the dialect converts."""
    positional: bool

    @classmethod
    def compile(cls, statement: Insert | Update, keys: Sequence[str], dialect: Dialect) -> Self:
        """`statement` for `dialect`, taking parameters named `keys`."""
        compiled = statement.compile(dialect=dialect, column_keys=list(keys))
        names = tuple(compiled.positiontup or compiled.binds)
        types = (compiled.binds[name].type.dialect_impl(dialect) for name in names)
        processors = (kind.bind_processor(dialect) for kind in types)
        processed = tuple((i, fn) for i, fn in enumerate(processors) if fn is not None)
        return cls(compiled.string, names, processed, compiled.positional)

    def execute(self, connection: Connection, rows: Iterable[dict[str, Any]]) -> int:
        """Run the statement once per row; the number of rows it changed."""
        converted = [self._parameters(row) for row in rows]
        return connection.exec_driver_sql(self.sql, converted).rowcount

    def _parameters(self, row: dict[str, Any]) -> tuple[Any, ...] | dict[str, Any]:
        values = [row[name] for name in self.names]
        for position, process in self.processed:
            values[position] = process(values[position])
        return tuple(values) if self.positional else dict(zip(self.names, values, strict=True))


# --- the synchronous store --------------------------------------------------------------


def _sqlite_pragmas(dbapi_connection: Any, _connection_record: object) -> None:
    """Per-connection SQLite settings: WAL survives a kill -9 and lets readers in."""
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
    finally:
        cursor.close()


def _create_engine(url: URL) -> Engine:
    """An engine for `url`; SQLite gets its pragmas, an in-memory one a single connection."""
    if url.get_backend_name() != "sqlite":
        return create_engine(url)
    if url.database in (None, "", ":memory:"):
        # One shared connection, or every thread would see its own empty database.
        engine = create_engine(url, poolclass=StaticPool, connect_args={"check_same_thread": False})
    else:
        engine = create_engine(url)
    event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def _cannot_open(where: str, error: Exception) -> HistoryError:
    """The error to raise for `error`, in the driver's own words without SQLAlchemy's wrapping."""
    if isinstance(error, ImportError):
        said = f"its driver is not installed ({error})"
    elif isinstance(error, DBAPIError) and error.orig is not None:
        said = str(error.orig)
    else:
        said = str(error)
    return HistoryError(f"cannot open history database {where}: {said}")


def _check_schema(connection: Connection, where: str) -> bool:
    """Whether the schema exists already; refuses one this code does not know.

    Raises:
        HistoryError: the database was written by a newer (or unknown) tuisched.
    """
    if not inspect(connection).has_table(meta.name):
        return False
    found = connection.scalar(select(meta.c.value).where(meta.c.key == "schema_version"))
    if found is None:
        return False
    version = int(found) if found.isdigit() else -1
    if version > SCHEMA_VERSION:
        raise HistoryError(
            f"history database {where} has schema version {version}, newer than this "
            f"tuisched supports ({SCHEMA_VERSION}): upgrade tuisched, or point "
            "settings.history at another database"
        )
    if version != SCHEMA_VERSION:
        raise HistoryError(f"history database {where} has an unknown schema version {found!r}")
    return True


def _create_schema(engine: Engine, where: str) -> None:
    """Create the tables (and the version row) unless they are there already."""
    with engine.begin() as connection:
        known = _check_schema(connection, where)
        metadata.create_all(connection)  # also adds tables newer than the file (no-op else)
        if not known:
            connection.execute(
                meta.insert().values(key="schema_version", value=str(SCHEMA_VERSION))
            )


class HistoryStore:
    """The run history in one database. Synchronous; used from one thread at a time.

    That thread is normally the writer thread of `AsyncHistory`; the CLI uses a
    store directly. Every method commits before it returns.
    """

    def __init__(self, engine: Engine) -> None:
        """Wrap an engine whose schema is ready; use `open` or `open_sqlite` instead."""
        self._engine = engine
        self._host = socket.gethostname()
        self._closed = False
        dialect = engine.dialect
        self._insert = _BatchStatement.compile(runs.insert(), _RUN_COLUMNS, dialect)
        keys = [*_RUN_COLUMNS[1:], "b_run_id"]
        self._update = _BatchStatement.compile(_UPDATE_RUN, keys, dialect)

    @classmethod
    def open(cls, url: str) -> HistoryStore:
        """Open the database at `url`, creating the schema if it is missing.

        Raises:
            HistoryError: the URL is malformed, the database unreachable, or its
                schema is newer than this version of tuisched knows.
        """
        try:
            parsed = make_url(url)
        except SQLAlchemyError as error:
            raise HistoryError("cannot open the history: malformed database URL") from error
        return cls._open(parsed)

    @classmethod
    def open_sqlite(cls, path: Path) -> HistoryStore:
        """Open (or create) the SQLite database at `path`, private to the user.

        The file is created 0600; SQLite gives its -wal and -shm files the same
        mode. The parent directory must exist (see `prepare_state_dir`).

        Raises:
            HistoryError: the folder is missing, or `open` failed.
        """
        if not path.parent.is_dir():
            raise HistoryError(f"cannot create the history {path}: folder {path.parent} is missing")
        try:
            create_private_file(path)
        except OSError as error:
            raise HistoryError(f"cannot create the history {path}: {error.strerror}") from error
        return cls._open(URL.create("sqlite", database=str(path)))

    @classmethod
    def _open(cls, url: URL) -> HistoryStore:
        where = url.render_as_string(hide_password=True)
        try:
            engine = _create_engine(url)
        except (SQLAlchemyError, ImportError) as error:
            raise _cannot_open(where, error) from error
        try:
            _create_schema(engine, where)
        except SQLAlchemyError as error:
            engine.dispose()
            raise _cannot_open(where, error) from error
        except BaseException:
            engine.dispose()
            raise
        return cls(engine)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _begin(self) -> AbstractContextManager[Connection]:
        """A transaction, committed when its block ends without an exception."""
        if self._closed:
            raise HistoryError("the run history is closed")
        return self._engine.begin()

    def insert(self, run: RunRecord) -> None:
        """Add a new run. Raises an IntegrityError if its run_id exists."""
        self.write_many([run], [])

    def update(self, run: RunRecord) -> None:
        """Replace the whole row of `run.run_id`.

        Raises:
            UnknownRunError: no such run.
        """
        self.write_many([], [run])

    def write_many(self, inserts: Sequence[RunRecord], updates: Sequence[RunRecord]) -> None:
        """Insert `inserts`, then apply `updates` in order, in one transaction.

        All or nothing: if one fails, none is written.

        Raises:
            UnknownRunError: an update names a run that does not exist.
            sqlalchemy.exc.IntegrityError: an insert reuses a run_id.
        """
        with self._begin() as connection:
            if inserts:
                self._insert.execute(connection, map(_row, inserts))
            if updates:
                self._apply_updates(connection, updates)

    def _apply_updates(self, connection: Connection, updates: Sequence[RunRecord]) -> None:
        changed = self._update.execute(connection, map(_update_params, updates))
        sane = self._engine.dialect.supports_sane_multi_rowcount or len(updates) == 1
        if sane and changed != len(updates):
            wanted = {run.run_id for run in updates}
            found = set(connection.scalars(select(runs.c.run_id).where(runs.c.run_id.in_(wanted))))
            raise UnknownRunError(sorted(wanted - found))

    def get(self, run_id: str) -> RunRecord | None:
        """The run with that id, or None."""
        with self._begin() as connection:
            row = connection.execute(select(runs).where(runs.c.run_id == run_id)).mappings().first()
        return None if row is None else _record(row)

    def recent(self, job: str | None = None, limit: int = 20) -> list[RunRecord]:
        """The newest `limit` runs (of `job`, or of every job), newest first.

        Newest means latest `queued_at`; ties go to the greater run_id.
        """
        query = select(runs).order_by(runs.c.queued_at.desc(), runs.c.run_id.desc()).limit(limit)
        if job is not None:
            query = query.where(runs.c.job == job)
        return self._records(query)

    def unfinished(self, node: str | None = None) -> list[RunRecord]:
        """Runs QUEUED, WAITING or RUNNING (on `node`, or anywhere), oldest first."""
        query = select(runs).where(runs.c.state.in_(_UNFINISHED))
        if node is not None:
            query = query.where(runs.c.node == node)
        return self._records(query.order_by(runs.c.queued_at, runs.c.run_id))

    def _records(self, query: Select[Any]) -> list[RunRecord]:
        with self._begin() as connection:
            return [_record(row) for row in connection.execute(query).mappings()]

    def slots_since(self, since: datetime) -> set[tuple[str, datetime]]:
        """Every (job, slot) with a run of any state whose slot is at or after `since`.

        Slots come back as aware UTC datetimes; compare them with
        `slot.astimezone(UTC)`. Manual runs (no slot) are not included.
        """
        query = select(runs.c.job, runs.c.slot).where(runs.c.slot >= since)
        with self._begin() as connection:
            return {(job, slot) for job, slot in connection.execute(query)}

    def has_success(self, job: str, slot: datetime) -> bool:
        """Whether `job` succeeded for `slot` or a later slot (R9).

        A run started by hand counts when it began at or after `slot`: an
        operator can satisfy a requirement by running the upstream job.
        """
        by_slot = runs.c.slot >= slot
        by_hand = runs.c.slot.is_(None) & (runs.c.started_at >= slot)
        query = (
            select(runs.c.run_id)
            .where(runs.c.job == job, runs.c.state == RunState.SUCCESS.value, by_slot | by_hand)
            .limit(1)
        )
        with self._begin() as connection:
            return connection.scalar(query) is not None

    def has_run_for(self, job: str, slot: datetime) -> bool:
        """Whether `job` has any run recorded (in any state) for exactly `slot`."""
        query = select(runs.c.run_id).where(runs.c.job == job, runs.c.slot == slot).limit(1)
        with self._begin() as connection:
            return connection.scalar(query) is not None

    def last_runs(self) -> dict[str, RunRecord]:
        """The newest finished run of every job (by when it ended)."""
        newest = (
            select(runs.c.job, func.max(runs.c.ended_at).label("ended"))
            .where(runs.c.ended_at.is_not(None))
            .group_by(runs.c.job)
            .subquery()
        )
        query = select(runs).join(
            newest, (runs.c.job == newest.c.job) & (runs.c.ended_at == newest.c.ended)
        )
        return {run.job: run for run in self._records(query)}

    def failures_since(self, since: datetime) -> list[datetime]:
        """When the runs that failed at or after `since` ended (oldest first).

        A failure is the job's: a FAILED run that was not stopped by an
        operator or a shutdown, or a run that could not be launched.
        """
        own = (Result.COMPLETED.value, Result.TIMED_OUT.value, Result.ERROR.value)
        failed = (runs.c.state == RunState.FAILED.value) & runs.c.result.in_(own)
        unlaunched = runs.c.result == Result.LAUNCH_FAILED.value
        query = (
            select(runs.c.ended_at)
            .where(failed | unlaunched, runs.c.ended_at >= since)
            .order_by(runs.c.ended_at)
        )
        with self._begin() as connection:
            return [ended for (ended,) in connection.execute(query)]

    def pauses(self) -> set[tuple[str, str]]:
        """Every pause in force, as (kind, name); kind is `job`, `group` or `all`."""
        with self._begin() as connection:
            rows = connection.execute(select(pauses.c.kind, pauses.c.name))
            return {(kind, name) for kind, name in rows}

    def set_pause(self, kind: str, name: str, *, paused: bool, at: datetime) -> None:
        """Record (or lift) a pause of `name` (a job, a group, or "" for all)."""
        where = (pauses.c.kind == kind) & (pauses.c.name == name)
        with self._begin() as connection:
            connection.execute(pauses.delete().where(where))
            if paused:
                connection.execute(pauses.insert().values(kind=kind, name=name, since=at))

    def close_abandoned(self, node: str, now: datetime) -> list[RunRecord]:
        """Close the runs a dead scheduler on `node` left open, as ABANDONED at `now`.

        RUNNING and QUEUED rows are closed (result `abandoned`, `ended_at` = now,
        reason `ABANDONED_REASON`); WAITING rows are left alone, as waiting
        survives a restart. Call it at start, before any new run of `node`.

        Returns:
            The closed records, oldest first, as they are now stored.
        """
        query = select(runs).where(runs.c.node == node, runs.c.state.in_(_ABANDONABLE))
        with self._begin() as connection:
            rows = connection.execute(query.order_by(runs.c.queued_at, runs.c.run_id)).mappings()
            closed = [_abandoned(_record(row), now) for row in rows]
            if closed:
                self._apply_updates(connection, closed)
        return closed

    def mark_alive(self, node: str, at: datetime, pid: int) -> None:
        """Record that `node` (process `pid` on this host) was alive at `at`.

        The first call of a new process (another pid or host) also sets the
        node's `started_at`. Read `last_alive` before the first call: after it,
        the previous instance's heartbeat is gone.
        """
        with self._begin() as connection:
            row = connection.execute(select(nodes).where(nodes.c.name == node)).mappings().first()
            if row is None:
                values = {"pid": pid, "host": self._host, "started_at": at, "last_alive": at}
                connection.execute(nodes.insert().values(name=node, **values))
            elif row["pid"] == pid and row["host"] == self._host:
                connection.execute(nodes.update().where(nodes.c.name == node).values(last_alive=at))
            else:
                values = {"pid": pid, "host": self._host, "started_at": at, "last_alive": at}
                connection.execute(nodes.update().where(nodes.c.name == node).values(**values))

    def last_alive(self, node: str) -> datetime | None:
        """When `node` last said it was alive (UTC), or None if it never did."""
        with self._begin() as connection:
            found: datetime | None = connection.scalar(
                select(nodes.c.last_alive).where(nodes.c.name == node)
            )
        return found

    def close(self) -> None:
        """Close every connection. Idempotent; the store cannot be used afterwards."""
        if not self._closed:
            self._closed = True
            self._engine.dispose()


def _abandoned(run: RunRecord, now: datetime) -> RunRecord:
    """`run` closed as ABANDONED at `now`."""
    return replace(
        run,
        state=RunState.ABANDONED,
        result=Result.ABANDONED,
        ended_at=now,
        reason=ABANDONED_REASON,
    )


# --- the writer thread ------------------------------------------------------------------


@dataclass(slots=True)
class _Write:
    kind: Literal["insert", "update"]
    run: RunRecord
    future: asyncio.Future[Any] | None
    """None for a fire-and-forget update."""


@dataclass(slots=True)
class _Call:
    fn: Callable[[HistoryStore], Any]
    future: asyncio.Future[Any]


@dataclass(slots=True)
class _Stop:
    future: asyncio.Future[Any]


_Op = _Write | _Call | _Stop
_Settlement = tuple[asyncio.Future[Any], Any, BaseException | None]


def _nothing(_store: HistoryStore) -> None:
    """A query that does nothing: awaiting it waits for everything queued before."""


def _coalesce(writes: Sequence[_Write]) -> tuple[list[RunRecord], list[RunRecord]] | None:
    """The inserts and updates that leave the rows as `writes` in order would.

    Updates replace whole rows, so only the last state of each run matters, and
    a run inserted in the same batch is inserted in its last state. None when
    the batch inserts a run twice (or after updating it): that must fail, in order.
    """
    inserts: dict[str, RunRecord] = {}
    updates: dict[str, RunRecord] = {}
    for write in writes:
        run_id = write.run.run_id
        if write.kind == "update":
            target = inserts if run_id in inserts else updates
            target[run_id] = write.run
        elif run_id in inserts or run_id in updates:
            return None
        else:
            inserts[run_id] = write.run
    return list(inserts.values()), list(updates.values())


def _resolve(settlements: list[_Settlement]) -> None:
    """Settle futures on their loop; a future whose waiter was cancelled is skipped."""
    for future, value, error in settlements:
        if future.done():
            continue
        if error is None:
            future.set_result(value)
        else:
            future.set_exception(error)


def _settle(settlements: list[_Settlement]) -> None:
    """Hand the settlements to each future's loop, once per loop."""
    by_loop: dict[asyncio.AbstractEventLoop, list[_Settlement]] = {}
    for settlement in settlements:
        by_loop.setdefault(settlement[0].get_loop(), []).append(settlement)
    for loop, batch in by_loop.items():
        try:
            loop.call_soon_threadsafe(_resolve, batch)
        except RuntimeError:  # the loop is closed: nobody waits for these any more
            log.debug("history: %d results dropped, their loop is closed", len(batch))


class AsyncHistory:
    """A `HistoryStore` behind one writer thread, for the asyncio engine.

    Operations are queued in call order; the thread takes every pending one at
    once, commits the writes in one transaction and then settles the futures
    on their loop. A write that fails is logged and fails its own future (the
    batch is retried one write at a time to find it); the thread carries on.
    Cancelling a task that awaits a write does not cancel the write.
    """

    def __init__(self, store: HistoryStore) -> None:
        """Wrap `store`; from now on only the writer thread may use it."""
        self._store = store
        self._pending: deque[_Op] = deque()
        self._tickets = 0
        """Operations ever enqueued (the ticket of the newest)."""
        self._done = 0
        """Tickets up to this one have been processed (written, or failed and logged)."""
        self._ready = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closing: asyncio.Future[Any] | None = None

    def start(self) -> None:
        """Start the writer thread. Idempotent; operations queued before wait for it."""
        with self._ready:
            if self._thread is not None:
                return
            self._thread = threading.Thread(
                target=self._serve, name="tuisched-history", daemon=True
            )
        self._thread.start()

    async def insert(self, run: RunRecord) -> None:
        """Add `run`; returns once committed (so its row exists before its process starts).

        Raises:
            HistoryError: the history is closed.
            Exception: whatever the database raised (a duplicate run_id...).
        """
        await self._write("insert", run)

    async def update(self, run: RunRecord) -> None:
        """Replace the row of `run`; returns once committed.

        Raises:
            UnknownRunError: no such run.
            HistoryError: the history is closed.
        """
        await self._write("update", run)

    def insert_soon(self, run: RunRecord) -> int:
        """Add `run` without waiting; ordered with every other operation.

        Safe from any thread. A failure is only logged. Returns a ticket:
        `committed(ticket)` tells when the row is in the database; await
        `flush()` (or `update` of the same run) before anything depends on it.

        Raises:
            HistoryError: the history is closed.
        """
        return self._enqueue(_Write("insert", run, None))

    def committed(self, ticket: int) -> bool:
        """True once the operation that returned `ticket` has been written."""
        return self._done >= ticket

    def update_soon(self, run: RunRecord) -> int:
        """Replace the row of `run` without waiting; ordered with every other operation.

        Safe from any thread. A failure is only logged. Returns a ticket (see
        `insert_soon`).

        Raises:
            HistoryError: the history is closed.
        """
        return self._enqueue(_Write("update", run, None))

    async def call(self, fn: Callable[[HistoryStore], T]) -> T:
        """The result of `fn(store)`, run on the writer thread after every pending write.

        Raises:
            HistoryError: the history is closed.
            Exception: whatever `fn` raised.
        """
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._enqueue(_Call(fn, future))
        return await future

    async def flush(self) -> None:
        """Return once everything queued before is committed (or has failed)."""
        await self.call(_nothing)

    async def close(self) -> None:
        """Commit everything pending, close the store and end the thread. Idempotent.

        Starts the thread first if it never was, so nothing queued is lost.
        """
        if self._closing is None:
            self._closing = asyncio.get_running_loop().create_future()
            self._enqueue(_Stop(self._closing))
            self.start()
        await asyncio.shield(self._closing)
        if self._thread is not None:
            self._thread.join()  # it settled our future as its last act: this is immediate

    async def _write(self, kind: Literal["insert", "update"], run: RunRecord) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._enqueue(_Write(kind, run, future))
        await future

    def _enqueue(self, op: _Op) -> int:
        with self._ready:
            if self._closing is not None and not isinstance(op, _Stop):
                raise HistoryError("the run history is closed")
            self._pending.append(op)
            self._tickets += 1
            self._ready.notify()
            return self._tickets

    # --- on the writer thread ---

    def _serve(self) -> None:
        """The writer thread: take every pending operation, process them, until stopped."""
        while True:
            with self._ready:
                while not self._pending:
                    self._ready.wait()
                batch = list(self._pending)
                self._pending.clear()
                through = self._tickets
            stopped = self._process(batch)
            self._done = through  # an int store: atomic, read by the loop thread
            if stopped:
                return

    def _process(self, batch: list[_Op]) -> bool:
        """Run one batch in order; True once the store is closed."""
        settlements: list[_Settlement] = []
        writes: list[_Write] = []
        stopped = False
        for op in batch:
            if isinstance(op, _Write):
                writes.append(op)
                continue
            self._commit(writes, settlements)
            writes = []
            if isinstance(op, _Call):
                settlements.append(self._run_call(op))
            else:
                settlements.append(self._close_store(op))
                stopped = True
        self._commit(writes, settlements)
        _settle(settlements)
        return stopped

    def _commit(self, writes: list[_Write], settlements: list[_Settlement]) -> None:
        """Commit `writes` in one transaction, or one by one if that fails."""
        if not writes:
            return
        merged = _coalesce(writes)
        if merged is not None and self._commit_merged(*merged):
            settlements.extend((w.future, None, None) for w in writes if w.future is not None)
        else:  # find the culprit: one write, one transaction
            settlements.extend(self._commit_each(writes))

    def _commit_merged(self, inserts: list[RunRecord], updates: list[RunRecord]) -> bool:
        try:
            self._store.write_many(inserts, updates)
        except Exception:
            log.debug("history: a batch failed, retrying its writes one by one", exc_info=True)
            return False
        return True

    def _commit_each(self, writes: list[_Write]) -> Iterable[_Settlement]:
        for write in writes:
            error = self._write_one(write)
            if error is not None:
                log.error(
                    "history: could not %s run %s of job %r: %s",
                    write.kind,
                    write.run.run_id,
                    write.run.job,
                    error,
                )
            if write.future is not None:
                yield write.future, None, error

    def _write_one(self, write: _Write) -> BaseException | None:
        """Write one run, retrying transient failures (a locked or lost database)."""
        for pause in (*TRANSIENT_RETRY_PAUSES, None):
            try:
                self._upsert(write)
            except OperationalError as error:
                if pause is None:
                    return error
                log.warning("history: %s; retrying in %ss", error.orig or error, pause)
                time.sleep(pause)
            except Exception as error:
                return error
            else:
                return None
        return None  # pragma: no cover  (the loop always returns)

    def _upsert(self, write: _Write) -> None:
        """Insert or update, whichever the row needs: the run's latest state must land."""
        if write.kind == "insert":
            try:
                self._store.insert(write.run)
            except IntegrityError:
                self._store.update(write.run)
        else:
            try:
                self._store.update(write.run)
            except UnknownRunError:
                self._store.insert(write.run)

    def _run_call(self, call: _Call) -> _Settlement:
        try:
            return call.future, call.fn(self._store), None
        except Exception as error:
            return call.future, None, error

    def _close_store(self, stop: _Stop) -> _Settlement:
        try:
            self._store.close()
        except Exception as error:
            log.exception("history: closing the store failed")
            return stop.future, None, error
        return stop.future, None, None
