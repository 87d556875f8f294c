"""Hostile crontabs through `tuisched import-crontab`: one line per bad line, or jobs that
tuisched accepts and that run what cron would have run.

Hypothesis writes crontabs out of what real and broken ones hold (valid and
invalid fields, @-nicknames, variable lines, `%` and `\\%`, control characters,
NUL and ESC, Unicode line and paragraph separators, huge fields and very long
lines, bytes that are not UTF-8). Each goes through the command's own code
in-process; the outcome is exit 0 or 1, a report of one line per unmapped line,
and YAML that the configuration loader accepts, in which every job's command
is, for /bin/sh, the command cron would have run with the standard input cron
would have given it.
"""

from __future__ import annotations

import io
import re
import subprocess
import sys
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tuisched.domain.config.crontab import read_crontab
from tuisched.domain.model import CommandSpec, Config
from tuisched.frontends.cli import main
from tuisched.frontends.crontabimport import to_yaml
from tuisched.runtime.configfiles import parse_config

SETTINGS = "settings: {timezone: UTC, state_dir: state}\n"
REPORT_LINE = re.compile(
    r"line \d+: not mapped: .+|note: .+|(1 job|\d+ jobs) imported, (1 line|\d+ lines) not mapped"
    r"|tuisched: import-crontab: no entry of .+ could be mapped"
)

FIELD = st.sampled_from(
    ["*", "0", "5", "59", "*/5", "1-5", "1,2", "MON", "jan", "60", "-1", "*/0", "x", "¹", "٣",
     "L", "?", "99999999999999999999", "1-", ",", "x" * 3000]
)  # fmt: skip
GOOD_FIELDS = st.sampled_from(["* * * * *", "0 3 * * *", "*/15 8-18 * * 1-5", "5 4 1 * *"])
NICKNAME = st.sampled_from(
    ["@hourly", "@daily", "@midnight", "@weekly", "@monthly", "@yearly", "@annually",
     "@reboot", "@bogus", "@", "@HOURLY"]
)  # fmt: skip
SAFE_WORD = st.sampled_from(
    ["echo", "cat", "printf 'x%s'", "a", "b c", "#", ";", "&&", "||", "|", "%", "\\%", "\\",
     "\\\\", "\\\\%", "%%", "CRONTAB_STDIN", "'q'", '"d"', "tr a b", "wc -c", "&", "}", "{",
     "\u00a0", "\u2028", "\u2029", "\u0085", "\ufeff", "\ufffe", "ü", "日本", "$HOME", "~"]
)  # fmt: skip
"""Words of commands the property runs through /bin/sh: nothing that writes or waits."""
HOSTILE = st.sampled_from(
    ["", " ", "\t", "\x00", "\x1b[31m", "\x7f", "\x80", "\x9b", "\r", "\x0b", "\x0c", "\x1c",
     "\u2028", "\u0085", "\ufffe", "\uffff", "\ud7ff", "=", "#", "@", "%", "\\", "x" * 5000,
     "日本", "\u202e"]
)  # fmt: skip
VARIABLE = st.sampled_from(
    ["CRON_TZ", "SHELL", "RANDOM_DELAY", "MAILTO", "PATH", "FOO", "_", "TZ", "HOME",
     "TUISCHED_RUN_ID", "LD_PRELOAD"]
)  # fmt: skip
VALUE = st.one_of(
    HOSTILE,
    st.sampled_from(
        ["UTC", "Europe/Berlin", "posix/UTC", "right/UTC", "Etc/GMT+14", "localtime", "Factory",
         "/bin/bash", "/bin/sh", "sh", "0", "10", "99999999999999999999", "1440", "1e3", "-5",
         "'quoted'", '"x"', "root", "a b", "ü", "٣"]
    ),
)  # fmt: skip


LINE_CHARS = st.characters(codec="utf-8", exclude_characters="\n")
"""Any character but the one that ends a line (the strategy numbers the lines)."""


@dataclass(frozen=True)
class Entry:
    """A crontab entry written by the strategy: its line, and the command as cron sees it."""

    text: str
    command: str | None
    """None when the line's fields are not five: where the command begins is cron's to say."""
    valid: bool
    """Surely imported: valid fields, a plain command, no odd character."""


Case = tuple[str, dict[int, Entry]]


@st.composite
def entry(draw: st.DrawFn) -> Entry:
    five = True
    if draw(st.booleans()):
        schedule, good = draw(GOOD_FIELDS), True
    elif draw(st.booleans()):
        schedule = draw(NICKNAME)
        good = schedule not in {"@reboot", "@bogus", "@"}
    else:
        fields = draw(st.lists(FIELD, min_size=4, max_size=6))
        schedule, good, five = " ".join(fields), False, len(fields) == 5
    words = draw(st.lists(SAFE_WORD, min_size=1, max_size=8))
    command = " ".join(words).strip(" \t")
    plain = all(w in {"echo", "cat", "a", "b c", "tr a b", "wc -c"} for w in words)
    space = draw(st.sampled_from([" ", "\t", "  "]))
    valid = good and plain and bool(command)
    return Entry(f"{schedule}{space}{command}", command if five else None, valid)


@st.composite
def crontab(draw: st.DrawFn) -> Case:
    """A crontab's text and its entries by line number (from 1)."""
    lines: list[str] = []
    entries: dict[int, Entry] = {}
    for _ in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["entry", "entry", "entry", "env", "comment", "junk", ""]))
        if kind == "entry":
            found = draw(entry())
            entries[len(lines) + 1] = found
            lines.append(found.text)
        elif kind == "env":
            space = draw(st.sampled_from(["", " "]))
            lines.append(f"{draw(VARIABLE)}{space}={space}{draw(VALUE)}")
        elif kind == "comment":
            lines.append("# " + draw(st.one_of(HOSTILE, st.text(LINE_CHARS, max_size=40))))
        elif kind == "junk":
            lines.append(draw(st.one_of(HOSTILE, st.text(LINE_CHARS, max_size=80))))
        else:
            lines.append("")
    end = draw(st.sampled_from(["\n", "\r\n"]))
    return end.join(lines) + draw(st.sampled_from(["", end])), entries


def cron_reads(command: str) -> tuple[str, str]:
    """The command cron runs and the standard input it gives it (Vixie cron's and
    cronie's do_command.c, character for character)."""
    cut = len(command)
    run: list[str] = []
    escaped = False
    for at, char in enumerate(command):
        if escaped:
            if char == "%":
                run[-1] = "%"
            else:
                run.append(char)
            escaped = False
            continue
        if char == "\\":
            escaped = True
            run.append(char)
            continue
        if char == "%":
            cut = at + 1
            break
        run.append(char)
    else:
        return "".join(run), ""
    given: list[str] = []
    escaped, need_newline = False, False
    for char in command[cut:]:
        shown = char
        if escaped:
            if char != "%":
                given.append("\\")
        elif char == "%":
            shown = "\n"
        escaped = shown == "\\"
        if not escaped:
            given.append(shown)
        need_newline = shown != "\n"
    if escaped:
        given.append("\\")
    if need_newline:
        given.append("\n")
    return "".join(run), "".join(given)


def _sh(script: str, stdin: str) -> tuple[int, bytes]:
    done = subprocess.run(
        ["/bin/sh", "-c", script], input=stdin.encode(), capture_output=True, timeout=10,
        check=False, env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"},
    )  # fmt: skip
    return done.returncode, done.stdout


def _import(data: bytes) -> tuple[int, str, str]:
    with TemporaryDirectory() as tmp:
        path = Path(tmp) / "crontab"
        path.write_bytes(data)
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            status = main(["import-crontab", str(path)])
    return status, out.getvalue(), err.getvalue()


def _shell_of(config: Config, name: str) -> str:
    """The script the job gives /bin/sh (or the SHELL it names)."""
    kind = config.jobs[name].kind
    assert isinstance(kind, CommandSpec)
    if kind.shell is not None:
        return kind.shell
    assert kind.argv is not None
    assert kind.argv[1] == "-c"
    return kind.argv[2]


def _examples(cases: list[Case]) -> Callable[[Callable[[Case], None]], Callable[[Case], None]]:
    """Hypothesis `@example` for each of `cases`."""

    def decorate(test: Callable[[Case], None]) -> Callable[[Case], None]:
        for case in reversed(cases):
            test = example(case)(test)
        return test

    return decorate


def _check(text: str, entries: dict[int, Entry], data: bytes | None = None) -> None:
    status, out, err = _import(text.encode() if data is None else data)
    assert status in (0, 1), err
    report = err.splitlines()
    assert report
    for line in report:
        assert REPORT_LINE.fullmatch(line), line
    found = read_crontab(text)
    assert len([line for line in report if " not mapped: " in line]) == len(found.unmapped)
    imported = {job.line: job for job in found.jobs}
    for number, one in entries.items():
        if one.valid:
            assert number in imported, (number, one, found.unmapped)
    if status == 1:
        assert not found.jobs
        assert out == ""
        return
    with TemporaryDirectory() as tmp:
        path = Path(tmp) / "tuisched.yaml"
        config = parse_config(SETTINGS + out, path)
    assert list(config.jobs) == [job.name for job in found.jobs]
    for job in found.jobs:
        script = _shell_of(config, job.name)
        one = entries.get(job.line)
        if one is None or one.command is None or data is not None:
            continue
        command, stdin = cron_reads(one.command)
        if not stdin:
            assert script == command
        else:  # what cron runs and what the job runs do the same, for sh
            assert _sh(script, "") == _sh(command, stdin), (script, command, stdin)


def _seen(command: str) -> Case:
    """A crontab of one entry running `command` (for the reproductions below)."""
    return f"* * * * * {command}\n", {1: Entry(f"* * * * * {command}", command, valid=False)}


SEEN = [
    # RANDOM_DELAY beyond what a timedelta holds: OverflowError
    ("RANDOM_DELAY=99999999999999999999\n* * * * * echo\n", {}),
    # a jitter larger than any the configuration takes
    ("RANDOM_DELAY=99999999\n* * * * * echo\n", {}),
    # the input's lines ran as commands: the here-document was inside the comment
    _seen("echo a # note%echo ran"),
    # stdin to the last command only, not to the shell
    _seen("echo a; cat%b"),
    # an input line that ended the here-document early, the rest ran as commands
    _seen("cat%CRONTAB_STDIN%echo ran"),
    # cron reads `\\%` as a backslash and then the start of the input
    _seen("printf '%s' a\\\\%b"),
    # an input ending in `%` ends its line once, none makes no empty line
    _seen("wc -c%a%"),
    _seen("wc -c%"),
    # a U+2028 folded into a space by YAML; it is no line break for cron
    _seen("echo \u2028"),
    # a no-break space is part of the command for cron
    _seen("echo \u00a0"),
    # a command of a no-break space alone: refused by the configuration
    _seen("\u00a0"),
    # C1 controls: YAML refuses them
    _seen("echo \x9b31m"),
    # a zone name too long for a file name: OSError, a traceback
    ("CRON_TZ=" + "x" * 5000 + "\n* * * * * echo\n", {}),
]


@settings(
    max_examples=250,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,
)
@given(crontab())
@example(("", {}))
@_examples(SEEN)
def test_a_hostile_crontab_maps_or_says_why_per_line(case: Case) -> None:
    text, entries = case
    _check(text, entries)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.binary(max_size=300), st.sampled_from([b"", b"* * * * * echo ok\n"]))
def test_bytes_that_are_not_utf8_are_replaced_not_a_traceback(data: bytes, tail: bytes) -> None:
    _check((data + tail).decode("utf-8", errors="replace"), {}, data + tail)


def test_the_command_line_reads_invalid_utf8_and_control_characters(tmp_path: Path) -> None:
    data = (
        b"MAILTO=root\n"
        b"0 3 * * * /usr/bin/backup \xff\xfe --full\n"
        b"5 * * * * echo \x1b[31mred\n"
        b"@reboot /usr/bin/start\n"
        b"*/5 * * * * echo 50\\% done%line one%line two\n"
    )
    path = tmp_path / "crontab"
    path.write_bytes(data)
    done = subprocess.run(
        [sys.executable, "-m", "tuisched", "import-crontab", str(path)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    report = done.stderr.splitlines()
    assert all(REPORT_LINE.fullmatch(line) for line in report), report
    assert report[-1] == "2 jobs imported, 3 lines not mapped"
    config = parse_config(SETTINGS + done.stdout, tmp_path / "tuisched.yaml")
    assert _shell_of(config, "backup") == "/usr/bin/backup \ufffd\ufffd --full"
    script = _shell_of(config, "echo")
    assert _sh(script, "") == (0, b"50% done\n")
    (tmp_path / "tuisched.yaml").write_text(SETTINGS + done.stdout)
    listed = subprocess.run(
        [sys.executable, "-m", "tuisched", "-c", str(tmp_path / "tuisched.yaml"), "validate"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert listed.stdout.startswith("OK: 2 jobs")


def test_the_yaml_header_holds_any_file_name() -> None:
    found = read_crontab("* * * * * echo\n")
    for source in ("a\x1bb", "a\u2028b", "a\ufffeb", "x\x85y"):
        config = parse_config(SETTINGS + to_yaml(found, source), Path("/nonexistent/t.yaml"))
        assert list(config.jobs) == ["echo"]
