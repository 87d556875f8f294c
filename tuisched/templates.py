"""Alert templates: Jinja2 in its immutable sandbox, with size caps.

Template sources come only from the configuration; run data enters a
template only as plain values (strings, numbers, None, tuples and plain
dicts of them) in the render context, never as live objects (SPEC R20a).

Rendering fails with `TemplateError` (a `TuischedError`) for a syntax error,
an undefined name or attribute (`{{ run.exit_cod }}`), a sandbox violation
(`{{ ''.__class__ }}`) or any error the template raises while running. The
sandbox also refuses huge ranges, string products and powers, and the output
is cut at `MAX_RENDERED_BYTES` with `CUT_MARKER`.

The context (SPEC R11) is built by `alert_context`:

```
job           name, description, groups (a tuple of group names)
event         success | failed | not_started
run           run_id, slot, started_at, ended_at (ISO 8601 with offset, "" if none),
              duration ("1m05s", "" if none), exit_code (int or None), status,
              result ("completed", ...; "" if none), output_tail, reason
message_data  a python job's data (a missing key renders as ""), else empty
hostname      the scheduler's host
```
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any
from zoneinfo import ZoneInfo

from jinja2 import StrictUndefined, Template, TemplateSyntaxError
from jinja2.exceptions import SecurityError, UndefinedError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from tuisched.duration import format_elapsed
from tuisched.errors import Problem, TuischedError
from tuisched.model import (
    AlertEvent,
    AlertRule,
    CommandSpec,
    Config,
    EmailSettings,
    Group,
    Job,
    ManualSchedule,
)
from tuisched.runs import Result, RunRecord, RunState, Trigger

MAX_TEMPLATE_BYTES = 64 * 1024
"""Largest template source accepted."""
MAX_RENDERED_BYTES = 256 * 1024
"""Largest rendered text (UTF-8 bytes); the rest is replaced by `CUT_MARKER`."""
CUT_MARKER = "\n[... cut: the rendered text was longer than 256 KiB]\n"
MAX_PRODUCT = MAX_RENDERED_BYTES
"""Longest string or sequence a `*` in a template may build."""
MAX_POWER_BITS = 4096
"""Largest integer (in bits) a `**` in a template may build."""

_TEMPLATE_FILE = "<template>"
"""The file name Jinja gives frames of a template compiled from a string."""


class TemplateError(TuischedError):
    """An alert template cannot be rendered; the message says where and why."""

    def __init__(self, message: str, *, line: int | None = None) -> None:
        """`line` is the line within the template, when known."""
        self.line = line
        self.reason = message
        super().__init__(f"line {line}: {message}" if line is not None else message)


# --- the sandbox -----------------------------------------------------------------------


class _Fields(dict[str, object]):
    """A plain dict that knows its name in the context, for clear undefined errors."""

    __slots__ = ("label",)

    def __init__(self, label: str, fields: Mapping[str, object]) -> None:
        super().__init__(fields)
        self.label = label


class _AnyKey(dict[str, object]):
    """A plain dict whose missing keys read as "": `message_data` varies from run to run."""

    __slots__ = ()

    def __missing__(self, key: str) -> object:
        return ""


class _Undefined(StrictUndefined):
    """StrictUndefined that names the context variable: "'run' has no attribute 'x'"."""

    __slots__ = ()

    @property
    def _undefined_message(self) -> str:
        owner = self._undefined_obj
        if isinstance(owner, _Fields) and self._undefined_hint is None:
            return f"'{owner.label}' has no attribute {self._undefined_name!r}"
        return str(super()._undefined_message)


def _product(left: Any, right: Any) -> Any:
    """`left * right`, refusing to build a string or sequence longer than `MAX_PRODUCT`."""
    if isinstance(left, int) and not isinstance(right, int):
        left, right = right, left
    if isinstance(right, int) and hasattr(left, "__len__") and len(left) * right > MAX_PRODUCT:
        raise SecurityError(f"the product would be longer than {MAX_PRODUCT} items")
    return left * right


def _power(base: Any, exponent: Any) -> Any:
    """`base ** exponent`, refusing integers larger than `MAX_POWER_BITS` bits."""
    huge = (
        isinstance(base, int)
        and isinstance(exponent, int)
        and abs(base).bit_length() * max(exponent, 0) > MAX_POWER_BITS
    )
    if huge and abs(base) > 1:
        raise SecurityError(f"the power would be larger than {MAX_POWER_BITS} bits")
    return base**exponent


class _AlertSandbox(ImmutableSandboxedEnvironment):
    """The immutable sandbox, with `*` and `**` bounded and no `lipsum` (it loops on demand)."""

    intercepted_binops = frozenset({"*", "**"})
    _BINOPS: Mapping[str, Callable[[Any, Any], Any]] = {"*": _product, "**": _power}

    def call_binop(self, context: Any, operator_: str, left: Any, right: Any) -> Any:
        """Apply an intercepted operator with its size bound."""
        handler = self._BINOPS.get(operator_)
        if handler is None:
            return super().call_binop(context, operator_, left, right)
        return handler(left, right)


def sandbox() -> ImmutableSandboxedEnvironment:
    """A fresh alert sandbox: immutable, strict about undefined names, autoescape off."""
    environment = _AlertSandbox(autoescape=False, keep_trailing_newline=True, undefined=_Undefined)
    environment.globals.pop("lipsum", None)
    return environment


_ENVIRONMENT = sandbox()
"""Shared by every render: a Jinja environment is safe to use from many threads."""


def syntax_problem(source: str) -> tuple[int, str] | None:
    """Check `source` parses; return (line within the template, message) if not."""
    if len(source.encode()) > MAX_TEMPLATE_BYTES:
        return 1, f"template is larger than {MAX_TEMPLATE_BYTES // 1024} KiB"
    try:
        sandbox().parse(source)
    except TemplateSyntaxError as error:
        return error.lineno, f"template syntax error: {error.message}"
    return None


# --- rendering -----------------------------------------------------------------------


@functools.lru_cache(maxsize=256)
def _compile(source: str) -> Template:
    """`source` compiled once; alerts render the same few templates again and again."""
    return _ENVIRONMENT.from_string(source)


def _cut(chunks: Iterable[str]) -> str:
    """Join `chunks`, stopping at `MAX_RENDERED_BYTES` (then `CUT_MARKER` ends the text)."""
    kept: list[str] = []
    room = MAX_RENDERED_BYTES
    for chunk in chunks:
        data = chunk.encode()
        if len(data) > room:
            kept.append(data[:room].decode(errors="ignore"))
            kept.append(CUT_MARKER)
            break
        kept.append(chunk)
        room -= len(data)
    return "".join(kept)


def _template_line(traceback: TracebackType | None) -> int | None:
    """The template line the error happened on (Jinja rewrites tracebacks to show it)."""
    line = None
    while traceback is not None:
        if traceback.tb_frame.f_code.co_filename == _TEMPLATE_FILE:
            line = traceback.tb_lineno
        traceback = traceback.tb_next
    return line


def render(source: str, context: Mapping[str, object]) -> str:
    """Render the template `source` with `context` in the alert sandbox.

    The result is cut at `MAX_RENDERED_BYTES` (ending in `CUT_MARKER`); output
    is streamed, so a runaway loop stops as soon as the cap is reached.

    Raises:
        TemplateError: the source is too large or malformed, names something
            undefined, breaks the sandbox's rules, or fails while running.
    """
    if len(source.encode()) > MAX_TEMPLATE_BYTES:
        raise TemplateError(f"template is larger than {MAX_TEMPLATE_BYTES // 1024} KiB")
    try:
        template = _compile(source)
    except TemplateSyntaxError as error:
        raise TemplateError(f"syntax error: {error.message}", line=error.lineno) from None
    try:
        return _cut(template.generate(context))
    except SecurityError as error:
        line = _template_line(error.__traceback__)
        raise TemplateError(f"not allowed in a template: {error}", line=line) from None
    except UndefinedError as error:
        raise TemplateError(str(error), line=_template_line(error.__traceback__)) from None
    except Exception as error:  # the template's own runtime error: 1/0, "a" + 1, a range too big
        line = _template_line(error.__traceback__)
        raise TemplateError(f"{type(error).__name__}: {error}", line=line) from None


def read_template(path: Path) -> str:
    """The source of the template file at `path` (UTF-8).

    Raises:
        TemplateError: the file cannot be read or is not UTF-8.
    """
    try:
        return path.read_text(encoding="utf-8")
    except OSError as error:
        raise TemplateError(f"cannot read template {path}: {error.strerror}") from None
    except UnicodeDecodeError:
        raise TemplateError(f"cannot read template {path}: not UTF-8") from None


# --- the context -----------------------------------------------------------------------


def _iso(moment: datetime | None, tz: ZoneInfo) -> str:
    return "" if moment is None else moment.astimezone(tz).isoformat()


def _elapsed(duration: timedelta | None) -> str:
    return "" if duration is None else format_elapsed(duration)


_SCALARS = (str, int, float, bool, type(None))


def _scalar(value: object) -> object:
    """`value` if it is a plain scalar, else its text (never the live object)."""
    if isinstance(value, _SCALARS):
        return value
    try:
        return str(value)
    except Exception:  # a python job's object whose __str__ fails must not stop the alert
        return f"<unprintable {type(value).__name__}>"


def _plain(value: object) -> object:
    """A plain copy of one `message_data` value: a scalar, or a tuple of scalars for a list."""
    if isinstance(value, list | tuple):
        return tuple(_scalar(item) for item in value)
    return _scalar(value)


def plain_data(message_data: Mapping[str, object]) -> dict[str, object]:
    """A plain copy of a python job's `message_data`; a missing key renders as ""."""
    return _AnyKey({str(key): _plain(value) for key, value in message_data.items()})


def _run_fields(run: RunRecord, tz: ZoneInfo) -> _Fields:
    return _Fields(
        "run",
        {
            "run_id": run.run_id,
            "slot": _iso(run.slot, tz),
            "started_at": _iso(run.started_at, tz),
            "ended_at": _iso(run.ended_at, tz),
            "duration": _elapsed(run.duration),
            "exit_code": run.exit_code,
            "status": run.status,
            "result": "" if run.result is None else run.result.value,
            "output_tail": run.output_tail,
            "reason": run.reason,
        },
    )


def alert_context(
    *,
    job: Job,
    event: str,
    run: RunRecord,
    message_data: Mapping[str, object],
    hostname: str,
    tz: ZoneInfo,
) -> dict[str, object]:
    """The render context of SPEC R11 for one alert, made of plain values only.

    Args:
        job: the job the run belongs to.
        event: `success`, `failed` or `not_started`.
        run: the run's record; its times are shown in `tz`.
        message_data: a python job's data (copied; values that are not plain
            scalars or lists of them become their text).
        hostname: the scheduler's host name.
        tz: the zone times are written in (ISO 8601 with offset).
    """
    job_fields = {"name": job.name, "description": job.description, "groups": tuple(job.groups)}
    return {
        "job": _Fields("job", job_fields),
        "event": str(event),
        "run": _run_fields(run, tz),
        "message_data": plain_data(message_data),
        "hostname": hostname,
    }


_SAMPLE_SLOT = datetime(2026, 1, 5, 6, 0)  # noqa: DTZ001  (made aware in the job's zone below)
_SAMPLE_OUTCOMES: Mapping[str, tuple[RunState, Result, int | None, str]] = {
    AlertEvent.SUCCESS: (RunState.SUCCESS, Result.COMPLETED, 0, "exit 0: done"),
    AlertEvent.FAILED: (RunState.FAILED, Result.COMPLETED, 1, "exit 1: disk full"),
    AlertEvent.NOT_STARTED: (RunState.NOT_STARTED, Result.DEPENDENCY, None, ""),
}


def sample_run(job_name: str, event: str, tz: ZoneInfo) -> RunRecord:
    """A realistic fake run of `job_name` ending with `event`, for checking templates."""
    state, result, exit_code, status = _SAMPLE_OUTCOMES.get(
        event, _SAMPLE_OUTCOMES[AlertEvent.FAILED]
    )
    slot = _SAMPLE_SLOT.replace(tzinfo=tz)
    started = None if state is RunState.NOT_STARTED else slot + timedelta(seconds=2)
    return RunRecord(
        run_id="0123456789ab",
        job=job_name,
        slot=slot,
        trigger=Trigger.SCHEDULE,
        state=state,
        queued_at=slot,
        result=result,
        status=status,
        exit_code=exit_code,
        started_at=started,
        ended_at=slot + timedelta(seconds=67),
        reason="upstream 'export' failed" if state is RunState.NOT_STARTED else "",
        output_tail="copying files\nlast line of output\n",
    )


def sample_context(job: Job, event: str, tz: ZoneInfo) -> dict[str, object]:
    """The context of a realistic fake run of `job`, to check templates at validation.

    `message_data` is empty and accepts any key (rendering ""), so a template
    written for a python job's data (`{{ message_data.rows }}`) validates.
    """
    run = sample_run(job.name, event, tz)
    return alert_context(
        job=job, event=event, run=run, message_data={}, hostname="scheduler-host", tz=tz
    )


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


def _rule_problem(job: Job, rule: AlertRule, email: EmailSettings) -> str | None:
    """Why `rule`'s body template fails for a sample run of `job`, or None."""
    path = rule.template or email.default_template
    if path is None:
        return f"alerts.{rule.event}: no template and no email.default_template"
    origin = "" if rule.template is not None else " (email.default_template)"
    try:
        render(read_template(path), sample_context(job, rule.event, job.timezone))
    except TemplateError as error:
        where = f"{path}:{error.line}" if error.line is not None else str(path)
        return f"alerts.{rule.event}: template {where}{origin}: {error.reason}"
    return None


def _subject_problems(config: Config, email: EmailSettings) -> Iterator[Problem]:
    job = next(iter(config.jobs.values()), None) or _stand_in(config, "example", ())
    found: set[str] = set()
    for event in AlertEvent:
        try:
            render(email.subject, sample_context(job, event, job.timezone))
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
) -> Iterator[Problem]:
    """A problem for each of `rules` whose template fails for a sample run of `job`."""
    assert config.email is not None  # noqa: S101  (checked by template_problems)
    for rule in rules:
        message = _rule_problem(job, rule, config.email)
        if message is not None:
            yield Problem(file=config.path, line=line, message=message, **owner)


def template_problems(config: Config) -> list[Problem]:
    """Render every alert template of `config` against a sample run; report what fails.

    Checks each job's and each group's alert rules (their template, or
    `email.default_template`) and `email.subject`. Problems are located on
    the owning job's or group's line (the subject on line 1: the model keeps
    no line for it). A configuration without `email:` has nothing to check.
    """
    if config.email is None:
        return []
    problems = list(_subject_problems(config, config.email))
    for job in config.jobs.values():
        problems += _rules_problems(config, job, job.alerts, line=job.line, owner={"job": job.name})
    for group in config.groups.values():
        member = _member(config, group)
        owner = {"group": group.name}
        problems += _rules_problems(config, member, group.alerts, line=group.line, owner=owner)
    return problems
