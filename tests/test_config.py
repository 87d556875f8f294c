"""Valid configurations read into the model as the operator meant them."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from tuisched.domain.errors import ConfigError
from tuisched.domain.model import (
    AlertEvent,
    CommandSpec,
    CronSchedule,
    EverySchedule,
    ManualSchedule,
    Misfire,
    Outcome,
    Overlap,
    PythonSpec,
    Unit,
    WaitForSpec,
)
from tuisched.runtime.configfiles import load_config, parse_config

from .conftest import SAMPLE

Write = Callable[[str], Path]
BERLIN = ZoneInfo("Europe/Berlin")


def test_sample_config_is_valid_and_shows_every_feature() -> None:
    config = load_config(SAMPLE)
    kinds = {type(job.kind) for job in config.jobs.values()}
    assert kinds == {CommandSpec, PythonSpec, WaitForSpec}
    schedules = {type(job.schedule) for job in config.jobs.values()}
    assert {EverySchedule, CronSchedule, ManualSchedule, type(None)} <= schedules
    assert config.email is not None
    assert config.groups["nightly"].alerts
    assert any(job.requires for job in config.jobs.values())
    assert config.jobs["compress"].groups == ("nightly",)


def test_defaults_are_the_documented_ones(write_config: Write, tmp_path: Path) -> None:
    config = load_config(
        write_config(
            """
            jobs:
              tick:
                command: [/bin/true]
                schedule: manual
            """
        ),
        system_timezone=ZoneInfo("Asia/Tokyo"),
        default_state_dir=tmp_path / "state",
    )
    settings = config.settings
    assert settings.timezone == ZoneInfo("Asia/Tokyo")
    assert (settings.max_workers, settings.shutdown_grace) == (8, timedelta(seconds=10))
    assert settings.state_dir == tmp_path / "state"
    job = config.jobs["tick"]
    assert job.timezone == ZoneInfo("Asia/Tokyo")
    assert (job.priority, job.overlap, job.retries, job.enabled) == (0, Overlap.SKIP, 0, True)
    assert (job.grace, job.misfire, job.timeout) == (timedelta(seconds=60), Misfire.SKIP, None)
    assert isinstance(job.kind, CommandSpec)
    assert job.kind.success_codes == frozenset({0})


def test_yaml_11_surprises_are_read_as_written(write_config: Write) -> None:
    config = load_config(
        write_config(
            """
            settings: {timezone: UTC}
            jobs:
              parent:
                command: [/bin/echo, 12:30, on, yes, 0755, 1e3, null-ish]
                description: yes
                env: {DEBUG: on, MODE: 0644}
                schedule: manual
              child:
                command: echo child
                after: {job: parent, on: failure}
            """
        )
    )
    parent = config.jobs["parent"]
    assert isinstance(parent.kind, CommandSpec)
    assert parent.kind.argv == ("/bin/echo", "12:30", "on", "yes", "0755", "1e3", "null-ish")
    assert parent.description == "yes"
    assert dict(parent.kind.env) == {"DEBUG": "on", "MODE": "0644"}
    after = config.jobs["child"].after
    assert after is not None
    assert after.on is Outcome.FAILURE


def test_datetimes_bare_quoted_and_with_offset(write_config: Write) -> None:
    config = load_config(
        write_config(
            """
            settings: {timezone: Europe/Berlin}
            jobs:
              bare:
                command: [/bin/true]
                schedule: {every: 1 hour, start: 2026-05-04T02:30}
              quoted:
                command: [/bin/true]
                schedule: {every: 1 hour, start: "2026-05-04T02:30"}
              offset:
                command: [/bin/true]
                schedule: {every: 1 hour, start: "2026-05-04T00:30+00:00"}
            """
        )
    )
    starts = {name: job.schedule.start for name, job in config.jobs.items()}  # type: ignore[union-attr]
    expected = datetime(2026, 5, 4, 2, 30, tzinfo=BERLIN)
    assert starts == {"bare": expected, "quoted": expected, "offset": expected}
    assert all(start.tzinfo == BERLIN for start in starts.values())


def test_every_schedule_is_typed(write_config: Write) -> None:
    job = load_config(
        write_config(
            """
            jobs:
              monthly:
                command: [/bin/true]
                timezone: America/New_York
                schedule:
                  every: 1 month
                  start: 2026-01-31T06:00
                  stop: 2026-12-31T06:00
            """
        )
    ).jobs["monthly"]
    schedule = job.schedule
    assert isinstance(schedule, EverySchedule)
    assert (schedule.step, schedule.unit) == (1, Unit.MONTH)
    assert schedule.tz == ZoneInfo("America/New_York")
    assert schedule.stop == datetime(2026, 12, 31, 6, 0, tzinfo=ZoneInfo("America/New_York"))


def test_anchors_merge_keys_and_x_keys(write_config: Write) -> None:
    config = load_config(
        write_config(
            """
            x-defaults: &defaults
              priority: 7
              timeout: 1h30m
              overlap: queue
            jobs:
              a:
                <<: *defaults
                command: [/bin/true]
                schedule: manual
              b:
                <<: *defaults
                priority: 1
                command: [/bin/true]
                schedule: manual
            """
        )
    )
    a, b = config.jobs["a"], config.jobs["b"]
    assert (a.priority, a.timeout, a.overlap) == (7, timedelta(hours=1, minutes=30), Overlap.QUEUE)
    assert b.priority == 1  # an explicit key wins over the merged one


def test_relative_paths_are_relative_to_the_config_folder(
    write_config: Write, tmp_path: Path
) -> None:
    (tmp_path / "mail").mkdir()
    (tmp_path / "mail" / "t.txt").write_text("{{ job.name }}\n")
    config = load_config(
        write_config(
            """
            settings: {state_dir: var/state, timezone: UTC}
            email:
              smtp: {host: localhost, security: starttls}
              from: ops@example.org
            jobs:
              sensor:
                wait_for: incoming/*.csv
                timeout: 1h
                schedule: manual
                alerts:
                  failed: {to: [ops@example.org, "Ops <ops2@example.org>"], template: mail/t.txt}
              cmd:
                command: [./run.sh]
                cwd: work
                schedule: manual
            """
        )
    )
    assert config.settings.state_dir == tmp_path / "var" / "state"
    assert config.email is not None
    assert config.email.smtp.port == 587  # starttls's port unless one is given
    sensor = config.jobs["sensor"]
    assert sensor.kind == WaitForSpec(path=str(tmp_path / "incoming" / "*.csv"))
    assert sensor.alerts[0].event is AlertEvent.FAILED
    assert sensor.alerts[0].template == tmp_path / "mail" / "t.txt"
    assert sensor.alerts[0].to == ("ops@example.org", "Ops <ops2@example.org>")
    cmd = config.jobs["cmd"].kind
    assert isinstance(cmd, CommandSpec)
    assert cmd.cwd == tmp_path / "work"


def test_every_problem_is_reported_at_once(write_config: Write) -> None:
    path = write_config(
        """
        settings: {timezone: UTC, max_workers: 0}
        jobs:
          a:
            command: [/bin/true]
            schedule: {cron: "61 * * * *"}
          b:
            command: [/bin/true]
            timeout: soon
            schedule: manual
          c:
            command: [/bin/true]
            after: nobody
        """
    )
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    located = {(p.line, p.job) for p in caught.value.problems}
    assert located == {(1, None), (5, "a"), (8, "b"), (12, "c")}


def test_parse_config_reads_text_as_if_from_the_file(write_config: Write) -> None:
    text = "jobs:\n  a: {command: [/bin/true], schedule: manual}\n"
    path = write_config(text)
    assert parse_config(text, path).jobs.keys() == load_config(path).jobs.keys()


def test_unreadable_and_non_utf8_files_are_problems(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the file"):
        load_config(tmp_path / "missing.yaml")
    latin = tmp_path / "latin.yaml"
    latin.write_bytes(b"jobs:\n  a: {command: [/bin/echo, caf\xe9], schedule: manual}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(latin)
    assert caught.value.problems[0].line == 2
    assert "UTF-8" in caught.value.problems[0].message
