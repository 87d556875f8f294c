"""Template limits and the error every template failure raises."""

from __future__ import annotations

from collections.abc import Callable

from tuisched.domain.errors import TemplateError

__all__ = [
    "CUT_MARKER",
    "MAX_NESTING",
    "MAX_POWER_BITS",
    "MAX_PRODUCT",
    "MAX_RENDERED_BYTES",
    "MAX_TEMPLATE_BYTES",
    "Interrupt",
    "TemplateError",
]

MAX_TEMPLATE_BYTES = 64 * 1024
"""Largest template source accepted."""
MAX_RENDERED_BYTES = 256 * 1024
"""Largest rendered text (UTF-8 bytes); the rest is replaced by `CUT_MARKER`."""
CUT_MARKER = "\n[... cut: the rendered text was longer than 256 KiB]\n"
MAX_PRODUCT = MAX_RENDERED_BYTES
"""Longest string or sequence a `*` in a template may build."""
MAX_POWER_BITS = 4096
"""Largest integer (in bits) a `**` in a template may build."""

MAX_NESTING = 48
"""Most operators, filters and brackets in one tag, and blocks inside each other.

Jinja builds a nested tree for `a | f | g ...` and `a + b + ...`, and compiles it
with recursion: a few hundred would exhaust Python's stack (`RecursionError`).
"""

Interrupt = Callable[[], str | None]
"""Asked at every step of a render: why it must stop now (out of time, cancelled), or None."""

_TEMPLATE_FILE = "<template>"
"""The file name Jinja gives frames of a template compiled from a string."""
