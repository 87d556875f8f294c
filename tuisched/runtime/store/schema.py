"""The run history's schema: tables, the UTC time type, and rows to records and back."""

from __future__ import annotations

import logging
import operator
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Self, TypeVar

from sqlalchemy import (
    Column,
    Connection,
    DateTime,
    Dialect,
    Index,
    Insert,
    Integer,
    MetaData,
    RowMapping,
    String,
    Table,
    Text,
    TypeDecorator,
    Update,
    bindparam,
)
from sqlalchemy.dialects import sqlite
from sqlalchemy.types import TypeEngine

from tuisched.domain.errors import HistoryError
from tuisched.domain.runs import Result, RunRecord, RunState, Trigger

T = TypeVar("T")

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
"""The schema this code writes. A database with a newer one is refused, never changed."""

ABANDONED_REASON = "the scheduler stopped without closing this run"
"""`reason` of the runs `close_abandoned` closes."""

BUSY_TIMEOUT_MS = 5000
"""How long SQLite waits for another connection's lock (a CLI reader) before failing."""

_UNFINISHED = (RunState.QUEUED.value, RunState.WAITING.value, RunState.RUNNING.value)
_ABANDONABLE = (RunState.QUEUED.value, RunState.RUNNING.value)


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
        if value.tzinfo is UTC:  # the usual (the runtime's clock): no conversion
            moment = value
        elif value.utcoffset() is None:
            raise ValueError(f"naive datetime {value.isoformat()} cannot be stored")
        else:
            moment = value.astimezone(UTC)
        if dialect.name == "sqlite":
            return moment.isoformat(" ", "microseconds")[:-6]  # without its "+00:00"
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
    # Retention by `days` walks the oldest runs first: without it each batch of 500 scans
    # the whole table (0.18 s a batch at 1,000,000 runs; docs/benchmarks.md).
    Index("ix_runs_queued_at", "queued_at", "run_id"),
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


_ATTRIBUTE = {**{name: name for name in _RUN_COLUMNS}, "b_run_id": "run_id"}
"""The RunRecord attribute each statement parameter takes its value from."""
_ENUMS = frozenset({"trigger", "state", "result"})
"""Attributes stored as their enum's `.value`."""
_CACHED_VALUES = 256
"""Converted instants remembered per column: a burst's runs share their slot and times."""


def _remembering(process: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """`process`, remembering its last few results: the runs of one burst share their
    slot and often their instants, and converting one costs a few microseconds."""
    seen: dict[Any, Any] = {}

    def convert(value: Any) -> Any:
        if value is None:
            return None
        found = seen.get(value)
        if found is None:
            if len(seen) >= _CACHED_VALUES:
                seen.clear()
            found = seen[value] = process(value)
        return found

    return convert


@dataclass(frozen=True, slots=True)
class _BatchStatement:
    """A Core statement compiled once for one dialect, for executemany of many runs.

    SQLAlchemy prepares executemany parameters row by row, which costs the
    writer thread more than SQLite's own work. This compiles the statement once
    and takes each run's values straight from its record, converted with the
    dialect's own bind processors, so the SQL is still Core's (dialect-neutral)
    at a fraction of the cost per row.
    """

    sql: str
    names: tuple[str, ...]
    values: Callable[[RunRecord], tuple[Any, ...]]
    """A run's attributes in parameter order (C speed: `operator.attrgetter`)."""
    enums: tuple[int, ...]
    """Positions of the values stored as their enum's text."""
    processed: tuple[tuple[int, Callable[[Any], Any]], ...]
    """(position, bind processor) of the parameters the dialect converts."""
    positional: bool

    @classmethod
    def compile(cls, statement: Insert | Update, keys: Sequence[str], dialect: Dialect) -> Self:
        """`statement` for `dialect`, taking parameters named `keys` (run attributes, and
        `b_run_id` for the run id in a WHERE clause)."""
        compiled = statement.compile(dialect=dialect, column_keys=list(keys))
        names = tuple(compiled.positiontup or compiled.binds)
        types = (compiled.binds[name].type.dialect_impl(dialect) for name in names)
        processors = (kind.bind_processor(dialect) for kind in types)
        processed = tuple((i, _remembering(fn)) for i, fn in enumerate(processors) if fn)
        attributes = [_ATTRIBUTE[name] for name in names]
        enums = tuple(i for i, name in enumerate(attributes) if name in _ENUMS)
        values = operator.attrgetter(*attributes)
        return cls(compiled.string, names, values, enums, processed, compiled.positional)

    def execute(self, connection: Connection, runs: Iterable[RunRecord]) -> int:
        """Run the statement once per run; the number of rows it changed."""
        converted = [self._parameters(run) for run in runs]
        return connection.exec_driver_sql(self.sql, converted).rowcount

    def parameters(self, run: RunRecord) -> tuple[Any, ...] | dict[str, Any]:
        """The statement's parameters for `run`."""
        return self._parameters(run)

    def _parameters(self, run: RunRecord) -> tuple[Any, ...] | dict[str, Any]:
        values = list(self.values(run))
        for position in self.enums:
            value = values[position]
            if value is not None:
                values[position] = value.value
        for position, process in self.processed:
            values[position] = process(values[position])
        return tuple(values) if self.positional else dict(zip(self.names, values, strict=True))


ROWS_PER_STATEMENT = 1024 if sqlite3.sqlite_version_info >= (3, 32) else 62
"""Most runs one statement lands: 16 parameters a row, under SQLite's limit on the parameters
of a statement (999 before SQLite 3.32, 32,766 since)."""
STATEMENTS_KEPT = 32
"""Statements of so many rows remembered (a burst's batches come in a few sizes)."""


class _Landing:
    """Rows of runs inserted or replaced, many to a statement where the dialect allows.

    SQLite's Python driver lets other threads run during each statement and
    takes the interpreter lock back after it: one statement per row (an
    executemany) makes the writer wait for a busy event loop once per row,
    up to a switch interval (5 ms) each time. A statement of up to
    ROWS_PER_STATEMENT rows waits once. Dialects whose driver does not take
    positional parameters run a one-row statement per run.
    """

    def __init__(self, dialect: Dialect) -> None:
        self._dialect = dialect
        self._one = _BatchStatement.compile(_upsert(dialect, 1), _RUN_COLUMNS, dialect)
        self._many: dict[int, str] = {}
        """SQL of the statements of so many rows, the most recently made last."""
        self._rows = _values_group(self._one.sql) if self._one.positional else None
        """The one-row statement cut around its VALUES group, when another row's group can
        be repeated in it (checked against a statement of two rows compiled by SQLAlchemy:
        compiling one of 256 rows costs a tenth of a second)."""
        if self._rows is not None and self._statement(2) != self._compiled(2):
            self._rows = None

    def execute(self, connection: Connection, runs: Sequence[RunRecord]) -> None:
        """Insert or replace the rows of `runs`."""
        one = self._one
        if not one.positional:
            one.execute(connection, runs)
            return
        params = [one.parameters(run) for run in runs]
        for start in range(0, len(params), ROWS_PER_STATEMENT):
            chunk = params[start : start + ROWS_PER_STATEMENT]
            sql = one.sql if len(chunk) == 1 else self._statement(len(chunk))
            connection.exec_driver_sql(sql, tuple(value for row in chunk for value in row))

    def _statement(self, rows: int) -> str:
        sql = self._many.get(rows)
        if sql is None:
            if self._rows is not None:
                head, group, tail = self._rows
                sql = head + ", ".join([group] * rows) + tail
            else:
                sql = self._compiled(rows)
            if len(self._many) >= STATEMENTS_KEPT:
                del self._many[next(iter(self._many))]  # the oldest size
            self._many[rows] = sql
        return sql

    def _compiled(self, rows: int) -> str:
        """The statement of `rows` rows, as SQLAlchemy compiles it."""
        compiled = _upsert(self._dialect, rows).compile(dialect=self._dialect)
        names = [f"{name}__{i}" for i in range(rows) for name in self._one.names]
        if list(compiled.positiontup or ()) != names:  # pragma: no cover  (a new SQLAlchemy)
            raise HistoryError("the history's multi-row statement has an unexpected form")
        return compiled.string


def _values_group(sql: str) -> tuple[str, str, str] | None:
    """`sql` cut into what comes before its one VALUES group, the group, and what follows."""
    start = sql.find(" VALUES (")
    if start < 0:
        return None
    start += len(" VALUES ")
    end = sql.find(")", start) + 1
    return sql[:start], sql[start:end], sql[end:]


def _upsert(dialect: Dialect, rows: int) -> Insert:
    """INSERT of `rows` runs that replaces the row of a run id already there."""
    insert = _postgresql_insert() if dialect.name == "postgresql" else sqlite.insert
    if rows == 1:
        statement = insert(runs)
    else:
        values: list[dict[str, Any]] = [
            {name: bindparam(f"{name}__{i}") for name in _RUN_COLUMNS} for i in range(rows)
        ]
        statement = insert(runs).values(values)
    keep = {name: statement.excluded[name] for name in _CHANGING}
    return statement.on_conflict_do_update(index_elements=["run_id"], set_=keep)


def _postgresql_insert() -> Callable[[Table], Any]:
    """PostgreSQL's INSERT: only a PostgreSQL history loads its dialect (35 ms a start)."""
    from sqlalchemy.dialects import postgresql  # noqa: PLC0415

    return postgresql.insert


_CHANGING = (
    "state", "result", "status", "exit_code", "started_at", "ended_at", "pid", "reason",
    "output_tail",
)  # fmt: skip
"""The columns a run's later rows change. Its job, slot, trigger, queued_at, node and attempt
are those it was created with: leaving them out of an upsert spares SQLite two of the
table's indexes on every run's end."""
