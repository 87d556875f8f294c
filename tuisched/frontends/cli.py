"""The `tuisched` command line (SPEC R20): stable, because scripts depend on it.

Exit codes (`exits.py`): 0 success; 1 a check failed (`validate`) or a named
job does not exist; 2 a usage error; 69 (EX_UNAVAILABLE) a verb found no
running scheduler (see `verbs`); 78 (EX_CONFIG) a command could not read a
valid configuration. No user error ends in a traceback.

It answers at once: building the parser loads argparse and little else. This
module holds the grammar of the commands that read (`validate`, `next`,
`upstream`, `jobs`, `history`, `nodes`, `stats`, `simulate`), `run` and the
console's; `verbs.py` the verbs' grammar; the other commands add their own.
None of them imports more than its grammar needs at the top: each command
loads its work when it runs: `queries.py`, `stats.py` and `simulation.py`
(the configuration's validation, the history), `operations.py` (the verbs,
over a blocking socket client), the console (Textual). `python -X importtime
-m tuisched status` shows it; tests/test_cli.py and tests/test_verbs.py check
in fresh interpreters what `--version`, the verbs and the reading commands
load.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tuisched import __version__
from tuisched.domain.schedule.bounds import DEFAULT_LIMIT, MAX_LIMIT
from tuisched.frontends.completion import add_completion
from tuisched.frontends.crontabimport import add_import_crontab
from tuisched.frontends.examples import describe_commands
from tuisched.frontends.lookup import add_config_option, config_path
from tuisched.frontends.service import add_service
from tuisched.frontends.starter import add_init
from tuisched.frontends.verbs import add_verbs

if TYPE_CHECKING:
    from tuisched.domain.runs import RunState, Trigger

STATS_SORTS = ("job", "runs", "failures", "rate", "p50", "p95", "duration")
"""`stats --sort` keys (the order functions are `stats.SORTS`)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status.

    A reader that goes away early (`tuisched jobs --json | head -1`) ends any
    command quietly, here for all of them, with the status `cat` has then.
    """
    try:
        parser = _command_line()
        args = parser.parse_args(argv)  # --help and --version print, then exit
        from tuisched.frontends.exits import finish  # noqa: PLC0415  (the errors load once one runs)

        status = finish(parser, args.func, args)
        sys.stdout.flush()  # what is still buffered meets a closed pipe here, not at exit
    except BrokenPipeError:
        from tuisched.frontends.exits import reader_gone  # noqa: PLC0415

        return reader_gone()
    return status


@functools.cache
def _command_line() -> argparse.ArgumentParser:
    """The parser, built once a process (about 9 ms): parsing leaves it as it was, and
    `main` may run many times in one process (the tests, a shell's completion)."""
    return _parser()


def _parser() -> argparse.ArgumentParser:
    config = argparse.ArgumentParser(add_help=False)
    add_config_option(config)
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
        "jobs", parents=[config], help="list every job: kind, schedule, next run, state, why"
    )
    shown = jobs.add_mutually_exclusive_group()
    shown.add_argument("--json", action="store_true", help="print a JSON array")
    shown.add_argument(
        "--names", action="store_true",
        help="print only the job names, one a line, as the file has them (not validated: "
        "fast, for scripts and shell completion)",
    )  # fmt: skip
    jobs.set_defaults(func=_jobs)

    history = commands.add_parser(
        "history", parents=[config], help="print the newest runs",
        description="Print the newest runs from the history, newest first, filtered by "
        "job, time, state and trigger (every node's runs in cluster mode).",
    )  # fmt: skip
    history.add_argument("job", metavar="JOB", nargs="?", help="only this job's runs")
    history.add_argument("-n", type=_positive, default=20, metavar="N", help="how many (20)")
    history.add_argument("--json", action="store_true", help="print a JSON array")
    _add_history_filters(history)
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
    _add_simulate(commands, config)
    _add_stats(commands, config)
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


# --- the options `history` and `stats` share, `stats` and `simulate` -------------------------


def _state(text: str) -> RunState:
    from tuisched.domain.runs import RunState  # noqa: PLC0415  (when the option is given)

    try:
        return RunState(text.upper())
    except ValueError:
        names = ", ".join(state.value.lower() for state in RunState)
        raise argparse.ArgumentTypeError(f"unknown state '{text}' (one of {names})") from None


def _trigger(text: str) -> Trigger:
    from tuisched.domain.runs import Trigger  # noqa: PLC0415  (when the option is given)

    try:
        return Trigger(text.lower())
    except ValueError:
        names = ", ".join(trigger.value for trigger in Trigger)
        raise argparse.ArgumentTypeError(f"unknown trigger '{text}' (one of {names})") from None


def _add_window(parser: argparse.ArgumentParser, *, default: str) -> None:
    """Add `--since T` and `--until T` to `parser`."""
    parser.add_argument(
        "--since", metavar="T",
        help=f"runs queued at or after T: ISO 8601, or a duration before now like 7d ({default})",
    )  # fmt: skip
    parser.add_argument("--until", metavar="T", help="runs queued before T (default: now)")


def _add_history_filters(parser: argparse.ArgumentParser) -> None:
    """Add the filters of `tuisched history`: the window, `--state`, `--trigger` (repeatable)."""
    _add_window(parser, default="default: any time")
    parser.add_argument(
        "--state", type=_state, action="append", default=[], metavar="S",
        help="only runs in state S (repeatable): success, failed, missed...",
    )  # fmt: skip
    parser.add_argument(
        "--trigger", type=_trigger, action="append", default=[], metavar="T",
        help="only runs made by T (repeatable): schedule, dependency, manual, catchup, backfill",
    )  # fmt: skip


def _add_stats(commands: argparse._SubParsersAction[argparse.ArgumentParser],
              config: argparse.ArgumentParser) -> None:  # fmt: skip
    """Add `stats` to the command line's subcommands."""
    parser = commands.add_parser(
        "stats", parents=[config], help="per job: runs, success rate, p50/p95 duration",
        description="Sum up each job's runs over a window (default: the last 7 days): runs, "
        "successes, failures, success rate, median and 95th percentile duration, the "
        "slowest run and the last failure. It reads the history (every node's runs in "
        "cluster mode), whether a scheduler runs or not. "
        "Example: tuisched stats --since 7d --slowest 10",
    )  # fmt: skip
    parser.add_argument("job", metavar="JOB", nargs="?", help="only this job")
    _add_window(parser, default="default: 7d")
    parser.add_argument(
        "--sort", choices=STATS_SORTS, default="job",
        help="order of the jobs: by name (default), or most first; rate: worst first",
    )  # fmt: skip
    parser.add_argument(
        "--slowest", type=_count, default=0, metavar="N",
        help="also list the window's N slowest runs",
    )  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print a JSON object")
    parser.set_defaults(func=_stats)


def _count(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= 10_000:
        raise argparse.ArgumentTypeError(f"not a count from 1 to 10000: '{text}'")
    return int(text)


def _add_simulate(commands: argparse._SubParsersAction[argparse.ArgumentParser],
                 config: argparse.ArgumentParser) -> None:  # fmt: skip
    """Add `simulate` to the command line's subcommands."""
    parser = commands.add_parser(
        "simulate", parents=[config], help="list every run a window of time would hold",
        description="List every run from --from to --to (excluded): the slots of every "
        "enabled job and the runs their `after` dependants would start, with DST warnings. "
        "A time without an offset is read in settings.timezone. "
        "Example: tuisched simulate --from 2026-03-29 --to 2026-03-30 --json",
    )  # fmt: skip
    parser.add_argument("jobs", metavar="JOB", nargs="*", help="only these jobs' runs")
    parser.add_argument("--from", dest="start", metavar="T", help="window start (default now)")
    parser.add_argument("--to", dest="end", metavar="T", help="window end (default +24h)")
    parser.add_argument("--json", action="store_true", help="print a JSON array")
    parser.add_argument(
        "--assume", choices=("success", "failure"), default="success",
        help="the outcome every run is assumed to have (default success)",
    )  # fmt: skip
    parser.add_argument(
        "--limit", type=int, default=DEFAULT_LIMIT, metavar="N",
        help=f"list at most N runs (default {DEFAULT_LIMIT}, at most {MAX_LIMIT})",
    )  # fmt: skip
    parser.set_defaults(func=_simulate)


# --- commands: each loads its work when it runs -------------------------------------------


def _validate(args: argparse.Namespace) -> int:
    from tuisched.frontends.queries import validate  # noqa: PLC0415  (see the module docstring)

    return validate(args)


def _next(args: argparse.Namespace) -> int:
    from tuisched.frontends.queries import next_runs  # noqa: PLC0415

    return next_runs(args)


def _upstream(args: argparse.Namespace) -> int:
    from tuisched.frontends.queries import upstream  # noqa: PLC0415

    return upstream(args)


def _jobs(args: argparse.Namespace) -> int:
    if args.names:  # on every Tab of a shell's completion: PyYAML, nothing more
        from tuisched.frontends.jobnames import print_job_names  # noqa: PLC0415

        return print_job_names(args)
    from tuisched.frontends.queries import jobs  # noqa: PLC0415

    return jobs(args)


def _history(args: argparse.Namespace) -> int:
    from tuisched.frontends.queries import history  # noqa: PLC0415

    return history(args)


def _nodes(args: argparse.Namespace) -> int:
    from tuisched.frontends.queries import nodes  # noqa: PLC0415

    return nodes(args)


def _stats(args: argparse.Namespace) -> int:
    from tuisched.frontends.stats import stats_of_jobs  # noqa: PLC0415

    return stats_of_jobs(args)


def _simulate(args: argparse.Namespace) -> int:
    from tuisched.frontends.simulation import simulate_window  # noqa: PLC0415

    return simulate_window(args)


def _console(args: argparse.Namespace) -> int:
    if args.no_ui:
        from tuisched.frontends.headless import run_headless  # noqa: PLC0415  (no Textual headless)

        return run_headless(config_path(args), log_format=args.log_format)
    from tuisched.frontends.tui.hosting import run_console  # noqa: PLC0415  (Textual: console only)

    return run_console(config_path(args), read_only=args.read_only)


def _attach(args: argparse.Namespace) -> int:
    from tuisched.frontends.tui.hosting import run_attach  # noqa: PLC0415  (Textual: console only)

    return run_attach(config_path(args), read_only=args.read_only)


def _run(args: argparse.Namespace) -> int:
    from tuisched.frontends.foreground import run_in_foreground  # noqa: PLC0415
    from tuisched.frontends.queries import named_job  # noqa: PLC0415

    named_job(args)  # an unknown job is one line with the nearest name, before anything starts
    return run_in_foreground(
        config_path(args), args.job, fire_events=args.fire_events, out=sys.stdout, err=sys.stderr
    )
