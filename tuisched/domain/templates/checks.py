"""Checking a configuration's templates by rendering them against a sample run."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from tuisched.domain.errors import Problem
from tuisched.domain.model import (
    AlertEvent,
    AlertRule,
    CommandSpec,
    Config,
    EmailSettings,
    Group,
    Job,
    ManualSchedule,
)
from tuisched.domain.templates.base import (
    Interrupt,
    TemplateError,
)
from tuisched.domain.templates.context import (
    sample_context,
)
from tuisched.domain.templates.rendering import (
    render,
)

TemplateReader = Callable[[Path], str]
"""Reads a template file's source (raises TemplateError when it cannot)."""
RenderLimit = Callable[[], Interrupt | None]
"""Gives each sample render its interrupt (a time budget), or None for none."""

# --- checking a configuration ---------------------------------------------------------


def _stand_in(config: Config, name: str, groups: tuple[str, ...]) -> Job:
    """A job to render a group's (or the subject's) templates with when no member exists."""
    tz = config.settings.timezone
    return Job(
        name=name,
        kind=CommandSpec(argv=("true",)),
        schedule=ManualSchedule(tz=tz),
        timezone=tz,
        groups=groups,
    )


def _rule_problem(
    job: Job, rule: AlertRule, email: EmailSettings, read_template: TemplateReader,
    limit: RenderLimit,
) -> str | None:  # fmt: skip
    """Why `rule`'s body template fails for a sample run of `job`, or None."""
    path = rule.template or email.default_template
    if path is None:
        return f"alerts.{rule.event}: no template and no email.default_template"
    origin = "" if rule.template is not None else " (email.default_template)"
    try:
        context = sample_context(job, rule.event, job.timezone)
        render(read_template(path), context, interrupt=limit())
    except TemplateError as error:
        where = f"{path}:{error.line}" if error.line is not None else str(path)
        return f"alerts.{rule.event}: template {where}{origin}: {error.reason}"
    return None


def job_template_problems(
    config: Config, name: str, read_template: TemplateReader, limit: RenderLimit | None = None
) -> list[Problem]:
    """The problems `template_problems` would find that job `name` of `config` can cause.

    A job's definition reaches the sample renders of its own alert rules, of
    the groups whose sample member it is, and of `email.subject` when it is
    the first job; every other render is the same as in a configuration
    without the change, so checking one edited job needs only these.
    """
    job = config.jobs.get(name)
    if config.email is None or job is None:
        return []
    limit = limit or _no_limit
    problems = list(
        _rules_problems(
            config, job, job.alerts, line=job.line, owner={"job": name},
            read_template=read_template, limit=limit,
        )
    )  # fmt: skip
    if next(iter(config.jobs)) == name:
        problems += _subject_problems(config, config.email, limit)
    for group in config.groups.values():
        if name in group.jobs and _member(config, group) is job:
            problems += _rules_problems(
                config, job, group.alerts, line=group.line, owner={"group": group.name},
                read_template=read_template, limit=limit,
            )  # fmt: skip
    return problems


def _subject_problems(
    config: Config, email: EmailSettings, limit: RenderLimit
) -> Iterator[Problem]:
    job = next(iter(config.jobs.values()), None) or _stand_in(config, "example", ())
    found: set[str] = set()
    for event in AlertEvent:
        try:
            render(email.subject, sample_context(job, event, job.timezone), interrupt=limit())
        except TemplateError as error:
            found.add(f"email.subject: {error}")
    for message in sorted(found):
        yield Problem(file=config.path, line=1, message=message)


def _member(config: Config, group: Group) -> Job:
    """The job a group's templates are checked with: its first member, or a stand-in."""
    members = [config.jobs[name] for name in group.jobs if name in config.jobs]
    return members[0] if members else _stand_in(config, f"{group.name}-member", (group.name,))


def _rules_problems(
    config: Config,
    job: Job,
    rules: tuple[AlertRule, ...],
    *,
    line: int,
    owner: Mapping[str, str],
    read_template: TemplateReader,
    limit: RenderLimit,
) -> Iterator[Problem]:
    """A problem for each of `rules` whose template fails for a sample run of `job`."""
    assert config.email is not None  # noqa: S101  (checked by template_problems)
    for rule in (rule for rule in rules if rule.to):  # webhook-only rules send no mail
        message = _rule_problem(job, rule, config.email, read_template, limit)
        if message is not None:
            yield Problem(file=config.path, line=line, message=message, **owner)


def _no_limit() -> None:
    return None


def template_problems(
    config: Config, read_template: TemplateReader, limit: RenderLimit = _no_limit
) -> list[Problem]:
    """Render every alert template of `config` against a sample run; report what fails.

    Template files are read with `read_template` (the runtime's, which reads
    only regular files, up to a size); each render is bounded by what `limit`
    gives it (the runtime's: a time budget).

    Checks each job's and each group's alert rules (their template, or
    `email.default_template`) and `email.subject`. Problems are located on
    the owning job's or group's line (the subject on line 1: the model keeps
    no line for it). A configuration without `email:` has nothing to check.
    """
    if config.email is None:
        return []
    problems = list(_subject_problems(config, config.email, limit))
    for job in config.jobs.values():
        problems += _rules_problems(
            config, job, job.alerts, line=job.line, owner={"job": job.name},
            read_template=read_template, limit=limit,
        )  # fmt: skip
    for group in config.groups.values():
        member = _member(config, group)
        owner = {"group": group.name}
        problems += _rules_problems(
            config, member, group.alerts, line=group.line, owner=owner,
            read_template=read_template, limit=limit,
        )  # fmt: skip
    return problems


# --- webhooks (issue 16, item 4) ------------------------------------------------------


def webhook_template_problems(
    config: Config, read_template: TemplateReader, limit: RenderLimit = _no_limit
) -> list[Problem]:
    """Render each webhook's body template for a sample run of every event; report what
    fails, on the webhook's line (one problem per webhook and message)."""
    job = next(iter(config.jobs.values()), None) or _stand_in(config, "example", ())
    problems: list[Problem] = []
    for hook in config.webhooks.values():
        if hook.template is None:
            continue
        found: dict[str, None] = {}
        for event in AlertEvent:
            try:
                context = sample_context(job, event, job.timezone)
                render(read_template(hook.template), context, interrupt=limit())
            except TemplateError as error:
                where = hook.template if error.line is None else f"{hook.template}:{error.line}"
                found[f"webhooks.{hook.name}.template: {where}: {error.reason}"] = None
        problems += [Problem(file=config.path, line=hook.line, message=m) for m in found]
    return problems
