"""Values as the configuration file writes them: text, null, lists and mappings."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.scalarstring import ScalarString

Plain = str | list["Plain"] | dict[str, "Plain"] | None
"""A configuration value as tuisched reads it: text, null, lists and mappings."""


# --- values ----------------------------------------------------------------


def as_text(value: object) -> Plain:
    """`value` (from the API) as the text tuisched reads back with the same meaning.

    Raises:
        TypeError: for a value a configuration cannot hold (a set, an object,
            a mapping with a key that is not a string).
    """
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, Mapping):
        return mapping_as_text(value)
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        return [as_text(item) for item in value]
    raise TypeError(f"a configuration cannot hold {type(value).__name__} values: {value!r}")


def mapping_as_text(value: Mapping[Any, object]) -> dict[str, Plain]:
    for key in value:
        if not isinstance(key, str):
            raise TypeError(f"configuration keys are strings, not {key!r}")
    return {key: as_text(item) for key, item in value.items()}


def plain_value(node: object) -> Plain:
    """A loaded value as plain Python text values (merged keys included, as tuisched reads)."""
    if isinstance(node, CommentedMap):
        return {str(key): plain_value(value) for key, value in node.items()}
    if isinstance(node, list):
        return [plain_value(item) for item in node]
    if node is None:
        return None
    return str(node)  # a ScalarString, or what an explicit tag made of the text


def new_node(value: Plain) -> object:
    """A new value to insert: block mappings; flow lists when they hold only text."""
    if isinstance(value, dict):
        mapping = CommentedMap((key, new_node(item)) for key, item in value.items())
        mapping.fa.set_block_style()
        return mapping
    if isinstance(value, list):
        sequence = CommentedSeq(new_node(item) for item in value)
        if all(item is None or isinstance(item, str) for item in value):
            sequence.fa.set_flow_style()
        else:
            sequence.fa.set_block_style()
        return sequence
    return value


def styled_like(old: object, new: Plain) -> object:
    """`new` as a node, keeping `old`'s quotes when both are text."""
    if isinstance(new, str) and isinstance(old, ScalarString):
        return type(old)(new)
    return new_node(new)


def shared(node: object) -> bool:
    """True for a value that carries an anchor: editing it in place would edit its aliases."""
    anchor = getattr(node, "anchor", None)
    return bool(anchor is not None and anchor.value)


def own_keys(mapping: CommentedMap) -> list[str]:
    """Keys written in `mapping` itself, not brought in by a `<<` merge."""
    return [key for key, _ in mapping.non_merged_items()]
