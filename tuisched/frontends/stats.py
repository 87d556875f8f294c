"""`tuisched stats`, and the window and state filters `tuisched history` shares with it.

    tuisched stats [JOB] [--since T] [--until T] [--sort KEY] [--slowest N] [--json]

T is ISO 8601 (without an offset: in `settings.timezone`) or a duration
before now such as `7d` or `12h`. The window defaults to the last 7 days.
Stats read the history the way `tuisched history` does: the database the
configuration names (the cluster's shared table in cluster mode), whether a
scheduler runs or not. Exit 0; 1 for an unknown job; 2 for a bad option.
The options are in `cli.py`, which loads this module when `stats` or
`history` runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TextIO
from zoneinfo import ZoneInfo

from tuisched.domain.config.values import nearest
from tuisched.domain.errors import TuischedError, UnknownJobError, UsageError, one_line
from tuisched.domain.model import Config
from tuisched.domain.schedule.duration import format_elapsed
from tuisched.domain.stats import DEFAULT_WINDOW, parse_instant
from tuisched.domain.text import columns
from tuisched.domain.views import HistoryStats, JobStats, StatsQuery
from tuisched.frontends.exits import EX_USAGE
from tuisched.frontends.history import run_as_json
from tuisched.frontends.lookup import config_path
from tuisched.runtime.control import read_config

if TYPE_CHECKING:
    from tuisched.runtime.control import OfflineControl

SORTS: dict[str, Callable[[JobStats], Any]] = {
    "job": lambda s: s.job,
    "runs": lambda s: -s.runs,
    "failures": lambda s: -s.failures,
    "rate": lambda s: s.success_rate if s.success_rate is not None else 2.0,
    "p50": lambda s: -(s.p50 or timedelta(0)),
    "p95": lambda s: -(s.p95 or timedelta(0)),
    "duration": lambda s: -(s.slowest or timedelta(0)),
}
"""`--sort` keys: most first, except `job` (by name) and `rate` (worst first); the same
as the command line's `STATS_SORTS`."""


# --- the filters `history` shares ---------------------------------------------------------


def window(args: argparse.Namespace, tz: ZoneInfo, now: datetime,
           default: timedelta | None) -> tuple[datetime | None, datetime | None]:  # fmt: skip
    """The [since, until) the options name; `since` defaults to `default` before now.

    Raises:
        UsageError: a time that does not parse, or a window that ends before it begins.
    """
    try:
        since = parse_instant(args.since, now, tz, "--since") if args.since else None
        until = parse_instant(args.until, now, tz, "--until") if args.until else None
    except TuischedError as error:
        raise UsageError(str(error)) from None
    if since is None and default is not None:
        since = (until or now) - default
    if since is not None and until is not None and until <= since:
        raise UsageError(
            f"--until ({until.isoformat()}) must be after --since ({since.isoformat()})"
        )
    return since, until


# --- tuisched stats -------------------------------------------------------------------------


def stats_of_jobs(args: argparse.Namespace) -> int:
    """`tuisched stats`: each job's runs over the window, as a table or JSON."""
    text, config = read_config(config_path(args))
    if args.job is not None and args.job not in config.jobs:  # exit 1, as other commands do
        hint = nearest(args.job, frozenset(config.jobs))
        raise TuischedError(f"{UnknownJobError(args.job)} in {config.path}{hint}")
    tz = config.settings.timezone
    try:
        since, until = window(args, tz, datetime.now(UTC), DEFAULT_WINDOW)
    except UsageError as error:
        print(f"tuisched: stats: {one_line(str(error))}", file=sys.stderr)
        return EX_USAGE
    query = StatsQuery(job=args.job, since=since, until=until, slowest=args.slowest)
    import asyncio  # noqa: PLC0415  (`history` shares this module's window, not its reader)

    found = asyncio.run(_read(config, _left_by(config, text), query))
    ordered = sorted(found.jobs, key=SORTS[args.sort])
    if args.json:
        json.dump(stats_json(found, ordered, tz), sys.stdout, indent=2)
        print()
    else:
        print_stats(found, ordered, tz, sys.stdout)
    return 0


def _left_by(config: Config, text: str) -> OfflineControl | None:
    """The seam over the history the scheduler left (None in cluster mode: the cluster's
    database is read instead); a PostgreSQL history without its driver is exit 78."""
    from tuisched.runtime.control import offline_control  # noqa: PLC0415  (`history` shares this module's window, not its reader)

    return None if config.settings.cluster is not None else offline_control(config, text)


async def _read(config: Config, left: OfflineControl | None, query: StatsQuery) -> HistoryStats:
    from tuisched.runtime.control import cluster_stats  # noqa: PLC0415  (`history` shares this module's window, not its reader)

    if left is None:  # every node's runs, from the shared database
        return await cluster_stats(config, query)
    return await left.stats(query)


def _seconds(value: timedelta | None) -> float | None:
    return value.total_seconds() if value is not None else None


def _iso(moment: datetime | None, tz: ZoneInfo) -> str | None:
    return moment.astimezone(tz).isoformat() if moment is not None else None


def job_json(stats: JobStats, tz: ZoneInfo) -> dict[str, object]:
    """One job's stats as `tuisched stats --json` prints them (durations in seconds)."""
    return {
        "job": stats.job,
        "runs": stats.runs,
        "successes": stats.successes,
        "failures": stats.failures,
        "success_rate": stats.success_rate,
        "p50": _seconds(stats.p50),
        "p95": _seconds(stats.p95),
        "slowest_run": stats.slowest_run,
        "slowest": _seconds(stats.slowest),
        "last_failure_at": _iso(stats.last_failure_at, tz),
        "last_failure": stats.last_failure or None,
    }


def stats_json(found: HistoryStats, ordered: list[JobStats], tz: ZoneInfo) -> dict[str, object]:
    """The whole answer as JSON: the window, each job, and the slowest runs asked for."""
    return {
        "since": _iso(found.since, tz),
        "until": _iso(found.until, tz),
        "jobs": [job_json(stats, tz) for stats in ordered],
        "slowest": [run_as_json(run, tz) for run in found.slowest],
    }


def _took(value: timedelta | None) -> str:
    return format_elapsed(value) if value is not None else "-"


def _rate(stats: JobStats) -> str:
    rate = stats.success_rate
    return f"{rate:.1%}" if rate is not None else "-"


def _when(moment: datetime | None, tz: ZoneInfo) -> str:
    return moment.astimezone(tz).strftime("%Y-%m-%d %H:%M") if moment is not None else "-"


def print_stats(found: HistoryStats, ordered: list[JobStats], tz: ZoneInfo, out: TextIO) -> None:
    """The stats as a table (and the slowest runs under it)."""
    since, until = _when(found.since, tz), _when(found.until, tz) if found.until else "now"
    out.write(f"runs queued from {since} to {until} ({tz.key})\n")
    rows = [["JOB", "RUNS", "OK", "FAILED", "RATE", "P50", "P95", "SLOWEST", "LAST FAILURE"]]
    for stats in ordered:
        slowest = f"{_took(stats.slowest)} {stats.slowest_run}" if stats.slowest_run else "-"
        failure = (f"{_when(stats.last_failure_at, tz)} {stats.last_failure}"
                   if stats.last_failure else "-")  # fmt: skip
        counts = [str(stats.runs), str(stats.successes), str(stats.failures), _rate(stats)]
        rows.append([stats.job, *counts, _took(stats.p50), _took(stats.p95), slowest, failure])
    if not ordered:
        out.write("no finished runs in this window\n")
    else:
        _table(rows, out)
    if found.slowest:
        out.write("\nslowest runs\n")
        table = [["RUN ID", "JOB", "STARTED", "TOOK", "STATE"]]
        table += [[run.run_id, run.job, _when(run.started_at, tz), _took(run.duration),
                   run.state.value] for run in found.slowest]  # fmt: skip
        _table(table, out)


def _table(rows: list[list[str]], out: TextIO) -> None:
    out.write("".join(line + "\n" for line in columns(rows)))
