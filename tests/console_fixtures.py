"""Helpers for console tests: the real app hosting a real runtime, and bounded waits."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar
from weakref import WeakKeyDictionary

from textual import events
from textual.app import App
from textual.keys import _character_to_key
from textual.pilot import Pilot

from tuisched.frontends.tui.app import TuischedApp
from tuisched.runtime.configfiles import load_config
from tuisched.runtime.control import LocalScheduler
from tuisched.runtime.runtime import Runtime

_RUNTIMES: WeakKeyDictionary[TuischedApp, Runtime] = WeakKeyDictionary()
T = TypeVar("T")

FIXED = datetime(2026, 5, 7, 9, 10, tzinfo=UTC)
"""The clock the console shows in tests (the engine keeps real time)."""


def make_app(path: Path, *, read_only: bool = False) -> tuple[TuischedApp, Runtime]:
    """The console hosting a fresh runtime for the configuration at `path`, and the runtime.

    Tests act on the runtime directly to make things happen behind the console's back
    (a run started elsewhere), and through the console's keys to test the console.
    """
    runtime = Runtime(load_config(path), kill_grace=0.5)
    scheduler = LocalScheduler(runtime)
    control = scheduler.control("tester@test (console)")
    app = TuischedApp(control, scheduler=scheduler, read_only=read_only, clock=lambda: FIXED)
    _RUNTIMES[app] = runtime
    return app, runtime


def runtime_of(app: TuischedApp) -> Runtime:
    """The runtime `make_app` made for `app`."""
    return _RUNTIMES[app]


def hosted(app: TuischedApp) -> LocalScheduler:
    """The scheduler `make_app` made `app` host."""
    assert app.scheduler is not None
    return app.scheduler


async def on_lane(app: TuischedApp, act: Callable[[Runtime], T | Awaitable[T]]) -> T:
    """`act(runtime)` done on the runtime's own thread and loop, where the scheduler does
    everything (a run started elsewhere, a pause from the command line), and its result.

    The console's runtime runs on a lane of its own (SPEC R26): acting on it from the
    test's loop would run engine code on the wrong thread.
    """
    assert app.scheduler is not None

    async def acting() -> T:
        done = act(_RUNTIMES[app])
        return await done if inspect.isawaitable(done) else done

    return await app.scheduler.lane.run(acting())


async def until(pilot: Pilot[int], condition: Callable[[], object], within: float = 10) -> None:
    """Let the app run until `condition()` holds; fail after `within` seconds."""
    waited = 0.0
    while not condition():
        if waited >= within:
            raise AssertionError(f"condition not met within {within}s")
        await pilot.pause(0.05)
        waited += 0.05


_CHARACTERS = {"escape": "\x1b", "enter": "\r", "tab": "\t", "space": " ", "backspace": "\x7f"}


def burst(app: App[int], *keys: str) -> None:
    """Post `keys` to the app in one go, as a slow link delivers what was typed ahead.

    `pilot.press` waits for the app to be idle after each key, which hides every
    race a burst meets; here no key waits for the one before it.
    """
    for key in keys:
        name = _character_to_key(key) if len(key) == 1 and not key.isalnum() else key
        character = key if len(key) == 1 else _CHARACTERS.get(key)
        app.post_message(events.Key(name, character))
