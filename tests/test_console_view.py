"""The console's formatting: relative times, results as glyph and word."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from tuisched.domain.runs import RunRecord, RunState, Trigger
from tuisched.frontends.tui.view import relative, result_text, when

NOW = datetime(2026, 5, 7, 9, 10, tzinfo=UTC)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "now"), (45, "in 45s"), (-45, "45s ago"), (6 * 60 + 26, "in 6m"), (7380, "in 2h03m"),
     (-7380, "2h03m ago"), (17 * 3600 + 600, "in 17h"), (3 * 86400, "in 3d")],
)  # fmt: skip
def test_relative(seconds: int, text: str) -> None:
    assert relative(NOW + timedelta(seconds=seconds), NOW) == text


def test_when_shows_the_date_only_for_another_day() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    assert when(NOW + timedelta(minutes=20), NOW, berlin) == "in 20m (11:30)"
    assert when(NOW + timedelta(days=2), NOW, berlin) == "in 2d (Sat 11:10)"
    assert when(NOW + timedelta(days=9), NOW, berlin) == "in 9d (05-16 11:10)"
    assert when(None, NOW, berlin) == "-"


@pytest.mark.parametrize(
    ("state", "text"),
    [(RunState.SUCCESS, "✔ ok"), (RunState.FAILED, "✘ failed"),
     (RunState.NOT_STARTED, "⊘ not started"), (RunState.MISSED, "◌ missed")],
)  # fmt: skip
def test_results_are_a_glyph_and_a_word(state: RunState, text: str) -> None:
    """The word alone must be enough: colour is never the only sign."""
    run = RunRecord(
        run_id="r", job="j", slot=None, trigger=Trigger.MANUAL, state=state, queued_at=NOW
    )
    assert result_text(run) == text
    assert result_text(None) == "-"


def test_a_stopped_run_is_not_a_failure() -> None:
    from tuisched.domain.runs import Result
    from tuisched.frontends.tui.view import is_failure

    stopped = RunRecord(
        run_id="r", job="j", slot=None, trigger=Trigger.MANUAL, state=RunState.FAILED,
        queued_at=NOW, result=Result.STOPPED,
    )  # fmt: skip
    assert result_text(stopped) == "■ stopped"
    assert not is_failure(stopped)
    timed_out = stopped.__class__(**{**_fields(stopped), "result": Result.TIMED_OUT})
    assert result_text(timed_out) == "✘ timed out"
    assert is_failure(timed_out)


def _fields(run: RunRecord) -> dict[str, object]:
    return {name: getattr(run, name) for name in run.__dataclass_fields__}
