"""A blocked event loop is noticed, counted and named (what was running), once per episode."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from tuisched.runtime.watchdog import INTERVAL, THRESHOLD, LoopWatchdog


def _block_the_loop(seconds: float) -> None:
    """What a careless neighbour does: a blocking call on the loop."""
    time.sleep(seconds)


async def _next_turns() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


async def test_a_blocked_loop_is_reported_with_what_blocked_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="tuisched.runtime.watchdog")
    watchdog = LoopWatchdog()
    watchdog.start()
    try:
        await asyncio.sleep(INTERVAL * 2)
        assert watchdog.report().episodes == 0  # an idle loop beats on time
        _block_the_loop(THRESHOLD + 0.25)
        await _next_turns()  # the overdue beat runs now, and ends the episode
    finally:
        watchdog.stop()
    report = watchdog.report()
    assert report.episodes == 1
    assert THRESHOLD < report.recent < THRESHOLD + 1
    assert report.worst == report.recent
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.startswith("the event loop was blocked for 0.")
    assert "in _block_the_loop" in line  # the thread sampled the loop's stack


async def test_the_status_shows_the_lag_of_the_scheduler(tmp_path: object) -> None:
    from pathlib import Path

    from tuisched.runtime.control import LocalControl

    from ..runtime_fixtures import running, write_config

    path = write_config(Path(str(tmp_path)), "a: {command: [x], schedule: manual}")
    async with running(path) as (runtime, _):
        control = LocalControl(runtime, actor="test")
        assert (await control.status()).lag_episodes == 0
        _block_the_loop(THRESHOLD + 0.2)
        await _next_turns()
        status = await control.status()
        assert status.lag_episodes == 1
        assert status.loop_lag > THRESHOLD
