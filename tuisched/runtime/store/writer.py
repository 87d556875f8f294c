"""The history behind one writer thread, batched, for the asyncio engine."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from tuisched.domain.errors import (
    DuplicateRunError,
    HistoryDamagedError,
    HistoryError,
    HistoryUnavailableError,
    UnknownRunError,
)
from tuisched.domain.runs import RunRecord
from tuisched.domain.text import counted
from tuisched.runtime.clock import Clock, SystemClock
from tuisched.runtime.store.database import (
    HistoryStore,
)
from tuisched.runtime.store.journal import Journal, Kept
from tuisched.runtime.store.schema import (
    T,
    log,
)
from tuisched.runtime.store.slots import latest_slots

# --- the writer thread ------------------------------------------------------------------

OUTAGE_PAUSES = (0.1, 0.5, 1.0, 2.0, 5.0)
"""Pauses between tries of held writes during an outage; the last one repeats."""
CLOSE_TRIES_SECONDS = 1.0
"""How long closing goes on trying held writes before reporting them lost."""


class _Outage:
    """An episode of the database not taking writes: when it began, when to try next.

    Timed on the clock's monotonic reading (safe from the writer's thread).
    """

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._since = clock.monotonic()
        self._tries = 0
        self._next = self._since

    def failed(self) -> None:
        pause = OUTAGE_PAUSES[min(self._tries, len(OUTAGE_PAUSES) - 1)]
        self._tries += 1
        self._next = self._clock.monotonic() + pause

    def pause_left(self) -> float:
        return max(0.0, self._next - self._clock.monotonic())

    def lasted(self) -> float:
        return self._clock.monotonic() - self._since


@dataclass(slots=True)
class _Write:
    kind: Literal["insert", "update"]
    run: RunRecord
    future: asyncio.Future[Any] | None
    """None for a fire-and-forget update."""
    ticket: int = 0


@dataclass(slots=True)
class _Call:
    fn: Callable[[HistoryStore], Any]
    future: asyncio.Future[Any]


@dataclass(slots=True)
class _Stop:
    future: asyncio.Future[Any]


_Op = _Write | _Call | _Stop
_Settlement = tuple[asyncio.Future[Any], Any, BaseException | None]


def _nothing(_store: HistoryStore) -> None:
    """A query that does nothing: awaiting it waits for everything queued before."""


def _coalesce(writes: Sequence[_Write]) -> tuple[list[RunRecord], list[RunRecord]] | None:
    """The inserts and updates that leave the rows as `writes` in order would.

    Updates replace whole rows, so only the last state of each run matters, and
    a run inserted in the same batch is inserted in its last state. None when
    the batch inserts a run twice (or after updating it): that must fail, in order.
    """
    inserts: dict[str, RunRecord] = {}
    updates: dict[str, RunRecord] = {}
    for write in writes:
        run_id = write.run.run_id
        if write.kind == "update":
            target = inserts if run_id in inserts else updates
            target[run_id] = write.run
        elif run_id in inserts or run_id in updates:
            return None
        else:
            inserts[run_id] = write.run
    return list(inserts.values()), list(updates.values())


def _resolve(settlements: list[_Settlement]) -> None:
    """Settle futures on their loop; a future whose waiter was cancelled is skipped."""
    for future, value, error in settlements:
        if future.done():
            continue
        if error is None:
            future.set_result(value)
        else:
            future.set_exception(error)


def _settle(settlements: list[_Settlement]) -> None:
    """Hand the settlements to each future's loop, once per loop."""
    by_loop: dict[asyncio.AbstractEventLoop, list[_Settlement]] = {}
    for settlement in settlements:
        by_loop.setdefault(settlement[0].get_loop(), []).append(settlement)
    for loop, batch in by_loop.items():
        try:
            loop.call_soon_threadsafe(_resolve, batch)
        except RuntimeError:  # the loop is closed: nobody waits for these any more
            log.debug("history: %s dropped, their loop is closed", counted(len(batch), "result"))


class _Lander:
    """The writer thread's side of the history: it lands the writes of each batch (in
    one transaction when it can), holds them through an outage and journals them, runs
    the calls and closes the store; and it tells how far the writes have got (that part
    is safe from any thread). See `AsyncHistory`.
    """

    def __init__(
        self, store: HistoryStore, *, journal: Journal | None, kept: Sequence[Kept], clock: Clock
    ) -> None:
        self._store = store
        self._clock = clock
        self._done = 0
        """Tickets up to this one have been processed (written, or failed and logged)."""
        self._landed = threading.Condition(threading.Lock())
        """Notified each time `_done` or `_rows` moves on (what `wait_landed` waits for)."""
        self._rows = 0
        """The rows of the writes with tickets up to this one exist (the new rows of a batch
        land before the rest of it: see `_commit`)."""
        self._held: list[_Write] = [_Write(k.kind, k.run, None) for k in kept]
        """Writes the database did not take yet, in order (writer thread only)."""
        self._journal = journal
        self._journaled = 0
        """The writes with tickets up to this one are in the journal (or landed)."""
        self._undurable = False
        """The journal refuses writes too (or there is none): held writes are only in memory."""
        self._awaiting: list[tuple[int, asyncio.Future[None]]] = []
        """Tasks awaiting `until_landed` (guarded by `_landed`)."""
        self.left_unwritten = 0
        """Writes that had not landed when the history closed (kept in the journal, or lost)."""
        self._outage: _Outage | None = None

    @property
    def unwritten(self) -> int:
        """Writes kept in memory because the database does not take them now."""
        return len(self._held)

    @property
    def in_outage(self) -> bool:
        """Whether the database refuses writes now (it reads one attribute the writer
        replaces)."""
        return self._outage is not None

    @property
    def journaled(self) -> bool:
        """Whether writes go to a journal first."""
        return self._journal is not None

    @property
    def undurable(self) -> bool:
        """Whether writes held now are kept only in memory (see `AsyncHistory.undurable`)."""
        return self._outage is not None and (self._journal is None or self._undurable)

    def committed(self, ticket: int) -> bool:
        """See `AsyncHistory.committed`."""
        return self._done >= ticket

    def landed(self, ticket: int) -> bool:
        """See `AsyncHistory.landed`."""
        return self._done >= ticket or self._rows >= ticket or self._journaled >= ticket

    def wait_landed(self, ticket: int, timeout: float) -> bool:
        """See `AsyncHistory.wait_landed`."""
        if self.landed(ticket):
            return True
        with self._landed:
            self._landed.wait_for(lambda: self.landed(ticket) or self.undurable, timeout)
        return self.landed(ticket)

    def tell_when_landed(self, ticket: int, future: asyncio.Future[None]) -> bool:
        """Settle `future` once `landed(ticket)` or `undurable`; False when that is so
        already (and `future` is left alone)."""
        with self._landed:
            if self.landed(ticket) or self.undurable:
                return False
            self._awaiting.append((ticket, future))
        return True

    def pause_left(self) -> float | None:
        """Seconds until the held writes are tried again (None: no outage)."""
        return None if self._outage is None else self._outage.pause_left()

    def serve(self, take: Callable[[Callable[[], float | None]], tuple[list[_Op], int]]) -> None:
        """The writer thread: `take` every pending operation, process them, until stopped.

        With writes held, it takes (an empty batch, maybe) when the next try is due.
        """
        while True:
            batch, through = take(self.pause_left)
            stopped = self._process(batch, through - len(batch))
            self._mark_done(through)
            if stopped:
                return

    def held_runs(self) -> dict[str, RunRecord]:
        """Each run of the held writes, in its latest state (writer thread only)."""
        return {write.run.run_id: write.run for write in self._held}

    def _rows_landed(self, through: int) -> None:
        """The rows of the writes up to `through` exist (their latest states may not have
        landed yet): what `landed` tells."""
        with self._landed:
            self._rows = max(self._rows, through)
            self._tell_landed()

    def _mark_done(self, through: int) -> None:
        """Tickets up to `through` are processed: done, up to the first write held."""
        with self._landed:  # an int store is atomic: `committed` reads it without the lock
            self._done = self._held[0].ticket - 1 if self._held else through
            self._tell_landed()

    def _tell_landed(self) -> None:
        """Wake what waits for writes that landed (all of it once writes cannot be kept
        on disk). `_landed` is held."""
        self._landed.notify_all()
        if not self._awaiting:
            return
        waiting: list[tuple[int, asyncio.Future[None]]] = []
        woken: list[_Settlement] = []
        for ticket, future in self._awaiting:
            if self.landed(ticket) or self.undurable:
                woken.append((future, None, None))
            elif not future.done():  # (one whose waiter gave up is dropped)
                waiting.append((ticket, future))
        self._awaiting = waiting
        if woken:
            _settle(woken)

    def _process(self, batch: list[_Op], before: int) -> bool:
        """Run one batch in order (its tickets follow `before`); True once the store is
        closed."""
        settlements: list[_Settlement] = []
        writes: list[_Write] = []
        stopped = False
        for index, op in enumerate(batch):
            if isinstance(op, _Write):
                writes.append(op)
                continue
            self._commit(writes, settlements)
            writes = []
            # Told now, not after the call: a prune batch may take a while.
            self._mark_done(before + index)
            if settlements:
                _settle(settlements)
                settlements = []
            if isinstance(op, _Call):
                if not self._held and self._journal is not None and not self._journal.empty:
                    self._clear_journal()  # a call may write too: the journal must not undo it
                settlements.append(self._run_call(op))
            else:
                self._last_tries(settlements)
                settlements.append(self._close_store(op))
                stopped = True
        self._commit(writes, settlements)
        _settle(settlements)
        return stopped

    def _commit(self, writes: list[_Write], settlements: list[_Settlement]) -> None:
        """Commit the held writes and `writes`, in one transaction if it can be; the
        ones the database does not take go to the journal. The journal is emptied
        once nothing is held.

        During an outage, writes only join the held ones until the next try is due.
        """
        self._held.extend(writes)
        if self._journal is not None and writes:
            self._journal_held()
        if self._held and (self._outage is None or self._outage.pause_left() <= 0):
            self._land_held(settlements)
        if self._held and self._outage is not None:
            self._settle_journaled(settlements)
        elif not self._held and self._journal is not None and self._journal.half_full:
            self._clear_journal()

    def _land_held(self, settlements: list[_Settlement]) -> None:
        """Try to land the held writes (an outage that goes on keeps them held)."""
        merged = _coalesce(self._held)
        if merged is not None:
            inserts, updates = merged
            try:
                # Every write lands its run's latest state, as `_upsert` does one at a time.
                if inserts and updates:  # first the new rows: runs wait for them to start
                    self._store.land(inserts)
                    self._rows_landed(self._held[-1].ticket)
                self._store.land(updates if inserts and updates else [*inserts, *updates])
            except HistoryUnavailableError as error:
                self._outage_goes_on(error)
                return
            except Exception:
                log.debug("history: a batch failed, retrying its writes one by one", exc_info=True)
            else:
                settlements.extend((w.future, None, None) for w in self._held if w.future)
                self._held = []
                self._outage_over()
                return
        self._commit_each(settlements)

    def _commit_each(self, settlements: list[_Settlement]) -> None:
        """Commit the held writes one at a time: a bad one fails alone, an outage stops."""
        while self._held:
            write = self._held[0]
            try:
                self._upsert(write)
            except HistoryUnavailableError as error:
                self._outage_goes_on(error)
                return
            except Exception as error:
                log.error("history: could not %s run %s of job %r: %s",
                          write.kind, write.run.run_id, write.run.job, error)  # fmt: skip
                if write.future is not None:
                    settlements.append((write.future, None, error))
            else:
                if write.future is not None:
                    settlements.append((write.future, None, None))
            self._held.pop(0)
        self._outage_over()

    def _outage_goes_on(self, error: HistoryUnavailableError) -> None:
        if self._outage is None:
            self._outage = _Outage(self._clock)
            with self._landed:
                self._tell_landed()  # with no journal, what waits for a row waits no more
            kept = "in memory and in the journal" if self._journal is not None else "in memory"
            if isinstance(error, HistoryDamagedError):  # said in its own ERROR line already
                log.warning("history: keeping %s %s until the history is repaired",
                            counted(len(self._held), "write"), kept)  # fmt: skip
            else:
                log.warning(
                    "history: cannot write (%s); keeping %s %s, tried again until it "
                    "works (warning once until then)", error, counted(len(self._held), "write"),
                    kept,
                )  # fmt: skip
        self._outage.failed()

    def _journal_held(self) -> None:
        """Append the held writes the journal lacks to it: once they are on disk, the
        runs waiting for them may start."""
        fresh = [w for w in self._held if w.ticket > self._journaled]
        if self._journal is None or not fresh:
            return
        try:
            self._journal.append([Kept(w.kind, w.run) for w in fresh])
        except OSError as error:
            if not self._undurable:
                log.error(
                    "history: the journal %s takes no writes either (%s): %s held only in "
                    "memory until the history takes them (error once until then)",
                    self._journal.path, error.strerror or error, counted(len(self._held), "write"),
                )  # fmt: skip
            self._undurable = True
            with self._landed:
                self._tell_landed()  # what waits for a row stops waiting
            return
        if self._undurable:
            log.warning("history: the journal %s takes writes again", self._journal.path)
            self._undurable = False
        with self._landed:
            self._journaled = max(self._journaled, fresh[-1].ticket)
            self._tell_landed()

    def _settle_journaled(self, settlements: list[_Settlement]) -> None:
        """During an outage, a write waited for is done once the journal has it."""
        for write in self._held:
            if write.future is not None and write.ticket <= self._journaled:
                settlements.append((write.future, None, None))
                write.future = None

    def _clear_journal(self) -> None:
        """Every write journaled has landed: empty the journal (a journal that cannot be
        emptied is closed and removed, so that its writes never land twice)."""
        assert self._journal is not None  # noqa: S101  (the caller checked)
        try:
            self._journal.clear()
        except OSError as error:
            log.error("history: cannot empty the journal %s (%s); it is removed",
                      self._journal.path, error.strerror or error)  # fmt: skip
            self._journal.close()
            try:
                self._journal.path.unlink()
            except OSError:
                log.exception("history: cannot remove the journal %s", self._journal.path)
            self._journal = None
        self._undurable = False

    def _outage_over(self) -> None:
        if self._outage is not None:
            log.warning("history: writing works again after %.0f s; every write kept has landed",
                        self._outage.lasted())  # fmt: skip
            self._outage = None

    def _last_tries(self, settlements: list[_Settlement]) -> None:
        """Before closing: try the held writes for a last moment, then report what is lost.

        The first try is at once; the last is at the end of the moment, whatever the
        outage's pause. The moment is `CLOSE_TRIES_SECONDS` on the clock, and the pauses
        slept between the tries (on this thread, the writer's own) add up to no more than
        that either: a clock that stands still (a test's) does not keep the close waiting.
        """
        clock = self._clock
        ends = clock.monotonic() + CLOSE_TRIES_SECONDS
        slept = 0.0
        # Tried at once, whatever the outage's pause: the database may be back by now
        # (a lock let go), and a pause longer than the moment must not leave it untried.
        while self._held and self._outage is not None:
            self._land_held(settlements)
            left = min(ends - clock.monotonic(), CLOSE_TRIES_SECONDS - slept)
            if not self._held or self._outage is None or left <= 0:
                break
            pause = min(self._outage.pause_left(), left)
            time.sleep(pause)
            slept += pause or CLOSE_TRIES_SECONDS / 100  # tries with no pause count too
        self.left_unwritten = len(self._held)
        if not self._held:
            return
        lost = HistoryUnavailableError("the history did not take this write before shutdown")
        if self._journal is not None and self._held[-1].ticket <= self._journaled:
            log.error("history: %s did not reach the history before shutdown; the "
                      "journal %s keeps them, and they land at the next start",
                      counted(len(self._held), "write"), self._journal.path)  # fmt: skip
        else:
            log.error("history: %s not written before shutdown, lost: %s",
                      counted(len(self._held), "write"),
                      ", ".join(f"{w.run.job}#{w.run.run_id} {w.run.state.value}"
                                for w in self._held[-20:]))  # fmt: skip
        settlements.extend((w.future, None, lost) for w in self._held if w.future is not None)
        self._held = []

    def _upsert(self, write: _Write) -> None:
        """Insert or update, whichever the row needs: the run's latest state must land."""
        if write.kind == "insert":
            try:
                self._store.insert(write.run)
            except DuplicateRunError:
                self._store.update(write.run)
        else:
            try:
                self._store.update(write.run)
            except UnknownRunError:
                self._store.insert(write.run)

    def _run_call(self, call: _Call) -> _Settlement:
        try:
            return call.future, call.fn(self._store), None
        except Exception as error:
            return call.future, None, error

    def _close_store(self, stop: _Stop) -> _Settlement:
        if self._journal is not None:
            if not self.left_unwritten and not self._journal.empty:
                self._clear_journal()  # a clean stop leaves nothing to land again
            if self._journal is not None:
                self._journal.close()
        try:
            self._store.close()
        except Exception as error:
            log.exception("history: closing the store failed")
            return stop.future, None, error
        return stop.future, None, None


class AsyncHistory:
    """A `HistoryStore` behind one writer thread, for the asyncio engine.

    Operations are queued in call order; the thread takes every pending one at
    once, commits the writes in one transaction and then settles the futures
    on their loop (those committed before a call before the call runs: a run
    waiting for its row never waits for a slow call queued after it). A write
    that fails is logged and fails its own future (the batch is retried one
    write at a time to find it); the thread carries on.
    Cancelling a task that awaits a write does not cancel the write.

    When the database cannot take writes for a passing reason (another
    process holds its lock, the disk is full, the server is gone), the
    writes are kept in memory, in order, and tried again with a growing
    pause (`OUTAGE_PAUSES`); one warning opens the episode and one line ends
    it. Queries go on meanwhile (they see the history without the writes
    kept), and nothing waiting on the history blocks the scheduler for long.

    With a `journal`, each write is appended to it and flushed to the disk
    before it is tried in the database; a run's start waits for its row to be
    in one of them (a kill -9 loses neither), and during an outage a write
    that is waited for is done once the journal has it. The writes a journal
    kept from before (`kept`) land before anything else. The journal is emptied
    once every write in it has landed and a call comes (a call may write
    rows too, which a later replay of older writes must not undo), or it is
    half full.
    """

    def __init__(
        self,
        store: HistoryStore,
        *,
        journal: Journal | None = None,
        kept: Sequence[Kept] = (),
        clock: Clock | None = None,
    ) -> None:
        """Wrap `store`; from now on only the writer thread may use it (and `journal`).
        `clock` times the outage pauses and the last tries at close."""
        self._lander = _Lander(store, journal=journal, kept=kept, clock=clock or SystemClock())
        self._pending: deque[_Op] = deque()
        self._tickets = 0
        """Operations ever enqueued (the ticket of the newest)."""
        self._ready = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closing: asyncio.Future[Any] | None = None
        self._wake_on: asyncio.AbstractEventLoop | None = None
        """The loop at the end of whose turn a wake-up of the writer is due."""
        self._released = 0
        """Operations at the head of `_pending` the writer may take: those of ended
        turns of the loop, and everything up to the newest one that is waited for."""

    @property
    def unwritten(self) -> int:
        """Writes kept in memory because the database does not take them now."""
        return self._lander.unwritten

    @property
    def in_outage(self) -> bool:
        """Whether the database refuses writes now (they are kept and tried again). Safe
        from any thread: it reads one attribute the writer replaces."""
        return self._lander.in_outage

    @property
    def journaled(self) -> bool:
        """Whether writes go to a journal first (see `Journal`)."""
        return self._lander.journaled

    @property
    def undurable(self) -> bool:
        """Whether writes held now are kept only in memory: the database refuses them
        and no journal takes them. A run does not wait for its row then."""
        return self._lander.undurable

    @property
    def left_unwritten(self) -> int:
        """Writes that had not landed when the history closed (kept in the journal, or lost)."""
        return self._lander.left_unwritten

    def start(self) -> None:
        """Start the writer thread. Idempotent; operations queued before wait for it."""
        with self._ready:
            if self._thread is not None:
                return
            self._thread = threading.Thread(
                target=self._lander.serve,
                args=(self._take,),
                name="tuisched-history",
                daemon=True,
            )
        self._thread.start()

    async def insert(self, run: RunRecord) -> None:
        """Add `run`; returns once committed (so its row exists before its process starts).

        Raises:
            HistoryError: the history is closed.
            HistoryError: the database refused or failed the write.
        """
        await self._write("insert", run)

    async def update(self, run: RunRecord) -> None:
        """Replace the row of `run`; returns once committed.

        Raises:
            UnknownRunError: no such run.
            HistoryError: the history is closed.
        """
        await self._write("update", run)

    def insert_soon(self, run: RunRecord) -> int:
        """Add `run` without waiting; ordered with every other operation.

        Safe from any thread. A failure is only logged. Returns a ticket:
        `committed(ticket)` tells when the row is in the database; await
        `flush()` (or `update` of the same run) before anything depends on it.

        Raises:
            HistoryError: the history is closed.
        """
        return self._enqueue(_Write("insert", run, None), soon=True)

    def committed(self, ticket: int) -> bool:
        """True once the operation that returned `ticket` has been written."""
        return self._lander.committed(ticket)

    def landed(self, ticket: int) -> bool:
        """True once the run that `insert_soon` or `update_soon` returned `ticket` for has its
        row in the database (the insert committed, or the row it updates there, in a
        state that may be older) or, while the database takes no writes, in the journal.
        What a run's start waits for: a slot the history holds never runs again."""
        return self._lander.landed(ticket)

    def wait_landed(self, ticket: int, timeout: float) -> bool:
        """Block until `landed(ticket)`, for `timeout` seconds at most (not at all while
        held writes cannot be kept on disk); whether it landed. For threads other than
        the loop's (a job thread starting the next run itself)."""
        return self._lander.wait_landed(ticket, timeout)

    async def until_landed(self, ticket: int) -> None:
        """Return once `landed(ticket)`, or once held writes cannot be kept on disk (see
        `undurable`): what a run's start waits for on the loop. Bound it with a timeout."""
        if self.landed(ticket):
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self._lander.tell_when_landed(ticket, future):
            await future

    def write_soon(self, inserts: Sequence[RunRecord], updates: Sequence[RunRecord]) -> int:
        """Add `inserts` and replace the rows of `updates`, in that order, without waiting:
        `insert_soon` and `update_soon` for many runs at one cost. Returns the ticket of
        the last write (see `insert_soon`); the writes before it have the tickets before.

        Raises:
            HistoryError: the history is closed.
        """
        ops = [_Write("insert", run, None) for run in inserts]
        ops += [_Write("update", run, None) for run in updates]
        return self._enqueue_many(ops)

    def update_soon(self, run: RunRecord) -> int:
        """Replace the row of `run` without waiting; ordered with every other operation.

        Safe from any thread. A failure is only logged. Returns a ticket (see
        `insert_soon`).

        Raises:
            HistoryError: the history is closed.
        """
        return self._enqueue(_Write("update", run, None), soon=True)

    async def call(self, fn: Callable[[HistoryStore], T]) -> T:
        """The result of `fn(store)`, run on the writer thread after every pending write.

        Raises:
            HistoryError: the history is closed.
            Exception: whatever `fn` raised.
        """
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._enqueue(_Call(fn, future))
        return await future

    async def slots_since(self, since: datetime) -> set[tuple[str, datetime]]:
        """`HistoryStore.slots_since`, with the slots of the writes held (not landed yet,
        kept in the journal): at start, a slot that ran is taken, whatever the database
        took."""

        def read(store: HistoryStore) -> set[tuple[str, datetime]]:
            found = store.slots_since(since)
            held = self._lander.held_runs().values()
            found.update((run.job, run.slot.astimezone(UTC)) for run in held
                         if run.slot is not None and run.slot >= since)  # fmt: skip
            return found

        return await self.call(read)

    async def latest_slots(self) -> dict[str, datetime]:
        """`HistoryStore.latest_slots`, with the slots of the writes held."""

        def read(store: HistoryStore) -> dict[str, datetime]:
            found = latest_slots(store)
            for run in self._lander.held_runs().values():
                if run.slot is not None:
                    slot = run.slot.astimezone(UTC)
                    found[run.job] = max(found.get(run.job, slot), slot)
            return found

        return await self.call(read)

    async def held_runs(self) -> list[RunRecord]:
        """The runs whose writes are held (not landed yet), each in its latest state."""
        return await self.call(lambda _store: list(self._lander.held_runs().values()))

    async def flush(self) -> None:
        """Return once everything queued before is committed (or has failed)."""
        await self.call(_nothing)

    async def close(self) -> None:
        """Commit everything pending, close the store and end the thread. Idempotent.

        Starts the thread first if it never was, so nothing queued is lost.
        """
        if self._closing is None:
            self._closing = asyncio.get_running_loop().create_future()
            self._enqueue(_Stop(self._closing))
            self.start()
        await asyncio.shield(self._closing)
        if self._thread is not None:
            self._thread.join()  # it settled our future as its last act: this is immediate

    async def _write(self, kind: Literal["insert", "update"], run: RunRecord) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._enqueue(_Write(kind, run, future))
        await future

    def _enqueue_many(self, ops: list[_Write]) -> int:
        """Queue fire-and-forget writes, as `_enqueue(op, soon=True)` each would."""
        with self._ready:
            if self._closing is not None:
                raise HistoryError("the run history is closed")
            for op in ops:
                self._tickets += 1
                op.ticket = self._tickets
            self._pending.extend(ops)
            if ops and (self._wake_on is None or self._wake_on.is_closed()):
                self._wake_at_turn_end()
            return self._tickets

    def _enqueue(self, op: _Op, *, soon: bool = False) -> int:
        """Queue `op`. With `soon`, on an event loop, the writer is woken once at the
        end of the loop's turn for everything queued in it: one transaction per turn,
        not one wake-up (and a fight for the GIL) per write."""
        with self._ready:
            if self._closing is not None and not isinstance(op, _Stop):
                raise HistoryError("the run history is closed")
            self._pending.append(op)
            self._tickets += 1
            if isinstance(op, _Write):
                op.ticket = self._tickets
            if not soon:
                self._release()
            elif self._wake_on is None or self._wake_on.is_closed():
                self._wake_at_turn_end()
            return self._tickets

    def _release(self) -> None:
        """Let the writer take everything queued so far (the lock is held)."""
        self._released = len(self._pending)
        self._ready.notify()

    def _wake_at_turn_end(self) -> None:
        """Wake the writer when the running loop's turn ends (at once without a loop)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # another thread: nothing to batch with
            self._release()
            return
        self._wake_on = loop
        loop.call_soon(self._wake)

    def _wake(self) -> None:
        with self._ready:
            self._wake_on = None
            self._release()

    def _take(self, pause: Callable[[], float | None]) -> tuple[list[_Op], int]:
        """For the writer thread: wait until operations are released, or the `pause` of
        an outage (None: none) is over, and take them; with the newest ticket taken."""
        with self._ready:
            while not self._released:
                wait = pause()
                if wait is None:
                    self._ready.wait()
                elif not self._ready.wait(wait):
                    break  # time to try the held writes again
            batch = [self._pending.popleft() for _ in range(self._released)]
            self._released = 0
            return batch, self._tickets - len(self._pending)
