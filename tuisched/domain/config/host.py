"""What reading a configuration needs from the machine it runs on.

Its own module, below the readers of each part of the file (`config`,
`sections`, `jobs`), which all take it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from zoneinfo import ZoneInfo

from tuisched.domain.templates import Interrupt
from tuisched.domain.templates.checks import RenderLimit


def _no_render_limit() -> Interrupt | None:
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigHost:
    """What reading a configuration needs from the machine it runs on (the runtime's).

    The domain reads no file and no environment itself: the zone and state
    directory used when the file names none, and the sources of alert
    templates, come from here (`tuisched.runtime.configfiles` makes the real one).
    """

    system_timezone: Callable[[], ZoneInfo]
    """The zone when `settings.timezone` is absent (asked only then)."""
    default_state_dir: Callable[[], Path]
    """The state directory when `settings.state_dir` is absent (asked only then)."""
    read_template: Callable[[Path], str]
    """The source of an alert template file; raises TemplateError when it cannot."""
    render_limit: RenderLimit = _no_render_limit
    """The interrupt of each sample render of an alert template (the runtime's: a time budget)."""
    node_name: Callable[[], str | None] = lambda: None
    """In cluster mode, this node's name when the machine gives one (`TUISCHED_NODE_NAME`):
    it replaces `settings.cluster.name`, and the node keeps its state in a folder of that
    name under `state_dir`, so that several nodes of one file can run on one machine."""
