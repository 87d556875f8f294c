"""Turn a YAML configuration into a valid `Config`, or a `ConfigError` listing every problem.

Nothing is loaded from a file with a problem: `interpret_config` either
returns a whole configuration or raises with all the problems it found, each
naming the file, the line, the job (or group) and the rule broken. What it
needs from the machine comes through a `ConfigHost`.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from types import MappingProxyType
from typing import TypeVar
from zoneinfo import ZoneInfo

from tuisched.domain.config.dependencies import cycle_of, find_cycle
from tuisched.domain.config.sections import Sections
from tuisched.domain.config.values import Values, nearest
from tuisched.domain.config.yamlsource import Entry, Map, Scalar, Value, read_yaml
from tuisched.domain.errors import ConfigError, CronError, Problem, ScheduleError
from tuisched.domain.model import (
    After,
    AlertRule,
    AtSchedule,
    CommandSpec,
    Config,
    CronSchedule,
    EmailSettings,
    EverySchedule,
    Group,
    Job,
    JobKind,
    ManualSchedule,
    Misfire,
    Outcome,
    Overlap,
    PythonSpec,
    Schedule,
    Settings,
    WaitForSpec,
)
from tuisched.domain.schedule.cron import CronExpr
from tuisched.domain.schedule.slots import localize, parse_every
from tuisched.domain.templates import template_problems

T = TypeVar("T")

TOP_KEYS = frozenset({"settings", "email", "groups", "jobs"})
GROUP_KEYS = frozenset({"jobs", "alerts", "description"})
KIND_KEYS = ("command", "python", "wait_for")
COMMAND_KEYS = frozenset({"cwd", "env", "success_codes"})
JOB_KEYS = frozenset(KIND_KEYS) | COMMAND_KEYS | frozenset(
    {
        "description", "schedule", "after", "priority", "timeout", "overlap", "retries",
        "retry_delay", "enabled", "timezone", "grace", "misfire", "requires", "wait_timeout",
        "recover", "alerts",
    }
)  # fmt: skip
SCHEDULE_KEYS = frozenset({"every", "cron", "at", "start", "stop"})
AFTER_KEYS = frozenset({"job", "on", "delay"})
SELF = "self"
"""In `requires`, the job itself: its own previous slot must have succeeded."""

_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.:")


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigHost:
    """What reading a configuration needs from the machine it runs on (the runtime's).

    The domain reads no file and no environment itself: the zone and state
    directory used when the file names none, and the sources of alert
    templates, come from here (`tuisched.runtime.configfiles` makes the real one).
    """

    system_timezone: Callable[[], ZoneInfo]
    """The zone when `settings.timezone` is absent (asked only then)."""
    default_state_dir: Callable[[], Path]
    """The state directory when `settings.state_dir` is absent (asked only then)."""
    read_template: Callable[[Path], str]
    """The source of an alert template file; raises TemplateError when it cannot."""


def interpret_config(text: str, path: Path, host: ConfigHost) -> Config:
    """Validate `text` as the contents of the configuration file at `path`.

    Raises:
        ConfigError: listing every problem found; nothing is returned then.
    """
    path = path.absolute()
    with collector_paused():
        root, problems = read_yaml(path, text, owner_of)
        return _interpret(path, root, problems, host)


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a configuration (or a schedule) is built.

    Reading builds millions of small objects and no reference cycles; the
    collector would rescan the growing graph again and again (a 100,000-job
    file loads about 3x faster without it).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _interpret(path: Path, root: Value | None, problems: list[Problem], host: ConfigHost) -> Config:
    if root is None:
        raise ConfigError(problems)
    interpreter = _Interpreter(path, host)
    interpreter.values.problems.extend(problems)
    config = interpreter.config(root)
    if config is None or interpreter.values.problems:
        raise ConfigError(interpreter.values.problems)
    # Every alert template is rendered against a sample run: a typo fails here, not at 3 a.m.
    rendering = template_problems(config, host.read_template)
    if rendering:
        raise ConfigError(rendering)
    return config


def owner_of(keys: tuple[str, ...]) -> dict[str, str]:
    """The job or group that the YAML under `keys` belongs to, as Problem fields."""
    if len(keys) >= 2 and keys[0] in ("jobs", "groups"):
        return {keys[0][:-1]: keys[1]}
    return {}


class _Interpreter:
    """Walks the located YAML and builds the model, recording problems as it goes."""

    def __init__(self, path: Path, host: ConfigHost) -> None:
        self.path = path
        self.values = Values(path, base=path.parent)
        self.sections = Sections(self.values, host)
        self.key_lines: dict[str, dict[str, int]] = {}
        """Line of each key of each job, for problems found across jobs."""

    def config(self, root: Value) -> Config | None:
        top = self._top(root)
        if top is None:
            return None
        settings = self.sections.settings(top.get("settings"))
        email = self.sections.email(top["email"]) if "email" in top else None
        jobs = self.jobs(top.get("jobs"), root.line, settings)
        groups = self.groups(top.get("groups"), jobs)
        self._check_dependencies(jobs)
        self._check_alerts(jobs, groups, email, top)
        if settings is None:
            return None
        jobs = _with_groups(jobs, groups)
        return Config(
            path=self.path,
            settings=settings,
            jobs=MappingProxyType(jobs),
            groups=MappingProxyType(groups),
            email=email,
        )

    def _top(self, root: Value) -> dict[str, Entry] | None:
        if not isinstance(root, Map):
            self.values.problem(root.line, "the configuration must be a mapping with a 'jobs:' key")
            return None
        # `x-` keys hold YAML anchors for reuse (as in Compose files); they are not read.
        for key, entry in root.entries.items():
            if key not in TOP_KEYS and not key.startswith("x-"):
                near = nearest(key, TOP_KEYS)
                self.values.problem(entry.key_line, f"unknown top-level key '{key}'{near}")
        return {key: entry for key, entry in root.entries.items() if key in TOP_KEYS}

    # --- groups ------------------------------------------------------------

    def groups(self, entry: Entry | None, jobs: Mapping[str, Job]) -> dict[str, Group]:
        if entry is None:
            return {}
        value = entry.value
        if isinstance(value, Scalar) and value.is_null:
            return {}
        if not isinstance(value, Map):
            self.values.problem(value.line, "groups must map each group name to its members")
            return {}
        groups = {}
        for name, group_entry in value.entries.items():
            with self.values.scope(group=name):
                group = self._group(name, group_entry, jobs)
            if group is not None:
                groups[name] = group
        return groups

    def _group(self, name: str, entry: Entry, jobs: Mapping[str, Job]) -> Group | None:
        if not self._check_name(name, entry.key_line, "group"):
            return None
        fields = self.values.mapping(entry.value, "the group", GROUP_KEYS)
        if fields is None:
            return None
        if "jobs" not in fields:
            self.values.problem(entry.key_line, "a group needs 'jobs' (a list of job names)")
            return None
        members = self.values.string_list(fields["jobs"].value, "jobs") or []
        seen: set[str] = set()
        for member, line in members:
            if member in seen:
                self.values.problem(line, f"job '{member}' is listed twice")
            elif member not in jobs:
                near = nearest(member, frozenset(jobs))
                self.values.problem(line, f"unknown group member: no job named '{member}'{near}")
            seen.add(member)
        alerts = self.sections.alerts(fields["alerts"].value) if "alerts" in fields else ()
        return Group(
            name=name,
            jobs=tuple(member for member, _ in members),
            alerts=alerts or (),
            line=entry.key_line,
        )

    # --- jobs --------------------------------------------------------------

    def jobs(
        self, entry: Entry | None, root_line: int, settings: Settings | None
    ) -> dict[str, Job]:
        if entry is None:
            self.values.problem(root_line, "the configuration has no 'jobs:' section")
            return {}
        value = entry.value
        if isinstance(value, Scalar) and value.is_null:
            self.values.problem(
                entry.key_line, "'jobs:' is empty (a truncated file?); write 'jobs: {}' for no jobs"
            )
            return {}
        if not isinstance(value, Map):
            self.values.problem(value.line, "jobs must map each job name to its definition")
            return {}
        zone = settings.timezone if settings is not None else ZoneInfo("UTC")
        jobs = {}
        for name, job_entry in value.entries.items():
            with self.values.scope(job=name):
                job = self._job(name, job_entry, zone)
            if job is not None:
                jobs[name] = job
        return jobs

    def _job(self, name: str, entry: Entry, default_zone: ZoneInfo) -> Job | None:
        if not self._check_name(name, entry.key_line, "job"):
            return None
        fields = self.values.mapping(entry.value, "the job", JOB_KEYS)
        if fields is None:
            return None
        self.key_lines[name] = {key: field.key_line for key, field in fields.items()}
        before = len(self.values.problems)
        zone = self.values.opt(fields, "timezone", self.values.zone, "timezone") or default_zone
        kwargs: dict[str, object] = {"name": name, "line": entry.key_line, "timezone": zone}
        kwargs["kind"] = self._kind(fields, entry)
        kwargs["schedule"], kwargs["after"] = self._trigger(fields, entry, zone)
        self._job_options(kwargs, fields)
        if kwargs["kind"] is None or len(self.values.problems) > before:
            return None
        job = Job(**kwargs)  # type: ignore[arg-type]
        self._check_job(job, fields)
        return job

    def _job_options(self, kwargs: dict[str, object], fields: dict[str, Entry]) -> None:
        v = self.values
        self.values.put(kwargs, fields, "description", v.text)
        self.values.put(kwargs, fields, "priority", v.integer)
        self.values.put(kwargs, fields, "timeout", v.duration)
        self.values.put(kwargs, fields, "overlap", self.values.enum(Overlap))
        self.values.put(kwargs, fields, "retries", lambda x, w: v.integer(x, w, minimum=0))
        self.values.put(kwargs, fields, "retry_delay", v.duration)
        self.values.put(kwargs, fields, "enabled", v.boolean)
        self.values.put(kwargs, fields, "grace", v.duration)
        self.values.put(kwargs, fields, "misfire", self.values.enum(Misfire))
        self.values.put(kwargs, fields, "wait_timeout", v.duration)
        self.values.put(kwargs, fields, "recover", v.boolean)
        self.values.put(kwargs, fields, "alerts", lambda x, _: self.sections.alerts(x))
        if "requires" in fields:
            names = v.string_list(fields["requires"].value, "requires")
            kwargs["requires"] = tuple(n for n, _ in names) if names is not None else None

    def _check_job(self, job: Job, fields: dict[str, Entry]) -> None:
        if isinstance(job.kind, WaitForSpec) and job.timeout is None:
            self.values.problem(job.line, "a wait_for job needs a timeout (how long to wait)")
        if job.timeout is not None and not job.timeout:
            self.values.problem(fields["timeout"].value.line, "timeout must be longer than 0s")

    def _kind(self, fields: dict[str, Entry], entry: Entry) -> JobKind | None:
        kinds = [key for key in KIND_KEYS if key in fields]
        if len(kinds) != 1:
            found = " and ".join(kinds) if kinds else "none"
            self.values.problem(
                entry.key_line,
                f"a job needs exactly one kind (command, python or wait_for); found {found}",
            )
            return None
        kind = kinds[0]
        if kind != "command":
            for key in COMMAND_KEYS & set(fields):
                self.values.problem(fields[key].key_line, f"'{key}' applies only to command jobs")
        value = fields[kind].value
        if kind == "python":
            return self._python(value)
        if kind == "wait_for":
            path = self.values.path(value, "wait_for")
            return WaitForSpec(path=str(path)) if path else None
        return self._command(value, fields)

    def _python(self, value: Value) -> PythonSpec | None:
        target = self.values.text(value, "python")
        if target is None:
            return None
        module, _, attr = target.partition(":")
        if not (_dotted(module) and _dotted(attr)):
            self.values.problem(value.line, f"python must be 'package.module:attr', not '{target}'")
            return None
        return PythonSpec(target=target)

    def _command(self, value: Value, fields: dict[str, Entry]) -> CommandSpec | None:
        v = self.values
        kwargs: dict[str, object] = {}
        if isinstance(value, Scalar):
            kwargs["shell"] = v.text(value, "command")
        else:
            argv = v.string_list(value, "command")
            if argv is not None and not argv:
                v.problem(value.line, "command is an empty list")
                argv = None
            kwargs["argv"] = tuple(arg for arg, _ in argv) if argv is not None else None
        self.values.put(kwargs, fields, "cwd", self.values.path)
        self.values.put(kwargs, fields, "env", self._env)
        self.values.put(kwargs, fields, "success_codes", self._codes)
        if None in kwargs.values():
            return None
        return CommandSpec(**kwargs)  # type: ignore[arg-type]

    def _env(self, value: Value, what: str) -> Mapping[str, str] | None:
        if not isinstance(value, Map):
            self.values.problem(value.line, f"{what} must map variable names to values")
            return None
        env = {}
        for key, entry in value.entries.items():
            if not key or "=" in key or "\0" in key:
                self.values.problem(entry.key_line, f"{what}: bad variable name '{key}'")
            scalar = self.values.scalar(entry.value, f"{what}.{key}")
            if scalar is not None:
                env[key] = scalar.text
        return MappingProxyType(env)

    def _codes(self, value: Value, what: str) -> frozenset[int] | None:
        items = value.items if not isinstance(value, Scalar | Map) else (value,)
        codes = [self.values.integer(item, f"each of {what}", minimum=0) for item in items]
        if None in codes or isinstance(value, Map):
            return None
        if not codes or any(code > 255 for code in codes if code is not None):
            self.values.problem(value.line, f"{what} must list exit codes from 0 to 255")
            return None
        return frozenset(code for code in codes if code is not None)

    # --- triggers ------------------------------------------------------------

    def _trigger(
        self, fields: dict[str, Entry], entry: Entry, zone: ZoneInfo
    ) -> tuple[Schedule | None, After | None]:
        has_schedule, has_after = "schedule" in fields, "after" in fields
        if has_schedule and has_after:
            self.values.problem(
                fields["after"].key_line,
                "a job has exactly one trigger source: 'schedule' or 'after', not both",
            )
            return None, None
        if not has_schedule and not has_after:
            self.values.problem(
                entry.key_line,
                "a job needs a trigger source: 'schedule' or 'after' "
                "(write 'schedule: manual' for a job run only by hand)",
            )
            return None, None
        if has_after:
            return None, self._after(fields["after"].value)
        return self._schedule(fields["schedule"].value, zone), None

    def _after(self, value: Value) -> After | None:
        if isinstance(value, Scalar):
            job = self.values.text(value, "after")
            return After(job=job) if job else None
        fields = self.values.mapping(value, "after", AFTER_KEYS)
        if fields is None:
            return None
        if "job" not in fields:
            self.values.problem(value.line, "after needs 'job' (the job to follow)")
            return None
        kwargs: dict[str, object] = {}
        self.values.put(kwargs, fields, "job", self.values.text, prefix="after")
        self.values.put(kwargs, fields, "on", self.values.enum(Outcome), prefix="after")
        self.values.put(kwargs, fields, "delay", self.values.duration, prefix="after")
        if None in kwargs.values():
            return None
        return After(**kwargs)  # type: ignore[arg-type]

    def _schedule(self, value: Value, zone: ZoneInfo) -> Schedule | None:
        if isinstance(value, Scalar) and value.text == "manual":
            return ManualSchedule(tz=zone)
        if not isinstance(value, Map):
            self.values.problem(
                value.line,
                "schedule must be a mapping with every, cron or at, or the word 'manual'",
            )
            return None
        fields = self.values.mapping(value, "schedule", SCHEDULE_KEYS)
        if fields is None:
            return None
        forms = [key for key in ("every", "cron", "at") if key in fields]
        if len(forms) != 1:
            found = " and ".join(forms) if forms else "none"
            self.values.problem(
                value.line, f"schedule needs exactly one of every, cron or at; found {found}"
            )
            return None
        start = self.values.opt(fields, "start", self._instant(zone), "schedule.start")
        stop = self.values.opt(fields, "stop", self._instant(zone), "schedule.stop")
        if start is not None and stop is not None and start > stop:
            self.values.problem(
                fields["start"].value.line,
                f"schedule.start {start.isoformat()} is after schedule.stop {stop.isoformat()}",
            )
            return None
        return self._schedule_form(forms[0], fields, value.line, (start, stop), zone)

    def _schedule_form(
        self,
        form: str,
        fields: dict[str, Entry],
        line: int,
        window: tuple[datetime | None, datetime | None],
        zone: ZoneInfo,
    ) -> Schedule | None:
        start, stop = window
        form_value = fields[form].value
        if form == "at":
            for key in ("start", "stop"):
                if key in fields:
                    self.values.problem(fields[key].key_line, f"'{key}' does not apply to 'at'")
            at = self._instant(zone)(form_value, "schedule.at")
            return AtSchedule(at=at, tz=zone) if at is not None else None
        text = self.values.text(form_value, f"schedule.{form}")
        if text is None:
            return None
        try:
            if form == "cron":
                return CronSchedule(expr=CronExpr.parse(text), start=start, stop=stop, tz=zone)
            step, unit = parse_every(text)
        except (CronError, ScheduleError) as error:
            self.values.problem(form_value.line, f"schedule.{form}: {error}")
            return None
        if start is None:
            if "start" not in fields:
                self.values.problem(line, "an 'every' schedule needs 'start' (its first slot)")
            return None
        return EverySchedule(step=step, unit=unit, start=start, stop=stop, tz=zone)

    def _instant(self, zone: ZoneInfo) -> Callable[[Value, str], datetime | None]:
        def read(value: Value, what: str) -> datetime | None:
            moment = self.values.local_datetime(value, what)
            if moment is None:
                return None
            if moment.tzinfo is not None:
                return moment.astimezone(zone)
            return localize(moment, zone)

        return read

    # --- whole-configuration checks -------------------------------------------

    def _check_dependencies(self, jobs: Mapping[str, Job]) -> None:
        names = frozenset(jobs)
        for job in jobs.values():
            with self.values.scope(job=job.name):
                if job.after is not None and job.after.job not in names:
                    near = nearest(job.after.job, names)
                    line = self._line(job, "after")
                    self.values.problem(line, f"after names unknown job '{job.after.job}'{near}")
                self._check_requires(job, jobs)
        graph = {
            job.name: [
                *([job.after.job] if job.after else []),
                *(name for name in job.requires if name not in (SELF, job.name)),
            ]
            for job in jobs.values()
            if job.after or job.requires  # a job that depends on none is in no cycle
        }
        cycle = find_cycle(graph)
        if cycle is not None:
            first = jobs[cycle[0]]
            with self.values.scope(job=first.name):
                line = self._line(first, "after" if first.after else "requires")
                self.values.problem(line, f"dependency cycle: {' -> '.join(cycle)}")

    def _check_requires(self, job: Job, jobs: Mapping[str, Job]) -> None:
        if not job.requires:
            return
        if job.schedule is None or cycle_of(job.schedule) is None:
            self.values.problem(
                self._line(job, "requires"),
                "requires needs a cron schedule, or an every schedule whose step is a cycle "
                "(minutes dividing an hour, hours dividing a day, 1 day, week, month or year)",
            )
            return
        for name in job.requires:
            upstream = jobs.get(name)
            if name in (SELF, job.name):
                continue
            if upstream is None:
                near = nearest(name, frozenset(jobs) | {SELF})
                self.values.problem(
                    self._line(job, "requires"), f"requires names unknown job '{name}'{near}"
                )
            elif upstream.schedule is None or cycle_of(upstream.schedule) is None:
                self.values.problem(
                    self._line(job, "requires"),
                    f"requires '{name}', which has no cycle (it needs a cron or every schedule)",
                )

    def _check_alerts(
        self,
        jobs: Mapping[str, Job],
        groups: Mapping[str, Group],
        email: EmailSettings | None,
        top: dict[str, Entry],
    ) -> None:
        owners: list[tuple[str | None, str | None, int, tuple[AlertRule, ...]]] = [
            (job.name, None, job.line, job.alerts) for job in jobs.values()
        ] + [(None, group.name, group.line, group.alerts) for group in groups.values()]
        for job, group, line, rules in owners:
            with self.values.scope(job=job, group=group):
                if rules and "email" not in top:
                    self.values.problem(line, "alerts need the top-level 'email:' section")
                elif (
                    email is not None
                    and email.default_template is None
                    and any(rule.template is None for rule in rules)
                ):
                    self.values.problem(
                        line, "an alert without 'template' needs email.default_template"
                    )

    # --- shared readers --------------------------------------------------------

    def _line(self, job: Job, key: str) -> int:
        """The line of `key` in `job`'s definition, else the job's own line."""
        return self.key_lines.get(job.name, {}).get(key, job.line)

    def _check_name(self, name: str, line: int, what: str) -> bool:
        if not name.strip():
            self.values.problem(line, f"a {what} name must not be empty")
            return False
        if not set(name) <= _NAME_CHARS or len(name) > 100 or name.startswith("."):
            self.values.problem(
                line,
                f"bad {what} name '{name}': use up to 100 letters, digits, '_', '-', '.' or ':' "
                "(not starting with '.')",
            )
            return False
        if name == SELF:
            self.values.problem(line, f"'{SELF}' is reserved (requires: [self]); pick another name")
            return False
        return True


def _dotted(text: str) -> bool:
    return bool(text) and all(part.isidentifier() for part in text.split("."))


def _with_groups(jobs: Mapping[str, Job], groups: Mapping[str, Group]) -> dict[str, Job]:
    membership: dict[str, list[str]] = {}
    for group in groups.values():
        for member in group.jobs:
            if member in jobs:
                membership.setdefault(member, []).append(group.name)
    result = dict(jobs)
    for name, names in membership.items():  # only members are rebuilt: 100,000 jobs load fast
        result[name] = replace(jobs[name], groups=tuple(names))
    return result
