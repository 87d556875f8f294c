"""YAML as the console shows and takes it: every scalar is the text written.

A job's definition reaches the console as text values (the document writer
reads them so, see `tuisched.runtime.document`); the detail view shows it as
block YAML and the edit form shows an argv as a flow list (`[/bin/echo, hi]`)
and reads one back. With no implicit resolvers, PyYAML neither turns `yes` or
`0755` into other types when reading nor quotes `2` as `'2'` when writing: only
what YAML's syntax needs (`"*/5 * * * *"`, an empty string) gets quotes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import yaml


class TextLoader(yaml.SafeLoader):
    """Reads every scalar as text: `[/bin/echo, yes]` keeps the word `yes`."""

    yaml_implicit_resolvers: ClassVar[dict[str, list[tuple[str, object]]]] = {}  # type: ignore[misc]


class TextDumper(yaml.SafeDumper):
    """Writes text scalars unquoted where YAML allows (`retries: 2`, `[/bin/echo, hi]`)."""

    yaml_implicit_resolvers: ClassVar[dict[str, list[tuple[str, object]]]] = {}  # type: ignore[misc]


def block_text(mapping: Mapping[str, object]) -> str:
    """`mapping` (text values) as block YAML, keys in their order."""
    return yaml.dump(
        dict(mapping), Dumper=TextDumper, sort_keys=False,
        default_flow_style=False, allow_unicode=True, width=10_000,
    )  # fmt: skip


def flow_text(items: list[Any]) -> str:
    """`items` (text values) as a one-line flow list: `[/bin/echo, hi]`."""
    return yaml.dump(items, Dumper=TextDumper, default_flow_style=True, width=10_000).strip()


def read_text(text: str) -> object:
    """`text` read as YAML with every scalar a string (yaml.YAMLError if it is not YAML)."""
    return yaml.load(text, Loader=TextLoader)  # noqa: S506  (a SafeLoader subclass)
