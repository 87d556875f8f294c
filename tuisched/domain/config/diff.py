"""What changed between two configurations, job by job (SPEC R17's diff).

Pure: the effect on next runs is computed for a given `now`.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from tuisched.domain.model import (
    After,
    AlertRule,
    AtSchedule,
    CommandSpec,
    Config,
    CronSchedule,
    EverySchedule,
    Job,
    ManualSchedule,
    PythonSpec,
    WaitForSpec,
)
from tuisched.domain.schedule.duration import format_duration
from tuisched.domain.schedule.slots import describe, next_slot

_IGNORED = frozenset({"line"})
"""Job fields that change when lines move, not when the job does."""


@dataclass(frozen=True, slots=True)
class FieldChange:
    """One field of a job, before and after, in words."""

    field: str
    before: str
    after: str


@dataclass(frozen=True, slots=True)
class JobChange:
    """A job present in both configurations whose definition changed."""

    name: str
    fields: tuple[FieldChange, ...]
    next_before: datetime | None
    next_after: datetime | None


@dataclass(frozen=True, slots=True)
class ConfigDiff:
    """Jobs added, removed and changed; groups and other sections that changed."""

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[JobChange, ...] = ()
    groups: tuple[str, ...] = ()
    """Groups added, removed or changed."""
    sections: tuple[str, ...] = ()
    """`settings`, `email` and `webhooks` when they changed."""

    @property
    def empty(self) -> bool:
        """True when nothing that matters changed."""
        return not (self.added or self.removed or self.changed or self.groups or self.sections)

    def summary(self) -> str:
        """`+1 -0 ~3 jobs` (and the groups or sections that changed)."""
        text = f"+{len(self.added)} -{len(self.removed)} ~{len(self.changed)} jobs"
        if self.groups:
            text += f", groups {', '.join(self.groups)}"
        if self.sections:
            text += f", {' and '.join(self.sections)}"
        return text

    def lines(self) -> list[str]:
        """One line per job added or removed, and one per changed field, for people."""
        lines = [f"+ {name}" for name in self.added]
        lines += [f"- {name}" for name in self.removed]
        for change in self.changed:
            lines.append(f"~ {change.name}")
            lines += [f"    {f.field}: {f.before} -> {f.after}" for f in change.fields]
            if change.next_before != change.next_after:
                before, after = _when(change.next_before), _when(change.next_after)
                lines.append(f"    next run: {before} -> {after}")
        lines += [f"~ group {name}" for name in self.groups]
        lines += [f"~ {section}" for section in self.sections]
        return lines


def config_diff(old: Config, new: Config, now: datetime) -> ConfigDiff:
    """The difference from `old` to `new`, with next runs computed after `now`."""
    changed = tuple(
        change
        for name in old.jobs.keys() & new.jobs.keys()
        if (change := _job_change(old.jobs[name], new.jobs[name], now)) is not None
    )
    groups = sorted(
        name
        for name in old.groups.keys() | new.groups.keys()
        if _without_lines(old.groups.get(name)) != _without_lines(new.groups.get(name))
    )
    sections = [
        name
        for name, before, after in (
            ("settings", old.settings, new.settings),
            ("email", old.email, new.email),
            ("webhooks", _webhooks(old), _webhooks(new)),
        )
        if before != after
    ]
    return ConfigDiff(
        added=tuple(name for name in new.jobs if name not in old.jobs),
        removed=tuple(name for name in old.jobs if name not in new.jobs),
        changed=tuple(sorted(changed, key=lambda c: c.name)),
        groups=tuple(groups),
        sections=tuple(sections),
    )


def _job_change(old: Job, new: Job, now: datetime) -> JobChange | None:
    fields = tuple(
        FieldChange(
            new.kind_name if field.name == "kind" else field.name, _text(before), _text(after)
        )
        for field in dataclasses.fields(Job)
        if field.name not in _IGNORED
        and (before := getattr(old, field.name)) != (after := getattr(new, field.name))
    )
    if not fields:
        return None
    return JobChange(new.name, fields, _next(old, now), _next(new, now))


def _next(job: Job, now: datetime) -> datetime | None:
    if not job.enabled or job.schedule is None:
        return None
    return next_slot(job.schedule, now)


def _without_lines(group: object) -> object:
    return dataclasses.replace(group, line=0) if dataclasses.is_dataclass(group) else group  # type: ignore[type-var]


def _when(moment: datetime | None) -> str:
    return moment.isoformat() if moment is not None else "none"


def _text(value: object) -> str:
    """A field's value in the words the configuration uses."""
    match value:
        case None:
            return "-"
        case enum.Enum():
            return str(value.value)
        case bool():
            return "true" if value else "false"
        case timedelta():
            return format_duration(value)
        case ZoneInfo():
            return value.key
        case Path():
            return str(value)
        case After():
            return f"{value.job} on {value.on.value} +{format_duration(value.delay)}"
        case AlertRule():
            return f"{value.event.value} to {', '.join(value.to)}"
        case tuple():
            return ", ".join(_text(item) for item in value) or "-"
        case Mapping():
            return ", ".join(f"{k}={v}" for k, v in value.items()) or "-"
        case EverySchedule() | CronSchedule() | AtSchedule() | ManualSchedule():
            return describe(value)
        case CommandSpec() | PythonSpec() | WaitForSpec():
            return str(value.describe())
    return str(value)


def _webhooks(config: Config) -> dict[str, object]:
    """The webhooks as compared: a webhook that only moved in the file is unchanged."""
    return {name: _without_lines(hook) for name, hook in config.webhooks.items()}
