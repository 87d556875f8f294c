"""The processes of a runtime's runs: followed in /proc while runs go, recorded in the
state directory, and what ended runs left running stopped at stop.

A scheduler that owns its state directory records the processes of its runs
there, and its run keeper ends them if the scheduler dies (`Keeper`); the next
start kills what a dead one left (`tuisched.runtime.abandoned`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from pathlib import Path
from typing import Any

from tuisched.domain.text import counted
from tuisched.runtime.clock import Clock
from tuisched.runtime.execution.descendants import Descendants
from tuisched.runtime.execution.keeper import Keeper
from tuisched.runtime.threads import Lane, in_thread

log = logging.getLogger(__name__)

FOLLOW_SECONDS = 1.0
"""How often the processes of runs are looked for in /proc (while runs are going)."""
FOLLOW_GAP = 0.2
"""Seconds between two looks at least: a run that starts or ends asks for a look at once
(so that the record names its processes within a fraction of a second), and a burst of
them costs a few looks a second, not one each."""
LEFTOVER_GRACE = 1.0
"""Seconds the processes ended runs left running get between SIGTERM and SIGKILL at stop."""


async def cancelled(task: asyncio.Future[Any] | None) -> None:
    """Cancel `task` (if any) and wait until it has ended."""
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


class RunProcesses:
    """The processes of one runtime's runs, and the keeper that ends them if it dies."""

    def __init__(self, *, clock: Clock, kill_grace: float) -> None:
        self._clock = clock
        self._kill_grace = kill_grace
        self._changed = asyncio.Event()
        """Set when a run with processes starts or ends: look for its processes now."""
        self.descendants = Descendants()
        """The processes of runs (recorded in the state directory once started)."""
        self.keeper: Keeper | None = None
        """Ends the runs' processes if this scheduler dies or its cluster claims lapse."""
        self._following: asyncio.Task[None] | None = None

    def begin(self, record: Path | None) -> None:
        """Follow the processes of runs from now on, recorded in `record` (None: not
        recorded); the looks start with `start_following`."""
        self._changed = asyncio.Event()
        self.descendants = Descendants(record, changed=self._changed.set)

    def start_following(self) -> None:
        """Look for the processes of runs in the background until `stop_leftovers`."""
        self._following = asyncio.get_running_loop().create_task(self._follow())

    async def start_keeper(
        self, log_path: Path, record: Path | None, journals: Path | None = None
    ) -> None:
        """Start the run keeper (the scheduler that runs the jobs: its runs end with it);
        `journals`, the fork servers' journals (their python runs end with it too)."""
        self.keeper = Keeper(log_path, grace=self._kill_grace, record=record, journals=journals)
        await self.keeper.start()

    async def stop_keeper(self) -> None:
        """Let the keeper go, once no run and nothing a run left is running."""
        if self.keeper is not None:
            await self.keeper.stop()

    async def stop_leftovers(self) -> None:
        """Stop what ended runs left running: SIGTERM, then SIGKILL after the kill grace."""
        await cancelled(self._following)
        self._following = None
        descendants = self.descendants
        await in_thread(Lane.PROCESSES, descendants.scan)
        stopped = await in_thread(Lane.PROCESSES, descendants.stop_all, signal.SIGTERM)
        if stopped:
            log.warning("stopping %s that ended runs left running",
                        counted(stopped, "process", "processes"))  # fmt: skip
            await self._clock.sleep(min(self._kill_grace, LEFTOVER_GRACE))
            await in_thread(Lane.PROCESSES, descendants.scan)
            await in_thread(Lane.PROCESSES, descendants.stop_all, signal.SIGKILL)
        await in_thread(Lane.PROCESSES, descendants.forget_record)

    async def _follow(self) -> None:
        """Look for the processes of runs once a second while there are some, and soon
        after a run starts or ends (on the runtime's clock). With none to follow, no
        timer is armed: the next run's start asks for a look."""
        changed = self._changed
        while True:
            if not self.descendants.watching:
                await changed.wait()
            else:
                asking = asyncio.ensure_future(changed.wait())
                try:
                    await self._clock.wait({asking}, FOLLOW_SECONDS - FOLLOW_GAP)
                finally:
                    await cancelled(asking)
            asked = changed.is_set()
            changed.clear()
            if asked or self.descendants.watching:
                try:
                    await in_thread(Lane.PROCESSES, self.descendants.scan)
                except Exception:  # the runs go on; only their leftovers may be missed
                    log.exception("looking for the processes of runs failed")
            await self._clock.sleep(FOLLOW_GAP)
