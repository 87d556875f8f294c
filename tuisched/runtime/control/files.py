"""Reading a configuration for a front end (most CLI commands need no scheduler)."""

from __future__ import annotations

from pathlib import Path

from tuisched.domain.model import Config
from tuisched.runtime.configsource import ConfigSource


def read_config(path: Path) -> tuple[str, Config]:
    """The text and the validated configuration at `path` (ConfigError if it is not valid)."""
    return ConfigSource.read(path)
