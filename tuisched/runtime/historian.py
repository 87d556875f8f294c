"""A runtime's history: opened with its journal, looked at for damage, pruned, and told
that the scheduler is alive.

The history itself is `AsyncHistory` (one writer thread); this is how one
runtime opens it, keeps it healthy and small while it runs, and closes it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from tuisched.domain.bus import EventBus
from tuisched.domain.errors import HistoryDamagedError, HistoryUnavailableError, StateError
from tuisched.domain.events import HistoryDamaged
from tuisched.domain.model import Config
from tuisched.domain.text import counted
from tuisched.runtime.clock import Clock
from tuisched.runtime.processes import cancelled
from tuisched.runtime.store import AsyncHistory
from tuisched.runtime.store.damage import keep_checking
from tuisched.runtime.store.history import open_history
from tuisched.runtime.store.journal import Journal, Kept
from tuisched.runtime.store.retention import PRUNE_BATCH, SharedPrune, keep_pruning
from tuisched.runtime.threads import Lane, in_thread

if TYPE_CHECKING:  # cluster mode only: it imports psycopg (the `postgres` extra)
    from tuisched.runtime.cluster.link import ClusterLink
    from tuisched.runtime.engine.waiting import WaitingRoom

log = logging.getLogger(__name__)

HISTORY_JOURNAL = "history.journal"
"""The history writes the database did not take yet, in the state directory (see journal)."""
WRITER_BUSY_MS = 100
"""How long the history's writer waits for another process's lock on a SQLite history
before it counts an outage: meanwhile the writes that come are not journaled, and the
runs that wait for them wait."""


class Historian:
    """The history of one runtime, from its opening to its closing."""

    def __init__(
        self, config: Callable[[], Config], *, bus: EventBus, clock: Clock, node: str
    ) -> None:
        self._config = config
        self._bus = bus
        self._clock = clock
        self._node = node
        self.history: AsyncHistory | None = None
        """The history writer, once `open` opened it (it stays after `close`, closed)."""
        self._file: Path | None = None
        """The history's SQLite file (None for PostgreSQL), once opened."""
        self._checking: asyncio.Task[None] | None = None
        """The look for damage in a SQLite history's file, every few minutes."""
        self._heartbeat: asyncio.Task[None] | None = None
        self._pruning: asyncio.Task[None] | None = None
        """History retention's background pass (when `settings.history_retention` is set)."""

    async def open(self, *, password: str | None, journaled: bool) -> AsyncHistory:
        """Open the history off the loop (a SQLite file's damage check, or a silent
        PostgreSQL, takes seconds), with the state directory's journal if `journaled`."""
        config = self._config()
        store = await in_thread(
            Lane.FILES, lambda: open_history(config, password=password, busy_ms=WRITER_BUSY_MS)
        )
        self._file = store.sqlite_path
        database = str(store.sqlite_path or "history")
        store.on_damage = lambda damage: self._damaged(database, damage)
        journal: Journal | None = None
        kept: list[Kept] = []
        if journaled:
            path = config.settings.state_dir / HISTORY_JOURNAL
            try:
                journal, kept = await in_thread(Lane.FILES, Journal.open, path)
            except (OSError, StateError) as error:  # runs go on; an outage keeps writes in memory
                log.error("history: cannot use the journal %s: %s", path, error)  # noqa: TRY400
        if kept:
            log.warning("history: the journal kept %s since the last run: they land first",
                        counted(len(kept), "write"))  # fmt: skip
        self.history = AsyncHistory(store, journal=journal, kept=kept, clock=self._clock)
        self.history.start()
        return self.history

    async def close(self) -> None:
        """Commit what is pending and close the history."""
        if self.history is not None:
            await self.history.close()

    def start_checks(self) -> None:
        """Look at a SQLite history's file for damage every few minutes (issue 26)."""
        if self._file is not None and self.history is not None:
            self._checking = asyncio.get_running_loop().create_task(
                keep_checking(self.history, self._file, self._clock)
            )

    async def stop_checks(self) -> None:
        """No more looks for damage."""
        await cancelled(self._checking)
        self._checking = None

    async def mark_alive(self) -> None:
        """Note in the history that this scheduler is alive now (a heartbeat).

        A history that takes no write now (its outage is reported by the
        writer) costs only this beat: the next start then counts missed slots
        from an earlier beat, which records more MISSED slots, never fewer.
        """
        if self.history is not None:
            node, at, pid = self._node, self._clock.now(), os.getpid()
            try:
                await self.history.call(lambda store: store.mark_alive(node, at, pid))
            except HistoryUnavailableError as error:
                log.debug("heartbeat not noted: %s", error)

    def start_heartbeat(self, every: float, waiting: Callable[[], WaitingRoom | None]) -> None:
        """Mark this scheduler alive every `every` seconds, and let the `waiting` room (if
        any) look for successes recorded by other processes."""
        self._heartbeat = asyncio.get_running_loop().create_task(self._beat(every, waiting))

    async def stop_heartbeat(self) -> None:
        """No more beats; the last one says when firing stopped (the next start records
        later slots MISSED)."""
        await cancelled(self._heartbeat)
        self._heartbeat = None
        await self.mark_alive()

    def start_retention(self, cluster: ClusterLink | None) -> None:
        """Prune the history in the background, now and every hour (whatever the
        configuration says then: a reload may change or unset `history_retention`).

        Only once the configuration asks for it (at start, or the first reload that
        sets it): a scheduler that keeps everything arms no hourly timer for it. A
        reload that unsets it stops the pass (`stop_retention`); one that sets it again
        starts it again.
        """
        config = self._config()
        wanted = config.settings.history_retention
        if self._pruning is not None or wanted is None or self.history is None:
            return
        shared: SharedPrune | None = None
        if cluster is not None:  # the shared table too, one node at a time
            shared = functools.partial(cluster.store.prune, batch=PRUNE_BATCH)
        self._pruning = asyncio.get_running_loop().create_task(keep_pruning(
            self.history, lambda: self._config().settings.history_retention, self._clock,
            config.settings.state_dir / "output", shared=shared,
        ))  # fmt: skip

    async def stop_retention(self) -> None:
        """No more pruning (until `start_retention` again)."""
        await cancelled(self._pruning)
        self._pruning = None

    def _damaged(self, database: str, damage: HistoryDamagedError) -> None:
        """Damage found while running (on the writer's thread, once): one ERROR line, and
        the event that the console shows."""
        said = (f"{damage}. Meanwhile runs go on, and their records are kept in memory "
                "(not written to the damaged file)")  # fmt: skip
        log.error("history: %s", said)
        self._bus.publish(HistoryDamaged(at=self._clock.now(), database=database, error=said))

    async def _beat(self, every: float, waiting: Callable[[], WaitingRoom | None]) -> None:
        while True:
            await self._clock.sleep(every)
            try:
                await self.mark_alive()
                room = waiting()
                if room is not None:  # successes recorded by other processes
                    await room.recheck()
            except Exception:
                log.exception("could not record the heartbeat")
