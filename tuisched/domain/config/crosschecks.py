"""Checks across the whole configuration: dependencies between jobs, and alerts."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from tuisched.domain.config.dependencies import cycle_of, find_cycle
from tuisched.domain.config.keys import SELF
from tuisched.domain.config.values import Values, nearest
from tuisched.domain.config.yamlsource import Entry
from tuisched.domain.model import AlertRule, EmailSettings, Group, Job


def check_dependencies(
    values: Values, jobs: Mapping[str, Job], line: Callable[[Job, str], int]
) -> None:
    """`after` and `requires` name existing jobs with cycles, and form no dependency cycle."""
    names = frozenset(jobs)
    for job in jobs.values():
        with values.scope(job=job.name):
            if job.after is not None and job.after.job not in names:
                near = nearest(job.after.job, names)
                values.problem(
                    line(job, "after"), f"after names unknown job '{job.after.job}'{near}"
                )
            _check_requires(values, job, jobs, line)
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
        with values.scope(job=first.name):
            where = line(first, "after" if first.after else "requires")
            values.problem(where, f"dependency cycle: {' -> '.join(cycle)}")


def _check_requires(
    values: Values, job: Job, jobs: Mapping[str, Job], line: Callable[[Job, str], int]
) -> None:
    if not job.requires:
        return
    if job.schedule is None or cycle_of(job.schedule) is None:
        values.problem(
            line(job, "requires"),
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
            values.problem(line(job, "requires"), f"requires names unknown job '{name}'{near}")
        elif upstream.schedule is None or cycle_of(upstream.schedule) is None:
            values.problem(
                line(job, "requires"),
                f"requires '{name}', which has no cycle (it needs a cron or every schedule)",
            )


def check_alerts(
    values: Values,
    jobs: Mapping[str, Job],
    groups: Mapping[str, Group],
    email: EmailSettings | None,
    top: dict[str, Entry],
) -> None:
    """Every alert rule has `email:` to go through, and a template to render."""
    owners: list[tuple[str | None, str | None, int, tuple[AlertRule, ...]]] = [
        (job.name, None, job.line, job.alerts) for job in jobs.values()
    ] + [(None, group.name, group.line, group.alerts) for group in groups.values()]
    for job, group, line, rules in owners:
        with values.scope(job=job, group=group):
            if rules and "email" not in top:
                values.problem(line, "alerts need the top-level 'email:' section")
            elif (
                email is not None
                and email.default_template is None
                and any(rule.template is None for rule in rules)
            ):
                values.problem(line, "an alert without 'template' needs email.default_template")
