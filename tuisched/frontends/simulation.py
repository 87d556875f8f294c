"""`tuisched simulate`: every run a window would hold, from the configuration file alone.

    tuisched simulate [--from T] [--to T] [--json] [--assume success|failure]
                      [--limit N] [JOB...]

T is ISO 8601; a time without an offset is read in `settings.timezone`, a bare
date is its midnight. The window defaults to the next 24 hours. Output: one
line per run in aligned columns (time with offset, job, trigger, then note and
DST warning), or with `--json` an array of objects. What the listing assumes,
and how many runs the limit left out, go to stderr, so stdout holds only runs.
Exit 0; 1 for an unknown job; 2 for a bad date-time, an empty or too long
window, or a bad limit. Its options are in `cli.py`, which loads this module
when the command runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime, timedelta
from typing import TextIO
from zoneinfo import ZoneInfo

from tuisched.domain.config.values import nearest
from tuisched.domain.errors import ScheduleError, TuischedError, UnknownJobError, one_line
from tuisched.domain.model import Outcome
from tuisched.domain.schedule.simulate import MAX_LIMIT, MAX_WINDOW, simulate
from tuisched.domain.schedule.slots import localize
from tuisched.domain.text import columns, counted
from tuisched.domain.views import SimulatedRun, Simulation
from tuisched.frontends.exits import EX_USAGE
from tuisched.frontends.lookup import config_path
from tuisched.runtime.control import read_config

DEFAULT_WINDOW = timedelta(days=1)


def simulate_window(args: argparse.Namespace) -> int:
    """`tuisched simulate`: the runs of the window, on stdout; what it assumed on stderr."""
    config = read_config(config_path(args))[1]
    for name in args.jobs:
        if name not in config.jobs:  # exit 1 with the nearest name, as other commands do
            hint = nearest(name, frozenset(config.jobs))
            raise TuischedError(f"{UnknownJobError(name)} in {config.path}{hint}")
    tz = config.settings.timezone
    try:
        start = _moment(args.start, tz, "--from") if args.start else _now()
        end = _moment(args.end, tz, "--to") if args.end else start + DEFAULT_WINDOW
        found = simulate(
            config, start, end, jobs=args.jobs, outcome=Outcome(args.assume), limit=args.limit
        )
    except ScheduleError as error:
        print(f"tuisched: simulate: {one_line(str(error))}", file=sys.stderr)
        return EX_USAGE
    _say_assumptions(found, tz, sys.stderr)
    if args.json:
        json.dump([run_json(run) for run in found.runs], sys.stdout, indent=2)
        print()
    else:
        print_runs(found.runs, sys.stdout)
    if found.left_out:
        print(f"tuisched: simulate: {limit_words(found)}", file=sys.stderr)
    return 0


def _now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def _moment(text: str, tz: ZoneInfo, option: str) -> datetime:
    """An ISO 8601 option; a time without an offset is read in `tz` (DST: as slots are)."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        message = f"{option}: bad date-time '{text}'; write it like 2026-05-07T09:10"
        raise ScheduleError(message) from None
    return localize(moment, tz) if moment.tzinfo is None else moment


def limit_words(simulation: Simulation) -> str:
    """`10000 runs listed; 2345 more left out (...)`, for a listing the limit cut."""
    more = f"{simulation.left_out}" if simulation.counted_all else f"at least {simulation.left_out}"
    return (
        f"{counted(len(simulation.runs), 'run')} listed; {more} more left out by the limit "
        f"(--limit up to {MAX_LIMIT}, or a narrower window; at most {MAX_WINDOW.days} days)"
    )


def _say_assumptions(simulation: Simulation, tz: ZoneInfo, out: TextIO) -> None:
    start, end = (at.astimezone(tz).isoformat() for at in (simulation.start, simulation.end))
    window = f"{start} to {end}"
    out.write(f"tuisched: simulate {window}: assuming {'; '.join(simulation.assumptions)}\n")


def run_cells(run: SimulatedRun) -> list[str]:
    """One run's cells: time with offset, job, trigger, then its note and DST warning."""
    dst = f"DST: {run.dst}" if run.dst else ""
    last = "  ".join(text for text in (run.note, dst) if text)
    return [one_line(cell) for cell in (run.at.isoformat(), run.job, run.trigger, last)]


def print_runs(runs: tuple[SimulatedRun, ...], out: TextIO) -> None:
    """Every run, one line each, in columns as wide as their widest cell (as `column -t`)."""
    out.write("".join(line + "\n" for line in columns([run_cells(run) for run in runs])))


def run_json(run: SimulatedRun) -> dict[str, object]:
    """One run as a JSON object (`upstream`, `dst` null when they do not apply)."""
    return {
        "at": run.at.isoformat(), "job": run.job, "trigger": run.trigger,
        "upstream": run.upstream or None, "note": run.note, "dst": run.dst or None,
        "timezone": run.timezone,
    }  # fmt: skip
