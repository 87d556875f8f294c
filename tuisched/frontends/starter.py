"""`tuisched init [PATH]`: a short, commented starter configuration.

PATH defaults to the file the other commands would name (`-c`,
`$TUISCHED_CONFIG`, else `./tuisched.yaml`). An existing file is never
overwritten (exit 1, one line). The starter validates as written; the
sample configuration (sample_config/tuisched.yaml) shows every feature.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from tuisched.frontends.lookup import CONFIG_NAME, ENV_VAR

STARTER = """\
# tuisched configuration: jobs, their schedules, and a few settings.
#
# Check it:          tuisched validate -c {path}
# Next runs of a job: tuisched next hello -c {path}
# Start the console:  tuisched -c {path}        (q quits, ? lists every key)
# Run it headless:    tuisched --no-ui -c {path}
#
# Times without an offset are wall-clock times in the job's time zone.
# Durations are written 90s, 5m, 2h, 1d or 1h30m. Every key is in the README;
# sample_config/tuisched.yaml in the source shows every feature.

settings:
  max_workers: 4                 # runs at once; more wait QUEUED (default 8)
  shutdown_grace: 10s            # how long running jobs get on shutdown (default 10s)
  # timezone: Europe/Berlin      # default: the machine's zone
  # state_dir: state             # history, audit log, run output (relative to this file;
  #                              #   default: a folder of this file's own under
  #                              #   ~/.local/state/tuisched/configs; init says which)

jobs:
  # A command given as a list runs without a shell.
  hello:
    description: Proves the scheduler is alive
    command: [/bin/echo, "hello from tuisched"]
    schedule:
      cron: "*/15 * * * *"       # every 15 minutes (standard 5-field crontab)

  # A string runs through /bin/sh -c.
  disk-report:
    command: df -h / | tail -n 1
    schedule:
      every: 1 day               # calendar steps from start, in the job's zone
      start: 2026-01-01T06:30
    timeout: 1m                  # stopped and failed if it takes longer
    retries: 1
    retry_delay: 5m

  # Runs after another job, when that one succeeded.
  after-report:
    command: [/bin/echo, "the disk report is done"]
    after: disk-report

  # Only ever run by hand: tuisched run by-hand, or `r` in the console.
  by-hand:
    command: [/bin/echo, "run by hand"]
    schedule: manual
"""


def add_init(commands: argparse._SubParsersAction[argparse.ArgumentParser],
             config: argparse.ArgumentParser) -> None:  # fmt: skip
    """Add `init` to the command line's subcommands."""
    parser = commands.add_parser(
        "init", parents=[config], help="write a commented starter configuration",
        description="Write a short, commented configuration to start from. It never "
        "overwrites a file. PATH defaults to -c, $TUISCHED_CONFIG, else ./tuisched.yaml.",
        epilog="Example: tuisched init ~/.config/tuisched/tuisched.yaml",
    )  # fmt: skip
    parser.add_argument("path", metavar="PATH", nargs="?", help="the file to write")
    parser.set_defaults(func=_init)


def starter_path(args: argparse.Namespace) -> Path:
    """Where `init` writes: PATH, else -c, else $TUISCHED_CONFIG, else ./tuisched.yaml."""
    named = args.path or getattr(args, "config", None) or os.environ.get(ENV_VAR)
    return Path(named or CONFIG_NAME).absolute()


def _init(args: argparse.Namespace) -> int:
    path = starter_path(args)
    try:
        _write_new(path, STARTER.format(path=path))
    except FileExistsError:
        print(f"tuisched: {path} exists; init never overwrites a file (name another PATH)",
              file=sys.stderr)  # fmt: skip
        return 1
    except OSError as error:
        print(f"tuisched: cannot write {path}: {error.strerror or error}", file=sys.stderr)
        return 1
    print(f"wrote {path}")
    print(f"its state: {_state_dir(path)}  (its own; settings.state_dir moves it)")
    print(f"check it: tuisched validate -c {path}")
    print(f"start it: tuisched -c {path}   (or tuisched service install -c {path} --user)")
    return 0


def _state_dir(path: Path) -> Path:
    """Where the scheduler of the file `init` wrote keeps its state (as every verb finds it)."""
    from tuisched.runtime.control import control_socket  # noqa: PLC0415  (init alone needs it)

    return control_socket(path).parent


def _write_new(path: Path, text: str) -> None:
    """Write `text` to `path`, creating its folder; FileExistsError only when `path` exists
    (opened with "x", so a file made meanwhile is kept too)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError as error:  # a file where a folder must be: not "exists"
        raise NotADirectoryError(error.errno, "a file is in the way of its folder") from None
    with path.open("x", encoding="utf-8") as file:
        file.write(text)
