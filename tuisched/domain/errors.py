"""Every error tuisched raises on purpose derives from one root.

```
TuischedError
├── ConfigError            a configuration was rejected; carries every Problem found
├── ScheduleError          a schedule cannot be built or evaluated (ValueError too)
│   └── CronError          a cron expression is malformed
└── JobActionError         add/modify/delete/run named a job that does not fit
    └── UnknownJobError    no job by that name (LookupError too)
```

Front ends catch `TuischedError` and show its message; anything else is a bug
and keeps its traceback.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
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
        where = f"{self.file}:{self.line}"
        if self.job is not None:
            return f"{where}: job '{self.job}': {self.message}"
        if self.group is not None:
            return f"{where}: group '{self.group}': {self.message}"
        return f"{where}: {self.message}"


class ConfigError(TuischedError):
    """A configuration was rejected. `problems` lists every problem found."""

    def __init__(self, problems: Iterable[Problem]) -> None:
        self.problems: tuple[Problem, ...] = tuple(
            sorted(problems, key=lambda p: (str(p.file), p.line))
        )
        super().__init__("\n".join(str(p) for p in self.problems))


class ScheduleError(TuischedError, ValueError):
    """A schedule cannot be built or evaluated."""


class CronError(ScheduleError):
    """A cron expression is malformed; the message says which field and why."""


class JobActionError(TuischedError):
    """An action named a job that does not fit (exists already, or is missing)."""


class UnknownJobError(JobActionError, LookupError):
    """No job by that name."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"no job named '{name}'")


class HistoryError(TuischedError):
    """The history database cannot be opened, or a write was refused."""


class UnknownRunError(HistoryError, LookupError):
    """No run by that id in the history."""

    def __init__(self, run_ids: Iterable[str]) -> None:
        self.run_ids = tuple(run_ids)
        super().__init__(f"no run with id {', '.join(self.run_ids)} in the history")
