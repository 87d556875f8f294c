"""The cluster's database against a real PostgreSQL: migrations once, and one clear line for
each way a connection fails (SPEC R21)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import tuisched.runtime.cluster.database
from tuisched.domain.errors import ClusterDatabaseError, SchemaTooNewError
from tuisched.domain.model import ClusterSettings
from tuisched.runtime.cluster.database import (
    CONNECT_SECONDS,
    ClusterDatabase,
    read_password,
    redacted,
)
from tuisched.runtime.cluster.schema import LATEST

from .conftest import REPO
from .pg_fixtures import PASSWORD, PostgresServer


@pytest.fixture
def database(postgres: PostgresServer) -> str:
    """The URL of a fresh database (no password in it, as in the configuration)."""
    return postgres.url(postgres.create_database())


async def test_ten_nodes_starting_together_migrate_once(
    postgres: PostgresServer,
    database: str,
) -> None:
    nodes = [ClusterDatabase(database, password=PASSWORD, node=f"n{i}") for i in range(10)]
    try:
        await asyncio.gather(*(node.open() for node in nodes))
        assert {await node.schema_version() for node in nodes} == {LATEST}
    finally:
        await asyncio.gather(*(node.close() for node in nodes))
    name = database.rsplit("/", 1)[1]
    applied = postgres.sql("SELECT version, applied_by FROM tuisched_schema", name)
    assert len(applied.splitlines()) == LATEST  # one row per migration: applied once
    again = ClusterDatabase(database, password=PASSWORD, node="late")
    try:
        await again.open()  # an up-to-date schema: nothing to do
    finally:
        await again.close()
    assert postgres.sql("SELECT count(*) FROM tuisched_schema", name) == str(LATEST)


def test_ten_node_processes_starting_together_migrate_once(
    postgres: PostgresServer,
    database: str,
) -> None:
    script = (
        "import asyncio, sys\n"
        "from tuisched.runtime.cluster.database import ClusterDatabase\n"
        "async def main():\n"
        "    db = ClusterDatabase(sys.argv[1], password=sys.argv[2], node=sys.argv[3])\n"
        "    await db.open()\n"
        "    await db.close()\n"
        "asyncio.run(main())\n"
    )
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", script, database, PASSWORD, f"p{i}"],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(10)
    ]
    for process in processes:
        _, err = process.communicate(timeout=60)
        assert process.returncode == 0, err
    name = database.rsplit("/", 1)[1]
    assert postgres.sql("SELECT count(*) FROM tuisched_schema", name) == str(LATEST)


async def test_a_node_cut_off_inside_a_transaction_holds_its_locks_only_a_moment(
    database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node whose COMMIT is lost on the way (the network cut) leaves its session idle
    in the transaction on the server, holding its row locks; the other nodes' reaping
    skips locked rows, so its runs would never be abandoned. The server ends such a
    session after IDLE_IN_TRANSACTION_SECONDS."""
    monkeypatch.setattr(tuisched.runtime.cluster.database, "IDLE_IN_TRANSACTION_SECONDS", 2)
    cut = ClusterDatabase(database, password=PASSWORD, node="cut")
    other = ClusterDatabase(database, password=PASSWORD, node="other")
    await cut.open()
    await other.open()
    locked = asyncio.Event()

    async def silent_in_a_transaction() -> None:
        async with cut.pool.connection() as connection, connection.transaction():
            await connection.execute("SELECT pg_advisory_xact_lock(4242)")
            locked.set()
            await asyncio.Event().wait()  # nothing more is said: cut off

    async def free() -> bool:
        async with other.pool.connection() as connection:
            cursor = await connection.execute("SELECT pg_try_advisory_xact_lock(4242)")
            row = await cursor.fetchone()
            return bool(row and row[0])

    holder = asyncio.create_task(silent_in_a_transaction())
    try:
        async with asyncio.timeout(10):
            await locked.wait()
        assert not await free()  # held while the transaction lives
        async with asyncio.timeout(15):
            while not await free():  # noqa: ASYNC110  (polling another server session)
                await asyncio.sleep(0.1)
    finally:
        holder.cancel()
        with contextlib.suppress(BaseException):  # its connection is gone: any error
            await holder
        await cut.close()
        await other.close()


async def test_a_schema_newer_than_this_tuisched_is_refused(
    postgres: PostgresServer,
    database: str,
) -> None:
    node = ClusterDatabase(database, password=PASSWORD, node="n")
    await node.open()
    await node.close()
    name = database.rsplit("/", 1)[1]
    insert = "INSERT INTO tuisched_schema (version, description, applied_by) VALUES ({}, 'x', 'y')"
    postgres.sql(insert.format(LATEST + 1), name)
    with pytest.raises(SchemaTooNewError) as refused:
        await ClusterDatabase(database, password=PASSWORD, node="old").open()
    assert str(refused.value) == (
        f"the database at {database} holds a tuisched schema of version {LATEST + 1}, newer "
        f"than this tuisched knows (up to {LATEST}): upgrade tuisched on this node"
    )


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections and never says a word (a blackhole)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        yield server.getsockname()[1]


@pytest.fixture
def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])  # closed again when the block ends


async def test_each_way_a_connection_fails_is_one_line_that_says_what_to_fix(
    postgres: PostgresServer,
    database: str,
    closed_port: int,
) -> None:
    name = database.rsplit("/", 1)[1]
    cases = [
        (database, "wrong", f"the database at {database} refused the password of role "
         "'postgres': check settings.cluster.password_env or password_file"),
        (database, None, f"the database at {database} asks for a password: set "
         "settings.cluster.password_env or password_file"),
        (postgres.url("nosuchdb"), PASSWORD, f"the database server at 127.0.0.1:{postgres.port} "
         'says: database "nosuchdb" does not exist; fix settings.cluster.database, or create '
         "what is missing"),
        (f"postgresql://postgres@127.0.0.1:{closed_port}/{name}", PASSWORD,
         f"nothing accepts connections at 127.0.0.1:{closed_port}: is PostgreSQL running "
         "there, and listening on TCP?"),
        ("postgresql://postgres@no-such-host.invalid/x", PASSWORD,
         "unknown host 'no-such-host.invalid' in settings.cluster.database"),
    ]  # fmt: skip
    for url, password, line in cases:
        with pytest.raises(ClusterDatabaseError) as failed:
            await ClusterDatabase(url, password=password, node="n").open()
        assert str(failed.value) == line
        assert PASSWORD not in str(failed.value)


async def test_a_silent_server_is_given_up_on_in_bounded_time(silent_port: int) -> None:
    database = ClusterDatabase(
        f"postgresql://postgres@127.0.0.1:{silent_port}/x", password=PASSWORD, node="n"
    )
    loop = asyncio.get_running_loop()
    began = loop.time()
    with pytest.raises(ClusterDatabaseError) as failed:
        await database.open()
    assert loop.time() - began < CONNECT_SECONDS + 3
    assert str(failed.value) == (
        f"no answer from the database at 127.0.0.1:{silent_port} within {CONNECT_SECONDS} s: "
        "check the host, the port and any firewall"
    )


async def test_a_role_without_rights_is_told_what_to_grant(
    postgres: PostgresServer,
    database: str,
) -> None:
    name = database.rsplit("/", 1)[1]
    role = f"r_{name}"
    postgres.sql(f"CREATE ROLE {role} LOGIN PASSWORD '{PASSWORD}'")
    postgres.sql(f"REVOKE CREATE ON SCHEMA public FROM PUBLIC; GRANT CONNECT ON DATABASE "
                 f"{name} TO {role}", name)  # fmt: skip
    url = postgres.url(name, user=role)
    with pytest.raises(ClusterDatabaseError) as refused:
        await ClusterDatabase(url, password=PASSWORD, node="n").open()
    said = str(refused.value)
    assert said.startswith(f"the database at {url} does not let role '{role}' create the "
                           "cluster's tables (permission denied for schema public")  # fmt: skip
    assert said.endswith("grant it CREATE on the schema, or start the first node as the "
                         "database's owner")  # fmt: skip


async def test_the_database_clock_is_the_servers(
    postgres: PostgresServer,
    database: str,
) -> None:
    node = ClusterDatabase(database, password=PASSWORD, node="n")
    await node.open()
    try:
        first = await node.now()
        second = await node.now()
    finally:
        await node.close()
    assert first.tzinfo is not None
    assert first <= second


def test_the_password_comes_from_a_file_or_the_environment(tmp_path: Path) -> None:
    secret = tmp_path / "pw"
    secret.write_text("s3cret\nignored\n")
    url = "postgresql://tuisched@db/tuisched"
    from_file = ClusterSettings(database=url, password_file=secret)
    assert read_password(from_file, {}) == "s3cret"
    from_env = ClusterSettings(database=url, password_env="PGPASS_T")  # noqa: S106
    assert read_password(from_env, {"PGPASS_T": "x"}) == "x"
    with pytest.raises(ClusterDatabaseError, match=r"names \$PGPASS_T, which is not set"):
        read_password(from_env, {})
    missing = ClusterSettings(database=url, password_file=tmp_path / "nope")
    with pytest.raises(ClusterDatabaseError, match=r"password_file .*nope: cannot read it"):
        read_password(missing, {})
    assert read_password(ClusterSettings(database=url), {}) is None
    assert redacted("postgresql://u:hunter2@h:5/d") == "postgresql://u:***@h:5/d"
