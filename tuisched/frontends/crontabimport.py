"""`tuisched import-crontab [FILE]`: a crontab turned into YAML jobs, and what did not map.

    tuisched import-crontab [--system] [FILE]

Reads FILE (stdin when none or `-`), prints the jobs as a `jobs:` section to
stdout, ready to paste into a configuration, and reports on stderr each line
it could not map and what changes under tuisched. Exit 0 when at least one job
was mapped, 1 when none was, 66 when FILE cannot be read.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import stat
import sys
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from tuisched.domain.config.crontab import CrontabImport, ImportedJob

EX_NOINPUT = 66
MAX_BYTES = 4 * 1024 * 1024
"""The largest crontab read (real ones are a few KiB; /dev/zero is not one)."""
_SYSTEM_PLACES = ("/etc/crontab", "/etc/cron.d/")
_UNSAFE = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff\ufeff\ufffe\uffff]"
)
"""What a YAML file holds only escaped: characters PyYAML refuses, and those YAML reads
as line breaks (in a quoted scalar, folded into a space)."""


class _Unreadable(Exception):
    """The crontab cannot be read; the message says why in one line."""


def add_import_crontab(commands: argparse._SubParsersAction[argparse.ArgumentParser],
                       config: argparse.ArgumentParser) -> None:  # fmt: skip
    """Add `import-crontab` to the command line's subcommands."""
    parser = commands.add_parser(
        "import-crontab", parents=[config], help="turn a crontab into YAML jobs",
        description="Read a crontab (FILE, or stdin when none or '-') and print its entries "
        "as tuisched jobs under 'jobs:' on stdout; each line that could not be mapped, and "
        "what runs differently, goes to stderr. Exit 0, 1 when nothing could be mapped, "
        "66 when FILE cannot be read.",
        epilog="Example: tuisched import-crontab /etc/crontab > jobs.yaml   "
        "(or: crontab -l | tuisched import-crontab)",
    )  # fmt: skip
    parser.add_argument("file", metavar="FILE", nargs="?", default="-", help="the crontab")
    parser.add_argument(
        "--system", action="store_true",
        help="entries name a user before the command, as in /etc/crontab and /etc/cron.d "
        "(assumed for files there, and when every entry names root)",
    )  # fmt: skip
    parser.set_defaults(func=_import_crontab)


def _import_crontab(args: argparse.Namespace) -> int:
    from tuisched.domain.config.crontab import read_crontab  # noqa: PLC0415  (see cli)

    try:
        text = _read(args.file)
    except _Unreadable as error:
        print(f"tuisched: import-crontab: {error}", file=sys.stderr)
        return EX_NOINPUT
    system = True if args.system or args.file.startswith(_SYSTEM_PLACES) else None
    found = read_crontab(text, system=system)
    source = "stdin" if args.file == "-" else args.file
    if found.jobs:
        sys.stdout.write(to_yaml(found, source))
    _report(found, sys.stderr)
    if not found.jobs:
        print(f"tuisched: import-crontab: no entry of {source} could be mapped", file=sys.stderr)
        return 1
    return 0


def _read(name: str) -> str:
    """The crontab's text: a regular file (or stdin) of at most MAX_BYTES."""
    if name == "-":
        data = sys.stdin.buffer.read(MAX_BYTES + 1)
    else:
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO must not block the open
        except OSError as error:
            raise _Unreadable(f"cannot read {name}: {error.strerror}") from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise _Unreadable(f"{name} is not a regular file")
        with os.fdopen(fd, "rb") as file:
            try:
                data = file.read(MAX_BYTES + 1)
            except OSError as error:
                raise _Unreadable(f"cannot read {name}: {error.strerror}") from None
    if len(data) > MAX_BYTES:
        raise _Unreadable(f"{name} is larger than {MAX_BYTES // 1024 // 1024} MiB")
    return data.decode("utf-8", errors="replace")


def to_yaml(found: CrontabImport, source: str) -> str:
    """The jobs as a `jobs:` section, each under a comment with its crontab line."""
    lines = [f"# Imported from {_one_line(source)} by tuisched import-crontab.", "jobs:"]
    for job in found.jobs:
        lines.extend(_job_yaml(job))
    return "\n".join(lines) + "\n"


def _job_yaml(job: ImportedJob) -> list[str]:
    from tuisched.domain.schedule.duration import format_duration  # noqa: PLC0415  (see cli)

    lines = [f"  # crontab line {job.line}: {_one_line(job.source)}", f"  {_quote(job.name)}:"]
    if job.description:
        lines.append(f"    description: {_quote(job.description)}")
    if job.shell is None:
        lines.append(f"    command: {_quote(job.command)}")
    else:
        argv = ", ".join(_quote(word) for word in (job.shell, "-c", job.command))
        lines.append(f"    command: [{argv}]")
    lines.append(f"    schedule: {{cron: {_quote(job.cron)}}}")
    if job.timezone is not None:
        lines.append(f"    timezone: {_quote(job.timezone)}")
    if job.jitter is not None:
        lines.append(f"    jitter: {format_duration(job.jitter)}")
    if job.env:
        lines.append("    env:")
        lines.extend(f"      {_quote(key)}: {_quote(value)}" for key, value in job.env.items())
    return lines


def _quote(text: str) -> str:
    """A YAML double-quoted scalar (JSON's escapes are YAML's), so nothing is read as
    a number, a boolean, a date or a comment."""
    return _escaped(json.dumps(text, ensure_ascii=False))


def _one_line(text: str) -> str:
    return _escaped(" ".join(text.split()))


def _escaped(text: str) -> str:
    """`text` with each character of `_UNSAFE` written as `\\uXXXX` (a JSON and YAML
    escape in a quoted scalar; visible, and harmless, in a comment)."""
    return _UNSAFE.sub(lambda found: f"\\u{ord(found.group()):04x}", text)


def _report(found: CrontabImport, out: TextIO) -> None:
    from tuisched.domain.text import counted  # noqa: PLC0415  (see cli)

    for item in found.unmapped:
        reason, text = _one_line(item.reason), _one_line(item.text)
        print(f"line {item.line}: not mapped: {reason}: {text}", file=out)
    for note in found.notes:
        print(f"note: {_one_line(note)}", file=out)
    imported, unmapped = counted(len(found.jobs), "job"), counted(len(found.unmapped), "line")
    print(f"{imported} imported, {unmapped} not mapped", file=out)


__all__ = ["add_import_crontab", "to_yaml"]
