"""Notices changes to the configuration file on disk (SPEC R17).

Editors and atomic writers save by renaming a new file over the old one, so
the folder is watched and events are filtered by the file's name; a burst of
events (write, rename, chmod) is debounced into one look at the file. What
the file now says is handed on; whether it is an offline edit (and not our
own write) is decided by its content, never by timing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from pathlib import Path

from watchfiles import Change, awatch

log = logging.getLogger(__name__)

DEBOUNCE_MS = 300
"""Events closer together than this are one change."""


class ConfigWatcher:
    """Calls `on_text(text)` (on the loop) whenever the file may have changed."""

    def __init__(self, path: Path, on_text: Callable[[str], None]) -> None:
        self.path = path.resolve()
        self._on_text = on_text
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
                self._look()
        except Exception:  # the scheduler goes on without noticing offline edits
            log.exception("watching %s failed; offline edits will not be noticed", self.path)

    def _look(self) -> None:
        try:
            text = self.path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            # Deleted, or caught between an editor's unlink and rename: the next event tells.
            log.info("configuration %s is unreadable for now: %s", self.path, error)
            return
        self._on_text(text)
