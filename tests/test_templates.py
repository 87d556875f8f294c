"""Alert templates: the R11 context, the sandbox, the caps, and checking a configuration."""

from __future__ import annotations

import enum
import os
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from tuisched.domain.errors import ConfigError, Problem
from tuisched.domain.model import CommandSpec, Job, ManualSchedule
from tuisched.domain.runs import Result, RunRecord, RunState, Trigger
from tuisched.domain.templates import (
    CUT_MARKER,
    MAX_RENDERED_BYTES,
    MAX_TEMPLATE_BYTES,
    TemplateError,
    alert_context,
    plain_data,
    render,
    sample_context,
    template_problems,
)
from tuisched.runtime.configfiles import load_config, read_template

from .conftest import SAMPLE

PARIS = ZoneInfo("Europe/Paris")
SLOT = datetime(2026, 5, 7, 10, 30, tzinfo=UTC)  # 12:30 in Paris
JOB = Job(
    name="backup",
    kind=CommandSpec(argv=("true",)),
    schedule=ManualSchedule(tz=PARIS),
    timezone=PARIS,
    description="Copies the files",
    groups=("nightly", "storage"),
)
RUN = RunRecord(
    run_id="r1",
    job="backup",
    slot=SLOT,
    trigger=Trigger.SCHEDULE,
    state=RunState.FAILED,
    queued_at=SLOT,
    result=Result.TIMED_OUT,
    status="exit 3: disk full",
    exit_code=3,
    started_at=SLOT + timedelta(seconds=1),
    ended_at=SLOT + timedelta(minutes=1, seconds=6),
    output_tail="copying\ndisk full\n",
)


class Live:
    """A live object a python job might put in its message_data."""

    hidden = "never reachable"

    def __str__(self) -> str:
        return "live object"


def context(**message_data: object) -> dict[str, object]:
    return alert_context(
        job=JOB, event="failed", run=RUN, message_data=message_data, hostname="node-1", tz=PARIS
    )


# --- the context ----------------------------------------------------------------------


def test_every_r11_name_renders() -> None:
    source = (
        "{{ job.name }}|{{ job.description }}|{{ job.groups | join(',') }}|{{ event }}|"
        "{{ run.run_id }}|{{ run.slot }}|{{ run.started_at }}|{{ run.ended_at }}|"
        "{{ run.duration }}|{{ run.exit_code }}|{{ run.status }}|{{ run.result }}|"
        "{{ run.output_tail }}|{{ run.reason }}|{{ message_data.rows }}|{{ hostname }}"
    )
    assert render(source, context(rows=42)).split("|") == [
        "backup",
        "Copies the files",
        "nightly,storage",
        "failed",
        "r1",
        "2026-05-07T12:30:00+02:00",
        "2026-05-07T12:30:01+02:00",
        "2026-05-07T12:31:06+02:00",
        "1m05s",
        "3",
        "exit 3: disk full",
        "timed_out",
        "copying\ndisk full\n",
        "",
        "42",
        "node-1",
    ]


def test_missing_times_are_empty() -> None:
    run = RunRecord(
        run_id="r2",
        job="backup",
        slot=None,
        trigger=Trigger.MANUAL,
        state=RunState.NOT_STARTED,
        queued_at=SLOT,
        reason="the previous run still runs",
    )
    ctx = alert_context(
        job=JOB, event="not_started", run=run, message_data={}, hostname="h", tz=PARIS
    )
    text = render(
        "[{{ run.slot }}][{{ run.started_at }}][{{ run.duration }}][{{ run.result }}]", ctx
    )
    assert text == "[][][][]"
    assert render("{{ run.exit_code }} {{ run.reason }}", ctx) == "None the previous run still runs"


def test_context_holds_only_plain_values() -> None:
    ctx = context(obj=Live(), rows=[1, "two", Live()], ratio=0.5, ok=True, none=None)
    data = ctx["message_data"]
    assert isinstance(data, dict)
    assert dict(data) == {
        "obj": "live object",
        "rows": (1, "two", "live object"),
        "ratio": 0.5,
        "ok": True,
        "none": None,
    }
    assert render("{% for row in message_data.rows %}<{{ row }}>{% endfor %}", ctx) == (
        "<1><two><live object>"
    )
    with pytest.raises(TemplateError):
        render("{{ message_data.obj.hidden }}", ctx)


def test_missing_message_data_key_renders_empty() -> None:
    assert render("[{{ message_data.rows }}]", context()) == "[]"


def test_sample_context_accepts_any_message_data_key() -> None:
    ctx = sample_context(JOB, "failed", PARIS)
    assert render("{{ message_data.anything }}{{ run.exit_code }}", ctx) == "1"
    assert render("{{ run.reason }}", sample_context(JOB, "not_started", PARIS)) != ""


# --- errors -------------------------------------------------------------------------


def test_undefined_attribute_is_a_clear_error() -> None:
    with pytest.raises(TemplateError, match=r"line 2: 'run' has no attribute 'exit_cod'") as info:
        render("Exit:\n{{ run.exit_cod }}", context())
    assert info.value.line == 2


def test_undefined_name_is_an_error() -> None:
    with pytest.raises(TemplateError, match="'jobb' is undefined"):
        render("{{ jobb.name }}", context())


def test_syntax_error_names_the_line() -> None:
    with pytest.raises(TemplateError, match=r"line 2: syntax error") as info:
        render("ok\n{% if run.exit_code %}", context())
    assert info.value.line == 2


def test_runtime_error_is_a_template_error() -> None:
    with pytest.raises(TemplateError, match="ZeroDivisionError"):
        render("{{ 1 / 0 }}", context())


def test_oversized_source_is_refused() -> None:
    with pytest.raises(TemplateError, match="larger than 64 KiB"):
        render("x" * (MAX_TEMPLATE_BYTES + 1), context())


# --- the sandbox ------------------------------------------------------------------------


ESCAPES = [
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ '{0.__class__}'.format(run) }}",
    "{{ '{0.__class__.__init__.__globals__}'.format(run) }}",
    "{{ '{x.__class__}'.format_map({'x': run}) }}",
    "{{ '{0.__class__}'.format_map(run) }}",
    "{{ run|attr('__class__') }}",
    "{{ cycler.__init__.__globals__ }}",
    "{{ joiner.__init__.__globals__ }}",
    "{{ lipsum.__globals__ }}",
    "{{ self._TemplateReference__context }}",
    "{{ self.__dict__ }}",
    "{{ run.update({'exit_code': 0}) }}",
    "{{ range(10**9)|list }}",
    "{{ 'x' * 10**9 }}",
    "{{ 10 ** 10000000 }}",
    "{{ job.groups.__class__ }}",
]


@pytest.mark.parametrize("source", ESCAPES)
def test_sandbox_escapes_do_not_run(source: str) -> None:
    with pytest.raises(TemplateError):
        render(source, context())


def test_escape_attempts_render_harmlessly_or_fail() -> None:
    # What the sandbox lets through shows plain values only, never an object's insides.
    assert render("{{ run.items() | list | length }}", context()) == "10"
    assert "__" not in render("{{ '%s' % job }}", context())


def test_output_is_cut_at_the_cap() -> None:
    text = render("{% for i in range(100000) %}{{ 'x' * 100 }}{% endfor %}", context())
    assert text.endswith(CUT_MARKER)
    assert len(text.encode()) <= MAX_RENDERED_BYTES + len(CUT_MARKER.encode())


def test_cut_keeps_whole_characters() -> None:
    text = render("{% for i in range(100000) %}éé{% endfor %}", context())
    assert text.endswith(CUT_MARKER)
    assert "\ufffd" not in text


# --- resource exhaustion: each must fail fast with a TemplateError ------------------------

BIG = "{% set b = 'x' * 262144 %}"
EXHAUSTION = [
    "{{ '%300000000s' % 'x' }}",
    "{{ '%.300000000f' % 1.0 }}",
    "{{ '%(a(b))300000000s' % {'a(b)': 1} }}",
    "{{ '%*s' % (300000000, 'x') }}",
    "{{ 'x'|center(300000000) }}",
    "{{ '{:>300000000}'.format('x') }}",
    "{{ '{:{}}'.format('x', 300000000) }}",
    "{{ '{x:>300000000}'.format_map({'x': 1}) }}",
    "{{ 'x'.ljust(300000000) }}",
    "{{ 'x'.rjust(300000000) }}",
    "{{ 'x'.zfill(300000000) }}",
    "{{ 'x'.center(300000000) }}",
    "{{ ('\t' * 1000).expandtabs(300000) }}",
    "{{ ('a\n' * 1000)|indent(300000) }}",
    "{{ 'a'|indent(300000000, first=True) }}",
    BIG + "{{ ('a ' * 1000)|wordwrap(1, wrapstring=b) }}",
    BIG + "{{ range(100000)|join(b) }}",
    BIG + "{{ b.join(range(1000)|map('string')) }}",
    BIG + "{{ b|replace('', b) }}",
    BIG + "{{ b.replace('', b) }}",
    BIG + "{{ '%s%s'|format(b, b) }}",
    "{% set ns = namespace(x=10) %}{% for i in range(40) %}{% set ns.x = ns.x * ns.x %}"
    "{% endfor %}",
    "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}",
    "{% for a in range(100000) %}{% for c in 'x' * 200000 %}{% endfor %}{% endfor %}",
    "{% set ns = namespace(x='xx') %}{% for i in range(40) %}{% set ns.x = ns.x ~ ns.x %}"
    "{% endfor %}",
    "{% set ns = namespace(x='xx') %}{% for i in range(40) %}{% set ns.x = ns.x + ns.x %}"
    "{% endfor %}",
    BIG + "{{ (b,) * 100000 }}",
    BIG + "{{ [b, b, b, b, b, b, b, b] }}",
    BIG + "{{ '%s' % ([b, b, b, b],) }}",
    BIG + "{{ '{}{}'.format(b, b) }}",
    BIG + "{% macro m() %}{% for i in range(100000) %}{{ b }}{% endfor %}{% endmacro %}"
    "{{ m()|length }}",
    BIG + "{% filter upper %}{% for i in range(100000) %}{{ b }}{% endfor %}{% endfilter %}",
    "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(40) }}",
    "{{ range(100000)|map('center', 200000)|list|length }}",
    "{{ [1]|slice(1000000000)|list|length }}",
    "{{ [1]|batch(1000000000, 0)|list|length }}",
    "{{ ([[1]] * 1000)|sum(start=[])|length }}",
    "{% for a in [[1]] recursive %}{{ loop(range(100000)) }}{{ loop(range(100000)) }}{% endfor %}",
]


@pytest.mark.parametrize("source", EXHAUSTION)
def test_resource_exhaustion_fails_fast(source: str) -> None:
    with pytest.raises(TemplateError):
        render(source, context())


def test_too_much_work_is_named() -> None:
    source = "{% for a in range(1000) %}{% for b in range(1000) %}{% endfor %}{% endfor %}"
    with pytest.raises(TemplateError, match="template does too much work"):
        render(source, context())


def test_budget_is_per_render() -> None:
    source = "{% for a in range(300) %}{% for b in range(300) %}{% endfor %}{% endfor %}ok"
    for _ in range(3):
        assert render(source, context()) == "ok"


LEGITIMATE = [
    ("{{ '%-8s|%5.1f|%03d' % ('ab', 2.25, 7) }}", "ab      |  2.2|007"),
    ("{{ '%(n)s=%(v)d' % {'n': 'rows', 'v': 3} }}", "rows=3"),
    ("{{ '{:>6}|{:.2f}|{name}'.format('ab', 1.5, name='x') }}", "    ab|1.50|x"),
    ("{{ '{n:*^7}'.format_map({'n': 'ok'}) }}", "**ok***"),
    ("{{ 'ab'|center(6) }}|{{ 'ab'.ljust(4) }}|{{ '7'.zfill(3) }}", "  ab  |ab  |007"),
    ("{{ 'a\nb'|indent(2) }}", "a\n  b"),
    ("{{ 'aa bb cc'|wordwrap(5) }}", "aa bb\ncc"),
    (
        "{{ job.groups|join(', ') }} {{ ', '.join(job.groups) }}",
        "nightly, storage nightly, storage",
    ),
    ("{{ '%s'|format(job.name) }} {{ job.name|replace('b', 'B') }}", "backup Backup"),
    ("{{ 'x' ~ 1 ~ job.groups }}", "x1('nightly', 'storage')"),
    (
        "{{ [1, 2] + [3] }} {{ 'a' + 'b' }} {{ 6 * 7 }} {{ 2 ** 10 }} {{ 7 % 3 }}",
        "[1, 2, 3] ab 42 1024 1",
    ),
    ("{% for g in job.groups %}{{ loop.index }}{{ g[0] }}{% endfor %}", "1n2s"),
    (
        "{% macro m(x) %}<{{ x }}>{% endmacro %}{% for i in range(3) %}{{ m(i) }}{% endfor %}",
        "<0><1><2>",
    ),
    ("{% filter upper %}{{ job.name }}{% endfilter %}", "BACKUP"),
    (
        "{{ [1, 2, 3]|sum }} {{ [1, 2, 3, 4]|batch(2)|list }} {{ ('\t' ~ 'x').expandtabs(2) }}",
        "6 [[1, 2], [3, 4]]   x",
    ),
]


@pytest.mark.parametrize(("source", "expected"), LEGITIMATE)
def test_legitimate_templates_still_render(source: str, expected: str) -> None:
    assert render(source, context()) == expected


# --- reading template files ----------------------------------------------------------------


def test_read_template_reads_a_regular_file(tmp_path: Path) -> None:
    path = tmp_path / "t.txt"
    path.write_text("Job {{ job.name }}\n", encoding="utf-8")
    assert read_template(path) == "Job {{ job.name }}\n"


def test_read_template_refuses_an_oversized_file(tmp_path: Path) -> None:
    path = tmp_path / "big.txt"
    path.write_bytes(b"x" * (MAX_TEMPLATE_BYTES + 1))
    with pytest.raises(TemplateError, match="larger than 64 KiB"):
        read_template(path)


def test_read_template_refuses_a_device() -> None:
    with pytest.raises(TemplateError, match="not a regular file"):
        read_template(Path("/dev/zero"))


def test_read_template_refuses_a_fifo_without_blocking(tmp_path: Path) -> None:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    with pytest.raises(TemplateError, match="not a regular file"):
        read_template(path)


def test_read_template_refuses_bad_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin.txt"
    path.write_bytes(b"caf\xe9")
    with pytest.raises(TemplateError, match="not UTF-8"):
        read_template(path)


# --- plain message_data -------------------------------------------------------------------


class Level(enum.IntEnum):
    HIGH = 3


class Shouty(str):
    __slots__ = ()

    def shout(self) -> str:
        return self.upper()


class Ratio(float):
    __slots__ = ()


def test_scalar_subclasses_become_their_base_type() -> None:
    data = plain_data({"level": Level.HIGH, "word": Shouty("hi"), "ratio": Ratio(0.5)})
    assert [type(value) for value in data.values()] == [int, str, float]
    assert data == {"level": 3, "word": "hi", "ratio": 0.5}
    with pytest.raises(TemplateError):
        render("{{ message_data.word.shout() }}", context(word=Shouty("hi")))


# --- checking a configuration ------------------------------------------------------------


WriteConfig = Callable[..., Path]


def alerting_config(write_config: WriteConfig, body: str, subject: str = "{{ job.name }}") -> Path:
    template = write_config(body, name="failed.txt")
    return write_config(
        f"""
        settings:
          timezone: UTC
          state_dir: state
        email:
          smtp: {{host: 127.0.0.1, port: 2525}}
          from: tuisched@example.org
          subject: "{subject}"
          default_template: {template}
        groups:
          nightly:
            jobs: [backup]
            alerts:
              success:
                to: [group@example.org]
        jobs:
          backup:
            command: [/bin/true]
            schedule: manual
            alerts:
              failed:
                to: [ops@example.org]
                template: {template}
          other:
            command: [/bin/true]
            schedule: manual
        """
    )


def test_undefined_attribute_in_a_rule_template_is_reported(write_config: WriteConfig) -> None:
    path = alerting_config(write_config, "Exit {{ run.exit_code }}\n{{ run.exit_cod }}\n")
    problems = _rejected(path)
    by_owner = {(p.job, p.group): p for p in problems}
    job_problem = by_owner[("backup", None)]
    template = path.parent / "failed.txt"
    assert job_problem.message == (
        f"alerts.failed: template {template}:2: 'run' has no attribute 'exit_cod'"
    )
    assert job_problem.file == path
    assert job_problem.line == 16
    group_problem = by_owner[(None, "nightly")]
    assert group_problem.message.startswith("alerts.success: template")
    assert group_problem.line == 10
    assert len(problems) == 2


def test_valid_templates_report_nothing(write_config: WriteConfig) -> None:
    body = "{{ job.name }} {{ run.exit_code }} {{ message_data.rows }} {{ run.output_tail }}"
    path = alerting_config(write_config, body)
    assert template_problems(load_config(path), read_template) == []


def test_bad_subject_is_reported(write_config: WriteConfig) -> None:
    path = alerting_config(write_config, "ok", subject="{{ job.nam }}")
    (problem,) = _rejected(path)
    assert problem.message == "email.subject: line 1: 'job' has no attribute 'nam'"
    assert problem.job is None


def test_sandbox_violation_is_reported(write_config: WriteConfig) -> None:
    path = alerting_config(write_config, "{{ run.__class__ }}")
    problems = _rejected(path)
    assert problems
    assert all("not allowed in a template" in p.message for p in problems)


def _rejected(path: Path) -> list[Problem]:
    """Loading refuses the configuration; its problems are `template_problems`'."""
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    return list(caught.value.problems)


def test_sample_config_templates_are_valid() -> None:
    assert template_problems(load_config(SAMPLE), read_template) == []
