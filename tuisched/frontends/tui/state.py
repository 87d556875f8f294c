"""What the console knows of the scheduler, and what a batch of events changes.

No widgets here: `ConsoleState` holds the last snapshots read through the
control seam (jobs, runs, status), and `digest` turns a batch of events into
`Changes` (which rows to re-read, audit lines, notices, the banner), so the
screen applies a burst of thousands of events as one repaint.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from tuisched.domain.audit import audit_line
from tuisched.domain.errors import Refusal
from tuisched.domain.events import (
    AlertFailed,
    ConfigChangedOnDisk,
    ConfigLoaded,
    ConfigRejected,
    Event,
    HistoryDamaged,
    PauseChanged,
    RunAbandoned,
    RunEvent,
    RunFinished,
    RunNotStarted,
    RunOutputWritten,
    SlotMissed,
)
from tuisched.domain.reasons import overlap_refusal
from tuisched.domain.runs import RunState
from tuisched.domain.views import GroupStatus, JobStatus, RunStatus, SchedulerStatus
from tuisched.frontends.tui.failures import Failure
from tuisched.frontends.tui.view import is_failure

_AUDITED = (RunFinished, RunNotStarted, RunAbandoned, SlotMissed)


@dataclass(frozen=True, slots=True)
class Notice:
    """A notification to show: plain text and a severity."""

    text: str
    severity: str = "information"
    job: str | None = None
    """The job it is about (muting the job keeps it off the notice line)."""


@dataclass(slots=True)
class Changes:
    """What a batch of events changed on screen."""

    touched: set[str] = field(default_factory=set)
    """Jobs whose rows must be read again."""
    everything: bool = False
    """Every job must be read again (a reload, a pause)."""
    audit: list[str] = field(default_factory=list)
    notices: list[Notice] = field(default_factory=list)
    failed: list[Failure] = field(default_factory=list)
    """Runs that failed: told as one notice per burst (see `failures`)."""
    banner: tuple[str, bool] | None = None
    """(text, is an error) to show in the banner."""
    hide_banner: bool = False


@dataclass(slots=True)
class ConsoleState:
    """The scheduler as the console last read it."""

    status: SchedulerStatus | None = None
    jobs: dict[str, JobStatus] = field(default_factory=dict)
    """Every job, in the file's order."""
    groups: tuple[GroupStatus, ...] = ()
    runs: tuple[RunStatus, ...] = ()
    failures: list[datetime] = field(default_factory=list)
    """When the job failures of the last 24 hours ended."""

    @property
    def timezone(self) -> ZoneInfo:
        """The scheduler's zone (UTC until the first status arrives)."""
        return ZoneInfo(self.status.timezone if self.status is not None else "UTC")

    commands_version: int = 0
    """Bumped when the palette's commands change: a job comes or goes, or is paused or
    resumed (the palette indexes its commands once per version, not per key stroke)."""

    def take_jobs(self, statuses: Iterable[JobStatus], *, complete: bool) -> list[JobStatus]:
        """Keep `statuses`; `complete` when they are every job (the others are gone)."""
        taken = list(statuses)
        old = self.jobs
        if complete:
            self.jobs = {status.name: status for status in taken}
            if self.jobs.keys() != old.keys() or any(old[s.name].paused != s.paused for s in taken):
                self.commands_version += 1
            return taken
        if any(s.name not in old or old[s.name].paused != s.paused for s in taken):
            self.commands_version += 1
        old.update((status.name, status) for status in taken)
        return taken

    def failures_within(self, now: datetime) -> int:
        """How many job failures ended in the last 24 hours (older ones are forgotten)."""
        day_ago = now - timedelta(hours=24)
        self.failures = [at for at in self.failures if at >= day_ago]
        return len(self.failures)

    def run_of(self, run_id: str) -> RunStatus | None:
        """The run in progress with that id."""
        return next((status for status in self.runs if status.run.run_id == run_id), None)

    def run_of_job(self, job: str) -> RunStatus | None:
        """A run in progress of `job` (the first listed)."""
        return next((status for status in self.runs if status.run.job == job), None)

    def refusal(self, job: str) -> Refusal | None:
        """What a run of `job` asked for now would meet, as far as the console knows:
        why its overlap would refuse it, or None (the scheduler decides when asked)."""
        status = self.jobs.get(job)
        if status is None:
            return None
        mine = [each.run for each in self.runs if each.run.job == job]
        running = sorted(
            (run for run in mine if run.state is RunState.RUNNING),
            key=lambda run: run.started_at or run.queued_at,
        )
        queued = sorted(
            (run for run in mine if run.state is RunState.QUEUED), key=lambda run: run.queued_at
        )
        backlog = len(queued) if running else max(len(queued) - 1, 0)
        zone = ZoneInfo(status.timezone)
        refusal = overlap_refusal(job, status.overlap, zone, running, queued, backlog=backlog)
        if refusal is not None and self.status is not None and self.status.cluster:
            return replace(refusal, queueable=False)  # the cluster would skip it (see Engine)
        return refusal

    def digest(self, events: Sequence[Event]) -> Changes:
        """What `events` change, in order."""
        changes = Changes()
        tz = self.timezone
        for event in events:
            if isinstance(event, RunOutputWritten):
                continue  # the running pane reads last lines with the runs
            if isinstance(event, RunEvent):
                self._run_event(event, changes, tz)
            else:
                self._other_event(event, changes)
        return changes

    def _run_event(self, event: RunEvent, changes: Changes, tz: ZoneInfo) -> None:
        run = event.run
        changes.touched.add(run.job)
        if isinstance(event, _AUDITED):
            changes.audit.append(audit_line(run, tz))
        if isinstance(event, RunFinished | RunNotStarted) and is_failure(run):
            self.failures.append(event.at)
            changes.failed.append(Failure(run.job, run.status or run.reason))

    def _other_event(self, event: Event, changes: Changes) -> None:
        match event:
            case ConfigChangedOnDisk(diff=diff, problems=problems):
                changes.banner = _disk_banner(event, problems, diff is not None and diff.empty)
            case ConfigRejected(problems=problems):
                more = f" (+{len(problems) - 1} more, D)" if len(problems) > 1 else ""
                changes.banner = (f"reload refused, nothing changed: {problems[0]}{more}", True)
            case ConfigLoaded(diff=diff):
                changes.hide_banner, changes.banner = True, None
                if diff is not None and not (diff.added or diff.removed or diff.groups):
                    # Only these jobs' rows change: refilling a 100,000-row table takes seconds.
                    changes.touched.update(change.name for change in diff.changed)
                    changes.everything = changes.everything or bool(diff.sections)
                else:
                    changes.everything = True
            case PauseChanged():
                changes.everything = True
            case AlertFailed(final=True, job=job, error=error):
                text = f"alert for {job} not delivered: {error}"
                changes.notices.append(Notice(text, "warning", job))
            case HistoryDamaged(error=error):
                changes.notices.append(Notice(error, "error"))


def _disk_banner(
    event: ConfigChangedOnDisk, problems: Sequence[object], layout_only: bool
) -> tuple[str, bool]:
    """The banner for an offline edit: what a reload would do, or why it cannot."""
    if problems:
        more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
        return f"config changed on disk, not valid: {problems[0]}{more} - D details", True
    if layout_only or event.diff is None:
        return "config file changed on disk (comments or layout only) - R takes it in", False
    return f"config changed on disk: {event.diff.summary()} - R reload, D diff, esc dismiss", False
