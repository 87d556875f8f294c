"""Template limits and the error every template failure raises."""

from __future__ import annotations

from tuisched.domain.errors import TemplateError

__all__ = [
    "CUT_MARKER",
    "MAX_POWER_BITS",
    "MAX_PRODUCT",
    "MAX_RENDERED_BYTES",
    "MAX_TEMPLATE_BYTES",
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

_TEMPLATE_FILE = "<template>"
"""The file name Jinja gives frames of a template compiled from a string."""
