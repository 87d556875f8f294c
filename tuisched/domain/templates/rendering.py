"""Rendering a template source, and reading a template file of bounded size."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from types import TracebackType

from jinja2 import Template, TemplateSyntaxError
from jinja2.exceptions import SecurityError, UndefinedError

from tuisched.domain.templates.base import (
    _TEMPLATE_FILE,
    CUT_MARKER,
    MAX_RENDERED_BYTES,
    MAX_TEMPLATE_BYTES,
    Interrupt,
    TemplateError,
)
from tuisched.domain.templates.sandbox import (
    _BUDGET,
    _ENVIRONMENT,
    Interrupted,
    _Budget,
    nesting_problem,
)

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


def render(
    source: str, context: Mapping[str, object], *, interrupt: Interrupt | None = None
) -> str:
    """Render the template `source` with `context` in the alert sandbox.

    The result is cut at `MAX_RENDERED_BYTES` (ending in `CUT_MARKER`); output
    is streamed, so a runaway loop stops as soon as the cap is reached.
    `interrupt` is asked at every step (loop iteration, call, filter): when
    it gives a reason (out of time, cancelled), the render stops with it.

    Raises:
        TemplateError: the source is too large, nested too deeply or
            malformed, names something undefined, breaks the sandbox's
            rules, fails while running, or was interrupted.
    """
    if len(source.encode()) > MAX_TEMPLATE_BYTES:
        raise TemplateError(f"template is larger than {MAX_TEMPLATE_BYTES // 1024} KiB")
    nested = nesting_problem(source)
    if nested is not None:
        raise TemplateError(nested[1], line=nested[0])
    try:
        template = _compile(source)
    except TemplateSyntaxError as error:
        raise TemplateError(f"syntax error: {error.message}", line=error.lineno) from None
    except (RecursionError, SyntaxError, MemoryError):  # what the nesting check let through
        raise TemplateError("template is nested too deeply to compile") from None
    budget = _BUDGET.set(_Budget(interrupt))
    try:
        return _cut(template.generate(context))
    except Interrupted as error:
        line = _template_line(error.__traceback__)
        raise TemplateError(f"rendering stopped: {error}", line=line) from None
    except SecurityError as error:
        line = _template_line(error.__traceback__)
        raise TemplateError(f"not allowed in a template: {error}", line=line) from None
    except UndefinedError as error:
        raise TemplateError(str(error), line=_template_line(error.__traceback__)) from None
    except Exception as error:  # the template's own runtime error: 1/0, "a" + 1, a range too big
        line = _template_line(error.__traceback__)
        raise TemplateError(f"{type(error).__name__}: {error}", line=line) from None
    finally:
        _BUDGET.reset(budget)
