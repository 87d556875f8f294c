"""The run history's schema: tables, the UTC time type, and rows to records and back."""

from __future__ import annotations

import logging
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
