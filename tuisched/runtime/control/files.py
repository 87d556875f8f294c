"""Reading a configuration for a front end (most CLI commands need no scheduler)."""

from __future__ import annotations

from pathlib import Path

from tuisched.domain.model import Config
from tuisched.runtime.configfiles import state_dir_of
from tuisched.runtime.configsource import ConfigSource
from tuisched.runtime.control.server import socket_path


def read_config(path: Path) -> tuple[str, Config]:
    """The text and the validated configuration at `path` (ConfigError if it is not valid)."""
    return ConfigSource.read(path)


def control_socket(path: Path) -> Path:
    """The control socket of the scheduler of the configuration at `path`, found from a
    file that does not validate too (ConfigError only if it cannot be read at all)."""
    return socket_path(state_dir_of(path))
