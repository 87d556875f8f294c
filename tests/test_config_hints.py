"""What to write instead: each common YAML or crontab mistake gives its hint (issue 27).

Each case is a job as an operator wrote it, read by the real loader; the test
checks the line the operator sees: `FILE:LINE: job 'NAME': ...; HINT`. The
parser's own words (before the hint) differ between libyaml and pure PyYAML,
so only where and the hint are pinned. The issue's cases also run through
`tuisched validate`, a starting scheduler (exit 78) and a reload that the
running scheduler refuses, which all show the same line.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from zoneinfo import available_timezones

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tuisched.domain.config.hints import (
    SHARED_ABBREVIATIONS,
    ZONE_ABBREVIATIONS,
    cron_hint,
    duration_hint,
    schedule_hint,
    syntax_hint,
    zone_hint,
)
from tuisched.domain.errors import ConfigError
from tuisched.runtime.configfiles import load_config

from .runtime_fixtures import Scheduler, listening, write_config
from .test_cli import run

FIRST = 6
"""The line of the first job's name in a file made by `write_config`."""

TICK = "tick:\n  command: echo hi\n"
"""A job's first lines; a case adds what it gets wrong."""

CASES = {
    # --- YAML habits -------------------------------------------------------------
    "unquoted cron expression": (
        TICK + "  schedule:\n    cron: */5 * * * *", FIRST + 3, "tick",
        'quote the cron expression: cron: "*/5 * * * *"',
    ),
    "unquoted cron nickname": (
        TICK + "  schedule:\n    cron: @daily", FIRST + 3, "tick",
        'quote the cron expression: cron: "@daily"',
    ),
    "unquoted cron expression in braces": (
        TICK + "  schedule: {cron: */5 * * * *}", FIRST + 2, "tick",
        'quote the cron expression: cron: "*/5 * * * *"',
    ),
    "a tab before a key": (
        TICK + "\tschedule: manual", FIRST + 2, "tick", "indent with spaces, not tabs",
    ),
    "a tab among the spaces": (
        "tick:\n  \tcommand: echo hi\n  schedule: manual", FIRST + 1, "tick",
        "indent with spaces, not tabs",
    ),
    "': ' inside a command": (
        "tick:\n  command: echo time: now\n  schedule: manual", FIRST + 1, "tick",
        "quote a command that holds ': ': command: \"echo time: now\"",
    ),
    "': ' inside a description": (
        TICK + "  description: Note: runs at night\n  schedule: manual", FIRST + 2, "tick",
        "quote a description that holds ': ': description: \"Note: runs at night\"",
    ),
    "': ' after a word that is also a key": (
        TICK + "  description: start: at noon\n  schedule: manual", FIRST + 2, "tick",
        "quote a description that holds ': ': description: \"start: at noon\"",
    ),
    "a command starting with '%'": (
        "tick:\n  command: %h/bin/sync\n  schedule: manual", FIRST + 1, "tick",
        "a value starting with '%' starts a directive in YAML; "
        'quote the command: command: "%h/bin/sync"',
    ),
    "a command starting with '@'": (
        "tick:\n  command: @reboot-task\n  schedule: manual", FIRST + 1, "tick",
        "a value starting with '@' is reserved in YAML; quote the command: "
        'command: "@reboot-task"',
    ),
    "a command starting with '['": (
        "tick:\n  command: [ -f /tmp/flag ] && rm /tmp/flag\n  schedule: manual", FIRST + 1,
        "tick", "a value starting with '[' starts a list in YAML; quote the command: "
        'command: "[ -f /tmp/flag ] && rm /tmp/flag"',
    ),
    "a command starting with '{' and more after": (
        "tick:\n  command: { echo a; echo b; } > /tmp/log\n  schedule: manual", FIRST + 1,
        "tick", "a value starting with '{' starts a mapping in YAML; quote the command: "
        'command: "{ echo a; echo b; } > /tmp/log"',
    ),
    "a command in braces": (
        "tick:\n  command: { echo a; echo b; }\n  schedule: manual", FIRST + 1, "tick",
        "a value starting with '{' starts a mapping in YAML; quote a command that does",
    ),
    "a command starting with '*' (a glob)": (
        "tick:\n  command: *.log cleanup\n  schedule: manual", FIRST + 1, "tick",
        "a value starting with '*' names an alias in YAML; quote the command: "
        'command: "*.log cleanup"',
    ),
    "a command that is an unknown alias": (
        "tick:\n  command: *cleanup\n  schedule: manual", FIRST + 1, "tick",
        "a value starting with '*' names an alias in YAML; quote it: command: \"*cleanup\"",
    ),
    "a command starting with '!'": (
        "tick:\n  command: !important-task\n  schedule: manual", FIRST + 1, "tick",
        "a value starting with '!' names a tag in YAML; quote it: command: \"!important-task\"",
    ),
    "a value quoted in part": (
        'tick:\n  command: "my script" --fast\n  schedule: manual', FIRST + 1, "tick",
        "a quoted value ends at its closing quote; quote the whole command: "
        "command: '\"my script\" --fast'",
    ),
    "a quote never closed": (
        'tick:\n  command: "echo hi\n  schedule: manual', FIRST + 1, "tick",
        'the " that opens the command here is never closed',
    ),
    "a key indented deeper than the one above": (
        TICK + "   schedule: manual", FIRST + 2, "tick",
        "'schedule' is indented 5 spaces, like no key above it: "
        "line it up (4 spaces as 'command' on line 7)",
    ),
    "a key indented between two levels": (
        TICK + " schedule: manual", FIRST + 2, "tick",
        "'schedule' is indented 3 spaces, like no key above it: "
        "line it up (4 spaces as 'command' on line 7 or 2 spaces as 'tick' on line 6)",
    ),
    "a mapping after a key on its line": (
        TICK + "  schedule: cron: 0 5 * * *", FIRST + 2, "tick",
        'write a mapping on one line in braces: schedule: {cron: "0 5 * * *"}',
    ),
    "a job's keys at the level of job names": (
        "tick:\ncommand: echo hi\nschedule: manual", FIRST, "tick",
        "the job has no keys; indent its keys (command, schedule) under its name",
    ),
    "a job's keys with no job name": (
        "command: echo hi\nschedule: manual", FIRST, None,
        "'command' is no job's name; write the job's name above 'command', "
        "and indent the job's keys under it",
    ),
    "cron beside schedule instead of under it": (
        TICK + "  schedule:\n  cron: '0 5 * * *'", FIRST + 3, "tick",
        "unknown key 'cron' in the job; indent it under 'schedule:'",
    ),
    "job beside after instead of under it": (
        TICK + "  after:\n  job: other\nother: {command: echo, schedule: manual}", FIRST + 3,
        "tick", "unknown key 'job' in the job; indent it under 'after:'",
    ),
    "jobs as a list with names": (
        "- name: tick\n  command: echo hi\n  schedule: manual", FIRST, None,
        "write each job as its name and ':' (tick:), with its keys indented under it, "
        "not as a list item '- name: tick'",
    ),
    "jobs as a list of named jobs": (
        "- tick: {command: echo hi, schedule: manual}", FIRST, None,
        "write each job's name without the '- ' (jobs is a mapping, not a list)",
    ),
    # --- crontab habits ----------------------------------------------------------
    "a crontab line pasted as a job": (
        "0 5 * * * /usr/local/bin/backup.sh --full", FIRST, None,
        "'0 5 * * * /usr/local/bin/backup.sh --full' is a crontab line; write it as a job: "
        'backup: {command: "/usr/local/bin/backup.sh --full", schedule: {cron: "0 5 * * *"}} '
        "(tuisched import-crontab converts a whole crontab)",
    ),
    "two crontab lines pasted as jobs": (
        "0 5 * * * /usr/local/bin/backup.sh\n30 6 * * 1 /usr/local/bin/report", FIRST, None,
        "'0 5 * * * /usr/local/bin/backup.sh' is a crontab line; write it as a job: "
        'backup: {command: "/usr/local/bin/backup.sh", schedule: {cron: "0 5 * * *"}} '
        "(tuisched import-crontab converts a whole crontab)",
    ),
    "a crontab line starting with */5 pasted as a job": (
        "*/5 * * * * /usr/bin/check-disk", FIRST, None,
        "'*/5 * * * * /usr/bin/check-disk' is a crontab line; write it as a job: check-disk: "
        '{command: "/usr/bin/check-disk", schedule: {cron: "*/5 * * * *"}} '
        "(tuisched import-crontab converts a whole crontab)",
    ),
    "a cron expression as the schedule": (
        TICK + "  schedule: 0 5 * * *", FIRST + 2, "tick",
        'write it under \'cron:\', quoted: schedule: {cron: "0 5 * * *"}',
    ),
    "an unquoted */5 cron expression as the schedule": (
        TICK + "  schedule: */5 * * * *", FIRST + 2, "tick",
        'write it under \'cron:\', quoted: schedule: {cron: "*/5 * * * *"}',
    ),
    "a crontab line as the schedule": (
        TICK + "  schedule: '0 5 * * * /usr/bin/backup.sh'", FIRST + 2, "tick",
        "the command goes in 'command:'; write schedule: {cron: \"0 5 * * *\"}",
    ),
    "a nickname as the schedule": (
        TICK + "  schedule: daily", FIRST + 2, "tick", 'write schedule: {cron: "@daily"}',
    ),
    "a crontab line as the cron expression": (
        TICK + "  schedule: {cron: '0 5 * * * /usr/bin/backup.sh'}", FIRST + 2, "tick",
        "the command goes in 'command:'; the cron expression holds the times only: "
        'cron: "0 5 * * *"',
    ),
    "a nickname without its '@'": (
        TICK + "  schedule: {cron: daily}", FIRST + 2, "tick", 'write cron: "@daily"',
    ),
    # --- durations ---------------------------------------------------------------
    "a duration's last unit left out": (
        TICK + "  schedule: manual\n  timeout: 1h30", FIRST + 3, "tick",
        "timeout: bad duration '1h30': write 1h30m",
    ),
    "a duration without a unit": (
        TICK + "  schedule: manual\n  timeout: 90", FIRST + 3, "tick",
        "timeout: bad duration '90': a number alone could be seconds or minutes: "
        "write 90s or 90m",
    ),
    "a duration in words": (
        TICK + "  schedule: manual\n  retry_delay: 5 minutes", FIRST + 3, "tick",
        "retry_delay: bad duration '5 minutes': write 5m",
    ),
    "a duration as a clock time": (
        TICK + "  schedule: manual\n  timeout: '1:30'", FIRST + 3, "tick",
        "timeout: bad duration '1:30': write 1h30m or 1m30s",
    ),
    # --- booleans ----------------------------------------------------------------
    "yes for true": (
        TICK + "  schedule: manual\n  enabled: yes", FIRST + 3, "tick",
        "enabled must be true or false, not 'yes'; write true (YAML 1.1 reads 'yes' as "
        "true, YAML 1.2 as text)",
    ),
    "Off for false": (
        TICK + "  schedule: manual\n  recover: Off", FIRST + 3, "tick",
        "recover must be true or false, not 'Off'; write false (YAML 1.1 reads 'Off' as "
        "false, YAML 1.2 as text)",
    ),
    # --- time zones --------------------------------------------------------------
    "CEST": (
        TICK + "  schedule: manual\n  timezone: CEST", FIRST + 3, "tick",
        "CEST is an abbreviation; use a zone name such as Europe/Berlin",
    ),
    "PST": (
        TICK + "  schedule: manual\n  timezone: PST", FIRST + 3, "tick",
        "PST is an abbreviation; use a zone name such as America/Los_Angeles",
    ),
    "AEST": (
        TICK + "  schedule: manual\n  timezone: AEST", FIRST + 3, "tick",
        "AEST is an abbreviation; use a zone name such as Australia/Sydney",
    ),
    "IST": (
        TICK + "  schedule: manual\n  timezone: IST", FIRST + 3, "tick",
        "IST is an abbreviation that several places use; use a zone name such as "
        "Asia/Kolkata (India), Europe/Dublin (Ireland) or Asia/Jerusalem (Israel)",
    ),
    "a zone in lower case": (
        TICK + "  schedule: manual\n  timezone: utc", FIRST + 3, "tick",
        "did you mean 'UTC'?",
    ),
    "a city without its area": (
        TICK + "  schedule: manual\n  timezone: New York", FIRST + 3, "tick",
        "did you mean 'America/New_York'?",
    ),
    "a UTC offset": (
        TICK + "  schedule: manual\n  timezone: UTC+2", FIRST + 3, "tick",
        "a UTC offset is no zone name; use the zone name of the place (it follows summer "
        "time), or Etc/GMT-2 for UTC+2 all year (its sign is reversed)",
    ),
    "an abbreviation the table lacks": (
        TICK + "  schedule: manual\n  timezone: QQT", FIRST + 3, "tick",
        "QQT looks like an abbreviation; use a zone name (Area/City) of the place",
    ),
}  # fmt: skip


def _problems(path: Path) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    return [str(problem) for problem in caught.value.problems]


@pytest.mark.parametrize(("jobs", "line", "job", "hint"), CASES.values(), ids=CASES.keys())
def test_a_common_mistake_says_what_to_write_instead(
    tmp_path: Path, jobs: str, line: int, job: str | None, hint: str
) -> None:
    path = write_config(tmp_path, jobs)
    where = f"{path}:{line}: " + (f"job '{job}': " if job else "")
    problems = _problems(path)
    assert any(p.startswith(where) and p.endswith(hint) for p in problems), (
        f"expected {where}...; {hint}\ngot:\n" + "\n".join(problems)
    )


def test_a_setting_at_the_top_belongs_under_settings(tmp_path: Path) -> None:
    path = tmp_path / "tuisched.yaml"
    path.write_text("timezone: UTC\nsettings: {state_dir: state}\njobs: {}\n")
    assert _problems(path) == [
        f"{path}:1: unknown top-level key 'timezone'; indent it under 'settings:'"
    ]


def test_a_job_at_the_top_belongs_under_jobs(tmp_path: Path) -> None:
    path = tmp_path / "tuisched.yaml"
    path.write_text(
        "settings: {state_dir: state}\njobs: {}\nbackup: {command: b, schedule: manual}\n"
    )
    assert _problems(path) == [f"{path}:3: unknown top-level key 'backup'; indent it under 'jobs:'"]


@pytest.mark.parametrize(
    "name", ["UTC", "GMT", "EST", "MST", "HST", "CET", "EET", "WET", "Etc/UTC", "Europe/Berlin"]
)
def test_zone_names_that_look_like_abbreviations_still_work(tmp_path: Path, name: str) -> None:
    path = write_config(tmp_path, TICK + f"  schedule: manual\n  timezone: {name}")
    assert load_config(path).jobs["tick"].timezone.key == name


def test_every_abbreviation_names_real_zones_and_is_no_zone_itself() -> None:
    known = available_timezones()
    suggested = set(ZONE_ABBREVIATIONS.values())
    suggested |= {zone for places in SHARED_ABBREVIATIONS.values() for zone in places.values()}
    assert suggested <= known, suggested - known
    # An abbreviation that is a zone's name is read as that zone: a hint would never show.
    assert not (set(ZONE_ABBREVIATIONS) | set(SHARED_ABBREVIATIONS)) & known


@pytest.mark.parametrize("name", ["CEST", "BST", "JST", "MSK", "EDT", "AEST", "IST", "XYZ"])
def test_an_abbreviation_is_never_answered_with_a_look_alike_zone(
    tmp_path: Path, name: str
) -> None:
    # Before: CEST got "did you mean 'EST'" (New York), JST and MSK "'MST'" (Arizona).
    path = write_config(tmp_path, TICK + f"  schedule: manual\n  timezone: {name}")
    (problem,) = _problems(path)
    assert "did you mean" not in problem


# --- the same line in validate, at start and on a refused reload ---------------------

ISSUE_CASES = {
    name: CASES[name]
    for name in ("unquoted cron expression", "a tab before a key", "': ' inside a command", "CEST")
}


def _line(path: Path, case: tuple[str, int, str | None, str]) -> str:
    """The one line the loader gives for `case` written at `path`, checked for its hint."""
    (line,) = _problems(path)
    assert line.endswith(f"; {case[3]}")
    return line


@pytest.mark.parametrize("case", ISSUE_CASES.values(), ids=ISSUE_CASES.keys())
def test_validate_prints_the_hint(tmp_path: Path, case: tuple[str, int, str | None, str]) -> None:
    path = write_config(tmp_path, case[0])
    status, out, err = run("validate", "-c", str(path))
    assert (status, out, err) == (1, _line(path, case) + "\n", "")


def test_a_scheduler_refuses_to_start_with_the_same_line(tmp_path: Path) -> None:
    case = CASES["unquoted cron expression"]
    path = write_config(tmp_path, case[0])
    status, _, err = run("--no-ui", "-c", str(path))
    assert status == 78
    assert any(logged.endswith(f" {_line(path, case)}") for logged in err.splitlines()), err


def test_a_refused_reload_shows_the_same_line(tmp_path: Path) -> None:
    path = write_config(tmp_path, TICK + "  schedule: manual")
    case = CASES["': ' inside a command"]
    with listening(path):
        write_config(tmp_path, case[0])
        status, out, _ = run("reload", "--json", "-c", str(path))
        assert status == 1
        assert _line(path, case) in json.loads(out)["lines"]
        status, out, err = run("reload", "-c", str(path))
        assert status == 1
        assert f"  {_line(path, case)}" in (out + err).splitlines()


def test_a_reload_on_sighup_logs_the_same_line(tmp_path: Path, schedulers: list[Scheduler]) -> None:
    path = write_config(tmp_path, TICK + "  schedule: manual")
    scheduler = Scheduler(path)
    schedulers.append(scheduler)
    scheduler.wait_for_line("scheduler started")
    case = CASES["a tab before a key"]
    write_config(tmp_path, case[0])
    scheduler.process.send_signal(signal.SIGHUP)
    scheduler.wait_for_line("configuration rejected")
    logged = scheduler.wait_for_line(case[3])
    assert _line(path, case) in logged
    scheduler.process.send_signal(signal.SIGTERM)
    assert scheduler.finish() == 0


# --- a hint never turns a refused file into a traceback ------------------------------

_YAMLISH = st.text(alphabet=" \t-:#*&!%@`|>[]{}?'\",/0123456789abcdefjobscmdrntuCEST", max_size=40)


@settings(max_examples=300, deadline=None)
@given(st.lists(_YAMLISH, min_size=1, max_size=6), st.integers(0, 8), st.integers(0, 45))
def test_syntax_hints_take_any_line(lines: list[str], number: int, column: int) -> None:
    hint = syntax_hint(lines, number, column)
    assert hint == "" or (hint.startswith("; ") and "\n" not in hint)


@settings(max_examples=300, deadline=None)
@given(_YAMLISH)
def test_value_hints_take_any_text(text: str) -> None:
    for hint in (zone_hint(text), duration_hint(text), schedule_hint(text), cron_hint(text)):
        assert "\n" not in hint
