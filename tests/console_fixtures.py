"""Helpers for console tests: the real app on a real runtime, and bounded waits."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from textual.pilot import Pilot

from tuisched.domain.config.config import load_config
from tuisched.frontends.tui.app import TuischedApp
from tuisched.runtime.runtime import Runtime

FIXED = datetime(2026, 5, 7, 9, 10, tzinfo=UTC)
"""The clock the console shows in tests (the engine keeps real time)."""


def make_app(path: Path, *, read_only: bool = False) -> TuischedApp:
    """The console on a fresh runtime for the configuration at `path`."""
    runtime = Runtime(load_config(path), kill_grace=0.5)
    return TuischedApp(runtime, read_only=read_only, clock=lambda: FIXED)


async def until(pilot: Pilot[int], condition: Callable[[], object], within: float = 10) -> None:
    """Let the app run until `condition()` holds; fail after `within` seconds."""
    waited = 0.0
    while not condition():
        if waited >= within:
            raise AssertionError(f"condition not met within {within}s")
        await pilot.pause(0.05)
        waited += 0.05
