"""Checks across the whole configuration: dependencies between jobs, and alerts.

A job whose own definition has problems is left out of the jobs checked here,
but it is still written in the file: the jobs naming it are not told it is
unknown (`refused` lists such names), so one mistake is reported once, where
it is, and not again at every line that names the job.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping

from tuisched.domain.config.dependencies import cycle_of, find_cycle
from tuisched.domain.config.keys import SELF
from tuisched.domain.config.values import Values, nearest
from tuisched.domain.config.yamlsource import Entry
from tuisched.domain.model import AlertRule, EmailSettings, Group, Job


def check_dependencies(
    values: Values,
    jobs: Mapping[str, Job],
    line: Callable[[Job, str], int],
    refused: Collection[str] = (),
) -> None:
    """`after` and `requires` name existing jobs with cycles, and form no dependency cycle.

    A name in `refused` (a job written in the file whose definition has problems) is
    not reported again as unknown.
    """
    for job in jobs.values():
        check_job_dependencies(values, job, jobs, line, refused)
    report_cycle(values, jobs, find_cycle(dependency_graph(jobs)), line)


def check_job_dependencies(
    values: Values,
    job: Job,
    jobs: Mapping[str, Job],
    line: Callable[[Job, str], int],
    refused: Collection[str] = (),
) -> None:
    """`job`'s `after` and `requires` name jobs of `jobs`, and what it requires has a cycle;
    a job named in `refused` has its own problems reported already, so it is skipped."""
    with values.scope(job=job.name):
        after = job.after.job if job.after is not None else None
        if after is not None and after not in jobs and after not in refused:
            near = nearest(after, frozenset(jobs))
            values.problem(line(job, "after"), f"after names unknown job '{after}'{near}")
        _check_requires(values, job, jobs, line, refused)


def dependency_graph(jobs: Mapping[str, Job]) -> dict[str, list[str]]:
    """Each job that depends on others, with the jobs it names in `after` and `requires`."""
    return {
        job.name: depends_on(job)
        for job in jobs.values()
        if job.after or job.requires  # a job that depends on none is in no cycle
    }


def depends_on(job: Job) -> list[str]:
    """The jobs `job` names in `after` and `requires` (`self` left out)."""
    return [
        *([job.after.job] if job.after else []),
        *(name for name in job.requires if name not in (SELF, job.name)),
    ]


def report_cycle(
    values: Values,
    jobs: Mapping[str, Job],
    cycle: list[str] | None,
    line: Callable[[Job, str], int],
) -> None:
    """Record `cycle` (from `find_cycle`), if any, on the line of its first job."""
    if cycle is None:
        return
    first = jobs[cycle[0]]
    with values.scope(job=first.name):
        where = line(first, "after" if first.after else "requires")
        values.problem(where, f"dependency cycle: {' -> '.join(cycle)}")


def _check_requires(
    values: Values,
    job: Job,
    jobs: Mapping[str, Job],
    line: Callable[[Job, str], int],
    refused: Collection[str],
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
        if name in (SELF, job.name) or (upstream is None and name in refused):
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
    *,
    webhooks: Collection[str] | None = None,
) -> None:
    """Every mail rule has `email:` to go through and a template to render; every
    webhook a rule names is defined under `webhooks:` (None: not checked)."""
    owners: list[tuple[str | None, str | None, int, tuple[AlertRule, ...]]] = [
        (job.name, None, job.line, job.alerts) for job in jobs.values()
    ] + [(None, group.name, group.line, group.alerts) for group in groups.values()]
    for job, group, line, rules in owners:
        mail = [rule for rule in rules if rule.to]
        with values.scope(job=job, group=group):
            if mail and "email" not in top:
                values.problem(line, "alerts need the top-level 'email:' section")
            elif (
                email is not None
                and email.default_template is None
                and any(rule.template is None for rule in mail)
            ):
                values.problem(line, "an alert without 'template' needs email.default_template")
            if webhooks is not None:
                _check_webhook_names(values, line, rules, webhooks)


def _check_webhook_names(
    values: Values, line: int, rules: tuple[AlertRule, ...], webhooks: Collection[str]
) -> None:
    """Each webhook named by `rules` is written under `webhooks:` (a refused one has its own
    problem)."""
    for name in dict.fromkeys(name for rule in rules for name in rule.webhooks):
        if name not in webhooks:
            near = nearest(name, frozenset(webhooks))
            values.problem(line, f"alerts name unknown webhook '{name}'{near}")
