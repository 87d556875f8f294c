"""The cluster's PostgreSQL database: connecting, explaining failures, migrating.

Everything here is asynchronous (psycopg 3's async connections and pool):
the event loop that keeps the schedule never waits on the database, and each
wait is bounded (`CONNECT_SECONDS`, `STATEMENT_SECONDS`). A failure to
connect becomes one line that says what to fix (the host, the password, the
database, the role's rights), never a driver's traceback; the URL in it is
always shown without a password.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from datetime import datetime
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import make_conninfo
from psycopg_pool import AsyncConnectionPool

from tuisched.domain.errors import (
    ClusterDatabaseError,
    DatabaseUnreachableError,
    SchemaTooNewError,
)
from tuisched.domain.model import ClusterSettings
from tuisched.runtime.cluster.schema import LATEST, LOCK_KEY, MIGRATIONS, VERSION_TABLE
from tuisched.runtime.pgerrors import CONNECT_SECONDS, explain, redacted

log = logging.getLogger(__name__)

STATEMENT_SECONDS = 10
"""How long the server lets one statement run (the lock wait of a migration included)."""
IDLE_IN_TRANSACTION_SECONDS = 5
"""How long the server keeps a session that sits in a transaction with nothing to do. A
node cut off half-way through a transaction (its COMMIT lost on the way) would otherwise
hold that transaction's row locks for as long as the server believes its connection
alive, and the other nodes' reaping, which skips locked rows, would never abandon its
runs. Every call of ours sends its statements back to back and gives up after a
heartbeat anyway."""
MIGRATE_LOCK_SECONDS = 60
"""How long a node waits for another one's migration."""
POOL_SIZE = 4
UNREACHABLE = ("connection refused", "timeout expired", "server closed the connection",
               "no such file or directory", "the database system is")  # fmt: skip
"""libpq's words for a server that is down or starting (unlike a wrong password, it may
come back: a node waits for it)."""
PASSWORD_SOURCES = "settings.cluster.password_env or password_file"  # noqa: S105  (where from)


def read_password(settings: ClusterSettings, environ: Mapping[str, str]) -> str | None:
    """The database password: from `password_file` (first line) or the `password_env`
    variable (taken out of the environment at start). Blocking: call it off the loop.

    Raises:
        ClusterDatabaseError: the file cannot be read, or the variable is not set.
    """
    if settings.password_file is not None:
        try:
            text = settings.password_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise ClusterDatabaseError(
                f"settings.cluster.password_file {settings.password_file}: cannot read it "
                f"({getattr(error, 'strerror', None) or error})"
            ) from None
        return text.splitlines()[0] if text.strip() else ""
    if settings.password_env is not None:
        value = environ.get(settings.password_env)
        if value is None:
            raise ClusterDatabaseError(
                f"settings.cluster.password_env names ${settings.password_env}, which is not set"
            )
        return value
    return None


class ClusterDatabase:
    """A pool of connections to the cluster's database, once `open` has checked it."""

    def __init__(self, url: str, *, password: str | None, node: str) -> None:
        """`url` is `settings.cluster.database` (no password in it); `node` names this
        node to the server (`application_name`, and in `tuisched_schema`)."""
        self.url = url
        self.node = node
        self._conninfo = make_conninfo(
            _libpq_url(url),
            password=password,
            connect_timeout=CONNECT_SECONDS,
            application_name=f"tuisched {node}"[:63],
            options=(
                f"-c statement_timeout={STATEMENT_SECONDS * 1000} "
                f"-c idle_in_transaction_session_timeout={IDLE_IN_TRANSACTION_SECONDS * 1000}"
            ),
        )
        self._pool: AsyncConnectionPool | None = None

    @property
    def shown(self) -> str:
        """The URL as logs and screens show it."""
        return redacted(self.url)

    async def open(self) -> None:
        """Connect (one clear error if that fails), then open the pool and migrate.

        Raises:
            ClusterDatabaseError: what to fix, in one line.
            SchemaTooNewError: the database was set up by a newer tuisched.
        """
        connection = await self._connect()
        await connection.close()
        # Autocommit: a one-statement call is one round trip (no COMMIT after it); the
        # calls that need several statements at once open a transaction themselves.
        pool = AsyncConnectionPool(
            self._conninfo, min_size=1, max_size=POOL_SIZE, open=False,
            timeout=CONNECT_SECONDS * 2, name=f"tuisched-{self.node}",
            kwargs={"autocommit": True},
        )  # fmt: skip
        await pool.open(wait=True, timeout=CONNECT_SECONDS * 2)
        self._pool = pool
        try:
            await self.migrate()
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close(timeout=CONNECT_SECONDS)
            self._pool = None

    @property
    def is_open(self) -> bool:
        return self._pool is not None

    @property
    def pool(self) -> AsyncConnectionPool:
        if self._pool is None:
            raise ClusterDatabaseError(f"the database at {self.shown} is not open")
        return self._pool

    async def now(self) -> datetime:
        """The database's clock: the one that says when a slot is due in a cluster."""
        async with self.pool.connection() as connection:
            cursor = await connection.execute("SELECT now()")
            row = await cursor.fetchone()
        assert row is not None  # noqa: S101  (SELECT now() returns a row)
        value: datetime = row[0]
        return value

    async def listen(self, channel: str) -> psycopg.AsyncConnection[tuple[object, ...]]:
        """A connection of its own (not the pool's) that LISTENs on `channel`: read its
        `notifies()`; it ends with an error when the connection is lost. Its
        `application_name` is `tuisched-listen NODE`."""
        named = make_conninfo(self._conninfo, application_name=f"tuisched-listen {self.node}"[:63])
        connection = await psycopg.AsyncConnection.connect(named, autocommit=True)
        await connection.execute(f"LISTEN {channel}")
        return connection

    async def recycle(self) -> None:
        """Replace every connection of the pool with a new one: a session keeps the
        defaults it began with, so after `ALTER DATABASE ... SET
        default_transaction_read_only` and its RESET only new sessions take writes."""
        await self.pool.drain()

    async def read_only(self) -> bool:
        """Whether the database takes no writes now (a standby, or a read-only default)."""
        async with self.pool.connection() as connection:
            cursor = await connection.execute("SHOW transaction_read_only")
            row = await cursor.fetchone()
        return row is not None and row[0] == "on"

    async def schema_version(self) -> int:
        """The version of the schema in the database (0: none yet)."""
        async with self.pool.connection() as connection:
            return await _version(connection)

    async def migrate(self) -> int:
        """Apply the migrations the database lacks, once however many nodes start at once;
        return the version it is at.

        Raises:
            SchemaTooNewError: the database's schema is newer than this tuisched knows.
            ClusterDatabaseError: the role may not create the tables.
        """
        async with self.pool.connection() as connection:
            version = await _version(connection)
            self._refuse_newer(version)
            if version == LATEST:
                return version
            try:
                async with connection.transaction():
                    await connection.execute(
                        f"SET LOCAL statement_timeout = {MIGRATE_LOCK_SECONDS * 1000}"
                    )
                    await connection.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
                    await connection.execute(VERSION_TABLE)
                    version = await _version(connection)  # another node may have done it
                    self._refuse_newer(version)
                    for migration in MIGRATIONS:
                        if migration.version <= version:
                            continue
                        for statement in migration.statements:
                            await connection.execute(statement)
                        await connection.execute(
                            "INSERT INTO tuisched_schema (version, description, applied_by) "
                            "VALUES (%s, %s, %s)",
                            (migration.version, migration.description, self.node),
                        )
                        log.info("database %s: schema migrated to version %d (%s)",
                                 self.shown, migration.version, migration.description)  # fmt: skip
            except pg_errors.InsufficientPrivilege as error:
                user = urlsplit(self.url).username or "this role"
                raise ClusterDatabaseError(
                    f"the database at {self.shown} does not let role '{user}' create the "
                    f"cluster's tables ({_first_line(error)}): grant it CREATE on the schema, "
                    "or start the first node as the database's owner"
                ) from None
            except pg_errors.QueryCanceled:
                raise ClusterDatabaseError(
                    f"the database at {self.shown}: another node's schema migration held its "
                    f"lock for over {MIGRATE_LOCK_SECONDS} s"
                ) from None
            except pg_errors.ReadOnlySqlTransaction:
                raise ClusterDatabaseError(
                    f"the database at {self.shown} takes no writes (read-only), and the "
                    "cluster's tables are not made there yet: start the first node on a "
                    "database that takes writes (the primary)"
                ) from None
            return LATEST

    def _refuse_newer(self, version: int) -> None:
        if version > LATEST:
            raise SchemaTooNewError(
                f"the database at {self.shown} holds a tuisched schema of version {version}, "
                f"newer than this tuisched knows (up to {LATEST}): upgrade tuisched on this node"
            )

    async def _connect(self) -> psycopg.AsyncConnection[tuple[object, ...]]:
        try:
            async with asyncio.timeout(CONNECT_SECONDS + 1):
                return await psycopg.AsyncConnection.connect(self._conninfo)
        except TimeoutError:
            raise self._silent() from None
        except psycopg.OperationalError as error:
            line = explain(str(error), self.url, setting="settings.cluster.database",
                           password=PASSWORD_SOURCES)  # fmt: skip
            said = str(error).lower()
            if any(needle in said for needle in UNREACHABLE):
                raise DatabaseUnreachableError(line) from None
            raise ClusterDatabaseError(line) from None

    def _silent(self) -> ClusterDatabaseError:
        parts = urlsplit(self.url)
        return DatabaseUnreachableError(
            f"no answer from the database at {parts.hostname}:{parts.port or 5432} within "
            f"{CONNECT_SECONDS} s: check the host, the port and any firewall"
        )


async def _version(connection: psycopg.AsyncConnection[tuple[object, ...]]) -> int:
    cursor = await connection.execute("SELECT to_regclass('tuisched_schema') IS NOT NULL")
    exists = await cursor.fetchone()
    if not exists or not exists[0]:
        return 0
    cursor = await connection.execute("SELECT coalesce(max(version), 0) FROM tuisched_schema")
    row = await cursor.fetchone()
    return int(str(row[0])) if row else 0


def _libpq_url(url: str) -> str:
    """The URL as libpq reads it (`postgresql+psycopg://` is SQLAlchemy's spelling)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(scheme="postgresql"))


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
