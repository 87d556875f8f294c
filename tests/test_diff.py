"""The job-level diff between two configurations."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from tuisched.domain.config.diff import FieldChange, config_diff
from tuisched.runtime.configfiles import parse_config

Write = Callable[[str], Path]
NOW = datetime(2026, 5, 7, 9, 10, tzinfo=UTC)
BEFORE = """
settings: {timezone: UTC}
jobs:
  keep: {command: [/bin/true], schedule: manual}
  gone: {command: [/bin/true], schedule: manual}
  hourly:
    command: [/bin/true]
    schedule: {every: 1 hour, start: 2026-05-04T02:30}
    retries: 1
groups:
  g: {jobs: [keep]}
"""


def test_added_removed_and_changed_jobs_with_their_next_runs(write_config: Write) -> None:
    path = write_config(BEFORE)
    old = parse_config(BEFORE, path)
    after = (
        BEFORE.replace("  gone: {command: [/bin/true], schedule: manual}\n", "")
        .replace("every: 1 hour", "every: 2 hours")
        .replace("retries: 1", "retries: 3")
        .replace("g: {jobs: [keep]}", "g: {jobs: [keep, new]}")
        .replace(
            "jobs:\n  keep:", "jobs:\n  new: {command: [/bin/false], schedule: manual}\n  keep:"
        )
    )
    diff = config_diff(old, parse_config(after, path), NOW)
    assert (diff.added, diff.removed, diff.groups) == (("new",), ("gone",), ("g",))
    (change,) = diff.changed
    assert change.name == "hourly"
    assert FieldChange("retries", "1", "3") in change.fields
    assert any(f.field == "schedule" and "2 hours" in f.after for f in change.fields)
    assert (change.next_before, change.next_after) == (
        datetime(2026, 5, 7, 9, 30, tzinfo=UTC),
        datetime(2026, 5, 7, 10, 30, tzinfo=UTC),
    )
    assert diff.summary() == "+1 -1 ~1 jobs, groups g"
    lines = diff.lines()
    assert lines[:3] == ["+ new", "- gone", "~ hourly"]
    assert "    retries: 1 -> 3" in lines
    assert "    next run: 2026-05-07T09:30:00+00:00 -> 2026-05-07T10:30:00+00:00" in lines


def test_moving_lines_is_no_change(write_config: Write) -> None:
    path = write_config(BEFORE)
    moved = BEFORE.replace("jobs:\n", "jobs:\n\n\n")
    diff = config_diff(parse_config(BEFORE, path), parse_config(moved, path), NOW)
    assert diff.empty
    assert diff.summary() == "+0 -0 ~0 jobs"
