"""`tuisched jobs --names`: the job names of the configuration file, one a line, at once.

For scripts and shell completion (`completion.py` calls it on each Tab after a
verb that takes a JOB), so it loads only PyYAML: the file is parsed, not
validated, and the names are the keys of its `jobs:` mapping in the file's
order. A file that cannot be read or parsed is one line on stderr, exit 78.
"""

from __future__ import annotations

import argparse
import stat
import sys
from pathlib import Path

from tuisched.frontends.exits import EX_CONFIG
from tuisched.frontends.lookup import config_path

MAX_BYTES = 16 * 1024 * 1024
"""A larger file is not read here (a configuration is kilobytes; /dev/zero is endless)."""


def print_job_names(args: argparse.Namespace) -> int:
    """Print every job name of the configuration `args` names; see the module docstring."""
    path = config_path(args)  # none found: ConfigError says where it looked (exit 78)
    try:
        names = job_names(path)
    except OSError as error:
        print(f"tuisched: cannot read {path}: {error.strerror or error}", file=sys.stderr)
        return EX_CONFIG
    except ValueError as error:
        print(f"tuisched: {error}", file=sys.stderr)
        return EX_CONFIG
    sys.stdout.write("".join(f"{name}\n" for name in names))
    return 0


def job_names(path: Path) -> list[str]:
    """The keys of the `jobs:` mapping of the YAML file at `path` ([] when it has none).

    Raises:
        OSError: the file cannot be read.
        ValueError: it is not a regular file, is too large, or is not YAML.
    """
    import yaml  # noqa: PLC0415  (only this command needs it)

    info = path.stat()
    if not stat.S_ISREG(info.st_mode):  # a FIFO would block the read forever
        raise ValueError(f"{path} is not a regular file")
    if info.st_size > MAX_BYTES:
        raise ValueError(f"{path} is larger than {MAX_BYTES // (1024 * 1024)} MiB")
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        document = yaml.load(path.read_bytes(), Loader=loader)  # noqa: S506  (a safe loader)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(error, "problem", None) or "cannot be parsed"
        raise ValueError(f"{where}: not valid YAML: {problem}") from None
    jobs = document.get("jobs") if isinstance(document, dict) else None
    if not isinstance(jobs, dict):
        return []
    return [str(name) for name in jobs if "\n" not in str(name)]
