"""Reading configuration files: what the domain's pure validation needs from the machine.

`load_config(path)` reads the file and validates it; `parse_config(text,
path)` validates text as if it were that file. Both give the domain a
`ConfigHost`: the machine's time zone (`$TZ`, then the system's) and the
platform's user state directory for when the file names neither, and a
reader of alert template files that reads only regular files, up to a size,
without ever blocking on a FIFO or a device. The file's own reading, and the
lenient reading of the state directory the command line's verbs need, are in
`configtext.py`.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from zoneinfo import ZoneInfo

from tuisched.domain.config.config import interpret_config
from tuisched.domain.config.host import ConfigHost
from tuisched.domain.errors import TemplateError
from tuisched.domain.model import Config
from tuisched.domain.templates.base import MAX_TEMPLATE_BYTES, Interrupt
from tuisched.runtime.configtext import default_state_dir as state_dir_for
from tuisched.runtime.configtext import node_name, read_config_text


def load_config(
    path: Path,
    *,
    system_timezone: ZoneInfo | None = None,
    default_state_dir: Path | None = None,
) -> Config:
    """Read and validate the configuration at `path`.

    Args:
        path: the YAML file.
        system_timezone: the zone used when `settings.timezone` is absent
            (default: the machine's zone).
        default_state_dir: used when `settings.state_dir` is absent (default:
            a folder of the file's own under the user state directory).

    Raises:
        ConfigError: listing every problem found (an unreadable file, or text
            that is not UTF-8, is one problem); nothing is returned then.
    """
    path = path.absolute()
    text = read_config_text(path)
    return parse_config(
        text, path, system_timezone=system_timezone, default_state_dir=default_state_dir
    )


def parse_config(
    text: str,
    path: Path,
    *,
    system_timezone: ZoneInfo | None = None,
    default_state_dir: Path | None = None,
) -> Config:
    """Validate `text` as if it were the contents of `path` (see `load_config`)."""
    host = config_host(path, system_timezone=system_timezone, default_state_dir=default_state_dir)
    return interpret_config(text, path, host)


def config_host(
    path: Path, *, system_timezone: ZoneInfo | None = None, default_state_dir: Path | None = None
) -> ConfigHost:
    """The machine's answers for the domain about the configuration at `path` (each
    default asked only when needed)."""
    return ConfigHost(
        system_timezone=(lambda: system_timezone) if system_timezone else _system_timezone,
        default_state_dir=(
            (lambda: default_state_dir) if default_state_dir else (lambda: state_dir_for(path))
        ),
        read_template=read_template,
        render_limit=_render_limit,
        node_name=node_name,
    )


def _system_timezone() -> ZoneInfo:
    from tzlocal import get_localzone_name  # noqa: PLC0415  (only needed without settings.timezone)

    name = os.environ.get("TZ") or get_localzone_name() or "UTC"
    try:
        return ZoneInfo(name.removeprefix(":"))
    except (ValueError, KeyError):
        return ZoneInfo("UTC")


def _render_limit() -> Interrupt:
    """A template check's time limit (`Deadline`); the clock module, and asyncio with it,
    load only when a configuration has a template to check, not for every command."""
    from tuisched.runtime.clock import Deadline  # noqa: PLC0415

    return Deadline()


def read_template(path: Path) -> str:
    """The source of the template file at `path` (UTF-8).

    Reads at most `MAX_TEMPLATE_BYTES + 1` bytes, and only from a regular
    file: it is opened without blocking, and a FIFO, a device or a directory
    is refused before anything is read.

    Raises:
        TemplateError: the file cannot be read, is not a regular file, is
            larger than `MAX_TEMPLATE_BYTES` or is not UTF-8.
    """
    try:
        data = _read_capped(path)
    except OSError as error:
        raise TemplateError(f"cannot read template {path}: {error.strerror}") from None
    if data is None:
        raise TemplateError(f"cannot read template {path}: not a regular file")
    if len(data) > MAX_TEMPLATE_BYTES:
        raise TemplateError(
            f"cannot read template {path}: larger than {MAX_TEMPLATE_BYTES // 1024} KiB"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise TemplateError(f"cannot read template {path}: not UTF-8") from None


def _read_capped(path: Path) -> bytes | None:
    """At most `MAX_TEMPLATE_BYTES + 1` bytes of `path`; None when it is not a regular file."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(descriptor, "rb") as file:
        if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
            return None
        return file.read(MAX_TEMPLATE_BYTES + 1)
