"""PostgreSQL's driver, loaded only for a configuration that uses PostgreSQL.

psycopg (with its pool) comes with the `postgres` extra, not with a plain
`pip install tuisched`: a single node on SQLite never imports it. A
configuration that names PostgreSQL (`settings.cluster`, or a
`postgresql://` `settings.history`) checks here, before anything starts,
that the driver can be imported; when it cannot, the operator gets one
problem at the setting's line that says what to install, as for any other
configuration problem (exit 78; `validate` lists it and exits 1).

The import-linter contract "psycopg only where cluster mode loads it" names
this module: it and the cluster's database, store and link import psycopg.
"""

from __future__ import annotations

from tuisched.domain.errors import DriverMissingError, Problem
from tuisched.domain.model import Config

POSTGRES_EXTRA = "pip install 'tuisched[postgres]'"
"""What installs the driver (psycopg with libpq, and its pool)."""

DRIVER_MODULES = ("psycopg", "psycopg_pool")
"""What cluster mode imports: the driver, and its connection pool."""


def postgres_setting(config: Config, *, cluster: bool = True) -> str | None:
    """The setting that makes `config` need PostgreSQL's driver, or None.

    `cluster` False leaves `settings.cluster` out: a process that does not take
    part in the cluster (`tuisched run JOB`) uses only its history.
    """
    settings = config.settings
    if cluster and settings.cluster is not None:
        return "cluster"
    if settings.history and settings.history.split(":", 1)[0].split("+")[0] in (
        "postgresql",
        "postgres",
    ):
        return "history"
    return None


def require_driver(config: Config, *, cluster: bool = True) -> None:
    """Import PostgreSQL's driver if `config` needs it (see `postgres_setting`);
    a configuration that does not need it imports nothing.

    Blocking (an import, and on failure a read of the file for the line):
    call it off the event loop.

    Raises:
        DriverMissingError: the driver is needed and cannot be imported; its one problem
            names the file, the line of the setting and what to install.
    """
    setting = postgres_setting(config, cluster=cluster)
    if setting is None:
        return
    try:
        for module in DRIVER_MODULES:
            __import__(module)
    except ImportError as error:
        raise DriverMissingError([_missing(config, setting, error)]) from None


def _missing(config: Config, setting: str, error: ImportError) -> Problem:
    """The problem for a driver that cannot be imported, at the setting's line."""
    said = str(error).splitlines()[0] if str(error) else type(error).__name__
    what = "cluster mode" if setting == "cluster" else "a PostgreSQL history"
    return Problem(
        file=config.path,
        line=config.settings.lines.get(setting, 1),
        message=f"settings.{setting}: {what} needs PostgreSQL's driver (psycopg), which "
        f"is not installed ({said}): {POSTGRES_EXTRA}",
    )
