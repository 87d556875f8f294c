"""Durations as the spec writes them (R17a)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from tuisched.domain.schedule.duration import format_age, format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("90s", timedelta(seconds=90)),
        ("5m", timedelta(minutes=5)),
        ("2h", timedelta(hours=2)),
        ("1d", timedelta(days=1)),
        ("1w", timedelta(weeks=1)),
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("1d 2h", timedelta(days=1, hours=2)),
        ("0s", timedelta(0)),
    ],
)
def test_parse(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "90", "5 minutes", "1.5h", "-5m", "30m1h", "1h1h", "h"])
def test_refused(text: str) -> None:
    with pytest.raises(ValueError, match="bad duration"):
        parse_duration(text)


@pytest.mark.parametrize("seconds", [0, 1, 59, 60, 61, 3600, 5400, 86400, 90061, 604800])
def test_format_reads_back(seconds: int) -> None:
    value = timedelta(seconds=seconds)
    assert parse_duration(format_duration(value)) == value


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"), (0.00085, "850µs"), (0.0015, "1.5ms"), (0.04, "40ms"), (0.5, "500ms"),
        (0.9996, "1.0s"), (2.5, "2.5s"), (9.96, "10s"), (42, "42s"), (59.6, "1m00s"),
        (65, "1m05s"), (125, "2m05s"), (3720, "1h02m"), (7380, "2h03m"), (90061, "1d01h"),
        (-3, "0s"),
    ],
)  # fmt: skip
def test_elapsed_for_people(seconds: float, text: str) -> None:
    """One style for every human output: never `0.00085s` (issue 27)."""
    from tuisched.domain.schedule.duration import format_elapsed

    assert format_elapsed(timedelta(seconds=seconds)) == text


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [(0, "0s"), (3.7, "3s"), (59, "59s"), (125, "2m05s"), (3599, "59m59s"), (3725, "1h02m"),
     (86399, "23h59m"), (90061, "1d01h"), (-2, "0s")],
)  # fmt: skip
def test_an_age_is_whole_seconds_then_two_units_up_to_days(seconds: float, expected: str) -> None:
    assert format_age(timedelta(seconds=seconds)) == expected


def test_the_nodes_table_writes_heartbeat_ages_in_the_same_style() -> None:
    """`tuisched nodes` said `3725s ago`; now `1h02m ago`, as every duration reads."""
    import io
    from datetime import UTC, datetime

    from tuisched.domain.views import NodeView
    from tuisched.frontends.nodes import print_nodes

    node = NodeView(
        node_id="vm:1:ab", name="vm", host="vm", pid=1, started_at=datetime(2026, 5, 7, tzinfo=UTC),
        heartbeat_age=3725.4, state="dead", running=0, capacity=8, config_hash="0123456789",
    )  # fmt: skip
    out = io.StringIO()
    print_nodes([node, replace(node, heartbeat_age=0.4)], as_json=False, out=out)
    rows = out.getvalue().splitlines()
    assert "  1h02m ago  dead" in rows[1]
    assert "  400ms ago  dead" in rows[2]
