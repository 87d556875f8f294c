"""Crontabs read into tuisched jobs (`tuisched import-crontab`): what maps, and what does not.

Pure: text in, jobs and a report out. Lines are read as crontab(5) (Vixie,
Debian and cronie) reads them:

- blank lines and `#` comments are skipped; the comment just above an entry
  becomes its job's `description`;
- `NAME=value` sets a variable for the entries below it: `CRON_TZ` becomes
  their `timezone`, `SHELL` (other than /bin/sh) runs their command through
  that shell, `RANDOM_DELAY` (cronie, minutes) becomes their `jitter`, the mail
  variables (`MAILTO`, `MAILFROM`, ...) are reported, and any other goes into
  their `env`;
- an entry is 5 time fields (or an `@` nickname) and a command; in a system
  crontab (/etc/crontab, /etc/cron.d) a user name comes between them. The
  command stays a string, run by /bin/sh as cron runs it; `\\%` is a literal `%`
  and the text after an unescaped `%` is the command's standard input (a
  here-document the shell reads it from), its other `%` newlines;
- lines end at `\\n` only, as cron reads them (a U+2028 is inside a line);
- `@reboot` and expressions tuisched does not read are reported, not mapped.
"""

from __future__ import annotations

import re
import shlex
import unicodedata
from dataclasses import dataclass, field
from datetime import timedelta
from types import MappingProxyType
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from tuisched.domain.config.keys import NAME_CHARS, SELF
from tuisched.domain.errors import CronError
from tuisched.domain.schedule.cron import CronExpr
from tuisched.domain.schedule.duration import MAX_SECONDS

__all__ = ["CrontabImport", "ImportedJob", "Unmapped", "read_crontab"]

_ENV_LINE = re.compile(r"(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*=\s*(?P<value>.*)")
_MAIL_VARIABLES = frozenset(
    {"MAILTO", "MAILFROM", "CONTENT_TYPE", "CONTENT_TRANSFER_ENCODING", "MAIL_TO"}
)
_PLAIN_SHELLS = frozenset({"", "/bin/sh", "sh"})
_SKIPPED_PROGRAMS = frozenset(
    {"cd", "test", "[", "[[", "true", ":", "export", "sleep", "umask", "{", "}"}
)
"""Steps before the real work (`cd /srv && ...`, `test -x X || ...`): not a job's name."""
_WRAPPERS = frozenset(
    {"sudo", "nice", "ionice", "nohup", "timeout", "flock", "env", "exec", "time", "chronic",
     "run-one", "setlock", "cronic", "su"}
)  # fmt: skip
"""Programs that run another one: the name comes from what they run."""
_RUNNERS = frozenset(
    {"run-parts", "sh", "bash", "zsh", "python", "python3", "php", "perl", "ruby", "node",
     "java", "make", "docker", "systemctl", "curl", "wget", "rsync", "find", "ansible-playbook"}
)  # fmt: skip
"""Programs whose first argument says more than they do: `run-parts-cron.daily`."""
_VALUE_OPTIONS = {"sudo": {"-u", "-g", "-C", "-D"}, "su": {"-c", "-s", "-g"}}
"""Wrapper options followed by a value (`sudo -u www-data php ...`)."""
_SEPARATORS = re.compile(r"&&|\|\||[;|()&]")
_NAME_BAD = re.compile(r"[^A-Za-z0-9_.:-]+")
_STDIN_END = "CRONTAB_STDIN"
_MAX_DELAY_MINUTES = MAX_SECONDS // 60
_MAX_NAME = 60


@dataclass(frozen=True, slots=True, kw_only=True)
class ImportedJob:
    """One crontab entry as a tuisched job."""

    name: str
    cron: str
    """The schedule: the entry's five fields, or its nickname (`@daily`)."""
    command: str
    """Run by /bin/sh, as cron runs it (see `shell`)."""
    line: int
    source: str
    """The entry as written."""
    shell: str | None = None
    """A shell other than /bin/sh that `SHELL=` named: the job runs `[shell, -c, command]`."""
    timezone: str | None = None
    env: MappingProxyType[str, str] = field(default_factory=lambda: MappingProxyType({}))
    jitter: timedelta | None = None
    description: str = ""


@dataclass(frozen=True, slots=True)
class Unmapped:
    """A line that did not become a job (or a setting it could not carry), and why."""

    line: int
    text: str
    reason: str


@dataclass(frozen=True, slots=True)
class CrontabImport:
    """What a crontab gave: jobs, lines not mapped, and notes on what changes."""

    jobs: tuple[ImportedJob, ...]
    unmapped: tuple[Unmapped, ...]
    notes: tuple[str, ...]


@dataclass(slots=True)
class _State:
    """What the lines read so far set for the entries below them."""

    env: dict[str, str] = field(default_factory=dict)
    timezone: str | None = None
    shell: str | None = None
    jitter: timedelta | None = None
    comment: str = ""
    names: set[str] = field(default_factory=set)
    suffixes: dict[str, int] = field(default_factory=dict)
    """The next number to try after each name taken more than once (see `_unique`)."""
    jobs: list[ImportedJob] = field(default_factory=list)
    unmapped: list[Unmapped] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    users: set[str] = field(default_factory=set)


def read_crontab(text: str, *, system: bool | None = None) -> CrontabImport:
    """Read a crontab's text into jobs and a report of what did not map.

    Args:
        text: The crontab.
        system: True for /etc/crontab and /etc/cron.d files, whose entries name a
            user between the time fields and the command; None to tell by the
            entries (a system crontab when every one names `root` there).
    """
    state = _State()
    if system is None:
        system = _names_root(text)
    for number, raw in enumerate(_lines(text), start=1):
        line = _stripped(raw)
        control = _CONTROL.search(line)
        if not line:
            state.comment = ""
        elif control is not None:  # a YAML file cannot hold it, nor a command line a NUL
            state.comment = ""
            if not line.startswith("#"):
                shown = line.encode("unicode_escape").decode("ascii")
                state.unmapped.append(Unmapped(number, shown, (
                    f"control character U+{ord(control.group()):04X} in the line: not "
                    "imported")))  # fmt: skip
        elif line.startswith("#"):
            state.comment = _description(line)
        else:
            _read_line(state, number, line, system=system)
            state.comment = ""
    if state.users:
        users = ", ".join(sorted(state.users))
        state.notes.append(
            f"entries ran as {users} under cron; tuisched runs every job as its own user"
        )
    if state.jobs:
        state.notes.append(
            "cron starts a run even while the previous one runs; the jobs use "
            "tuisched's default 'overlap: skip' (write 'overlap: allow' to keep cron's way)"
        )
    return CrontabImport(tuple(state.jobs), tuple(state.unmapped), tuple(state.notes))


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""Control characters other than tab (ESC, NUL, CSI...): in no command or description."""


_BLANK = " \t"
_BLANKS = re.compile(r"[ \t]+")
"""What separates fields for cron: spaces and tabs, not every Unicode space (a U+00A0
is part of a command, and of its first word)."""


def _stripped(line: str) -> str:
    """A line without the blanks around it, nor the carriage return of a CRLF file."""
    return line.removesuffix("\r").strip(_BLANK)


def _lines(text: str) -> list[str]:
    """The crontab's lines as cron reads them: ended by `\\n` alone (`str.splitlines`
    would also end one at U+2028, U+0085 or a form feed, in the middle of a command)."""
    lines = text.split("\n")
    return lines[:-1] if lines[-1] == "" else lines


def _names_root(text: str) -> bool:
    """Whether every entry (at least one) has `root` right after its schedule."""
    users = []
    for raw in _lines(text):
        line = _stripped(raw)
        if not line or line.startswith("#") or _ENV_LINE.fullmatch(line):
            continue
        words = _BLANKS.split(line)
        at = 1 if line.startswith("@") else 5  # the user's place, a command after it
        users.append(words[at] if len(words) > at + 1 else "")
    return bool(users) and all(user == "root" for user in users)


def _description(comment: str) -> str:
    """A comment's words, unless it looks like crontab syntax (a commented-out entry,
    the field chart of the stock header)."""
    text = comment.lstrip("#").strip()
    return "" if text[:1] in "*@|.0123456789" or "=" in text.split(" ", 1)[0] else text


def _read_line(state: _State, number: int, line: str, *, system: bool) -> None:
    found = _ENV_LINE.fullmatch(line)
    if found is not None:
        _read_variable(state, number, line, found["name"], _unquote(found["value"].strip(_BLANK)))
        return
    try:
        cron, user, command = _split_entry(line, system=system)
        _check_schedule(cron)
    except CronError as error:
        state.unmapped.append(Unmapped(number, line, str(error).removeprefix("cron: ")))
        return
    if user is not None:
        state.users.add(user)
    _add_job(state, number, line, cron, command)


def _check_schedule(cron: str) -> None:
    """Raise CronError when tuisched cannot run `cron` as a schedule."""
    if cron.lower() == "@reboot":
        raise CronError("@reboot runs at boot; tuisched runs jobs on a schedule only")
    CronExpr.parse(cron)


def _split_entry(line: str, *, system: bool) -> tuple[str, str | None, str]:
    """The schedule, the user (system crontabs) and the command of an entry."""
    parts = _BLANKS.split(line, maxsplit=1 if line.startswith("@") else 5)
    count = 1 if line.startswith("@") else 5
    if len(parts) <= count or not parts[count].strip():
        raise CronError("no command after the schedule")
    cron = " ".join(parts[:count])
    rest = parts[count]
    user = None
    if system:
        user_and_command = _BLANKS.split(rest, maxsplit=1)
        if len(user_and_command) < 2:
            raise CronError("a system crontab entry needs a user and then a command")
        user, rest = user_and_command
    return cron, user, rest


def _read_variable(state: _State, number: int, line: str, name: str, value: str) -> None:
    if name == "CRON_TZ":
        _set_zone(state, number, line, value)
    elif name == "SHELL":
        state.shell = None if value in _PLAIN_SHELLS else value
    elif name == "RANDOM_DELAY":
        if value.isascii() and value.isdigit() and int(value) <= _MAX_DELAY_MINUTES:
            state.jitter = timedelta(minutes=int(value)) or None
        else:
            state.unmapped.append(Unmapped(number, line, (
                f"RANDOM_DELAY must be whole minutes, at most {_MAX_DELAY_MINUTES} "
                "(100 years)")))  # fmt: skip
    elif name in _MAIL_VARIABLES:
        if value:
            reason = (
                "cron mailed each run's output to it; tuisched sends e-mail through "
                "'alerts' (e.g. failed: {to: [...]}) with 'email:' settings"
            )
            state.unmapped.append(Unmapped(number, line, reason))
    else:
        state.env[name] = value


def _set_zone(state: _State, number: int, line: str, value: str) -> None:
    if not value:
        state.timezone = None
        return
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a name too long for a file
        state.unmapped.append(
            Unmapped(number, line, f"unknown time zone '{value}'; entries below keep the default")
        )
        state.timezone = None
        return
    state.timezone = value


def _add_job(state: _State, number: int, line: str, cron: str, command: str) -> None:
    command, stdin = _split_percent(command)
    if not command.strip():
        state.unmapped.append(Unmapped(number, line, "no command before the '%' (its input)"))
        return
    name = _unique(state, derive_name(command))
    if stdin:
        command = _with_stdin(command, stdin)
        state.notes.append(
            f"line {number}: the text after '%' is the command's standard input, as cron "
            "gives it (a here-document)"
        )
    state.names.add(name)
    state.jobs.append(
        ImportedJob(
            name=name,
            cron=cron,
            command=command,
            line=number,
            source=line,
            shell=state.shell,
            timezone=state.timezone,
            env=MappingProxyType(dict(state.env)),
            jitter=state.jitter,
            description=state.comment,
        )
    )


def _split_percent(command: str) -> tuple[str, str]:
    """The command cron runs and the standard input it gives it, read as cron's
    do_command does: up to the first `%` not after a backslash, `\\%` is `%` (other
    backslashes stay); after it, `%` is a newline, `\\%` a `%`, and input that does
    not end a line gets a newline. Empty input: there was none (or nothing after `%`)."""
    run: list[str] = []
    escaped = False
    for at, char in enumerate(command):
        if escaped and char == "%":
            run[-1] = "%"
        elif not escaped and char == "%":
            return "".join(run), _stdin(command[at + 1 :])
        else:
            run.append(char)
        escaped = not escaped and char == "\\"
    return "".join(run), ""


def _stdin(text: str) -> str:
    """The standard input cron writes for the text after a command's first `%`."""
    given: list[str] = []
    escaped = False
    for char in text:
        shown = "\n" if char == "%" and not escaped else char
        if escaped and char != "%":
            given.append("\\")
        escaped = shown == "\\"  # cron's own rule: a `\\` after a `\\` escapes again
        if not escaped:
            given.append(shown)
    if escaped:
        given.append("\\")
    if given and given[-1] != "\n":
        given.append("\n")
    return "".join(given)


def _with_stdin(command: str, stdin: str) -> str:
    """`command` reading `stdin` (whole lines) as cron gives it: the shell's own input
    comes from a here-document before the command, which stays as written (a comment
    or a trailing `&` in it changes nothing). The here-document ends at a line no line
    of the input is."""
    lines = set(stdin.split("\n"))
    end, count = _STDIN_END, 2
    while end in lines:
        end, count = f"{_STDIN_END}_{count}", count + 1
    return f"exec <<'{end}'\n{stdin}{end}\n{command}"


def derive_name(command: str) -> str:
    """A job name from a command: its program, with the first argument for runners.

    `cd / && run-parts --report /etc/cron.daily` gives `run-parts-cron.daily`;
    `/usr/local/bin/backup.sh --full` gives `backup`; `FOO=1 nice python3 x.py`
    gives `python3-x`.
    """
    for segment in _SEPARATORS.split(command.split("\n", 1)[0]):
        words = _words(segment)
        while words and ("=" in words[0] and not words[0].startswith("=")):
            words = words[1:]  # VAR=value before the program
        while words and _base(words[0]) in _WRAPPERS:
            words = _unwrap(words)
        if not words or _base(words[0]) in _SKIPPED_PROGRAMS:
            continue
        program = _stem(words[0])
        if _base(words[0]) in _RUNNERS:
            argument = _telling_argument(words[1:])
            if argument:
                program = f"{program}-{argument}"
        name = _clean(program)
        if name:
            return name
    return "job"


def _telling_argument(words: list[str]) -> str:
    """What a runner runs: a URL's host, else its first argument that is not an
    option or a number (`run-parts --report /etc/cron.daily`: `cron.daily`)."""
    for word in words:
        if "://" in word:
            return word.split("://", 1)[1].split("/", 1)[0].rsplit("@", 1)[-1]
    for word in words:
        if not word.startswith("-") and not word.isdigit():
            return _stem(word)
    return ""


def _unwrap(words: list[str]) -> list[str]:
    """The words after a wrapper and its options (`timeout 30s`, `flock -n FILE`)."""
    wrapper, rest = _base(words[0]), words[1:]
    while rest and (rest[0].startswith("-") or rest[0][:1] in "0123456789"):
        takes_value = wrapper in _VALUE_OPTIONS and rest[0] in _VALUE_OPTIONS[wrapper]
        rest = rest[2:] if takes_value else rest[1:]
    if wrapper in {"flock", "setlock"} and rest:
        rest = rest[1:]  # the lock file
    return rest


def _words(segment: str) -> list[str]:
    try:
        return shlex.split(segment)
    except ValueError:  # an unbalanced quote split across `;` or `|`
        return segment.split()


def _base(word: str) -> str:
    return word.rstrip("/").rsplit("/", 1)[-1]


def _stem(word: str) -> str:
    base = _base(word)
    stem, dot, extension = base.rpartition(".")
    return stem if dot and stem and extension in {"sh", "py", "pl", "php", "rb", "js"} else base


def _clean(text: str) -> str:
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()  # über: uber
    name = _NAME_BAD.sub("-", text).strip("-.")[:_MAX_NAME].strip("-.")
    return "" if name == SELF or not set(name) <= NAME_CHARS else name


def _unique(state: _State, name: str) -> str:
    """`name`, or `name-2`, `name-3`... the first not taken. Each name remembers where its
    numbers got to: 16,000 entries of one command took 80 s counting from 2 each time."""
    if name not in state.names:
        return name
    count = state.suffixes.get(name, 2)
    while f"{name}-{count}" in state.names:
        count += 1
    state.suffixes[name] = count + 1
    return f"{name}-{count}"


def _unquote(value: str) -> str:
    """cron strips one pair of matching quotes around a variable's value."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value
