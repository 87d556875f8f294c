"""The operator's actions: asked first, then sent through the control seam.

Keys, the command palette and the screens all act through these methods, so
each action is confirmed the same way (Cancel is the default) and its error
is shown as a notification, never a traceback. `--read-only` refuses them all.

Undo names the change it takes back (what, when, what it changed), and takes
back that one only: if another console changed the file since, nothing is
undone and the operator is told.

Run now says before it asks when the job's `overlap` would refuse the run (a
run of it in progress, as the console knows), and offers to queue it behind
that run; the scheduler still decides when asked, and a refusal it gives is
told with its reason, never as a bare "not started".
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Protocol

from textual.app import App
from textual.screen import Screen

from tuisched.domain.errors import ConfigError, Refusal, RunRefusedError, TuischedError
from tuisched.domain.runs import RunRecord, RunState
from tuisched.domain.text import counted
from tuisched.domain.views import ConfigChange, ConfigEdit, Pause, PauseKind
from tuisched.frontends.tui.keyrules import cause
from tuisched.frontends.tui.screens.dialogs import ConfirmScreen
from tuisched.frontends.tui.state import ConsoleState
from tuisched.frontends.tui.typeahead import IN_BACKGROUND
from tuisched.runtime.control import SchedulerControl

_STARTED_WORDS = {RunState.QUEUED: "started", RunState.WAITING: "waiting"}
LISTED = 12
"""How many names a question about many jobs lists before it says how many more."""


class _Host(Protocol):
    """What the operator needs of the app."""

    control: SchedulerControl
    state: ConsoleState
    read_only: bool
    started: bool
    """False while the hosted scheduler starts (an action then waits for it)."""
    clock: Callable[[], datetime]
    """The console's clock (what "today" is)."""

    async def forgotten(self, job: str) -> None:
        """Once the panes no longer list `job` (it was deleted), or a moment has passed."""


class Operator:
    """Confirms, then acts; reports the outcome as a notification."""

    def __init__(self, app: App[int], host: _Host) -> None:
        self._app = app
        self._host = host

    @property
    def _control(self) -> SchedulerControl:
        return self._host.control

    # --- asking --------------------------------------------------------------------

    def confirm(
        self,
        question: str,
        then: Callable[[], Awaitable[object]],
        *,
        on_yes: Callable[[], None] | None = None,
        yes: str = "Yes",
        holds_keys: bool = False,
    ) -> None:
        """Ask `question`; on yes, call `on_yes` and run `then` in the background.

        The default is Cancel; `yes` names the other button. Keys typed after the yes
        do not wait for `then`, unless `holds_keys` and the scheduler has started: they
        then wait (a few seconds at most) for what `then` changes, such as the rows a
        delete takes away, before they act on the rows."""

        def answered(yes: bool | None) -> None:
            if yes:
                if on_yes is not None:
                    on_yes()
                group = "confirmed" if holds_keys and self._host.started else IN_BACKGROUND
                self._app.run_worker(self._act(then), group=group, exclusive=False)

        screen: Screen[bool] = ConfirmScreen(question, yes=yes)
        self._app.push_screen(screen, answered)

    async def _act(self, then: Callable[[], Awaitable[object]]) -> None:
        if not self._host.started:
            self._app.notify("the scheduler is starting: done once it has started", markup=False)
        try:
            await then()
        except ConfigError as error:
            text = "\n".join(str(problem) for problem in error.problems[:5]) or str(error)
            self._app.notify(text, severity="error", timeout=10, markup=False)
        except TuischedError as error:
            self._app.notify(str(error), severity="error", markup=False)

    # --- the actions -----------------------------------------------------------------

    def run(self, job: str) -> None:
        """Confirm, then run `job` now (one run however often yes is pressed); when its
        overlap would refuse the run, say why instead, and offer to queue it."""
        if self._host.read_only:
            return
        refusal = self._host.state.refusal(job)
        if refusal is not None:
            self._refused(refusal)
            return
        key = uuid.uuid4().hex

        async def run_now() -> None:
            try:
                run = await self._control.run_now(job, key=key)
            except RunRefusedError as error:  # the scheduler knew better than the console
                self._refused(error.refusal)
                return
            self._started(run)

        self.confirm(f"Run {job} now?", run_now)

    def _refused(self, refusal: Refusal) -> None:
        """Say why a run of the job is refused; offer to queue it when that would be taken."""
        job = refusal.job
        if not refusal.queueable:
            self._app.notify(f"{job} not run: {refusal.reason}", severity="warning", markup=False)
            return
        key = uuid.uuid4().hex

        async def queue() -> None:
            run = await self._control.run_now(job, key=key, queue=True)
            self._app.notify(
                f"{job}#{run.run_id} queued: it starts once run {refusal.run_id} has ended",
                markup=False,
            )

        question = f"{job} is {refusal.reason}.\nQueue a run to start when it ends?"
        self.confirm(question, queue, yes="Queue")

    def _started(self, run: RunRecord) -> None:
        word = _STARTED_WORDS.get(run.state) or run.state.value.lower()
        self._app.notify(f"{run.job}#{run.run_id} {word}", markup=False)

    def stop(self, run: RunRecord, *, kill: bool = False) -> None:
        """Confirm, then stop `run` (SIGKILL at once with `kill`)."""
        question = (
            f"Kill {run.job} (run {run.run_id}) at once with SIGKILL?"
            if kill
            else f"Stop {run.job} (run {run.run_id})?"
        )
        self.confirm(question, lambda: self._control.stop_run(run.run_id, kill=kill))

    def pause_job(self, job: str) -> None:
        """Confirm, then pause `job` (or resume it); explain a pause held from above."""
        status = self._host.state.jobs.get(job)
        if self._host.read_only or status is None:
            return
        own = Pause(kind=PauseKind.JOB, name=job)
        if status.paused and own not in status.paused_by:
            self._app.notify(f"{job} is paused because {cause(status.paused_by)}", markup=False)
            return
        paused = own in status.paused_by
        verb = "Resume" if paused else "Pause"
        self.confirm(f"{verb} {job}?", lambda: self._control.set_paused(own, paused=not paused))

    # --- many jobs at once (the marked ones): one question that lists them ------------

    def run_jobs(self, jobs: Sequence[str], *, on_yes: Callable[[], None] | None = None) -> None:
        """Confirm once, then run each of `jobs` now (once each however often yes is
        pressed); the question names those whose overlap would refuse the run, and the
        answer those the scheduler refused, with why."""
        if self._host.read_only or not jobs:
            return
        keys = {job: uuid.uuid4().hex for job in jobs}

        async def run_all() -> None:
            runs: list[RunRecord] = []
            refused: list[Refusal] = []
            for job, key in keys.items():
                try:
                    runs.append(await self._control.run_now(job, key=key))
                except RunRefusedError as error:
                    refused.append(error.refusal)
            started = [run.job for run in runs]
            text = f"{_count(started)} started: {listing(started)}" if runs else "none started"
            text += _not_run(refused)
            if refused:
                self._app.notify(text, severity="warning", markup=False)
            else:
                self._app.notify(text, markup=False)

        ahead = [r for r in map(self._host.state.refusal, jobs) if r is not None]
        question = f"Run {_count(jobs)} now?\n{listing(jobs)}{_not_run(ahead)}"
        self.confirm(question, run_all, on_yes=on_yes)

    def pause_jobs(
        self, jobs: Sequence[str], *, paused: bool, on_yes: Callable[[], None] | None = None
    ) -> None:
        """Confirm once, then pause each of `jobs` (or resume each, when `paused`)."""
        if self._host.read_only or not jobs:
            return
        verb = "Resume" if paused else "Pause"

        async def toggle_all() -> None:
            for job in jobs:
                own = Pause(kind=PauseKind.JOB, name=job)
                await self._control.set_paused(own, paused=not paused)
            self._app.notify(f"{_count(jobs)} {verb.lower()}d", markup=False)

        self.confirm(f"{verb} {_count(jobs)}?\n{listing(jobs)}", toggle_all, on_yes=on_yes)

    def stop_runs(
        self,
        runs: Sequence[RunRecord],
        *,
        kill: bool = False,
        on_yes: Callable[[], None] | None = None,
    ) -> None:
        """Confirm once, then stop each of `runs` (SIGKILL at once with `kill`)."""
        if not runs:
            return
        verb = "Kill" if kill else "Stop"
        names = [f"{run.job} ({run.run_id})" for run in runs]
        how = " with SIGKILL" if kill else ""
        question = f"{verb} {counted(len(runs), 'run')}{how}?\n{listing(names)}"

        async def stop_all() -> None:
            for run in runs:
                await self._control.stop_run(run.run_id, kill=kill)

        self.confirm(question, stop_all, on_yes=on_yes)

    def pause_group(self, group: str, jobs: int, *, paused: bool) -> None:
        """Confirm, then pause every job of `group` (or resume the group if `paused`)."""
        if self._host.read_only:
            return
        verb = "Resume" if paused else "Pause"
        pause = Pause(kind=PauseKind.GROUP, name=group)

        async def toggle() -> None:
            await self._control.set_paused(pause, paused=not paused)
            self._app.notify(f"group {group} {verb.lower()}d", markup=False)

        self.confirm(f"{verb} group {group} (its {counted(jobs, 'job')})?", toggle)

    def pause_all(self, *, paused: bool) -> None:
        """Confirm, then pause every job (or resume everything if `paused`)."""
        verb = "Resume every job" if paused else "Pause every job"
        everything = Pause(kind=PauseKind.ALL)
        self.confirm(f"{verb}?", lambda: self._control.set_paused(everything, paused=not paused))

    def edit(
        self, question: str, edit: ConfigEdit, done: str, *, removes: str | None = None
    ) -> None:
        """Confirm, then write `edit` to the configuration file; keys typed meanwhile
        act once the panes no longer list `removes` (the job the edit deletes)."""

        async def write() -> None:
            await self._control.edit(edit)
            self._app.notify(done, markup=False)
            if removes is not None:
                await self._host.forgotten(removes)

        self.confirm(question, write, holds_keys=removes is not None)

    def undo(self) -> None:
        """Ask the scheduler what its last change was, name it, confirm, then undo it."""
        if not self._host.read_only:
            self._app.run_worker(self._ask_undo(), group="undo", exclusive=True)

    async def _ask_undo(self) -> None:
        try:
            change = await self._control.last_change()
        except TuischedError as error:
            self._app.notify(str(error), severity="error", markup=False)
            return
        if change is None:
            self._app.notify("nothing to undo", markup=False)
            return
        what = change_words(change)

        async def undo() -> None:
            await self._control.undo(change=change.number)
            self._app.notify(f"undone: {what}", markup=False)

        question = f"Undo {what} at {self._clock_of(change.at)}?"
        self.confirm("\n".join([question, *undo_lines(change)]), undo, yes="Undo")

    def _clock_of(self, at: datetime) -> str:
        """`12:03:07` in the scheduler's zone; the date too when it is not today's."""
        tz = self._host.state.timezone
        local, today = at.astimezone(tz), self._host.clock().astimezone(tz).date()
        return local.strftime("%H:%M:%S" if local.date() == today else "%Y-%m-%d %H:%M:%S")

    def reload(self) -> None:
        """Confirm, then reload the configuration from disk."""
        self.confirm("Reload the configuration from disk?", self._control.reload)


_ACTION_WORDS = {"add": "the addition of", "replace": "the edit of", "delete": "the deletion of"}


def change_words(change: ConfigChange) -> str:
    """`the edit of job backup`, `the reload of the file`: the change in words."""
    if change.action == "reload":
        return "the reload of the file"
    words = _ACTION_WORDS.get(change.action, f"the {change.action} of")
    return f"{words} {change.subject}"


def undo_lines(change: ConfigChange) -> list[str]:
    """What undoing `change` takes back, the first LISTED lines of its diff (a job's own
    `~ name` line left out when it is the only job changed: the question names it)."""
    lines = [line.rstrip() for line in change.lines]
    subject = change.subject.removeprefix("job ")
    if change.action == "replace" and lines[:1] == [f"~ {subject}"]:
        lines = [line.strip() for line in lines[1:]]
    shown = lines[:LISTED]
    if len(lines) > LISTED:
        shown.append(f"and {counted(len(lines) - LISTED, 'more line')}")
    return [f"  {line}" for line in shown]


def _not_run(refusals: Sequence[Refusal]) -> str:
    """A line per job whose run is refused, with why (the first LISTED of them)."""
    lines = [f"\n{refusal.job} not run: {refusal.reason}" for refusal in refusals[:LISTED]]
    more = len(refusals) - LISTED
    return "".join(lines) + (f"\nand {more} more not run" if more > 0 else "")


def _count(jobs: Sequence[str]) -> str:
    return counted(len(jobs), "job")


def listing(names: Sequence[str]) -> str:
    """`names` for a question: comma-separated, the first LISTED of them, then how many more."""
    shown = ", ".join(names[:LISTED])
    more = len(names) - LISTED
    return f"{shown} and {more} more" if more > 0 else shown
