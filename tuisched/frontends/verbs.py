"""CLI verbs against the running scheduler, through its control socket (SPEC R22).

    tuisched status [--json]                        the scheduler at a glance, its runs
    tuisched pause JOB | --group G | --all          (and `resume`, the same forms)
    tuisched trigger JOB [--queue] [--wait]         run now; --wait follows it to its end
    tuisched stop RUN_ID | JOB [--kill]             stop a run, or every run of a job
    tuisched reload                                 apply the file on disk, with its report
    tuisched logs JOB [--run RUN_ID] [-f]           a run's output; -f follows a live run
    tuisched missed [--json]                        missed slots per job (the downtime ledger)
    tuisched missed decide JOB|--all latest|all|skip  decide them, once
    tuisched backfill JOB --from T --to T [--dry-run] [--json]  run a window's unrun slots

Each finds the scheduler by the configuration's state directory. When none
runs there, they say so in one line and exit 69 (EX_UNAVAILABLE); `logs`
then reads the files the scheduler left. `trigger --wait` exits like
`tuisched run` (0 success, the job's exit code, 124 timed out, 127 could not
launch, 130 stopped). A trigger the job's `overlap` refuses (`skip` while a
run of the job is in progress) exits 1 with the reason; `--queue` waits
behind that run instead.

This module is their grammar, which the command line builds for every
command; what each verb does is in `operations.py`, loaded (with the blocking
socket client and the domain's views) only when a verb runs.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

MISSED_CHOICES = ("latest", "all", "skip")
"""`missed decide`'s choices: the values of `MissedChoice` (tests/test_cli.py checks)."""


def add_verbs(commands: argparse._SubParsersAction[argparse.ArgumentParser],
              config: argparse.ArgumentParser) -> None:  # fmt: skip
    """Add the verbs to the command line's subcommands."""
    status = commands.add_parser(
        "status", parents=[config], help="the running scheduler and its runs"
    )
    status.add_argument("--json", action="store_true", help="print a JSON object")
    status.set_defaults(func=_operation("status"))
    for name in ("pause", "resume"):
        verb = commands.add_parser(name, parents=[config], help=f"{name} a job, a group or all")
        which = verb.add_mutually_exclusive_group(required=True)
        which.add_argument("job", metavar="JOB", nargs="?")
        which.add_argument("--group", metavar="GROUP")
        which.add_argument("--all", action="store_true", help="every job")
        verb.set_defaults(func=_operation(name))
    trigger = commands.add_parser(
        "trigger", parents=[config], help="run JOB now in the running scheduler"
    )
    trigger.add_argument("job", metavar="JOB")
    trigger.add_argument("--wait", action="store_true", help="follow its output to its end")
    trigger.add_argument(
        "--queue", action="store_true",
        help="if a run of JOB is in progress and its overlap would refuse another, "
        "start once that run ends",
    )  # fmt: skip
    trigger.add_argument(
        "--json", action="store_true", help="print the run, or the refusal, as a JSON object"
    )
    trigger.set_defaults(func=_operation("trigger"))
    stop = commands.add_parser("stop", parents=[config], help="stop a run, or a job's runs")
    stop.add_argument("target", metavar="RUN_ID|JOB")
    stop.add_argument("--kill", action="store_true", help="SIGKILL at once")
    stop.add_argument("--json", action="store_true", help="print the runs as a JSON list")
    stop.set_defaults(func=_operation("stop"))
    reload = commands.add_parser("reload", parents=[config], help="apply the file on disk")
    reload.add_argument("--json", action="store_true", help="print the report as JSON")
    reload.set_defaults(func=_operation("reload"))
    logs = commands.add_parser("logs", parents=[config], help="a run's output")
    logs.add_argument("job", metavar="JOB")
    logs.add_argument("--run", metavar="RUN_ID", help="this run (default: the newest)")
    logs.add_argument("-f", "--follow", action="store_true", help="follow a live run")
    logs.set_defaults(func=_operation("logs"))
    _add_missed(commands, config)
    _add_backfill(commands, config)


def _operation(name: str) -> Callable[[argparse.Namespace], int]:
    """The verb `name` of `operations`, which loads when the verb runs."""

    def run(args: argparse.Namespace) -> int:
        from tuisched.frontends import operations  # noqa: PLC0415  (the point of this module)

        verb: Callable[[argparse.Namespace], int] = getattr(operations, name)
        return verb(args)

    run.__name__ = name  # tests/test_cli.py finds every verb's operation by it
    return run


# --- the downtime ledger (SPEC R25) ---------------------------------------------------------


def _add_missed(commands: argparse._SubParsersAction[argparse.ArgumentParser],
                config: argparse.ArgumentParser) -> None:  # fmt: skip
    missed = commands.add_parser(
        "missed", parents=[config], help="slots missed while down or paused, per job"
    )
    missed.add_argument("--json", action="store_true", help="print a JSON array")
    missed.set_defaults(func=_operation("missed"))
    verbs = missed.add_subparsers(title="decisions", metavar="decide")
    decide = verbs.add_parser("decide", parents=[config], help="run latest, all, or skip")
    decide.add_argument("job", metavar="JOB", nargs="?", help="the job (or --all)")
    decide.add_argument("--all", action="store_true", help="every job waiting for a decision")
    decide.add_argument("choice", choices=MISSED_CHOICES)
    decide.add_argument("--json", action="store_true", help="print what was decided as JSON")
    decide.set_defaults(func=_operation("decide_missed"))


# --- backfill of a window (SPEC R24) ------------------------------------------------------


def _add_backfill(commands: argparse._SubParsersAction[argparse.ArgumentParser],
                  config: argparse.ArgumentParser) -> None:  # fmt: skip
    backfill = commands.add_parser(
        "backfill", parents=[config], help="run the slots of a window that have no successful run",
        description="Run, through the running scheduler, the slots of JOB from --from "
        "(included) to --to (excluded) that have no successful run, oldest first, with "
        "trigger `backfill`: `requires`, `overlap` and `max_workers` hold as for any run; "
        "one run at a time, or up to max_workers at a time for an `overlap: allow` job. "
        "At most 10,000 slots. T is ISO 8601 (without an offset: in the job's zone), a "
        "duration before now such as 6h or 7d, or `now`. "
        "--dry-run lists the slots and why others are left out (it needs no running "
        "scheduler). Exit 0; 1 for an unknown job or nothing to run; 2 for a bad time or "
        "window; 69 when no scheduler runs. "
        "Example: tuisched backfill nightly --from 2026-11-01 --to 2026-11-08 --dry-run "
        "(or: --from 7d --to now)",
    )  # fmt: skip
    backfill.add_argument("job", metavar="JOB")
    backfill.add_argument("--from", dest="start", required=True, metavar="T",
                          help="window start (included): ISO 8601, or a duration before "
                          "now like 6h")  # fmt: skip
    backfill.add_argument("--to", dest="end", required=True, metavar="T",
                          help="window end (excluded): ISO 8601, a duration before now, "
                          "or now")  # fmt: skip
    backfill.add_argument("--dry-run", action="store_true", help="list the slots; run nothing")
    backfill.add_argument("--json", action="store_true", help="print a JSON object")
    backfill.set_defaults(func=_operation("backfill"))
