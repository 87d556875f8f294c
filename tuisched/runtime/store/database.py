"""The run history in one database, used synchronously from one thread at a time."""

from __future__ import annotations

import contextlib
import functools
import socket
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from sqlalchemy import (
    URL,
    Connection,
    Engine,
    Select,
    create_engine,
    event,
    func,
    inspect,
    make_url,
    or_,
    select,
    text,
)
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError, SQLAlchemyError
from sqlalchemy.pool import StaticPool

from tuisched.domain.errors import (
    DuplicateRunError,
    HistoryDamagedError,
    HistoryError,
    HistoryUnavailableError,
    UnknownRunError,
)
from tuisched.domain.model import Retention
from tuisched.domain.runs import Result, RunRecord, RunState
from tuisched.domain.views import HistoryQuery
from tuisched.runtime.pgdriver import POSTGRES_EXTRA
from tuisched.runtime.pgerrors import CONNECT_SECONDS, explain
from tuisched.runtime.store.schema import (
    _ABANDONABLE,
    _RUN_COLUMNS,
    _UNFINISHED,
    _UPDATE_RUN,
    ABANDONED_REASON,
    BUSY_TIMEOUT_MS,
    SCHEMA_VERSION,
    _BatchStatement,
    _Landing,
    _record,
    meta,
    metadata,
    nodes,
    pauses,
    runs,
)
from tuisched.runtime.store.statedir import (
    create_private_file,
)

# --- the synchronous store --------------------------------------------------------------


def _sqlite_pragmas(
    dbapi_connection: Any, _connection_record: object, *, busy_ms: int = BUSY_TIMEOUT_MS
) -> None:
    """Per-connection SQLite settings: WAL survives a kill -9 and lets readers in."""
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute(f"PRAGMA busy_timeout={int(busy_ms)}")
        cursor.execute("PRAGMA foreign_keys=ON")
    finally:
        cursor.close()


SCHEMA_LOCK = 0x7475_6973_6869_7374
"""The advisory lock held while a PostgreSQL history's schema is created ("tuishist")."""
PG_PASSWORD = "~/.pgpass, $PGPASSFILE or $PGPASSWORD"  # noqa: S105  (where it comes from)
POSTGRES_DRIVER = "postgresql+psycopg"
"""PostgreSQL through psycopg 3 (the `postgres` extra); `postgresql://` means it."""


def _create_engine(url: URL, busy_ms: int = BUSY_TIMEOUT_MS) -> Engine:
    """An engine for `url`; SQLite gets its pragmas, an in-memory one a single connection.

    PostgreSQL goes through psycopg 3 with a bounded connect time; its password
    comes the way libpq looks for one (`~/.pgpass`, `$PGPASSFILE`, `$PGPASSWORD`).
    """
    if url.get_backend_name() in ("postgresql", "postgres"):
        if "+" not in url.drivername:
            url = url.set(drivername=POSTGRES_DRIVER)
        return create_engine(
            url,
            pool_pre_ping=True,
            connect_args={"connect_timeout": CONNECT_SECONDS, "application_name": "tuisched"},
        )
    if url.get_backend_name() != "sqlite":
        return create_engine(url)
    if url.database in (None, "", ":memory:"):
        # One shared connection, or every thread would see its own empty database.
        engine = create_engine(url, poolclass=StaticPool, connect_args={"check_same_thread": False})
    else:
        engine = create_engine(url)
    event.listen(engine, "connect", functools.partial(_sqlite_pragmas, busy_ms=busy_ms))
    return engine


def _said(error: SQLAlchemyError) -> str:
    """What the database driver said, without SQLAlchemy's wrapping and SQL text."""
    if isinstance(error, DBAPIError) and error.orig is not None:
        return str(error.orig)
    return str(error).split("\n", 1)[0]


QUICK_CHECK_MAX_BYTES = 512 * 1024 * 1024
"""SQLite histories up to this size are checked for damage when opened (a few seconds)."""
_DAMAGE_WORDS = ("malformed", "not a database", "corrupt")


def _damaged(where: str, said: str) -> HistoryDamagedError:
    path = where.removeprefix("sqlite:///")
    return HistoryDamagedError(
        f"the history database {path} is damaged ({said}); tuisched will not write to it. "
        f"Stop tuisched, then repair it (sqlite3 {path} .recover | sqlite3 repaired.db) "
        "or move it away to start an empty history"
    )


def _damage(where: str, error: BaseException) -> HistoryDamagedError | None:
    """The error to raise when `error` says the database file is damaged, else None."""
    said = _damage_said(error)
    return None if said is None else _damaged(where, said)


def _damage_said(error: BaseException) -> str | None:
    """What the driver said when `error` says the database file is damaged, else None."""
    if isinstance(error, DBAPIError) and not isinstance(error, OperationalError):
        said = str(error.orig)
        if any(word in said for word in _DAMAGE_WORDS):
            return said
    return None


def _quick_check(engine: Engine, where: str) -> None:
    """Refuse a SQLite history whose file is damaged (checked only up to a size)."""
    path = engine.url.database
    if not path or path == ":memory:":
        return
    try:
        if Path(path).stat().st_size > QUICK_CHECK_MAX_BYTES:
            return
    except OSError:  # not there yet: SQLite creates it, or says why it cannot
        return
    with engine.connect() as connection:
        found = [row[0] for row in connection.exec_driver_sql("PRAGMA quick_check(5)")]
    if found != ["ok"]:
        lines = [part for line in found for part in str(line).splitlines()]
        said = "; ".join(line for line in lines if not line.startswith("***"))
        raise _damaged(where, said or "quick_check failed")


def _cannot_open(where: str, error: Exception) -> HistoryError:
    """The error to raise for `error`, in the driver's own words without SQLAlchemy's wrapping."""
    damage = _damage(where, error)
    if damage is not None:
        return damage
    if isinstance(error, ImportError):
        said = f"its driver is not installed ({error})"
        if where.startswith("postgres"):
            said += f": {POSTGRES_EXTRA}"
    elif isinstance(error, DBAPIError) and error.orig is not None:
        said = str(error.orig)
        if isinstance(error, OperationalError) and where.startswith("postgres"):
            line = explain(said, where, setting="settings.history", password=PG_PASSWORD)
            return HistoryUnavailableError(f"cannot open the history: {line}")
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
        if engine.dialect.name == "postgresql":  # two processes creating it at once would clash
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": SCHEMA_LOCK})
        known = _check_schema(connection, where)
        metadata.create_all(connection)  # also adds tables newer than the file (no-op else)
        for index in runs.indexes:  # and indexes newer than the file (create_all does not)
            index.create(connection, checkfirst=True)
        if not known:
            connection.execute(
                meta.insert().values(key="schema_version", value=str(SCHEMA_VERSION))
            )


_IDS_PER_QUERY = 500
"""Run ids in one `IN (...)` (SQLite allows 999 parameters in older builds)."""


class HistoryStore:
    """The run history in one database. Synchronous; used from one thread at a time.

    That thread is normally the writer thread of `AsyncHistory`; the CLI uses a
    store directly. Every method commits before it returns.
    """

    def __init__(self, engine: Engine) -> None:
        """Wrap an engine whose schema is ready; use `open` or `open_sqlite` instead."""
        self._engine = engine
        self._where = engine.url.render_as_string(hide_password=True)
        self.dialect = engine.dialect.name
        """The database's kind (`sqlite`, `postgresql`), for SQL that differs by it."""
        self._host = socket.gethostname()
        self._closed = False
        self._damage: HistoryDamagedError | None = None
        """Set once the file was found damaged: it is never touched again."""
        database = engine.url.database
        self.sqlite_path = (
            Path(database)
            if engine.dialect.name == "sqlite" and database and database != ":memory:"
            else None
        )
        """The SQLite file of the history (None for PostgreSQL or an in-memory database)."""
        self.on_damage: Callable[[HistoryDamagedError], object] | None = None
        """Told once when the file is found damaged after it was opened (the scheduler
        says it in its log); the store's later errors then name the damage only."""
        dialect = engine.dialect
        self._insert = _BatchStatement.compile(runs.insert(), _RUN_COLUMNS, dialect)
        keys = [*_RUN_COLUMNS[1:], "b_run_id"]
        self._update = _BatchStatement.compile(_UPDATE_RUN, keys, dialect)
        self._landing = _Landing(dialect)

    @classmethod
    def open(cls, url: str, *, password: str | None = None) -> HistoryStore:
        """Open the database at `url`, creating the schema if it is missing (`password`
        for a database that asks for one; else libpq looks in its usual places).

        Raises:
            HistoryError: the URL is malformed, the database unreachable, or its
                schema is newer than this version of tuisched knows.
        """
        try:
            parsed = make_url(url)
        except SQLAlchemyError as error:
            raise HistoryError("cannot open the history: malformed database URL") from error
        if password is not None:
            parsed = parsed.set(password=password)
        return cls(_ready_engine(parsed))

    @classmethod
    def open_sqlite(cls, path: Path, *, busy_ms: int = BUSY_TIMEOUT_MS) -> HistoryStore:
        """Open (or create) the SQLite database at `path`, private to the user.

        The file is created 0600; SQLite gives its -wal and -shm files the same
        mode. The parent directory must exist (see `prepare_state_dir`).
        `busy_ms`: how long a statement waits for another process's lock.

        Raises:
            HistoryError: the folder is missing, or `open` failed.
        """
        if not path.parent.is_dir():
            raise HistoryError(f"cannot create the history {path}: folder {path.parent} is missing")
        try:
            create_private_file(path)
        except OSError as error:
            raise HistoryError(f"cannot create the history {path}: {error.strerror}") from error
        return cls(_ready_engine(URL.create("sqlite", database=str(path)), busy_ms=busy_ms))

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Connection]:
        """A transaction, committed when its block ends without an exception.

        The database's errors leave the store translated (the cause chained):
        a reused run id is a DuplicateRunError, a locked or unreachable
        database a HistoryUnavailableError (worth retrying), anything else a
        HistoryError.
        """
        if self._closed:
            raise HistoryError("the run history is closed")
        if self._damage is not None:
            raise self._damage
        try:
            with self._engine.begin() as connection:
                yield connection
        except IntegrityError as error:
            raise DuplicateRunError(f"the history refused a run: {_said(error)}") from error
        except OperationalError as error:
            raise HistoryUnavailableError(f"history database: {_said(error)}") from error
        except SQLAlchemyError as error:
            said = _damage_said(error)
            if said is not None:
                raise self.mark_damaged(said) from error
            raise HistoryError(f"history database: {_said(error)}") from error

    def mark_damaged(self, said: str) -> HistoryDamagedError:
        """The file is damaged (the database said `said`): from now on every use of the
        store raises the error returned, and nothing touches the file again.

        The first call tells `on_damage` the whole story (the file, and what to
        do); later calls return the first error and tell nothing.
        """
        if self._damage is None:
            damage = _damaged(self._where, said)
            if self.on_damage is None:
                self._damage = damage
            else:
                path = self.sqlite_path or self._where
                self._damage = HistoryDamagedError(f"the history database {path} is damaged")
                self.on_damage(damage)
        return self._damage

    def insert(self, run: RunRecord) -> None:
        """Add a new run. Raises DuplicateRunError if its run_id exists."""
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
            DuplicateRunError: an insert reuses a run_id.
            HistoryUnavailableError: the database is locked or unreachable (retry).
        """
        with self.transaction() as connection:
            if inserts:
                self._insert.execute(connection, inserts)
            if updates:
                self._apply_updates(connection, updates)

    def land(self, runs: Sequence[RunRecord]) -> None:
        """Write the rows of `runs` in the states given, inserting or replacing each, in one
        transaction: how a batch of the writer thread lands (a few hundred rows to a
        statement). All or nothing.

        Raises:
            HistoryUnavailableError: the database is locked or unreachable (retry).
        """
        with self.transaction() as connection:
            self._landing.execute(connection, runs)

    def _apply_updates(self, connection: Connection, updates: Sequence[RunRecord]) -> None:
        changed = self._update.execute(connection, updates)
        sane = self._engine.dialect.supports_sane_multi_rowcount or len(updates) == 1
        if sane and changed != len(updates):
            wanted = {run.run_id for run in updates}
            found = set(connection.scalars(select(runs.c.run_id).where(runs.c.run_id.in_(wanted))))
            raise UnknownRunError(sorted(wanted - found))

    def delete(self, run_id: str) -> None:
        """Forget a run (in cluster mode, a WAITING run handed to the cluster's table)."""
        with self.transaction() as connection:
            connection.execute(runs.delete().where(runs.c.run_id == run_id))

    def get(self, run_id: str) -> RunRecord | None:
        """The run with that id, or None."""
        with self.transaction() as connection:
            row = connection.execute(select(runs).where(runs.c.run_id == run_id)).mappings().first()
        return None if row is None else _record(row)

    def recent(self, job: str | None = None, limit: int = 20) -> list[RunRecord]:
        """The newest `limit` runs (of `job`, or of every job), newest first.

        Newest means latest `queued_at`; ties go to the greater run_id.
        """
        query = select(runs).order_by(runs.c.queued_at.desc(), runs.c.run_id.desc()).limit(limit)
        if job is not None:
            query = query.where(runs.c.job == job)
        return self.records(query)

    def page(self, query: HistoryQuery) -> list[RunRecord]:
        """One page of runs matching `query`, newest first (as `recent`)."""
        select_runs = (
            select(runs)
            .order_by(runs.c.queued_at.desc(), runs.c.run_id.desc())
            .limit(query.limit)
            .offset(query.offset)
        )
        if query.job is not None:
            select_runs = select_runs.where(runs.c.job == query.job)
        if query.states:
            select_runs = select_runs.where(runs.c.state.in_([s.value for s in query.states]))
        if query.triggers:
            select_runs = select_runs.where(runs.c.trigger.in_([t.value for t in query.triggers]))
        if query.since is not None:
            select_runs = select_runs.where(runs.c.queued_at >= query.since)
        if query.until is not None:
            select_runs = select_runs.where(runs.c.queued_at < query.until)
        return self.records(select_runs)

    def unfinished(self, node: str | None = None) -> list[RunRecord]:
        """Runs QUEUED, WAITING or RUNNING (on `node`, or anywhere), oldest first."""
        query = select(runs).where(runs.c.state.in_(_UNFINISHED))
        if node is not None:
            query = query.where(runs.c.node == node)
        return self.records(query.order_by(runs.c.queued_at, runs.c.run_id))

    def records(self, query: Select[Any]) -> list[RunRecord]:
        """The runs `query` (a select of the runs table) finds, in its order."""
        with self.transaction() as connection:
            return [_record(row) for row in connection.execute(query).mappings()]

    def slots_since(self, since: datetime) -> set[tuple[str, datetime]]:
        """Every (job, slot) with a run of any state whose slot is at or after `since`.

        Slots come back as aware UTC datetimes; compare them with
        `slot.astimezone(UTC)`. Manual runs (no slot) are not included.
        """
        query = select(runs.c.job, runs.c.slot).where(runs.c.slot >= since)
        with self.transaction() as connection:
            return {(job, slot) for job, slot in connection.execute(query)}

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
        return {run.job: run for run in self.records(query)}

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
        with self.transaction() as connection:
            return [ended for (ended,) in connection.execute(query)]

    def pauses(self) -> set[tuple[str, str]]:
        """Every pause in force, as (kind, name); kind is `job`, `group` or `all`."""
        with self.transaction() as connection:
            rows = connection.execute(select(pauses.c.kind, pauses.c.name))
            return {(kind, name) for kind, name in rows}

    def set_pause(self, kind: str, name: str, *, paused: bool, at: datetime) -> None:
        """Record (or lift) a pause of `name` (a job, a group, or "" for all)."""
        where = (pauses.c.kind == kind) & (pauses.c.name == name)
        with self.transaction() as connection:
            connection.execute(pauses.delete().where(where))
            if paused:
                connection.execute(pauses.insert().values(kind=kind, name=name, since=at))

    def close_abandoned(self, node: str, now: datetime) -> list[RunRecord]:
        """Close the runs a dead scheduler on `node` left open, as ABANDONED at `now`.

        RUNNING and QUEUED rows are closed (result `abandoned`, `ended_at` = now,
        reason `ABANDONED_REASON`); WAITING rows are left alone, as waiting
        survives a restart. Call it at start, before any new run of `node`. Runs
        claimed in cluster mode, under node ids `node:pid:random`, are `node`'s too.

        Returns:
            The closed records, oldest first, as they are now stored.
        """
        with self.transaction() as connection:
            closed = _abandonable(connection, node, now)
            if closed:
                self._apply_updates(connection, closed)
        return closed

    def runs_of(self, node: str, run_ids: Sequence[str]) -> set[str]:
        """Which of `run_ids` are runs of `node` (its cluster claims included), whatever
        their state: at a start, a process still carrying one of them in its environment
        was left by a dead scheduler of this node (a run of `tuisched run`, whose node
        is `node:run`, is not one)."""
        ours = or_(runs.c.node == node, runs.c.node.like(f"{node}:%:%"))
        wanted = sorted(set(run_ids))
        found: set[str] = set()
        with self.transaction() as connection:
            for at in range(0, len(wanted), _IDS_PER_QUERY):
                chunk = wanted[at : at + _IDS_PER_QUERY]
                query = select(runs.c.run_id).where(ours, runs.c.run_id.in_(chunk))
                found.update(connection.execute(query).scalars())
        return found

    def mark_alive(self, node: str, at: datetime, pid: int) -> None:
        """Record that `node` (process `pid` on this host) was alive at `at`.

        The first call of a new process (another pid or host) also sets the
        node's `started_at`. Read `last_alive` before the first call: after it,
        the previous instance's heartbeat is gone.
        """
        with self.transaction() as connection:
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
        with self.transaction() as connection:
            found: datetime | None = connection.scalar(
                select(nodes.c.last_alive).where(nodes.c.name == node)
            )
        return found

    def runs_of_slots(self, job: str, start: datetime, end: datetime) -> list[RunRecord]:
        """The runs of `job` whose slot lies from `start` (included) to `end` (excluded)
        and that succeeded or are in progress (a backfill leaves their slots out)."""
        states = (RunState.SUCCESS, RunState.QUEUED, RunState.RUNNING, RunState.WAITING)
        query = select(runs).where(
            runs.c.job == job, runs.c.slot >= start, runs.c.slot < end,
            runs.c.state.in_([state.value for state in states]),
        )  # fmt: skip
        return self.records(query.order_by(runs.c.slot, runs.c.run_id))

    def close(self) -> None:
        """Close every connection. Idempotent; the store cannot be used afterwards."""
        if not self._closed:
            self._closed = True
            self._engine.dispose()

    # --- retention (issue 16) ---------------------------------------------------------

    def prune(self, now: datetime, retention: Retention, *, batch: int) -> list[tuple[str, str]]:
        """Forget at most `batch` runs that `retention` no longer keeps, in one transaction.

        Never forgets a run that is not finished, nor a missed slot whose
        decision is pending (MISSED with an empty status, see `domain.ledger`).
        Call it again while it returns `batch` runs. The oldest runs are walked on
        the (queued_at, run_id) index, and each job's cut-off is found on the
        (job, queued_at) index, so a batch costs about the same however long the
        history is (docs/benchmarks.md, `bench_history`).

        Returns:
            (job, run_id) of each run forgotten, oldest first within a job.
        """
        found: list[tuple[str, str]] = []
        with self.transaction() as connection:
            if retention.days is not None:
                cutoff = now - timedelta(days=retention.days)
                found += _doomed(connection, runs.c.queued_at < cutoff, batch)
            if retention.runs_per_job is not None:
                for job in _crowded(connection, retention.runs_per_job):
                    if len(found) >= batch:
                        break
                    older = _beyond(connection, job, retention.runs_per_job)
                    if older is not None:
                        found += _doomed(connection, older, batch - len(found))
            found = list(dict.fromkeys(found))[:batch]
            if found:
                gone = [run_id for _, run_id in found]
                connection.execute(runs.delete().where(runs.c.run_id.in_(gone)))
        return found


def abandoned(run: RunRecord, now: datetime) -> RunRecord:
    """`run` closed as ABANDONED at `now`."""
    return replace(
        run,
        state=RunState.ABANDONED,
        result=Result.ABANDONED,
        ended_at=now,
        reason=ABANDONED_REASON,
    )


def abandonable(store: HistoryStore, node: str, now: datetime) -> list[RunRecord]:
    """The runs `close_abandoned` would close, closed, without writing them (a read:
    for a database that takes no writes now)."""
    with store.transaction() as connection:
        return _abandonable(connection, node, now)


# --- retention (issue 16) -------------------------------------------------------------------


def _doomed(connection: Connection, where: Any, limit: int) -> list[tuple[str, str]]:
    """Up to `limit` (job, run_id) matching `where` that retention may forget, oldest first."""
    if limit < 1:
        return []
    query = (
        select(runs.c.job, runs.c.run_id)
        .where(where, ~_KEPT_ALWAYS)
        .order_by(runs.c.queued_at, runs.c.run_id)
        .limit(limit)
    )
    return [(job, run_id) for job, run_id in connection.execute(query)]


def _crowded(connection: Connection, keep: int) -> list[str]:
    """The jobs with more than `keep` runs (counted on the job index)."""
    query = select(runs.c.job).group_by(runs.c.job).having(func.count() > keep)
    return list(connection.scalars(query))


def _beyond(connection: Connection, job: str, keep: int) -> Any:
    """The condition "a run of `job` older than its newest `keep`", or None."""
    newest_first = (runs.c.queued_at.desc(), runs.c.run_id.desc())
    last_kept = connection.execute(
        select(runs.c.queued_at, runs.c.run_id)
        .where(runs.c.job == job)
        .order_by(*newest_first)
        .offset(keep - 1)
        .limit(1)
    ).first()
    if last_kept is None:
        return None
    queued, run_id = last_kept
    older = (runs.c.queued_at < queued) | ((runs.c.queued_at == queued) & (runs.c.run_id < run_id))
    return (runs.c.job == job) & older


def _abandonable(connection: Connection, node: str, now: datetime) -> list[RunRecord]:
    ours = or_(runs.c.node == node, runs.c.node.like(f"{node}:%:%"))
    query = select(runs).where(ours, runs.c.state.in_(_ABANDONABLE))
    rows = connection.execute(query.order_by(runs.c.queued_at, runs.c.run_id)).mappings()
    return [abandoned(_record(row), now) for row in rows]


def _ready_engine(url: URL, *, busy_ms: int = BUSY_TIMEOUT_MS) -> Engine:
    """An engine on `url` whose file passed its quick check and whose schema is ready."""
    where = url._replace(password=None).render_as_string()  # as configured: no password
    try:
        engine = _create_engine(url, busy_ms)
    except (SQLAlchemyError, ImportError) as error:
        raise _cannot_open(where, error) from error
    try:
        if url.get_backend_name() == "sqlite":
            _quick_check(engine, where)
        _create_schema(engine, where)
    except HistoryDamagedError:
        engine.dispose()
        raise
    except SQLAlchemyError as error:
        engine.dispose()
        raise _cannot_open(where, error) from error
    except BaseException:
        engine.dispose()
        raise
    return engine


_KEPT_ALWAYS = runs.c.state.in_(_UNFINISHED) | (
    (runs.c.state == RunState.MISSED.value) & (runs.c.status == "")
)
"""Runs retention never forgets: not finished, or a missed slot waiting for a decision."""
