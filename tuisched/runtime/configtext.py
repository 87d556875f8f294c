"""The configuration file as text: read safely, and the state directory it names.

`read_config_text` reads the file (a regular file only, never blocking on a
FIFO, up to a size). `state_dir_of` finds where the configuration's scheduler
keeps its state, and so its control socket, which every command line verb
needs before anything else: leniently, from a file that does not validate
too, and cheaply, from libyaml's events without building the jobs. Nothing
here loads the configuration's validation (`configfiles.py` does), so a verb
does not pay for it.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path

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

from tuisched.domain.config.keys import NODE_NAME
from tuisched.domain.errors import ConfigError, Problem

FAST_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's loader where it is there (the same events, several times faster); as
`domain.config.yamlsource` reads, without loading that module."""
NODE_NAME_VARIABLE = "TUISCHED_NODE_NAME"


def node_name() -> str | None:
    """This node's name when the environment gives one (several nodes on one machine)."""
    return os.environ.get(NODE_NAME_VARIABLE) or None


def user_state_dir() -> Path:
    """The platform's user state directory for tuisched (`~/.local/state/tuisched`)."""
    from platformdirs import user_state_path  # noqa: PLC0415  (only needed without state_dir)

    return user_state_path("tuisched")


CONFIGS_FOLDER = "configs"
"""The folder of the user state directory that holds one state directory per configuration."""
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def default_state_dir(config: Path) -> Path:
    """The state directory of the configuration at `config` when it names none: a folder
    of its own, `configs/FOLDER-NAME-HASH` under the user state directory, named from the
    file's resolved path (so `-c ./tuisched.yaml`, its absolute path and a link to it are
    one configuration, and two files in two folders are two schedulers)."""
    import hashlib  # noqa: PLC0415  (only needed without state_dir)

    real = config.absolute().resolve()
    digest = hashlib.sha256(os.fsencode(real)).hexdigest()[:12]
    words = _UNSAFE.sub("-", f"{real.parent.name}-{real.stem}").strip("-.")[:48]
    return user_state_dir() / CONFIGS_FOLDER / f"{words or 'config'}-{digest}"


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
    if isinstance(given, str) and given:
        folder = path.parent / Path(given).expanduser()
    else:
        folder = default_state_dir(path)
    name = node_name()
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
