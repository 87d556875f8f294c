"""Turn a YAML configuration into a valid `Config`, or a `ConfigError` listing every problem.

Nothing is loaded from a file with a problem: `interpret_config` either
returns a whole configuration or raises with all the problems it found, each
naming the file, the line, the job (or group) and the rule broken. What it
needs from the machine comes through a `ConfigHost`.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator, Mapping, Set
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

from tuisched.domain.config import keys
from tuisched.domain.config.crosschecks import check_alerts, check_dependencies
from tuisched.domain.config.hints import top_key_hint
from tuisched.domain.config.host import ConfigHost
from tuisched.domain.config.jobs import JobReader, check_name
from tuisched.domain.config.sections import SETTINGS_KEYS, Sections, WebhookSections
from tuisched.domain.config.values import Values, nearest
from tuisched.domain.config.yamlsource import Entry, Map, Scalar, Value, read_yaml
from tuisched.domain.errors import ConfigError, Problem
from tuisched.domain.model import (
    Config,
    Group,
    Job,
)
from tuisched.domain.templates import template_problems
from tuisched.domain.templates.checks import webhook_template_problems

SELF = keys.SELF
"""In `requires`, the job itself (see `tuisched.domain.config.keys`)."""


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
    rendering = template_problems(config, host.read_template, host.render_limit)
    rendering += webhook_template_problems(config, host.read_template, host.render_limit)
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
        self.job_reader = JobReader(self.values, self.sections)

    def config(self, root: Value) -> Config | None:
        top = self._top(root)
        if top is None:
            return None
        settings = self.sections.settings(top.get("settings"))
        email = self.sections.email(top["email"]) if "email" in top else None
        jobs = self.job_reader.jobs(top.get("jobs"), root.line, settings)
        refused = _written(top.get("jobs")) - jobs.keys()
        groups = self.groups(top.get("groups"), jobs, refused)
        check_dependencies(self.values, jobs, self.job_reader.line, refused)
        webhooks = (
            WebhookSections(self.sections).webhooks(top["webhooks"]) if "webhooks" in top else {}
        )
        check_alerts(self.values, jobs, groups, email, top, webhooks=_written(top.get("webhooks")))
        if settings is None:
            return None
        jobs = _with_groups(jobs, groups)
        return Config(
            path=self.path,
            settings=settings,
            jobs=MappingProxyType(jobs),
            groups=MappingProxyType(groups),
            email=email,
            webhooks=MappingProxyType(webhooks),
        )

    def _top(self, root: Value) -> dict[str, Entry] | None:
        if not isinstance(root, Map):
            self.values.problem(root.line, "the configuration must be a mapping with a 'jobs:' key")
            return None
        # `x-` keys hold YAML anchors for reuse (as in Compose files); they are not read.
        for key, entry in root.entries.items():
            if key not in keys.TOP_KEYS and not key.startswith("x-"):
                inner = entry.value.entries if isinstance(entry.value, Map) else ()
                hint = top_key_hint(key, inner, SETTINGS_KEYS)
                self.values.problem(entry.key_line, f"unknown top-level key '{key}'{hint}")
        return {key: entry for key, entry in root.entries.items() if key in keys.TOP_KEYS}

    # --- groups ------------------------------------------------------------

    def groups(
        self, entry: Entry | None, jobs: Mapping[str, Job], refused: Set[str] = frozenset()
    ) -> dict[str, Group]:
        """The groups; a member in `refused` (a job with problems of its own) is not unknown."""
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
                group = self._group(name, group_entry, jobs, refused)
            if group is not None:
                groups[name] = group
        return groups

    def _group(
        self, name: str, entry: Entry, jobs: Mapping[str, Job], refused: Set[str]
    ) -> Group | None:
        if not check_name(self.values, name, entry.key_line, "group"):
            return None
        fields = self.values.mapping(entry.value, "the group", keys.GROUP_KEYS)
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
            elif member not in jobs and member not in refused:
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


def _written(entry: Entry | None) -> set[str]:
    """The names of the jobs written under `jobs:` (those refused too)."""
    section = entry.value if entry is not None else None
    return set(section.entries) if isinstance(section, Map) else set()


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
