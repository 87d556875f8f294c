"""Alert templates: Jinja2 in its immutable sandbox, with a size cap.

Template sources come only from the configuration; run data enters a
template only as plain values in the render context.
"""

from __future__ import annotations

from jinja2 import TemplateSyntaxError
from jinja2.sandbox import ImmutableSandboxedEnvironment

MAX_TEMPLATE_BYTES = 64 * 1024
"""Largest template source accepted."""


def sandbox() -> ImmutableSandboxedEnvironment:
    """A fresh immutable sandbox environment, autoescape off (mail is plain text)."""
    return ImmutableSandboxedEnvironment(autoescape=False, keep_trailing_newline=True)


def syntax_problem(source: str) -> tuple[int, str] | None:
    """Check `source` parses; return (line within the template, message) if not."""
    if len(source.encode()) > MAX_TEMPLATE_BYTES:
        return 1, f"template is larger than {MAX_TEMPLATE_BYTES // 1024} KiB"
    try:
        sandbox().parse(source)
    except TemplateSyntaxError as error:
        return error.lineno, f"template syntax error: {error.message}"
    return None
