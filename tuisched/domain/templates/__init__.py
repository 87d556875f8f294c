"""Alert templates: Jinja2 in its immutable sandbox, with size caps.

Template sources come only from the configuration; run data enters a
template only as plain values (strings, numbers, None, tuples and plain
dicts of them) in the render context, never as live objects (SPEC R20a).

Rendering fails with `TemplateError` (a `TuischedError`) for a syntax error,
an undefined name or attribute (`{{ run.exit_cod }}`), a sandbox violation
(`{{ ''.__class__ }}`) or any error the template raises while running. The
sandbox also refuses, before building it, any string, sequence or formatted
text longer than `MAX_PRODUCT` (`*`, `+`, `%`, `~`, `str.format`, width-taking
methods and filters, `join`), integers over `MAX_POWER_BITS`, and a render that
makes more than `MAX_STEPS` loop iterations and calls or builds more than
`MAX_BUILT` characters ("template does too much work"). The output is cut at
`MAX_RENDERED_BYTES` with `CUT_MARKER`.

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

from tuisched.domain.templates.base import (
    CUT_MARKER,
    MAX_POWER_BITS,
    MAX_PRODUCT,
    MAX_RENDERED_BYTES,
    MAX_TEMPLATE_BYTES,
    Interrupt,
    TemplateError,
)
from tuisched.domain.templates.checks import template_problems
from tuisched.domain.templates.context import alert_context, plain_data, sample_context, sample_run
from tuisched.domain.templates.rendering import render
from tuisched.domain.templates.sandbox import MAX_BUILT, MAX_STEPS, sandbox, syntax_problem

__all__ = [
    "CUT_MARKER",
    "MAX_BUILT",
    "MAX_POWER_BITS",
    "MAX_PRODUCT",
    "MAX_RENDERED_BYTES",
    "MAX_STEPS",
    "MAX_TEMPLATE_BYTES",
    "Interrupt",
    "TemplateError",
    "alert_context",
    "plain_data",
    "render",
    "sample_context",
    "sample_run",
    "sandbox",
    "syntax_problem",
    "template_problems",
]
