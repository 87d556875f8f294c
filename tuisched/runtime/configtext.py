"""The configuration file as text: read safely, and the state directory it names.

`read_config_text` reads the file (a regular file only, never blocking on a
FIFO, up to a size). `state_dir_of` finds where the configuration's scheduler
keeps its state, and so its control socket, which every command line verb
needs before anything else: leniently, from a file that does not validate
too, and cheaply, from libyaml's events without building the jobs. Nothing
here loads the configuration's validation (`configfiles.py` does), so a verb
does not pay for it. The YAML is read by the configuration's own reader
(`domain.config.yamlsource.read_section`), which builds `settings` only; a
file too broken to parse is searched line by line for the two settings.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path

import yaml

from tuisched.domain.config.keys import NODE_NAME
from tuisched.domain.config.yamlsource import Map, Scalar, read_section
from tuisched.domain.errors import ConfigError, Problem

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
        given, clustered = _settings_of(path, text)
    except yaml.YAMLError:  # a broken edit: the lines that name them, if any
        found = _STATE_DIR_LINE.search(text)
        given = found.group(1) if found else None
        clustered = _CLUSTER_LINE.search(text) is not None
    folder = path.parent / Path(given).expanduser() if given else default_state_dir(path)
    name = node_name()
    if name and NODE_NAME.fullmatch(name) and clustered:
        folder = folder / "nodes" / name  # as `Settings` places a named node's state
    return folder


def _settings_of(path: Path, text: str) -> tuple[str | None, bool]:
    """`settings.state_dir` as written (None when it is not a text) and whether
    `settings.cluster` is set, in the file `text`: only `settings` is built, the rest
    is only parsed (see `read_section`). Raises yaml.YAMLError on a broken file."""
    settings = read_section(path, text, "settings")
    if not isinstance(settings, Map):
        return None, False
    state_dir = settings.entries.get("state_dir")
    cluster = settings.entries.get("cluster")
    given = state_dir.value if state_dir is not None else None
    text_given = given.text if isinstance(given, Scalar) and not given.is_null else None
    clustered = cluster is not None and not (
        isinstance(cluster.value, Scalar) and cluster.value.is_null
    )
    return text_given, clustered
