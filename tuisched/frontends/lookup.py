"""Where the command line finds its configuration file.

In order: `-c PATH`, then `$TUISCHED_CONFIG`, then `./tuisched.yaml`, then
`tuisched.yaml` in the user's configuration folder (platformdirs; on Linux
`$XDG_CONFIG_HOME/tuisched`, by default `~/.config/tuisched`). A named file
(`-c`, the variable) is taken as named, so an error about it names it; the two
places looked in by default are taken only when the file is there, and when
neither is, the error says both places.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

CONFIG_NAME = "tuisched.yaml"
ENV_VAR = "TUISCHED_CONFIG"


def user_config_file() -> Path:
    """`tuisched.yaml` in the user's configuration folder (which may not exist)."""
    from platformdirs import user_config_dir  # noqa: PLC0415  (only when no file is named)

    return Path(user_config_dir("tuisched")) / CONFIG_NAME


def add_config_option(parser: argparse.ArgumentParser) -> None:
    """Add `-c/--config PATH` to `parser`; its help names the places looked in."""
    parser.add_argument(
        "-c", "--config", metavar="PATH", default=argparse.SUPPRESS, action=_ConfigOption,
        help=f"configuration file (default: ${ENV_VAR}, then ./{CONFIG_NAME}, then "
        "%(user_file)s)",
    )  # fmt: skip


class _UserConfigFile:
    """`user_config_file()` as text, found when the help is shown: a command that names its
    file never loads platformdirs for it."""

    def __str__(self) -> str:
        return str(user_config_file())


class _ConfigOption(argparse.Action):
    """`-c PATH`, stored as given; argparse expands `%(user_file)s` in its help from the
    action's own attributes, so the user's file is looked up only to print the help."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self.user_file = _UserConfigFile()

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
        values: str | Sequence[Any] | None, option_string: str | None = None,
    ) -> None:  # fmt: skip
        setattr(namespace, self.dest, values)


def config_path(args: argparse.Namespace) -> Path:
    """The configuration file the command names: `-c`, then the places `find_config` looks
    in (ConfigError says where it looked)."""
    return find_config(getattr(args, "config", None), os.environ, Path.cwd())


def find_config(given: str | None, environ: Mapping[str, str], cwd: Path) -> Path:
    """The configuration file to use (see the module docstring).

    Raises ConfigError (one problem, on `./tuisched.yaml`) saying where it looked
    when no file was named and neither default place holds one.
    """
    named = given or environ.get(ENV_VAR)
    if named:
        return Path(named)
    places = (cwd / CONFIG_NAME, user_config_file())
    for place in places:
        if place.exists():
            return place
    from tuisched.domain.errors import ConfigError, Problem  # noqa: PLC0415  (only to fail)

    looked = " and ".join(str(place) for place in places)
    raise ConfigError(
        [
            Problem(
                file=places[0],
                line=1,
                message=(
                    f"cannot read the file: No such file or directory; looked in {looked}; "
                    f"name a configuration with -c PATH or ${ENV_VAR}, or create one "
                    "(tuisched init writes a starter; sample_config/tuisched.yaml shows every "
                    "feature)"
                ),
            )
        ]
    )
