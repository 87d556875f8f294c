"""Screens whose children went before their work came back: a burst of keys (or the console
closing) can take a screen away before its mount handler runs, and a worker's answer from
the scheduler can come back after the screen closed. Either way the console goes on; the
late work does nothing (seen under a CPU hog: NoMatches failed the console)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from textual.screen import Screen
from textual.worker import WorkerState

from tuisched.domain.views import NodeView
from tuisched.frontends.tui.app import TuischedApp
from tuisched.frontends.tui.screens.diff import DiffScreen
from tuisched.frontends.tui.screens.drain import DrainScreen
from tuisched.frontends.tui.screens.help import HelpScreen
from tuisched.frontends.tui.screens.ledger import LedgerScreen
from tuisched.frontends.tui.screens.main import MainScreen
from tuisched.frontends.tui.screens.messages import MessagesScreen
from tuisched.frontends.tui.screens.nodes import NodesScreen

from .console_fixtures import make_app, until
from .runtime_fixtures import write_config

SIZE = (80, 24)
JOBS = "tick: {command: [/bin/echo, tick], schedule: {every: 1 hour, start: 2026-01-01T00:00}}"


async def _no_nodes() -> tuple[NodeView, ...]:
    return ()


SCREENS: dict[str, Callable[[TuischedApp], Screen[Any]]] = {
    "help": lambda app: HelpScreen([("Keys", [])]),
    "diff": lambda app: DiffScreen(app.control),
    "messages": lambda app: MessagesScreen(app.notices, tz=ZoneInfo("UTC")),
    "nodes": lambda app: NodesScreen(_no_nodes),
    "ledger": LedgerScreen,
    "drain": lambda app: DrainScreen(app.control, [], wait=False),
}


async def _started(pilot: Any) -> TuischedApp:
    app = pilot.app
    assert isinstance(app, TuischedApp)
    await until(pilot, lambda: app.ready)
    return app


@pytest.mark.parametrize("name", list(SCREENS))
async def test_a_screen_whose_children_went_before_its_mount_handler_ran(
    tmp_path: Path, name: str
) -> None:
    app, _runtime = make_app(write_config(tmp_path, JOBS))
    async with app.run_test(size=SIZE) as pilot:
        await _started(pilot)
        screen = SCREENS[name](app)
        await app.push_screen(screen)
        for child in list(screen.children):
            await child.remove()  # as a close's prune does, before the handler ran
        screen.on_mount()  # type: ignore[attr-defined]  (as it runs after the removal)
        await pilot.pause()
        assert app.is_running
        app.pop_screen()
        await until(pilot, lambda: isinstance(app.screen, MainScreen))


@pytest.mark.parametrize("name", ["diff", "nodes", "ledger"])
async def test_an_answer_that_comes_back_after_the_screen_went_is_dropped(
    tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    app, _runtime = make_app(write_config(tmp_path, JOBS))
    async with app.run_test(size=SIZE) as pilot:
        await _started(pilot)
        asked, release = asyncio.Event(), asyncio.Event()

        def held(answer: Callable[..., Any]) -> Callable[..., Any]:
            async def holding(*args: Any, **kwargs: Any) -> Any:
                asked.set()
                await release.wait()
                return await answer(*args, **kwargs)

            return holding

        if name == "nodes":
            screen: Screen[Any] = NodesScreen(held(_no_nodes))
        else:
            asked_for = {"diff": "pending_edit", "ledger": "missed"}[name]
            monkeypatch.setattr(app.control, asked_for, held(getattr(app.control, asked_for)))
            screen = SCREENS[name](app)
        await app.push_screen(screen)
        await until(pilot, asked.is_set)
        for child in list(screen.children):
            await child.remove()  # the screen closing while the answer is on its way
        release.set()
        await until(pilot, lambda: all(w.is_finished for w in screen.workers))
        failed = [w.error for w in screen.workers if w.state is WorkerState.ERROR]
        assert not failed, failed
        assert app.is_running
        monkeypatch.undo()
        app.pop_screen()
        await until(pilot, lambda: isinstance(app.screen, MainScreen))
