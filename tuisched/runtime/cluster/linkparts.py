"""The two parts of a node's link that stand apart from its claim loop (see `link`).

`DatabaseAsks`: what the engine, backfill, the ledger and front ends ask of the
cluster's database (slots, requirements, history, nodes, pauses, stops, missed
rows), each call bounded by `CALL_SECONDS` on the injected clock.
`DatabaseConnection`: the database's state as this node sees it (connected,
reconnecting, read-only) and the way back to it.

`ClusterLink` is both; these classes hold no state of their own.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Protocol, TypeVar

from psycopg import errors as pg_errors

from tuisched.domain.errors import ClusterDatabaseError
from tuisched.domain.model import ClusterSettings
from tuisched.domain.runs import RunRecord
from tuisched.domain.views import HistoryQuery, NodeView
from tuisched.runtime.clock import Clock, within
from tuisched.runtime.cluster.database import ClusterDatabase
from tuisched.runtime.cluster.node import ClusterNode
from tuisched.runtime.cluster.rules import DB_STATES, DatabaseState, node_views, run_of_row
from tuisched.runtime.cluster.store import ClusterStore, NodeRow


class Need(Protocol):
    """A requirement of a waiting run (`engine.waiting.Requirement`)."""

    @property
    def job(self) -> str: ...
    @property
    def slot(self) -> datetime: ...
    @property
    def own(self) -> bool: ...


N = TypeVar("N", bound=Need)
T = TypeVar("T")

log = logging.getLogger("tuisched.runtime.cluster.link")

CALL_SECONDS = 5.0
"""How long one database call of the claim loop may take (a blackholed connection)."""


class DatabaseAsks:
    """The cluster database's answers, for whoever asks (`ClusterLink` is one)."""

    settings: ClusterSettings
    store: ClusterStore
    _db: ClusterDatabase
    _clock: Clock
    _state: DatabaseState
    _node: ClusterNode | None
    _name: str

    def _by(self) -> str:
        """Who writes: this node's id once it joined, else its name."""
        return (self._node.node_id if self._node is not None else "") or self._name

    async def slots_since(self, since: datetime) -> set[tuple[str, datetime]]:
        """The cluster's (job, slot) pairs since `since`, once the database answers."""
        while True:
            if self._state is DatabaseState.CONNECTED:
                try:
                    return await self._call(self.store.slots_since(since))
                except ClusterDatabaseError as error:
                    log.debug("cluster: missed slots not counted yet: %s", error)
            await self._clock.sleep(self.settings.poll.total_seconds())

    async def database_now(self) -> datetime:
        """The database's clock, once the database answers: the clock that judges slots in
        a cluster, whatever this node's own says."""
        while True:
            if self._state is DatabaseState.CONNECTED:
                try:
                    return await self._call(self._db.now())
                except ClusterDatabaseError as error:
                    log.debug("cluster: the database's clock not read yet: %s", error)
            await self._clock.sleep(self.settings.poll.total_seconds())

    async def set_paused(self, kind: str, name: str, *, paused: bool, jobs: list[str]) -> None:
        """Pause or resume for the whole cluster (a row first; the others read it).

        Raises:
            ClusterDatabaseError: the database did not take it.
        """
        await self._call(self.store.set_paused(kind, name, paused=paused, by=self._by(), jobs=jobs))

    async def unmet(self, needed: list[N]) -> list[N]:
        """Which of `needed` do not hold by the cluster's runs (all of them while the
        database does not answer: the next check tries again)."""
        try:
            succeeded, ended = await self._call(
                self.store.slots_done([(need.job, need.slot) for need in needed])
            )
        except ClusterDatabaseError as error:
            log.debug("cluster: requirements not checked: %s", error)
            return needed
        return [
            need for need in needed
            if (need.job, need.slot) not in succeeded
            and not (need.own and (need.job, need.slot) not in ended)  # R9: own slot not run
        ]  # fmt: skip

    async def history(self, query: HistoryQuery) -> tuple[RunRecord, ...]:
        """The cluster's runs that `query` asks for, newest first, whichever node ran them
        (ClusterDatabaseError when the database does not answer)."""
        states = [state for run_state in query.states for state in DB_STATES[run_state]]
        rows = await self._call(self.store.history(
            query.limit, query.job, offset=query.offset, states=states,
            triggers=[str(trigger) for trigger in query.triggers], since=query.since,
            until=query.until,
        ))  # fmt: skip
        return tuple(run_of_row(row) for row in reversed(rows))

    async def nodes(self) -> tuple[NodeView, ...]:
        """Every node the database knows (ClusterDatabaseError when it does not answer)."""
        return node_views(await self._call(self.store.nodes()))

    async def stop_run(self, run_id: str) -> str | None:
        """Stop a run that is not this node's (see `ClusterStore.stop`)."""
        return await self._call(self.store.stop(run_id, by=self._by()))

    async def _call(self, work: Awaitable[T]) -> T:
        try:
            return await within(self._clock, CALL_SECONDS, work)
        except TimeoutError:
            raise ClusterDatabaseError(
                f"the database at {self._db.shown} did not answer within {CALL_SECONDS:.0f} s"
            ) from None
        except ClusterDatabaseError:
            raise
        except Exception as error:
            raise ClusterDatabaseError(f"the database at {self._db.shown}: {error}") from None

    async def runs_of_slots(self, job: str, start: datetime, end: datetime) -> list[RunRecord]:
        """The cluster's runs of `job` with a slot in [start, end) that are due, running or
        successful (see `ClusterStore.runs_of_slots`).

        Raises:
            ClusterDatabaseError: the database did not answer.
        """
        rows = await self._call(self.store.runs_of_slots(job, start, end))
        return [run_of_row(row) for row in rows]

    async def decide_missed(
        self, decisions: Sequence[tuple[str, str]], *, fenced: bool = True
    ) -> bool:
        """Write decisions on the cluster's MISSED rows (see `ClusterStore.decide_missed`).

        Raises:
            ClusterDatabaseError: the database did not take it.
        """
        return await self._call(self.store.decide_missed(decisions, fenced=fenced))

    async def settle_missed(self, job: str, slots: Sequence[datetime], status: str) -> int:
        """Write `status` on the undecided MISSED rows of `job`'s `slots`.

        Raises:
            ClusterDatabaseError: the database did not take it.
        """
        return await self._call(self.store.settle_missed(job, slots, status))


class DatabaseConnection:
    """The database's state as this node sees it, and the way back to it."""

    elsewhere: tuple[RunRecord, ...]
    _db: ClusterDatabase
    _clock: Clock
    _state: DatabaseState
    _since: datetime
    _trouble: str | None
    _nodes: list[NodeRow]
    _now: Callable[[], datetime]

    async def _reconnect(self) -> bool:
        try:
            read_only = await within(self._clock, CALL_SECONDS * 3, self._open_again())
        except Exception as error:
            self._trouble = str(error).strip().splitlines()[0] if str(error).strip() else (
                type(error).__name__)  # fmt: skip
            return False
        if read_only:
            self._read_only()
            return False
        log.info("cluster: the database at %s answers again", self._db.shown)
        self._connected()
        return True

    async def _open_again(self) -> bool:
        """Open the database (new sessions, if it was read-only); whether it still is."""
        if not self._db.is_open:
            await self._db.open()
        elif self._state is DatabaseState.READ_ONLY:
            await self._db.recycle()  # sessions begun read-only stay so: new ones
        return await self._db.read_only()

    def _connected(self) -> None:
        self._state, self._since, self._trouble = DatabaseState.CONNECTED, self._now(), None

    def _read_only(self) -> None:
        if self._state is not DatabaseState.READ_ONLY:
            log.warning("cluster: the database at %s takes no writes (read-only): this node "
                        "starts nothing new until it does", self._db.shown)  # fmt: skip
            self._state, self._since = DatabaseState.READ_ONLY, self._now()
        self._trouble = "the database is read-only"

    def _lost(self, error: BaseException) -> None:
        if isinstance(error, pg_errors.ReadOnlySqlTransaction):
            self._read_only()
            return
        said = str(error).strip().splitlines()[0] if str(error).strip() else "no answer"
        self.elsewhere = ()  # not known while the database does not answer
        if self._state is DatabaseState.CONNECTED:
            log.warning("cluster: the database at %s failed (%s): reconnecting",
                        self._db.shown, said)  # fmt: skip
            self._state, self._since = DatabaseState.RECONNECTING, self._now()
        self._trouble = said

    def health(self) -> tuple[DatabaseState, tuple[str, ...]]:
        """This node's database state and each known node's state (alive, dead, left) as of
        the last pass. Safe from any thread: it reads two attributes the loop replaces."""
        return self._state, tuple(row.state for row in self._nodes)
