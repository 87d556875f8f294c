"""The commands that read and change nothing: `validate`, `next`, `upstream`, `jobs`,
`history` and `nodes` (their grammar is in `cli.py`, which loads this module only
when one of them runs: they need the configuration's validation, the verbs do not).

`validate`, `next` and `upstream` read the configuration file alone; `jobs`
asks the scheduler running on it, or reads what its scheduler left when none
runs; `history` and `nodes` read the history (the cluster's in cluster mode).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import textwrap
from datetime import UTC, datetime
from typing import TYPE_CHECKING, TextIO
from zoneinfo import ZoneInfo

from tuisched.domain.config.config import SELF
from tuisched.domain.config.dependencies import previous_own_slot, required_slot
from tuisched.domain.config.values import nearest
from tuisched.domain.errors import (
    ConfigError,
    OtherConfigurationError,
    SchedulerNotRunningError,
    TuischedError,
    UnknownJobError,
    UsageError,
)
from tuisched.domain.model import Config, Job
from tuisched.domain.runs import RunRecord
from tuisched.domain.schedule.duration import format_duration
from tuisched.domain.schedule.jitter import fire_time
from tuisched.domain.schedule.slots import localize, next_slots
from tuisched.domain.text import counted
from tuisched.domain.views import HistoryQuery, JobStatus
from tuisched.frontends.lookup import config_path
from tuisched.frontends.stats import window
from tuisched.frontends.table import table_lines
from tuisched.runtime.control import read_config, require_driver

if TYPE_CHECKING:  # the socket client loads for `jobs` and `history` only, not to validate
    from tuisched.runtime.control import BlockingControl


def _load(args: argparse.Namespace) -> Config:
    return read_config(config_path(args))[1]


def _offline(args: argparse.Namespace) -> tuple[Config, BlockingControl]:
    """The configuration, and the seam over what its scheduler left (no scheduler started)."""
    text, config = read_config(config_path(args))
    return config, _left_by(config, text)


def _left_by(config: Config, text: str) -> BlockingControl:
    """The seam over the files the scheduler of `config` left: its history, pauses, output."""
    from tuisched.runtime.control import BlockingControl, offline_control  # noqa: PLC0415  (SQLAlchemy)

    return BlockingControl.over(offline_control(config, text))


def named_job(args: argparse.Namespace) -> Job:
    """The job `args.job` of the configuration (TuischedError with the nearest name)."""
    return _find_job(_load(args), args.job)


def _find_job(config: Config, name: str) -> Job:
    try:
        return config.job(name)
    except UnknownJobError as error:
        hint = nearest(name, frozenset(config.jobs))
        raise TuischedError(f"{error} in {config.path}{hint}") from None


def _instant(text: str, job: Job, option: str) -> datetime:
    """Parse an ISO 8601 option; a date-time without offset is read in the job's zone."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        message = f"{option}: bad date-time '{text}'; write it like 2026-05-07T09:10"
        raise UsageError(message) from None
    if moment.tzinfo is None:
        return localize(moment, job.timezone)
    return moment


# --- commands -----------------------------------------------------------------


def validate(args: argparse.Namespace) -> int:
    """`tuisched validate`: OK with the counts, or every problem (exit 1). A file that
    validates has its python jobs' targets imported too, in a child process."""
    from tuisched.runtime.control import python_job_problems  # noqa: PLC0415  (validate only)

    try:
        config = _load(args)
        require_driver(config)  # cluster mode without the `postgres` extra is a problem too
    except ConfigError as error:
        problems = error.problems
    else:
        problems = tuple(python_job_problems(config))  # once the file is right: it runs code
    for problem in problems:
        print(problem)
    if problems:
        return 1
    print(f"OK: {counted(len(config.jobs), 'job')}, {counted(len(config.groups), 'group')}")
    return 0


def next_runs(args: argparse.Namespace) -> int:
    """`tuisched next JOB`: the job's next slots (or start times, with --jitter)."""
    config = _load(args)
    job = _find_job(config, args.job)
    now = _instant(args.now, job, "--now") if args.now else datetime.now(UTC)
    if job.schedule is None or not job.enabled:
        reason = (
            "is disabled"
            if not job.enabled
            else f"runs after '{job.after.job}'"
            if job.after
            else ""
        )
        print(f"tuisched: job '{job.name}' {reason}; it has no scheduled runs", file=sys.stderr)
        return 0
    for slot in next_slots(job.schedule, now, args.n):
        shown = fire_time(job.schedule, job.name, job.jitter, slot) if args.jitter else slot
        print(shown.isoformat())
    if job.jitter and not args.jitter:
        print(
            f"tuisched: job '{job.name}' has jitter {format_duration(job.jitter)}: each run "
            "starts up to that long after its slot (--jitter prints the start times)",
            file=sys.stderr,
        )
    return 0


def upstream(args: argparse.Namespace) -> int:
    """`tuisched upstream JOB --at T`: the upstream slots a run of JOB requires."""
    config = _load(args)
    job = _find_job(config, args.job)
    if not job.requires or job.schedule is None:
        print(f"tuisched: job '{job.name}' has no 'requires'", file=sys.stderr)
        return 0
    at = _instant(args.at, job, "--at")
    for name in job.requires:
        upstream = job if name in (SELF, job.name) else config.jobs[name]
        slot = None
        if upstream is job:
            slot = previous_own_slot(job.schedule, at)
        elif upstream.schedule is not None:  # validation guarantees it: upstreams have cycles
            slot = required_slot(job.schedule, upstream.schedule, at)
        print(f"{upstream.name} {slot.isoformat() if slot is not None else '-'}")
    return 0


def jobs(args: argparse.Namespace) -> int:
    """`tuisched jobs`: every job with its kind, state, next run and schedule."""
    rows = [_job_row(status) for status in _job_statuses(args)]
    if args.json:
        json.dump(rows, sys.stdout, indent=2)
        print()
    else:
        _print_table(rows, sys.stdout)
    return 0


def _job_statuses(args: argparse.Namespace) -> tuple[JobStatus, ...]:
    """Every job as the scheduler running on this state sees it (its runs, queue and
    waits make the `why`); as the files say when none runs. The file is read (and
    checked) first either way."""
    from tuisched.runtime.control import (  # noqa: PLC0415  (see the imports above)
        BlockingControl,
        control_socket,
        describe_client,
    )

    path = config_path(args)
    text, config = read_config(path)
    require_driver(config, cluster=False)  # a postgresql:// history is read with psycopg
    try:
        with BlockingControl.connect(
            control_socket(path), client=describe_client("command line"), config=path
        ) as running:
            return running.jobs()
    except OtherConfigurationError:  # its files are another configuration's too
        raise
    except SchedulerNotRunningError:  # none runs, or it stopped meanwhile
        with _left_by(config, text) as left:
            return left.jobs()


def history(args: argparse.Namespace) -> int:
    """`tuisched history [JOB]`: the newest runs, filtered."""
    from tuisched.frontends.history import print_runs  # noqa: PLC0415

    config, control = _offline(args)
    if args.job is not None:
        _find_job(config, args.job)
    since, until = _window(args, config)
    query = HistoryQuery(
        job=args.job, limit=args.n, states=tuple(dict.fromkeys(args.state)),
        triggers=tuple(dict.fromkeys(args.trigger)), since=since, until=until,
    )  # fmt: skip
    with control:
        if config.settings.cluster is not None:  # every node's runs, from the shared database
            runs = _cluster_history(config, query)
        else:
            runs = control.history(query)
    print_runs(runs, config.settings.timezone, as_json=args.json, out=sys.stdout)
    return 0


def nodes(args: argparse.Namespace) -> int:
    """`tuisched nodes`: the cluster's nodes, from its database."""
    import asyncio  # noqa: PLC0415  (the cluster's database is read with its async driver)

    from tuisched.frontends.nodes import print_nodes  # noqa: PLC0415
    from tuisched.runtime.control import cluster_nodes  # noqa: PLC0415

    config = read_config(config_path(args))[1]
    print_nodes(asyncio.run(cluster_nodes(config)), as_json=args.json, out=sys.stdout)
    return 0


def _cluster_history(config: Config, query: HistoryQuery) -> tuple[RunRecord, ...]:
    """Every node's runs the query asks for, from the cluster's shared database."""
    import asyncio  # noqa: PLC0415  (the cluster's database is read with its async driver)

    from tuisched.runtime.control import cluster_history  # noqa: PLC0415

    return asyncio.run(cluster_history(config, query))


# --- job rows -------------------------------------------------------------------


def _job_row(status: JobStatus) -> dict[str, object]:
    upcoming = status.next_fire
    return {
        "name": status.name,
        "kind": status.kind,
        "schedule": status.trigger,
        "next_run": upcoming.astimezone(ZoneInfo(status.timezone)).isoformat()
        if upcoming
        else None,
        "state": status.state.value,
        "groups": list(status.groups),
        "timezone": status.timezone,
        "description": status.description,
        "why": status.why,
    }


def _print_table(rows: list[dict[str, object]], out: TextIO) -> None:
    """The jobs as a table, each followed by its `why` on an indented line (wrapped to
    the terminal's width, 80 columns when there is none)."""
    columns = ("name", "kind", "state", "next_run", "schedule")
    table = [[c.upper().replace("_", " ") for c in columns]]
    table += [[str(row[c] if row[c] is not None else "-") for c in columns] for row in rows]
    lines = table_lines(table)
    width = max(shutil.get_terminal_size().columns, 40)
    out.write(lines[0] + "\n")
    for line, row in zip(lines[1:], rows, strict=True):
        out.write(line + "\n")
        if row["why"]:
            why = textwrap.wrap(
                str(row["why"]), width, initial_indent="  why: ", subsequent_indent="       ",
                break_long_words=False, break_on_hyphens=False,
            )  # fmt: skip
            out.write("\n".join(why) + "\n")


# --- history filters (issue 16) -----------------------------------------------------------


def _window(args: argparse.Namespace, config: Config) -> tuple[datetime | None, datetime | None]:
    """`history`'s --since and --until (a usage error, exit 2, when one does not parse)."""
    return window(args, config.settings.timezone, datetime.now(UTC), None)
