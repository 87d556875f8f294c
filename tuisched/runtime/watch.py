"""Notices changes to the configuration file on disk (SPEC R17).

Editors and atomic writers save by renaming a new file over the old one, so
the folder is watched and events are filtered by the file's name; a burst of
events (write, rename, chmod) is debounced into one look at the file, which
the configuration source takes (reading off the loop, regular files only);
whether it is an offline edit (and not our own write) is decided by its
content, never by timing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

from watchfiles import Change, awatch

log = logging.getLogger(__name__)

DEBOUNCE_MS = 300
"""Events closer together than this are one change."""


class ConfigWatcher:
    """Awaits `on_change()` (on the loop) whenever the file may have changed; it reads it."""

    def __init__(self, path: Path, on_change: Callable[[], Awaitable[None]]) -> None:
        self.path = path.resolve()
        self._on_change = on_change
        self._stop: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start watching, in a task on the running loop."""
        self._stop = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._watch(self._stop))

    async def stop(self) -> None:
        """Stop watching and wait for the watch to end."""
        if self._stop is not None and self._task is not None:
            self._stop.set()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def _concerns(self, change: Change, path: str) -> bool:
        return Path(path).name == self.path.name

    async def _watch(self, stop: asyncio.Event) -> None:
        try:
            async for _changes in awatch(
                self.path.parent,
                watch_filter=self._concerns,
                debounce=DEBOUNCE_MS,
                step=50,
                stop_event=stop,
                recursive=False,
            ):
                await self._on_change()
        except Exception:  # the scheduler goes on without noticing offline edits
            log.exception("watching %s failed; offline edits will not be noticed", self.path)
