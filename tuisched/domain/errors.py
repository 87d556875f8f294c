"""Every error tuisched raises on purpose derives from one root.

```
TuischedError
├── ConfigError                a configuration was rejected; carries every Problem found
│   └── DriverMissingError     it needs PostgreSQL's driver, which is not installed
├── ExcerptMismatch            a job's block is not cut as the configuration reads it
├── ScheduleError              a schedule cannot be built or evaluated (ValueError too)
│   └── CronError              a cron expression is malformed
├── TemplateError              an alert template cannot be read or rendered
├── JobActionError             add/modify/delete/run named a job that does not fit
│   ├── UnknownJobError        no job by that name (LookupError too)
│   └── RunRefusedError        the scheduler will not start a run now; carries its Refusal
├── LaunchError                a run could not start (its reason is the message)
│   └── StaleServerError       a fork server's module was edited: a new server forks the run
├── MailError                  an alert mail could not be delivered
├── WebhookError               a webhook post failed
├── StateError                 the state directory or what it holds cannot be used
│   ├── AlreadyRunningError    another scheduler holds the state directory
│   ├── HistoryError           the history database cannot be opened or written
│   │   ├── HistoryUnavailableError  locked or unreachable for now: worth retrying
│   │   │   └── HistoryDamagedError  the file is damaged: nothing is written to it again
│   │   ├── DuplicateRunError  a run id is already in the history
│   │   └── UnknownRunError    no run by that id (LookupError too)
│   └── ClusterDatabaseError   the cluster's PostgreSQL database cannot be used
│       ├── DatabaseUnreachableError  nothing answers at its address now
│       └── SchemaTooNewError  it holds a schema from a newer tuisched
├── ControlError               a front end's request cannot be answered
│   ├── SchedulerNotRunningError   it needs a running scheduler, and none runs
│   │   └── OtherConfigurationError  the one running there runs another file
│   └── EventsLostError        events after that number are no longer kept (LookupError too)
├── UsageError                 a command line option's value does not parse (exit 2)
├── WireError                  a message cannot be turned back into an event or a view
└── MetricsListenError         settings.metrics.listen cannot be listened on (port in use)
```

Errors of the libraries underneath (sqlite, YAML, Jinja2, the file system)
are translated where they happen, into one of these with the cause chained.
Front ends catch `TuischedError` and show its message in one line; anything
else is a bug and keeps its traceback. Every class of the tree lives here, so
the control socket's clients (`runtime/control/protocol.py`) raise a
scheduler's error again as its own class.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path


class TuischedError(Exception):
    """Root of every error tuisched raises on purpose."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Problem:
    """One thing wrong with a configuration, located for the operator."""

    file: Path
    line: int
    """1-based line in `file` (1 for a problem with the whole file)."""
    message: str
    job: str | None = None
    """The job the problem belongs to, when it belongs to one."""
    group: str | None = None
    """The group the problem belongs to, when it belongs to one."""

    def __str__(self) -> str:
        """`FILE:LINE: job 'NAME': message`, always one line: control characters in a
        name or a message (a newline, a NUL) are shown escaped."""
        where = f"{self.file}:{self.line}"
        if self.job is not None:
            return one_line(f"{where}: job '{self.job}': {self.message}")
        if self.group is not None:
            return one_line(f"{where}: group '{self.group}': {self.message}")
        return one_line(f"{where}: {self.message}")


def one_line(text: str) -> str:
    """`text` with every control character escaped (`\\n`, `\\x00`): one printable line."""
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)


class ConfigError(TuischedError):
    """A configuration was rejected. `problems` lists every problem found."""

    def __init__(self, problems: Iterable[Problem]) -> None:
        self.problems: tuple[Problem, ...] = tuple(
            sorted(problems, key=lambda p: (str(p.file), p.line))
        )
        super().__init__("\n".join(str(p) for p in self.problems))


class DriverMissingError(ConfigError):
    """The configuration uses PostgreSQL and its driver is not installed: its one
    problem is the whole report (the file is valid; the installation lacks the extra)."""


class ExcerptMismatch(TuischedError):
    """An excerpt does not hold the jobs as the configuration has them: check the whole file."""


class ScheduleError(TuischedError, ValueError):
    """A schedule cannot be built or evaluated."""


class CronError(ScheduleError):
    """A cron expression is malformed; the message says which field and why."""


class TemplateError(TuischedError):
    """An alert template cannot be rendered; the message says where and why."""

    def __init__(self, message: str, *, line: int | None = None) -> None:
        """`line` is the line within the template, when known."""
        self.line = line
        self.reason = message
        super().__init__(f"line {line}: {message}" if line is not None else message)


class JobActionError(TuischedError):
    """An action named a job that does not fit (exists already, or is missing)."""


class UnknownJobError(JobActionError, LookupError):
    """No job by that name."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"no job named '{one_line(name)}'")


@dataclass(frozen=True, slots=True, kw_only=True)
class Refusal:
    """Why the scheduler will not start a run of `job` asked for now (by hand)."""

    job: str
    reason: str
    """One line: `still running: run 3f2a since 12:00:03` (the time in the job's zone)."""
    run_id: str = ""
    """The run in the way, if one is."""
    since: datetime | None = None
    """When that run started (or was queued, if it has not started)."""
    queueable: bool = False
    """Asked again to wait behind the run in the way (`trigger --queue`), it would be taken."""


class RunRefusedError(JobActionError):
    """The scheduler will not start a run now; `refusal` says why, and whether it could
    wait behind the run in the way instead."""

    def __init__(self, refusal: Refusal) -> None:
        self.refusal = refusal
        super().__init__(f"trigger '{one_line(refusal.job)}': {refusal.reason}")


class LaunchError(TuischedError):
    """A run could not start; the message is the reason shown to the operator."""


class StaleServerError(LaunchError):
    """The server's module was edited since it imported it: a new server must fork this run."""


class MailError(TuischedError):
    """An alert mail could not be delivered; the message says why (never the password)."""


class WebhookError(TuischedError):
    """A webhook post failed; the message names the webhook, never its URL or secret."""


class StateError(TuischedError):
    """The state directory, or a file in it, cannot be used; the message names the path."""


class AlreadyRunningError(StateError):
    """Another tuisched holds the state directory: its pid, and the configuration it
    runs when that is another file than this one's."""

    def __init__(
        self, state_dir: Path, pid: int | None, *, theirs: str | None = None, ours: str = ""
    ) -> None:
        self.pid = pid
        who = f"pid {pid}" if pid else "another process"
        if theirs and theirs != ours:
            super().__init__(
                f"tuisched is already running on {state_dir} ({who}) for {theirs}, not "
                f"{ours}: give each configuration its own settings.state_dir"
            )
        else:
            super().__init__(f"tuisched is already running on {state_dir} ({who})")


class HistoryError(StateError):
    """The history database cannot be opened, or a write was refused."""


class HistoryUnavailableError(HistoryError):
    """The history database is locked or unreachable for now; the operation may be retried."""


class HistoryDamagedError(HistoryUnavailableError):
    """The history database file is damaged: nothing is written to it again."""


class DuplicateRunError(HistoryError):
    """A run id is already in the history (a new run cannot reuse it)."""


class UnknownRunError(HistoryError, LookupError):
    """No run by that id in the history."""

    def __init__(self, run_ids: Iterable[str]) -> None:
        self.run_ids = tuple(run_ids)
        shown = ", ".join(one_line(run_id) for run_id in self.run_ids)
        super().__init__(f"no run with id {shown} in the history")


class ClusterDatabaseError(StateError):
    """The cluster's PostgreSQL database cannot be used; the message says what to fix."""


class DatabaseUnreachableError(ClusterDatabaseError):
    """Nothing answers at the database's address now (refused, or silent): it may come
    back, unlike a wrong password or a missing database."""


class SchemaTooNewError(ClusterDatabaseError):
    """The database holds a schema from a newer tuisched than this one."""


class ControlError(TuischedError):
    """A front end's request to a scheduler cannot be answered."""


class SchedulerNotRunningError(ControlError):
    """The request needs a running scheduler, and there is none."""


class OtherConfigurationError(SchedulerNotRunningError):
    """The scheduler found on the state directory runs another configuration file than
    the one the command was given: none runs this one."""

    def __init__(self, state_dir: Path, theirs: str, ours: str) -> None:
        self.theirs = theirs
        super().__init__(
            f"the scheduler running on {state_dir} runs {theirs}, not {ours}: give each "
            "configuration its own settings.state_dir (or name the other file with -c)"
        )


class EventsLostError(ControlError, LookupError):
    """Events after the asked sequence number are no longer kept: re-read a snapshot."""

    def __init__(self, after: int, oldest: int) -> None:
        self.after = after
        self.oldest = oldest
        super().__init__(
            f"events {after + 1}-{oldest - 1} are no longer kept (the oldest kept is {oldest})"
        )


class UsageError(TuischedError):
    """An option's value does not parse: a usage error (exit 2), as argparse gives."""


class WireError(TuischedError, ValueError):
    """Data cannot be turned back into an event or a view; the message says where."""


class MetricsListenError(TuischedError):
    """`settings.metrics.listen` cannot be listened on (the port is in use, the address is
    not this machine's); the message names the setting and the address."""
