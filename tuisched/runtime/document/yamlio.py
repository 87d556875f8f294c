"""ruamel.yaml set up to change nothing it was not asked to, and the file's indentation."""

from __future__ import annotations

import re
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.emitter import Emitter
from ruamel.yaml.resolver import BaseResolver

_WIDE = 1 << 20
"""Line width that no configuration reaches: ruamel.yaml never re-wraps a line."""

_TAG = "tag:yaml.org,2002:"
_TEXT_ONLY_RULES = (
    (_TAG + "null", re.compile(r"^(?:~|null|Null|NULL|)$"), ["~", "n", "N", ""]),
    (_TAG + "merge", re.compile(r"^(?:<<)$"), ["<"]),
)


class _TextResolver(BaseResolver):
    """Resolves every plain scalar to a string, except the null forms and `<<`.

    This is how `tuisched.domain.config.yamlsource` reads a file, so ruamel.yaml neither
    converts values on loading nor quotes or tags strings on dumping.
    """

    yaml_implicit_resolvers: dict[str, list[tuple[str, re.Pattern[str]]]] = {}  # noqa: RUF012

    def __init__(self, version: object = None, loader: object = None, loadumper: object = None):
        # YAML() builds its resolver with `version=` and `loader=`; BaseResolver takes neither.
        super().__init__(loader if loader is not None else loadumper)

    @property
    def processing_version(self) -> tuple[int, int]:
        """YAML 1.2 syntax (the parser asks; the typing rules are ours)."""
        return (1, 2)


for _tag, _pattern, _first in _TEXT_ONLY_RULES:
    _TextResolver.add_implicit_resolver_base(_tag, _pattern, _first)


class _OperatorEmitter(Emitter):
    """Quotes a new value that needs quotes with double quotes, as the sample file does.

    ruamel.yaml prefers single quotes; a scalar read from the file keeps its
    own style (plain, `'...'` or `"..."`) through `preserve_quotes`.
    """

    def choose_scalar_style(self) -> Any:
        style = super().choose_scalar_style()
        if style == "'" and not self.event.style:
            return '"'
        return style


def round_trip_yaml() -> YAML:
    """A round-trip ruamel.yaml instance configured to change nothing it was not asked to."""
    yaml = YAML(typ="rt")
    yaml.Resolver = _TextResolver
    yaml.Emitter = _OperatorEmitter
    yaml.preserve_quotes = True
    yaml.width = _WIDE
    return yaml


# --- indentation -----------------------------------------------------------

_KEY_ONLY = re.compile(r"^( *)[^\s#-][^#]*:\s*(?:#.*)?$")
_ITEM = re.compile(r"^( *)- +(\S)")


def guess_indent(text: str) -> tuple[int, int, int]:
    """The file's mapping indent, sequence indent and dash offset, as `YAML.indent` takes them.

    Looks at the first nested mapping and the first block sequence under a
    key. Defaults (2, 2, 0) stand for what the file does not show.

    Returns:
        (mapping, sequence, offset): a nested key's extra indent; a sequence
        item's content indent relative to its key; the dash's indent.
    """
    mapping = sequence = offset = None
    parent: int | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        depth = len(line) - len(line.lstrip(" "))
        item = _ITEM.match(line)
        if parent is not None and item and sequence is None:
            offset = depth - parent
            sequence = item.start(2) - parent
        elif parent is not None and not item and depth > parent and mapping is None:
            mapping = depth - parent
        key_only = _KEY_ONLY.match(line)
        parent = len(key_only.group(1)) if key_only and not item else None
        if mapping is not None and sequence is not None:
            break
    mapping = mapping or 2
    offset = offset or 0
    return mapping, max(sequence or mapping, offset + 2), offset
