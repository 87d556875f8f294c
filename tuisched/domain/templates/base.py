"""Template limits and the error every template failure raises."""

from __future__ import annotations

from tuisched.domain.errors import TuischedError

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
