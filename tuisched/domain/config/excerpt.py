"""Checking a change to one job from an excerpt of the file, against the valid configuration.

A configuration that validated as a whole stays valid except where a change
reaches. Replacing job X's definition can break only:

- X itself: every rule a job's own definition follows (SPEC R7);
- the jobs that name X in `after` or `requires`: what they need of X (a cycle
  to require) may be gone;
- a dependency cycle, which would have to go through X (there was none before);
- the sample renders of the alert templates X takes part in.

Groups list names, and X keeps its name. So these are exactly the problems a
full check of the edited file finds, and checking them needs the text of X and
of its dependants only, not the other 10,000 jobs. Each problem keeps the
format and the line of a full check (`FILE:LINE: job 'NAME': message`). When
X itself is refused, both name X's own problems only: the jobs and groups that
name X are not told it is unknown (see `crosschecks`).

An *excerpt* is the file's text with every line blanked but those of some
jobs' blocks, under a `jobs:` on line 1, so each line keeps its number. It is
cut by the caller (the runtime knows where each job's block is); what it cuts
is checked here: the unchanged jobs must read back exactly as the live
configuration has them, or `ExcerptMismatch` tells the caller to check the
whole file instead.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

from tuisched.domain.config.config import collector_paused, owner_of
from tuisched.domain.config.crosschecks import (
    check_alerts,
    check_job_dependencies,
    dependency_graph,
    depends_on,
    report_cycle,
)
from tuisched.domain.config.dependencies import find_cycle
from tuisched.domain.config.host import ConfigHost
from tuisched.domain.config.jobs import JobReader
from tuisched.domain.config.sections import Sections
from tuisched.domain.config.values import Values
from tuisched.domain.config.yamlsource import Entry, Map, read_yaml
from tuisched.domain.errors import ConfigError, ExcerptMismatch
from tuisched.domain.model import Config, Job
from tuisched.domain.templates.checks import job_template_problems

Excerpt = Callable[[Collection[str]], str]
"""The file's text with only the blocks of the named jobs kept, every line in its place."""


@dataclass(slots=True)
class _Read:
    """Jobs read from an excerpt, with the problems found and each key's line."""

    jobs: dict[str, Job | None]
    reader: JobReader

    @property
    def values(self) -> Values:
        return self.reader.values


def dependants(config: Config, name: str) -> list[str]:
    """The jobs of `config` that name job `name` in `after` or `requires`, in file order."""
    return [
        job.name
        for job in config.jobs.values()
        if (job.after or job.requires) and job.name != name and name in depends_on(job)
    ]


def verify_excerpt(live: Config, names: Collection[str], text: str, host: ConfigHost) -> None:
    """Check that excerpt `text` holds jobs `names` exactly as `live` has them.

    Raises:
        ExcerptMismatch: it does not (the blocks were not cut where the jobs are).
    """
    read = _read(live, text, names, host)
    _same_as_live(live, read, names)


def replaced_job(live: Config, name: str, excerpt: Excerpt, host: ConfigHost) -> Config:
    """`live` with job `name` as the edited file's `excerpt` writes it, checked as a reload
    of the whole file would check it.

    Raises:
        ConfigError: the edited file would be refused (each problem located in it).
        ExcerptMismatch: the excerpt does not hold the unchanged jobs as `live` has them.
    """
    if name not in live.jobs:
        raise ExcerptMismatch(f"no job '{name}' to replace")
    return _changed(live, name, dependants(live, name), excerpt, host)


def added_job(live: Config, name: str, excerpt: Excerpt, host: ConfigHost) -> Config:
    """`live` with job `name` added last, as the edited file's `excerpt` writes it, checked
    as a reload would check it. No job names a new job (the file was valid, so none named
    it) and no group lists it: only its own definition, what it names and its alert
    templates can be wrong.

    Raises:
        ConfigError: the edited file would be refused (each problem located in it).
        ExcerptMismatch: a job by that name exists (the document says so, not this check).
    """
    if name in live.jobs:
        raise ExcerptMismatch(f"job '{name}' exists")
    return _changed(live, name, [], excerpt, host)


def _changed(
    live: Config, name: str, others: list[str], excerpt: Excerpt, host: ConfigHost
) -> Config:
    """`live` with job `name` as `excerpt` writes it, checked with the jobs naming it."""
    read = _read(live, excerpt([name, *others]), [name, *others], host)
    _same_as_live(live, read, others)
    new, known = read.jobs[name], live.jobs.get(name)
    edited = replace(new, groups=known.groups if known else ()) if new else None
    jobs = _Overlay(live.jobs, name, edited)
    refused = () if edited is not None else (name,)  # its own problems say it once
    for job in (jobs.get(name), *(jobs[other] for other in others)):
        if job is not None:
            check_job_dependencies(read.values, job, jobs, read.reader.line, refused)
    _check_cycle(live, read, jobs, excerpt, host)
    if edited is not None:
        _check_alerts(live, read.values, edited)
    if edited is None or read.values.problems:
        raise ConfigError(read.values.problems)
    config = replace(live, jobs=MappingProxyType({**live.jobs, name: edited}))
    rendering = job_template_problems(config, name, host.read_template, host.render_limit)
    if rendering:
        raise ConfigError(rendering)
    return config


def _read(live: Config, text: str, names: Collection[str], host: ConfigHost) -> _Read:
    """The jobs of excerpt `text` (None for one whose definition has problems).

    Raises:
        ExcerptMismatch: the excerpt does not hold exactly the jobs `names` under `jobs:`.
    """
    path = live.path
    with collector_paused():
        root, problems = read_yaml(path, text, owner_of)
    top = root.entries if isinstance(root, Map) else {}
    section = top["jobs"].value if set(top) == {"jobs"} else None
    if not isinstance(section, Map) or set(section.entries) != set(names):
        raise ExcerptMismatch(f"the excerpt does not hold exactly the jobs {sorted(names)}")
    values = Values(path, base=path.parent)
    values.problems.extend(problems)
    reader = JobReader(values, Sections(values, host))
    return _Read(jobs=_jobs(reader, section.entries, live), reader=reader)


def _jobs(reader: JobReader, entries: Mapping[str, Entry], live: Config) -> dict[str, Job | None]:
    zone = live.settings.timezone
    found: dict[str, Job | None] = {}
    for name, entry in entries.items():
        with reader.values.scope(job=name):
            found[name] = reader.job(name, entry, zone)
    return found


def _same_as_live(live: Config, read: _Read, names: Iterable[str]) -> None:
    """Jobs `names` read from an excerpt are the live ones (their lines may have moved)."""
    for name in names:
        job, known = read.jobs.get(name), live.jobs.get(name)
        if job is None or known is None or _moved(job, known) != known:
            raise ExcerptMismatch(f"job '{name}' does not read from the excerpt as it runs")


def _moved(job: Job, known: Job) -> Job:
    """`job` with the line and groups of `known` (which the excerpt cannot say)."""
    return replace(job, line=known.line, groups=known.groups)


def _check_cycle(
    live: Config, read: _Read, jobs: _Overlay, excerpt: Excerpt, host: ConfigHost
) -> None:
    """A cycle can only go through the replaced job; reported as a whole check reports it."""
    new = jobs.get(jobs.replaced)
    if new is None or not depends_on(new) or not _reaches(jobs, depends_on(new), new.name):
        return
    cycle = find_cycle(dependency_graph(jobs))  # the one a whole check names first
    if cycle is None:  # pragma: no cover  (a path back to the job is a cycle)
        return
    first = cycle[0]
    line = read.reader.line
    if first not in read.jobs:  # its key lines are in its own block
        line = _read(live, excerpt([first]), [first], host).reader.line
    report_cycle(read.values, jobs, cycle, line)


def _reaches(jobs: Mapping[str, Job], start: Iterable[str], target: str) -> bool:
    """Whether following `after` and `requires` from `start` leads to `target`."""
    seen: set[str] = set()
    pending = list(start)
    while pending:
        name = pending.pop()
        if name == target:
            return True
        job = jobs.get(name)
        if name in seen or job is None:
            continue
        seen.add(name)
        pending += depends_on(job)
    return False


def _check_alerts(live: Config, values: Values, job: Job) -> None:
    """The replaced job's alert rules have `email:` to go through (as `check_alerts`)."""
    top = {"email": Entry(key_line=1, value=Map(entries={}, line=1))} if live.email else {}
    check_alerts(values, {job.name: job}, {}, live.email, top, webhooks=live.webhooks)


class _Overlay(Mapping[str, Job]):
    """`base` with job `replaced` read anew, or added last (absent while its definition
    has problems).

    A view, not a copy: checking one job of 100,000 copies nothing.
    """

    def __init__(self, base: Mapping[str, Job], replaced: str, job: Job | None) -> None:
        self.base = base
        self.replaced = replaced
        self.job = job

    def __getitem__(self, name: str) -> Job:
        if name == self.replaced:
            if self.job is None:
                raise KeyError(name)
            return self.job
        return self.base[name]

    def __contains__(self, name: object) -> bool:
        if name == self.replaced:
            return self.job is not None
        return name in self.base

    def __iter__(self) -> Iterator[str]:
        for name in self.base:
            if name != self.replaced or self.job is not None:
                yield name
        if self.job is not None and self.replaced not in self.base:
            yield self.replaced

    def __len__(self) -> int:
        known = self.replaced in self.base
        return len(self.base) - (known and self.job is None) + (not known and self.job is not None)
