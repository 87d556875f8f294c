"""The console's formatting: relative times, results as glyph and word."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from tuisched.runs import RunRecord, RunState, Trigger
from tuisched.tui.view import relative, result_text, when

NOW = datetime(2026, 5, 7, 9, 10, tzinfo=UTC)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "now"), (45, "in 45s"), (-45, "45s ago"), (6 * 60 + 26, "in 6m"), (7380, "in 2h03m"),
     (-7380, "2h03m ago"), (3 * 86400, "in 3d")],
)  # fmt: skip
def test_relative(seconds: int, text: str) -> None:
    assert relative(NOW + timedelta(seconds=seconds), NOW) == text


def test_when_shows_the_date_only_for_another_day() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    assert when(NOW + timedelta(minutes=20), NOW, berlin) == "in 20m (11:30)"
    assert when(NOW + timedelta(days=2), NOW, berlin) == "in 2d (05-09 11:10)"
    assert when(None, NOW, berlin) == "-"


@pytest.mark.parametrize(
    ("state", "text"),
    [(RunState.SUCCESS, "✔ ok"), (RunState.FAILED, "✘ failed"),
     (RunState.NOT_STARTED, "⊘ not started"), (RunState.MISSED, "◌ missed")],
)  # fmt: skip
def test_results_are_a_glyph_and_a_word(state: RunState, text: str) -> None:
    run = RunRecord(
        run_id="r", job="j", slot=None, trigger=Trigger.MANUAL, state=state, queued_at=NOW
    )
    assert result_text(run) == text
    assert result_text(None) == "-"
