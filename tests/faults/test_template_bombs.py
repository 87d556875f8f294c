"""Templates cannot burn the CPU: a render has a time budget, stops when cancelled, and
nesting that would exhaust the stack is a located validation error."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from tuisched.domain.errors import TemplateError
from tuisched.domain.templates import render
from tuisched.domain.templates.base import MAX_NESTING
from tuisched.runtime.clock import RENDER_SECONDS, Deadline
from tuisched.runtime.threads import Lane, in_thread

from ..runtime_fixtures import write_config
from .test_bad_input import tuisched

# Each line sorts 100,000 items with a key: few steps, much time (about 13 s in all here).
BOMB = "{% set x = range(100000)|batch(1)|list %}\n" + "{{ x|groupby(0)|length }}\n" * 60


def test_a_render_that_runs_past_its_budget_stops_with_its_line() -> None:
    with pytest.raises(TemplateError) as caught:
        render(BOMB, {}, interrupt=Deadline(0.3))
    assert caught.value.reason == "rendering stopped: took longer than 0.3 s"
    assert caught.value.line is not None
    assert 2 <= caught.value.line <= 61


async def test_a_render_in_a_thread_stops_when_cancelled() -> None:
    deadline = Deadline(3600)
    started = threading.Event()

    def rendering() -> str:
        started.set()
        return render(BOMB, {}, interrupt=deadline)

    task = asyncio.ensure_future(in_thread(Lane.MAIL, rendering))
    await asyncio.wait_for(asyncio.to_thread(started.wait, 5), 6)
    deadline.cancel("cancelled: the scheduler stopped")
    with pytest.raises(TemplateError, match="rendering stopped: cancelled: the scheduler stopped"):
        await asyncio.wait_for(task, 5)  # not the 13 s the whole render would take


def test_a_deadline_starts_when_first_asked_and_ignores_the_wall_clock() -> None:
    deadline = Deadline(0.05)
    assert deadline() is None  # starts now, not when it was made
    threading.Event().wait(0.1)
    assert deadline() == "took longer than 0.05 s"


def _config_with_template(tmp_path: Path, template: str) -> Path:
    (tmp_path / "alert.txt").write_text(template)
    path = write_config(
        tmp_path,
        "nightly: {command: [/bin/true], schedule: manual,"
        " alerts: {failed: {to: [ops@example.org], template: alert.txt}}}",
    )
    email = (
        "email:\n  smtp: {host: 127.0.0.1, port: 25}\n"
        "  from: tuisched@example.org\n  subject: alert\n"
    )
    path.write_text(path.read_text().replace("jobs:", email + "jobs:"))
    return path


def test_validate_refuses_a_template_that_burns_the_cpu(tmp_path: Path) -> None:
    path = _config_with_template(tmp_path, BOMB)
    status, out, _ = tuisched("validate", "-c", str(path), cwd=tmp_path)  # bounded: 30 s
    assert status == 1
    (line,) = out.splitlines()
    assert line.startswith(f"{path}:")
    assert "job 'nightly': alerts.failed: template " in line
    assert "alert.txt:" in line
    assert line.endswith(f"rendering stopped: took longer than {RENDER_SECONDS:g} s")


@pytest.mark.parametrize(
    ("template", "line", "said"),
    [
        ("ok\n\n{{ x" + "|sort" * 300 + " }}", 3, "operators, filters and brackets in one tag"),
        ("ok\n{{ " + "(" * 250 + "1" + ")" * 250 + " }}", 2, "operators, filters and brackets"),
        ("{% if 1 %}\n" * 100 + "x" + "{% endif %}" * 100, MAX_NESTING + 1, "blocks are nested"),
        ("{{ 1" + " + 1" * 500 + " }}", 1, "operators, filters and brackets in one tag"),
    ],
)
def test_nesting_that_would_exhaust_the_stack_is_a_located_error(
    tmp_path: Path, template: str, line: int, said: str
) -> None:
    path = _config_with_template(tmp_path, template)
    status, out, _ = tuisched("validate", "-c", str(path), cwd=tmp_path)
    assert status == 1
    (problem,) = out.splitlines()
    assert f"alert.txt:{line}: " in problem
    assert said in problem


def test_recursion_in_a_macro_is_a_located_error_not_a_traceback(tmp_path: Path) -> None:
    template = "hello\n{% macro m(n) %}{{ m(n + 1) }}{% endmacro %}\n{{ m(0) }}\n"
    path = _config_with_template(tmp_path, template)
    status, out, _ = tuisched("validate", "-c", str(path), cwd=tmp_path)
    assert status == 1
    (problem,) = out.splitlines()
    assert "alert.txt:2: RecursionError: maximum recursion depth exceeded" in problem


def test_moderate_nesting_still_renders() -> None:
    pipes = "{{ x" + "|list" * (MAX_NESTING - 1) + "|length }}"
    assert render(pipes, {"x": [1, 2, 3]}) == "3"
    blocks = "{% if 1 %}" * MAX_NESTING + "deep" + "{% endif %}" * MAX_NESTING
    assert render(blocks, {}) == "deep"
