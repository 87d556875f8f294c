"""Pauses (SPEC R10): a job, a group or everything, kept in the history across restarts.

A paused job fires no slots (no runs); a resumed one goes on from its next
slot after now, and the slots that passed while it was paused are handed to
`resumed` (the engine records them MISSED for the downtime ledger, R25).
Runs in progress are untouched, and a run started by hand still runs.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from datetime import datetime, timedelta

from tuisched.domain.errors import JobActionError
from tuisched.domain.events import PauseChanged
from tuisched.domain.model import Config, Job
from tuisched.domain.reasons import PauseNote
from tuisched.runtime.clock import Clock
from tuisched.runtime.engine.outcomes import Outcomes
from tuisched.runtime.store import AsyncHistory

Pause = tuple[str, str]
"""A pause as stored: ("job", name), ("group", name) or ("all", "")."""


_AT_ONCE = timedelta(0)


def is_paused(job: Job, pauses: Collection[Pause]) -> bool:
    """Whether `pauses` hold `job`: itself, one of its groups, or all."""
    if not pauses:
        return False
    if ("all", "") in pauses or ("job", job.name) in pauses:
        return True
    return any(("group", group) in pauses for group in job.groups)


class Pauses:
    """The pauses in force; changes are stored first, then applied to the firing of slots."""

    def __init__(
        self,
        *,
        history: AsyncHistory,
        outcomes: Outcomes,
        clock: Clock,
        config: Callable[[], Config],
        changed: Callable[[Job, bool], None],
        resumed: Callable[[Job, datetime, datetime], None] | None = None,
    ) -> None:
        """`changed(job, paused)` is called for every job a change pauses or resumes;
        `resumed(job, since, now)` for every job resumed, with when its pause began."""
        self._history = history
        self._outcomes = outcomes
        self._clock = clock
        self._config = config
        self._changed = changed
        self._resumed = resumed
        self._pauses: set[Pause] = set()
        self._held_since: dict[str, datetime] = {}
        """When each paused job was paused (at start, for pauses an earlier run left:
        the slots before were missed while down, and recorded so)."""
        self.notes: dict[Pause, PauseNote] = {}
        """Who set each pause in force and when (pauses set since this scheduler started;
        the time only for those read back from the history)."""
        self.making: set[Pause] = set()
        """Pauses this node is setting or lifting itself, written to the cluster and not
        yet applied here: the cluster's view of them is this node's own change, not news
        from another node (whose late resume would leave its last slots to that node)."""

    async def load(self) -> None:
        """Read the pauses a previous run of the scheduler left."""
        self._pauses = await self._history.call(lambda store: store.pauses())
        now = self._clock.now()
        jobs = self._config().jobs.values()
        self._held_since = {job.name: now for job in jobs if self.holds(job)}
        self.notes = {}

    @property
    def in_force(self) -> frozenset[Pause]:
        """Every pause in force, as (kind, name)."""
        return frozenset(self._pauses)

    def holds(self, job: Job) -> bool:
        """Whether `job` is paused: itself, through one of its groups, or everything."""
        return is_paused(job, self._pauses)

    async def set(
        self, kind: str, name: str, *, paused: bool, actor: str = "",
        heard_after: timedelta = _AT_ONCE,
    ) -> None:  # fmt: skip
        """Pause or resume a job, a group (`kind` "group") or everything (`kind` "all").

        `heard_after`: how late this node may learn of it (a resume made on another node
        of a cluster): the slots of that last stretch are not taken as missed, since the
        node that resumed may have fired them.

        Raises:
            UnknownJobError: no such job.
            JobActionError: no such group, or the resume would not lift a wider pause.
        """
        name = self.check(kind, name, paused=paused)
        at = self._clock.now()
        await self._history.call(lambda store: store.set_pause(kind, name, paused=paused, at=at))
        # Firing changes now, not when the history was asked: the slots that came while it
        # wrote (seconds, on a busy machine) are the pause's, not lost between the two.
        changed = self._clock.now()
        jobs = self._config().jobs.values()
        before = {job.name for job in jobs if self.holds(job)}
        (self._pauses.add if paused else self._pauses.discard)((kind, name))
        if paused:
            self.notes[kind, name] = PauseNote(at=at, actor=actor)
        else:
            self.notes.pop((kind, name), None)
        for job in jobs:
            now_paused = self.holds(job)
            if now_paused != (job.name in before):
                self._changed(job, now_paused)
                self._note(job, paused=now_paused, at=changed,
                           missed_until=changed - heard_after)  # fmt: skip
        self._outcomes.publish(PauseChanged(at=at, kind=kind, name=name, paused=paused))

    def check(self, kind: str, name: str, *, paused: bool) -> str:
        """The pause's name as stored, once it is known to make sense."""
        config = self._config()
        if kind == "job":
            config.job(name)
        elif kind == "group":
            stale = not paused and ("group", name) in self._pauses  # a deleted group's pause
            if name not in config.groups and not stale:
                raise JobActionError(f"no group named '{name}'")
        elif kind == "all":
            name = ""
        else:
            raise JobActionError(f"cannot pause a '{kind}'")
        if not paused:
            self._check_resumable(kind, name)
        return name

    def _check_resumable(self, kind: str, name: str) -> None:
        """Resuming one job (or group) cannot lift a pause that covers it from above."""
        if ("all", "") in self._pauses and kind != "all":
            raise JobActionError("everything is paused: resume everything, not one part")
        if kind == "job":
            held = [g for g in self._config().job(name).groups if ("group", g) in self._pauses]
            if held:
                raise JobActionError(f"job '{name}' is paused through group '{held[0]}'")

    def held_since(self, job: Job) -> datetime | None:
        """When `job`'s firing was paused (None: it is not paused)."""
        return self._held_since.get(job.name)

    def _note(self, job: Job, *, paused: bool, at: datetime, missed_until: datetime) -> None:
        """Remember when `job` was paused; once resumed, hand over the time it was (up to
        `missed_until`)."""
        if paused:
            self._held_since[job.name] = at
            return
        since = self._held_since.pop(job.name, None)
        if since is not None and self._resumed is not None and missed_until > since:
            self._resumed(job, since, missed_until)
