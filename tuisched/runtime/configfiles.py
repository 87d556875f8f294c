"""Reading configuration files: what the domain's pure validation needs from the machine.

`load_config(path)` reads the file and validates it; `parse_config(text,
path)` validates text as if it were that file. Both give the domain a
`ConfigHost`: the machine's time zone (`$TZ`, then the system's) and the
platform's user state directory for when the file names neither, and a
reader of alert template files that reads only regular files, up to a size,
without ever blocking on a FIFO or a device.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from zoneinfo import ZoneInfo

import yaml
from yaml.events import (
    AliasEvent,
    Event,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
)

from tuisched.domain.config.config import ConfigHost, interpret_config
from tuisched.domain.config.sections import NODE_NAME
from tuisched.domain.config.yamlsource import FAST_LOADER
from tuisched.domain.errors import ConfigError, Problem, TemplateError
from tuisched.domain.model import Config
from tuisched.domain.templates.base import MAX_TEMPLATE_BYTES
from tuisched.runtime.clock import Deadline


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
            the platform's user state directory for tuisched).

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
    host = config_host(system_timezone=system_timezone, default_state_dir=default_state_dir)
    return interpret_config(text, path, host)


def read_config_text(path: Path) -> str:
    """The text of the configuration file at `path`.

    Raises:
        ConfigError: the file cannot be read, or is not UTF-8 (the line says where).
    """
    try:
        raw = _read_regular(path)
    except OSError as error:
        message = f"cannot read the file: {error.strerror}{_hint(error)}"
        raise ConfigError([Problem(file=path, line=1, message=message)]) from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        message = "the file is not valid UTF-8 here"
        raise ConfigError([Problem(file=path, line=line, message=message)]) from None


MAX_CONFIG_BYTES = 256 * 1024 * 1024
"""A configuration larger than this (a runaway generator, /dev/zero) is refused unread."""


def _read_regular(path: Path) -> bytes:
    """The bytes of the regular file at `path`, opened without blocking (a FIFO, a device
    or a folder is refused before anything is read; so is a file over the size limit)."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(descriptor, "rb") as file:
        info = os.fstat(file.fileno())
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a pipe or a device?)")
        if info.st_size > MAX_CONFIG_BYTES:
            raise OSError(errno.EFBIG, f"larger than {MAX_CONFIG_BYTES // 2**20} MiB")
        return file.read(MAX_CONFIG_BYTES + 1)


def _hint(error: OSError) -> str:
    """What to do about a configuration that cannot be read."""
    if isinstance(error, FileNotFoundError):
        return (
            "; name a configuration with -c PATH or $TUISCHED_CONFIG, or create one "
            "(tuisched init writes a starter; sample_config/tuisched.yaml shows every feature)"
        )
    if isinstance(error, IsADirectoryError):
        return "; name the YAML file itself, not its folder"
    return ""


_STATE_DIR_LINE = re.compile(r"""\bstate_dir:[ \t]*["']?([^"',}#\s]+)""")
_CLUSTER_LINE = re.compile(r"^[ \t]{1,4}cluster:", re.MULTILINE)


def state_dir_of(path: Path) -> Path:
    """The state directory the configuration at `path` names, read leniently: from a file
    that does not validate too, so that a scheduler running on it can still be found.

    Raises:
        ConfigError: the file cannot be read at all.
    """
    path = path.absolute()
    text = read_config_text(path)
    try:
        given, clustered = _settings_of(text)
    except yaml.YAMLError:  # a broken edit: the lines that name them, if any
        found = _STATE_DIR_LINE.search(text)
        given = found.group(1) if found else None
        clustered = _CLUSTER_LINE.search(text) is not None
    folder = _user_state_dir()
    if isinstance(given, str) and given:
        folder = path.parent / Path(given).expanduser()
    name = _node_name()
    if name and NODE_NAME.fullmatch(name) and clustered:
        folder = folder / "nodes" / name  # as `Settings` places a named node's state
    return folder


class _Unusual(Exception):
    """`settings` uses an alias or a merge key: read the whole file the slow way."""


_NULLS = frozenset({"", "~", "null", "Null", "NULL"})


def _settings_of(text: str) -> tuple[object, bool]:
    """`settings.state_dir` and whether `settings.cluster` is set, in the file `text`.

    Read from libyaml's events, skipping everything but `settings` (the CLI
    verbs find the control socket this way: 0.07 s instead of `safe_load`'s
    2.3 s at 10,000 jobs). `state_dir` is the text written, as the
    configuration reader takes it. Raises yaml.YAMLError on a broken file.
    """
    try:
        return _settings_from_events(iter(yaml.parse(text, Loader=FAST_LOADER)))
    except _Unusual:
        loaded = yaml.load(text, Loader=FAST_LOADER)  # noqa: S506  (CSafeLoader or SafeLoader)
        settings = loaded.get("settings") if isinstance(loaded, dict) else None
        if not isinstance(settings, dict):
            return None, False
        return settings.get("state_dir"), settings.get("cluster") is not None


def _settings_from_events(events: Iterator[Event]) -> tuple[object, bool]:
    for event in events:
        if isinstance(event, MappingStartEvent):
            break  # the first document's top mapping
        if isinstance(event, ScalarEvent | SequenceStartEvent | AliasEvent):
            return None, False  # not a mapping: no settings
    given: object = None
    clustered = False
    for key, value in _pairs(events):
        if not (_scalar(key) == "settings" and isinstance(value, MappingStartEvent)):
            if _scalar(key) == "settings" or _scalar(key) == "<<":
                raise _Unusual
            _skip(value, events)
            continue
        given, clustered = None, False  # the last `settings` counts, as with safe_load
        for name, setting in _pairs(events):
            if _scalar(name) == "<<" or isinstance(setting, AliasEvent):
                raise _Unusual
            if _scalar(name) == "state_dir":
                given = _scalar(setting)
            elif _scalar(name) == "cluster":
                clustered = not (isinstance(setting, ScalarEvent) and _scalar(setting) is None)
            _skip(setting, events)
    return given, clustered


def _pairs(events: Iterator[Event]) -> Iterator[tuple[Event, Event]]:
    """The (key, value) first events of a mapping whose start was just read; the caller
    skips each value (`_skip`). A key that is not a scalar is skipped here."""
    for key in events:
        if isinstance(key, MappingEndEvent):
            return
        _skip(key, events)
        yield key, next(events)


def _skip(first: Event, events: Iterator[Event]) -> None:
    """Read past the node that starts with `first`."""
    depth = int(isinstance(first, MappingStartEvent | SequenceStartEvent))
    while depth:
        event = next(events)
        if isinstance(event, MappingStartEvent | SequenceStartEvent):
            depth += 1
        elif isinstance(event, MappingEndEvent | SequenceEndEvent):
            depth -= 1


def _scalar(event: Event) -> str | None:
    """A scalar's text (None for a plain null form, or for anything but a scalar)."""
    if not isinstance(event, ScalarEvent):
        return None
    return None if event.implicit[0] and event.value in _NULLS else event.value


def config_host(
    *, system_timezone: ZoneInfo | None = None, default_state_dir: Path | None = None
) -> ConfigHost:
    """The machine's answers for the domain (each default asked only when needed)."""
    return ConfigHost(
        system_timezone=(lambda: system_timezone) if system_timezone else _system_timezone,
        default_state_dir=(lambda: default_state_dir) if default_state_dir else _user_state_dir,
        read_template=read_template,
        render_limit=Deadline,
        node_name=_node_name,
    )


NODE_NAME_VARIABLE = "TUISCHED_NODE_NAME"


def _node_name() -> str | None:
    """This node's name when the environment gives one (several nodes on one machine)."""
    return os.environ.get(NODE_NAME_VARIABLE) or None


def _system_timezone() -> ZoneInfo:
    from tzlocal import get_localzone_name  # noqa: PLC0415  (only needed without settings.timezone)

    name = os.environ.get("TZ") or get_localzone_name() or "UTC"
    try:
        return ZoneInfo(name.removeprefix(":"))
    except (ValueError, KeyError):
        return ZoneInfo("UTC")


def _user_state_dir() -> Path:
    from platformdirs import user_state_path  # noqa: PLC0415  (only needed without state_dir)

    return user_state_path("tuisched")


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
