"""Which of the main screen's keys apply where the cursor is, and why the others do not.

No widgets here: `Cursor` says where the operator is (the focused pane, the
job under the cursor, the marked jobs, the run selected), `refusal` says why
an action cannot apply there (None: it can). The footer offers only the keys
that apply; a key that does not apply is refused with that reason, before any
confirmation is asked.
"""

from __future__ import annotations

from dataclasses import dataclass

from tuisched.domain.runs import RunRecord
from tuisched.domain.views import Pause, PauseKind
from tuisched.frontends.tui.state import ConsoleState

MUTATING = frozenset(
    {
        "run_jobs", "pause_jobs", "resume_jobs", "stop_run", "toggle_pause_all", "add_job",
        "edit_job", "delete_job", "edit_file", "undo", "reload",
    }
)  # fmt: skip
"""Actions refused by `--read-only`."""
JOBS_PANE_ONLY = frozenset(
    {"run_jobs", "pause_jobs", "resume_jobs", "edit_job", "delete_job", "mark"}
)
"""Actions on the job under the jobs pane's cursor (or the marked jobs)."""
_WORDS = {
    "run_jobs": "run jobs", "pause_jobs": "pause jobs", "resume_jobs": "resume jobs",
    "stop_run": "stop runs", "toggle_pause_all": "pause or resume everything",
    "add_job": "add jobs", "edit_job": "edit jobs", "delete_job": "delete jobs",
    "edit_file": "edit the configuration", "undo": "undo changes",
    "reload": "reload the configuration",
}  # fmt: skip
"""What each action does, for the notice that says why it cannot."""


@dataclass(frozen=True, slots=True)
class Cursor:
    """Where the operator is on the main screen."""

    pane: str | None
    """The focused pane: `jobs`, `running`, `audit` (None: something else)."""
    job: str | None
    """The job under the jobs pane's cursor."""
    marked: tuple[str, ...] = ()
    """The jobs marked with `space`, in the order they were marked."""
    run: str | None = None
    """The run under the running pane's cursor."""
    read_only: bool = False

    @property
    def targets(self) -> list[str]:
        """The jobs a key acts on: the marked ones, else the one under the cursor."""
        return list(self.marked) or ([self.job] if self.job is not None else [])


def refusal(action: str, cursor: Cursor, state: ConsoleState) -> str | None:
    """Why `action` cannot apply at `cursor` (None: it can), said before any dialog."""
    if cursor.read_only and action in MUTATING:
        return f"read-only console: it cannot {_WORDS[action]}"
    if action in JOBS_PANE_ONLY and cursor.pane != "jobs":
        return "that key acts on the jobs pane: 1 goes there"
    if action in ("edit_job", "delete_job", "mark", "copy") and cursor.pane == "jobs":
        return None if cursor.job else "no job selected"
    if action in ("run_jobs", "pause_jobs", "resume_jobs"):
        return _job_refusal(action, cursor, state)
    if action == "stop_run":
        return _stop_refusal(cursor, state)
    if action == "copy" and cursor.pane != "running":
        return "nothing to copy on this pane (y copies a job's command or a run's id)"
    if action == "copy" and cursor.run is None:
        return "no run selected"
    return None


def every_paused(jobs: list[str], state: ConsoleState) -> bool:
    """Whether every one of `jobs` is paused, by any pause (then `p` resumes); jobs no
    longer in the state (deleted a moment ago) count for nothing, and none at all is
    not "every one paused"."""
    present = [state.jobs[job] for job in jobs if job in state.jobs]
    return bool(present) and all(status.paused for status in present)


def own_paused(jobs: list[str], state: ConsoleState) -> list[str]:
    """Those of `jobs` paused by their own pause (the ones `resume` resumes)."""
    return [
        job
        for job in jobs
        if job in state.jobs and Pause(kind=PauseKind.JOB, name=job) in state.jobs[job].paused_by
    ]


def runs_of(jobs: list[str], state: ConsoleState) -> list[RunRecord]:
    """The runs in progress of `jobs`."""
    wanted = set(jobs)
    return [status.run for status in state.runs if status.run.job in wanted]


def _job_refusal(action: str, cursor: Cursor, state: ConsoleState) -> str | None:
    # The cursor can name a job that is gone from the state and not yet from the table
    # (deleted or reloaded away a moment ago): it is not a target.
    jobs = [job for job in cursor.targets if job in state.jobs]
    if not jobs:
        return "no job selected"
    paused = every_paused(jobs, state)
    if action == "pause_jobs" and paused:
        return _already("paused", jobs)
    if action == "resume_jobs":
        if not paused:
            return _already("not paused", jobs)
        if not own_paused(jobs, state):
            return f"{jobs[0]} is paused because {cause(state.jobs[jobs[0]].paused_by)}"
    return None


def _stop_refusal(cursor: Cursor, state: ConsoleState) -> str | None:
    if cursor.pane == "running":
        return None if cursor.run else "nothing is running"
    jobs = cursor.targets
    if not jobs:
        return "no job selected"
    if runs_of(jobs, state):
        return None
    if len(jobs) == 1:
        return f"nothing to stop: {jobs[0]} has no run in progress"
    return f"nothing to stop: none of the {len(jobs)} marked jobs has a run in progress"


def _already(word: str, jobs: list[str]) -> str:
    if len(jobs) == 1:
        return f"{jobs[0]} is {word}"
    return f"every one of the {len(jobs)} marked jobs is {word}"


def cause(pauses: tuple[Pause, ...]) -> str:
    """Why a job is paused when it is not paused itself: everything, or a group."""
    if any(pause.kind is PauseKind.ALL for pause in pauses):
        return "everything is paused (P resumes)"
    group = next(pause.name for pause in pauses if pause.kind is PauseKind.GROUP)
    return f"its group {group} is paused (v, the group view, resumes it)"
