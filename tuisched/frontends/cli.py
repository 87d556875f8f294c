"""The `tuisched` command line (SPEC R20): stable, because scripts depend on it.

Exit codes: 0 success; 1 a check failed (`validate`) or a named job does not
exist; 2 a usage error; 69 (EX_UNAVAILABLE) a verb found no running
scheduler (see `verbs`); 78 (EX_CONFIG) a command could not read a valid
configuration. No user error ends in a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO
from zoneinfo import ZoneInfo

from tuisched import __version__
from tuisched.domain.config.config import SELF
from tuisched.domain.config.dependencies import previous_own_slot, required_slot
from tuisched.domain.config.values import nearest
from tuisched.domain.errors import ConfigError, TuischedError, UnknownJobError, one_line
from tuisched.domain.model import Config, Job
from tuisched.domain.schedule.duration import format_duration
from tuisched.domain.schedule.jitter import fire_time
from tuisched.domain.schedule.slots import localize, next_slots
from tuisched.domain.views import HistoryQuery, JobStatus
from tuisched.frontends.completion import add_completion
from tuisched.frontends.crontabimport import add_import_crontab
from tuisched.frontends.examples import describe_commands
from tuisched.frontends.lookup import find_config, user_config_file
from tuisched.frontends.service import add_service
from tuisched.frontends.simulation import add_simulate
from tuisched.frontends.starter import add_init
from tuisched.frontends.stats import BadOption, add_history_filters, add_stats, window
from tuisched.frontends.verbs import add_verbs
from tuisched.runtime.control import (
    OfflineControl,
    RemoteControl,
    SchedulerNotRunningError,
    cluster_history,
    cluster_nodes,
    control_socket,
    describe_client,
    read_config,
    require_driver,
    scheduler_answers,
)

EX_CONFIG = 78
DEFAULT_CONFIG = "tuisched.yaml"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    command: Callable[[argparse.Namespace], int] = args.func
    try:
        return command(args)
    except ConfigError as error:
        for problem in error.problems:
            print(problem, file=sys.stderr)
        return EX_CONFIG
    except UsageError as error:
        parser.error(str(error))  # prints the usage and exits 2
    except TuischedError as error:
        print(f"tuisched: {one_line(str(error))}", file=sys.stderr)
        return 1


def _parser() -> argparse.ArgumentParser:
    config = argparse.ArgumentParser(add_help=False)
    config.add_argument(
        "-c",
        "--config",
        metavar="PATH",
        default=argparse.SUPPRESS,
        help=f"configuration file (default: $TUISCHED_CONFIG, then ./{DEFAULT_CONFIG}, then "
        f"{user_config_file()})",
    )
    parser = argparse.ArgumentParser(
        prog="tuisched",
        description="A job scheduler you run, watch and steer from a terminal.",
        parents=[config],
    )
    parser.add_argument("--version", action="version", version=f"tuisched {__version__}")
    parser.add_argument("--no-ui", action="store_true", help="run headless (no console)")
    parser.add_argument(
        "--log-format", choices=("human", "json"), default="human", help="headless log lines"
    )
    parser.add_argument(
        "--read-only",
        action="store_true",
        help="watch the running scheduler: a console without any action that changes things",
    )
    parser.set_defaults(func=_console)
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")

    validate = commands.add_parser(
        "validate", parents=[config], help="check the configuration; print OK or every problem"
    )
    validate.set_defaults(func=_validate)

    nxt = commands.add_parser("next", parents=[config], help="print a job's next run times")
    nxt.add_argument("job", metavar="JOB")
    nxt.add_argument("-n", type=_positive, default=5, metavar="N", help="how many (default 5)")
    nxt.add_argument(
        "--now", metavar="ISO", help="count from this instant (read in the job's zone)"
    )
    nxt.add_argument(
        "--jitter", action="store_true",
        help="print when each run starts (slot plus the job's jitter delay), not the slot",
    )  # fmt: skip
    nxt.set_defaults(func=_next)

    upstream = commands.add_parser(
        "upstream", parents=[config], help="print the upstream slots a run of JOB requires"
    )
    upstream.add_argument("job", metavar="JOB")
    upstream.add_argument("--at", required=True, metavar="ISO", help="the run's slot")
    upstream.set_defaults(func=_upstream)

    jobs = commands.add_parser(
        "jobs", parents=[config], help="list every job: kind, schedule, next run, state"
    )
    jobs.add_argument("--json", action="store_true", help="print a JSON array")
    jobs.set_defaults(func=_jobs)

    history = commands.add_parser(
        "history", parents=[config], help="print the newest runs",
        description="Print the newest runs from the history, newest first, filtered by "
        "job, time, state and trigger (every node's runs in cluster mode).",
    )  # fmt: skip
    history.add_argument("job", metavar="JOB", nargs="?", help="only this job's runs")
    history.add_argument("-n", type=_positive, default=20, metavar="N", help="how many (20)")
    history.add_argument("--json", action="store_true", help="print a JSON array")
    add_history_filters(history)
    history.set_defaults(func=_history)

    nodes = commands.add_parser(
        "nodes", parents=[config], help="list the cluster's nodes: heartbeat, state, drift",
        description="List the nodes of the cluster (settings.cluster) from its database: "
        "each one's heartbeat age, state, running runs and drifted jobs. "
        "Example: tuisched nodes --json",
    )  # fmt: skip
    nodes.add_argument("--json", action="store_true", help="print a JSON array")
    nodes.set_defaults(func=_nodes)

    run = commands.add_parser(
        "run", parents=[config], help="run JOB once now in the foreground, streaming its output"
    )
    run.add_argument("job", metavar="JOB")
    run.add_argument(
        "--fire-events",
        action="store_true",
        help="also send the run's alerts and run its dependants (in the foreground)",
    )
    run.set_defaults(func=_run)
    attach = commands.add_parser(
        "attach", parents=[config], help="open the console on the scheduler running here"
    )
    attach.add_argument("--read-only", action="store_true", help="watch only: change nothing")
    attach.set_defaults(func=_attach)
    add_verbs(commands, config)
    add_simulate(commands, config)
    add_stats(commands, config)
    add_import_crontab(commands, config)
    # Service and packaging (issue 16, items 6-7): setting up, running as a service.
    add_init(commands, config)
    add_service(commands, config)
    add_completion(commands, config, _parser)
    describe_commands(parser)  # last: every command above gets its description and example
    return parser


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: '{text}'") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: '{text}'")
    return value


def config_path(args: argparse.Namespace) -> Path:
    """The configuration file the command names: -c, $TUISCHED_CONFIG, ./tuisched.yaml,
    then the user's configuration folder (see `lookup`; ConfigError says where it looked)."""
    return find_config(getattr(args, "config", None), os.environ, Path.cwd())


def _load(args: argparse.Namespace) -> Config:
    return read_config(config_path(args))[1]


def _offline(args: argparse.Namespace) -> tuple[Config, OfflineControl]:
    """The configuration, and the seam over what its scheduler left (no scheduler started)."""
    text, config = read_config(config_path(args))
    require_driver(config, cluster=False)  # a postgresql:// history is read with psycopg
    return config, OfflineControl(config, text, clock=lambda: datetime.now(UTC))


def _find_job(config: Config, name: str) -> Job:
    try:
        return config.job(name)
    except UnknownJobError as error:
        hint = nearest(name, frozenset(config.jobs))
        raise TuischedError(f"{error} in {config.path}{hint}") from None


class UsageError(TuischedError):
    """An option's value does not parse: a usage error (exit 2), as argparse gives."""


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


def _validate(args: argparse.Namespace) -> int:
    try:
        config = _load(args)
        require_driver(config)  # cluster mode without the `postgres` extra is a problem too
    except ConfigError as error:
        for problem in error.problems:
            print(problem)
        return 1
    print(f"OK: {len(config.jobs)} jobs, {len(config.groups)} groups")
    return 0


def _next(args: argparse.Namespace) -> int:
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


def _upstream(args: argparse.Namespace) -> int:
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


def _jobs(args: argparse.Namespace) -> int:
    _, control = _offline(args)
    rows = [_job_row(status) for status in asyncio.run(_job_statuses(args, control))]
    if args.json:
        json.dump(rows, sys.stdout, indent=2)
        print()
    else:
        _print_table(rows, sys.stdout)
    return 0


async def _job_statuses(args: argparse.Namespace, offline: OfflineControl) -> tuple[JobStatus, ...]:
    """Every job as the scheduler running on this state sees it (its runs, queue and
    waits make the `why`); as the files say when none runs."""
    socket = control_socket(config_path(args))
    if not scheduler_answers(socket):
        return await offline.jobs()
    remote = RemoteControl(socket, client=describe_client("command line"))
    try:
        await remote.connect()
        return await remote.jobs()
    except SchedulerNotRunningError:  # it stopped meanwhile
        return await offline.jobs()
    finally:
        await remote.close()


def _console(args: argparse.Namespace) -> int:
    if args.no_ui:
        from tuisched.frontends.headless import run_headless  # noqa: PLC0415  (no Textual headless)

        return run_headless(config_path(args), log_format=args.log_format)
    from tuisched.frontends.tui.hosting import run_console  # noqa: PLC0415  (Textual: console only)

    return run_console(config_path(args), read_only=args.read_only)


def _attach(args: argparse.Namespace) -> int:
    from tuisched.frontends.tui.hosting import run_attach  # noqa: PLC0415  (Textual: console only)

    return run_attach(config_path(args), read_only=args.read_only)


def _history(args: argparse.Namespace) -> int:
    from tuisched.frontends.history import print_runs  # noqa: PLC0415

    config, control = _offline(args)
    if args.job is not None:
        _find_job(config, args.job)
    since, until = _window(args, config)
    query = HistoryQuery(
        job=args.job, limit=args.n, states=tuple(dict.fromkeys(args.state)),
        triggers=tuple(dict.fromkeys(args.trigger)), since=since, until=until,
    )  # fmt: skip
    if config.settings.cluster is not None:  # every node's runs, from the shared database
        runs = asyncio.run(cluster_history(config, query))
    else:
        runs = asyncio.run(control.history(query))
    print_runs(runs, config.settings.timezone, as_json=args.json, out=sys.stdout)
    return 0


def _nodes(args: argparse.Namespace) -> int:
    from tuisched.frontends.nodes import print_nodes  # noqa: PLC0415

    config = read_config(config_path(args))[1]
    print_nodes(asyncio.run(cluster_nodes(config)), as_json=args.json, out=sys.stdout)
    return 0


def _run(args: argparse.Namespace) -> int:
    from tuisched.frontends.foreground import run_in_foreground  # noqa: PLC0415

    path = config_path(args)
    _find_job(read_config(path)[1], args.job)
    return run_in_foreground(
        path, args.job, fire_events=args.fire_events, out=sys.stdout, err=sys.stderr
    )


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
    columns = ("name", "kind", "state", "next_run", "schedule")
    table = [[c.upper().replace("_", " ") for c in columns]]
    table += [[str(row[c] if row[c] is not None else "-") for c in columns] for row in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(columns) - 1)]
    for line in table:
        cells = [cell.ljust(width) for cell, width in zip(line, widths, strict=False)]
        out.write("  ".join([*cells, line[-1]]).rstrip() + "\n")


# --- history filters (issue 16) -----------------------------------------------------------


def _window(args: argparse.Namespace, config: Config) -> tuple[datetime | None, datetime | None]:
    """`history`'s --since and --until (a usage error, exit 2, when one does not parse)."""
    try:
        return window(args, config.settings.timezone, datetime.now(UTC), None)
    except BadOption as error:
        raise UsageError(str(error)) from None
