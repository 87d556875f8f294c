"""Reading a configuration for a front end (most CLI commands need no scheduler).

Only the configuration layer (`configfiles`): a command that reads the file,
such as `validate` or `next`, loads none of the live configuration's machinery
(`configsource`, the comment-keeping writer).
"""

from __future__ import annotations

from pathlib import Path

from tuisched.domain.model import Config
from tuisched.runtime.configfiles import parse_config
from tuisched.runtime.configtext import read_config_text


def read_config(path: Path) -> tuple[str, Config]:
    """The text and the validated configuration at `path` (ConfigError if it is not valid),
    as `ConfigSource.read` gives them."""
    path = path.absolute()
    text = read_config_text(path)
    return text, parse_config(text, path)
