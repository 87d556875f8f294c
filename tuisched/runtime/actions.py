"""What operators do to a running scheduler, each recorded in `state_dir/actions.log`.

Run now, stop, pause and resume, and changes to the configuration file (add,
replace, delete, undo, reload): every one is recorded with who asked
(`user@host (console)`) once it succeeded. An edit that changes nothing (a
job saved as it was) writes nothing and is not recorded. The control seam
calls these with its own actor.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from tuisched.domain.errors import TuischedError
from tuisched.domain.runs import RunRecord
from tuisched.domain.text import counted
from tuisched.domain.views import (
    BackfillPlan,
    ConfigChange,
    ConfigEdit,
    EditAction,
    EditTarget,
    MissedChoice,
    MissedSlots,
)
from tuisched.runtime.configsource import ConfigSource
from tuisched.runtime.handlers.actions import ActionLog, who
from tuisched.runtime.privatefiles import WriteTrouble

if TYPE_CHECKING:
    from tuisched.runtime.engine.backfill import Backfills
    from tuisched.runtime.engine.engine import Engine
    from tuisched.runtime.engine.ledger import Ledger

log = logging.getLogger(__name__)

IDEMPOTENCY_KEYS = 1000
"""Idempotency keys of manual runs remembered (the oldest are forgotten first)."""


class ActionsHost(Protocol):
    """What the actions need of the runtime they act on (`Runtime` is the real one)."""

    @property
    def source(self) -> ConfigSource | None:
        """The configuration file in force (None before start)."""
        ...

    @property
    def engine(self) -> Engine:
        """The engine (only after start)."""
        ...

    @property
    def ledger(self) -> Ledger:
        """The downtime ledger (only after start)."""
        ...

    @property
    def backfills(self) -> Backfills:
        """Backfills of a window (only after start)."""
        ...

    def now(self) -> datetime:
        """The runtime's clock."""
        ...


class Actions:
    """The operator's actions on one runtime; `actor` is who they are recorded as by default."""

    def __init__(self, runtime: ActionsHost, log_file: ActionLog) -> None:
        self._runtime = runtime
        self._log = log_file
        self._trouble = WriteTrouble(log, f"the actions log {log_file.path}")
        self.actor = who("api")
        """Who actions are recorded as when the caller names nobody."""
        self._manual_runs: OrderedDict[str, RunRecord] = OrderedDict()
        """Manual runs by idempotency key, newest last (a double key press makes one run)."""

    async def reload(self, *, actor: str | None = None) -> bool:
        """Re-read the configuration file and apply it; a bad one changes nothing."""
        if self._runtime.source is None:
            return False
        applied = await self._runtime.source.reload()
        self._record("reload", "applied" if applied else "refused: not valid", actor)
        return applied

    def refused(self, who: str) -> None:
        """Record that `who` was refused by the control socket (not the scheduler's user)."""
        self._record("refused", "the control socket", f"{who} (control socket)")

    def _changed(self, change: ConfigChange | None, actor: str | None) -> None:
        """Record a change to the configuration, if it made one."""
        if change is not None:
            action = "edit" if change.action == "replace" else change.action
            self._record(action, change.subject, actor)

    def _record(self, action: str, subject: str, actor: str | None = None) -> None:
        try:
            self._log.write(self._runtime.now(), actor or self.actor, action, subject)
        except (OSError, TuischedError) as error:  # a link in its place, a full disk
            self._trouble.failed(error)  # one line an episode; the action itself is done
        else:
            self._trouble.succeeded()

    # --- changes to the configuration (written to the file first) ------------------

    def _source(self) -> ConfigSource:
        if self._runtime.source is None:
            raise TuischedError("the runtime is not started")
        return self._runtime.source

    async def edit(self, edit: ConfigEdit, *, actor: str | None = None) -> None:
        """Make `edit` (add, replace or delete a job or a group): file first, then schedule."""
        definition = edit.definition or {}
        target, action = edit.target, edit.action
        if target is EditTarget.JOB and action is EditAction.ADD:
            await self.add_job(edit.name, definition, actor=actor)
        elif target is EditTarget.JOB and action is EditAction.REPLACE:
            await self.replace_job(edit.name, definition, actor=actor)
        elif target is EditTarget.JOB:
            await self.delete_job(edit.name, actor=actor)
        elif action is EditAction.ADD:
            await self.add_group(edit.name, definition, actor=actor)
        elif action is EditAction.REPLACE:
            await self.replace_group(edit.name, definition, actor=actor)
        else:
            await self.delete_group(edit.name, actor=actor)

    async def add_job(
        self, name: str, definition: Mapping[str, object], *, actor: str | None = None
    ) -> None:
        """Add a job (JobActionError if the name exists; ConfigError if not valid)."""
        self._changed(await self._source().add_job(name, definition), actor)

    async def replace_job(
        self, name: str, definition: Mapping[str, object], *, actor: str | None = None
    ) -> None:
        """Replace a job's definition (UnknownJobError if there is none); one that reads
        as it did changes nothing."""
        self._changed(await self._source().replace_job(name, definition), actor)

    async def delete_job(self, name: str, *, actor: str | None = None) -> None:
        """Delete a job; a run in progress keeps running (UnknownJobError if none)."""
        change = await self._source().edit(
            lambda document: document.delete_job(name), action="delete", subject=f"job {name}"
        )
        self._changed(change, actor)

    async def add_group(
        self, name: str, definition: Mapping[str, object], *, actor: str | None = None
    ) -> None:
        """Add a group (JobActionError if the name exists)."""
        change = await self._source().edit(
            lambda document: document.add_group(name, definition), action="add",
            subject=f"group {name}",
        )  # fmt: skip
        self._changed(change, actor)

    async def replace_group(
        self, name: str, definition: Mapping[str, object], *, actor: str | None = None
    ) -> None:
        """Replace a group's definition (JobActionError if there is none)."""
        change = await self._source().edit(
            lambda document: document.replace_group(name, definition), subject=f"group {name}"
        )
        self._changed(change, actor)

    async def delete_group(self, name: str, *, actor: str | None = None) -> None:
        """Delete a group (JobActionError if there is none)."""
        change = await self._source().edit(
            lambda document: document.delete_group(name), action="delete",
            subject=f"group {name}",
        )  # fmt: skip
        self._changed(change, actor)

    def last_change(self) -> ConfigChange | None:
        """The change `undo` would take back now (None: nothing to undo)."""
        source = self._runtime.source
        return source.last_change if source is not None else None

    async def undo(self, *, change: int | None = None, actor: str | None = None) -> None:
        """Undo the last change (through the API or a reload): file and schedule. With
        `change` (a `ConfigChange.number`), only if it is still the last one."""
        undone = await self._source().undo(change=change)
        what = "edit" if undone.action == "replace" else undone.action
        self._record("undo", f"{what} {undone.subject}".strip(), actor)

    def run_now(
        self, job: str, *, key: str | None = None, actor: str | None = None, queue: bool = False
    ) -> RunRecord:
        """Queue a manual run of `job` (RunRefusedError when its overlap rule does not
        take it now; with `queue` it waits behind the job's run in progress instead).

        With an idempotency `key`, asking again with the same key returns the
        run the first request made instead of making another (a double key
        press, a client retrying after a lost answer).
        """
        if key is not None and key in self._manual_runs:
            return self._manual_runs[key]
        run = self._runtime.engine.run_now(job, queue=queue)
        if key is not None:
            self._manual_runs[key] = run
            while len(self._manual_runs) > IDEMPOTENCY_KEYS:
                self._manual_runs.popitem(last=False)
        self._record("run now", f"job {job} (run {run.run_id})", actor)
        return run

    async def stop_run(self, run_id: str, *, kill: bool = False, actor: str | None = None) -> None:
        """Stop a queued, waiting or running run (in cluster mode, on any node)."""
        await self._runtime.engine.stop_anywhere(run_id, kill=kill)
        self._record("kill" if kill else "stop", f"run {run_id}", actor)

    async def pause_job(self, name: str, *, paused: bool = True, actor: str | None = None) -> None:
        """Pause (or resume) one job; the pause survives a restart."""
        await self._runtime.engine.set_paused("job", name, paused=paused, actor=actor or self.actor)
        self._record("pause" if paused else "resume", f"job {name}", actor)

    async def pause_group(
        self, name: str, *, paused: bool = True, actor: str | None = None
    ) -> None:
        """Pause (or resume) every job of a group; the pause survives a restart."""
        await self._runtime.engine.set_paused(
            "group", name, paused=paused, actor=actor or self.actor
        )
        self._record("pause" if paused else "resume", f"group {name}", actor)

    async def pause_all(self, *, paused: bool = True, actor: str | None = None) -> None:
        """Pause (or resume) every job; the pause survives a restart."""
        await self._runtime.engine.set_paused("all", "", paused=paused, actor=actor or self.actor)
        self._record("pause" if paused else "resume", "every job", actor)

    # --- the downtime ledger (SPEC R25) -----------------------------------------------------

    async def decide_missed(
        self, job: str | None, choice: MissedChoice, *, actor: str | None = None
    ) -> tuple[MissedSlots, ...]:
        """Decide what becomes of the missed slots of `job` (None: every job's), once."""
        who = actor or self.actor
        decided = await self._runtime.ledger.decide(job, choice, actor=who)
        for entry in decided:
            done = entry.decided.removesuffix(f" by {who}")  # the line names who already
            self._record(f"missed slots: {choice}", f"job {entry.job}: {done}", actor)
        return decided

    # --- backfill of a window (SPEC R24) ---------------------------------------------------

    async def backfill(
        self, job: str, start: datetime, end: datetime, *, dry_run: bool = False,
        actor: str | None = None,
    ) -> BackfillPlan:  # fmt: skip
        """Run the slots of `job` from `start` to `end` (excluded) that have no successful
        run, in slot order; with `dry_run` only list them (not recorded as an action)."""
        backfills = self._runtime.backfills
        if dry_run:
            return await backfills.plan(job, start, end)
        plan = await backfills.start(job, start, end, actor=actor or self.actor)
        window = f"{start.isoformat()} to {end.isoformat()}"
        self._record(
            "backfill", f"job {job} from {window}: {counted(len(plan.slots), 'slot')}", actor
        )
        return plan
