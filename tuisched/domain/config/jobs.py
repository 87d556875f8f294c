"""The `jobs:` section: each job's kind, options and trigger, read with their lines."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from types import MappingProxyType
from zoneinfo import ZoneInfo

from tuisched.domain.config.hints import (
    braces_hint,
    jobs_hint,
    stray_key_hint,
    unindented_keys_hint,
)
from tuisched.domain.config.keys import (
    COMMAND_KEYS,
    ISOLATIONS,
    JOB_KEYS,
    KIND_KEYS,
    NAME_CHARS,
    PYTHON_KEYS,
    SELF,
)
from tuisched.domain.config.sections import Sections
from tuisched.domain.config.triggers import TriggerReader
from tuisched.domain.config.values import Values
from tuisched.domain.config.yamlsource import Entry, Map, Scalar, Seq, Value
from tuisched.domain.model import (
    AtSchedule,
    CommandSpec,
    CronSchedule,
    EverySchedule,
    Job,
    JobKind,
    Misfire,
    Overlap,
    PythonSpec,
    Settings,
    WaitForSpec,
)


class JobReader:
    """Reads the jobs, recording problems in `values` and each job's key lines."""

    def __init__(self, values: Values, sections: Sections) -> None:
        self.values = values
        self.sections = sections
        self.triggers = TriggerReader(values)
        self.key_lines: dict[str, dict[str, int]] = {}
        """Line of each key of each job, for problems found across jobs."""

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
            hint = _section_hint(value)
            self.values.problem(value.line, f"jobs must map each job name to its definition{hint}")
            return {}
        zone = settings.timezone if settings is not None else ZoneInfo("UTC")
        jobs = {}
        misplaced = self._misplaced_keys(value.entries)
        for name, job_entry in value.entries.items():
            if name in misplaced:
                continue
            with self.values.scope(job=name):
                job = self.job(name, job_entry, zone)
            if job is not None:
                jobs[name] = job
        return jobs

    def _misplaced_keys(self, entries: Mapping[str, Entry]) -> set[str]:
        """Reports a job's keys written where job names go (`command:` under `jobs:`, with
        no mapping of its own), with the job above them that has no keys (whose keys they
        are, most likely); returns the names reported, not to be read as jobs."""
        strays = [n for n, e in entries.items() if n in JOB_KEYS and not isinstance(e.value, Map)]
        names = list(entries)
        owned: set[str] = set()
        for at, name in enumerate(names):
            below = list(itertools.takewhile(strays.__contains__, names[at + 1 :]))
            if below and name not in strays and _is_empty(entries[name].value):
                with self.values.scope(job=name):
                    hint = unindented_keys_hint(below)
                    self.values.problem(entries[name].key_line, f"the job has no keys{hint}")
                owned |= {name, *below}
        for name in strays:
            if name not in owned:
                hint = stray_key_hint(name)
                self.values.problem(entries[name].key_line, f"'{name}' is no job's name{hint}")
        return owned | set(strays)

    def job(self, name: str, entry: Entry, default_zone: ZoneInfo) -> Job | None:
        """Job `name` from its entry under `jobs:`, or None when it has problems (recorded)."""
        if not check_name(self.values, name, entry.key_line, "job"):
            return None
        fields = self.values.mapping(entry.value, "the job", JOB_KEYS)
        if fields is None:
            return None
        self.key_lines[name] = {key: field.key_line for key, field in fields.items()}
        before = len(self.values.problems)
        zone = self.values.opt(fields, "timezone", self.values.zone, "timezone") or default_zone
        kwargs: dict[str, object] = {"name": name, "line": entry.key_line, "timezone": zone}
        kwargs["kind"] = self._kind(fields, entry)
        kwargs["schedule"], kwargs["after"] = self.triggers.trigger(fields, entry, zone)
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
        self.values.put(
            kwargs, fields, "retries", lambda x, w: v.integer(x, w, minimum=0, maximum=1000)
        )
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
        self.values.put(kwargs, fields, "jitter", v.duration)

    def _check_job(self, job: Job, fields: dict[str, Entry]) -> None:
        if isinstance(job.kind, WaitForSpec) and job.timeout is None:
            self.values.problem(job.line, "a wait_for job needs a timeout (how long to wait)")
        if job.timeout is not None and not job.timeout:
            self.values.problem(fields["timeout"].value.line, "timeout must be longer than 0s")
        if job.jitter and not isinstance(job.schedule, CronSchedule | EverySchedule | AtSchedule):
            self.values.problem(
                fields["jitter"].key_line,
                "jitter applies only to jobs with a schedule (every, cron or at)",
            )

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
        if kind != "python":
            for key in PYTHON_KEYS & set(fields):
                self.values.problem(fields[key].key_line, f"'{key}' applies only to python jobs")
        value = fields[kind].value
        if kind == "python":
            return self._python(value, fields.get("isolation"))
        if kind == "wait_for":
            path = self.values.path(value, "wait_for")
            return WaitForSpec(path=str(path)) if path else None
        return self._command(value, fields)

    def _python(self, value: Value, isolation: Entry | None) -> PythonSpec | None:
        target = self.values.text(value, "python")
        if target is None:
            return None
        module, _, attr = target.partition(":")
        if not (_dotted(module) and _dotted(attr)):
            self.values.problem(value.line, f"python must be 'package.module:attr', not '{target}'")
            return None
        in_thread = False
        if isolation is not None:
            how = self.values.text(isolation.value, "isolation")
            if how not in ISOLATIONS:
                if how is not None:
                    choices = " or ".join(ISOLATIONS)
                    self.values.problem(
                        isolation.value.line, f"isolation must be {choices}, not '{how}'"
                    )
                return None
            in_thread = how == "thread"
        return PythonSpec(target=target, in_thread=in_thread, line=value.line)

    def _command(self, value: Value, fields: dict[str, Entry]) -> CommandSpec | None:
        v = self.values
        kwargs: dict[str, object] = {}
        if isinstance(value, Scalar):
            shell = v.text(value, "command")
            usable = shell is None or _no_nul(v, value, shell, "command")
            kwargs["shell"] = shell if usable else None
        elif isinstance(value, Map):  # `command: { echo a; echo b; }` is a YAML mapping
            v.problem(value.line, f"command must be text or a list, not a mapping{braces_hint()}")
            kwargs["argv"] = None
        else:
            argv = v.string_list(value, "command")
            if argv is not None and not argv:
                v.problem(value.line, "command is an empty list")
                argv = None
            if argv is not None and not all(_no_nul(v, value, arg, "command") for arg, _ in argv):
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
            name = f"{what}.{key}"
            scalar = self.values.scalar(entry.value, name)
            if scalar is not None and _no_nul(self.values, entry.value, scalar.text, name):
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

    def line(self, job: Job, key: str) -> int:
        """The line of `key` in `job`'s definition, else the job's own line."""
        return self.key_lines.get(job.name, {}).get(key, job.line)


def _is_empty(value: Value) -> bool:
    return isinstance(value, Scalar) and value.is_null


def _section_hint(value: Value) -> str:
    """What to write for a `jobs:` section that is a list or a single value."""
    first = value.items[0] if isinstance(value, Seq) and value.items else value
    if isinstance(first, Map):
        texts = {
            k: e.value.text if isinstance(e.value, Scalar) else "" for k, e in first.entries.items()
        }
        return jobs_hint("", texts)
    return jobs_hint(first.text if isinstance(first, Scalar) else "", {})


def _no_nul(values: Values, value: Value, text: str, what: str) -> bool:
    """Whether `text` is free of NUL, which no program's arguments or environment can hold
    (a problem is recorded when not: every run would fail to start)."""
    if "\0" in text:
        values.problem(value.line, f"{what} holds a NUL character, which no program can take")
        return False
    return True


def check_name(values: Values, name: str, line: int, what: str) -> bool:
    """Whether `name` is a valid job or group name; a problem is recorded when not."""
    if not name.strip():
        values.problem(line, f"a {what} name must not be empty")
        return False
    if not set(name) <= NAME_CHARS or len(name) > 100 or name.startswith("."):
        values.problem(
            line,
            f"bad {what} name '{name}': use up to 100 letters, digits, '_', '-', '.' or ':' "
            "(not starting with '.')",
        )
        return False
    if name == SELF:
        values.problem(line, f"'{SELF}' is reserved (requires: [self]); pick another name")
        return False
    return True


def _dotted(text: str) -> bool:
    return bool(text) and all(part.isidentifier() for part in text.split("."))
