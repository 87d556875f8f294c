"""The command line's exit statuses (SPEC R20: scripts depend on them), and the usage error.

0 success; 1 a check failed or a named thing does not exist; 2 a usage error;
69 (EX_UNAVAILABLE) a verb found no running scheduler; 78 (EX_CONFIG) no valid
configuration could be read; 141 the reader of stdout went away (`| head`).
A run's own end, for `tuisched run` and `trigger --wait`, is `exit_status`.
`finish` runs a command and turns a user error into its line and status. The
commands read them here, so that none needs another command's module to say
how it ended.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from tuisched.domain.errors import (
    ConfigError,
    SchedulerNotRunningError,
    TuischedError,
    UsageError,
    one_line,
)
from tuisched.domain.runs import Result, RunRecord, RunState

EX_USAGE = 2
EX_UNAVAILABLE = 69
EX_CONFIG = 78
EX_PIPE = 141
"""The reader of stdout went away: 128 + SIGPIPE, what a shell says of `cat` then."""


def finish(
    parser: argparse.ArgumentParser, command: Callable[[argparse.Namespace], int],
    args: argparse.Namespace,
) -> int:  # fmt: skip
    """Run `command` and give its exit status; a user error is said in one line (a
    configuration's problems one a line), never as a traceback."""
    try:
        return command(args)
    except ConfigError as error:
        for problem in error.problems:
            print(problem, file=sys.stderr)
        return EX_CONFIG
    except UsageError as error:
        parser.error(str(error))  # prints the usage and exits 2
    except SchedulerNotRunningError as error:  # or one runs another configuration file
        return unavailable(error)
    except TuischedError as error:
        print(f"tuisched: {one_line(str(error))}", file=sys.stderr)
        return 1


def unavailable(error: SchedulerNotRunningError) -> int:
    """Say in one line that no scheduler runs; the status for it."""
    print(f"tuisched: {one_line(str(error))}", file=sys.stderr)
    return EX_UNAVAILABLE


def reader_gone() -> int:
    """stdout's reader closed the pipe (`| head -1`): say nothing more, as `cat` does.

    Python ignores SIGPIPE (a socket closed under a write must not kill the
    process), so a closed pipe is a BrokenPipeError; stdout then points at
    /dev/null, so that the interpreter's last flush at exit finds no pipe to break.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EX_PIPE


def exit_status(run: RunRecord) -> int:
    """The process exit status that reports how `run` ended."""
    if run.state is RunState.SUCCESS:
        return 0
    if run.result is Result.TIMED_OUT:
        return 124
    if run.result is Result.LAUNCH_FAILED:
        return 127
    if run.result is Result.STOPPED:
        return 130
    code = run.exit_code
    return code if code is not None and 0 < code < 256 else 1
