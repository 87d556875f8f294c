"""Editing a mapping or a list in place: unchanged values keep their quotes and comments."""

from __future__ import annotations

import difflib

from ruamel.yaml.comments import CommentedMap, CommentedSeq

from tuisched.domain.errors import JobActionError
from tuisched.runtime.document.comments import put_leading, put_trailing, take_trailing
from tuisched.runtime.document.values import (
    Plain,
    new_node,
    own_keys,
    plain_value,
    shared,
    styled_like,
)

# --- editing mappings in place --------------------------------------------------


def update_map(target: CommentedMap, new: dict[str, Plain], where: str) -> None:
    """Make `target` read as `new`, touching only the keys whose value changed.

    Raises:
        JobActionError: `new` drops a key that a `<<` merge provides (the merge
            line stays as written, so the key cannot go without editing the anchor).
    """
    current = plain_value(target)
    assert isinstance(current, dict)  # noqa: S101  (a CommentedMap reads as a dict)
    own = own_keys(target)
    for key in current.keys() - own - new.keys():
        raise JobActionError(
            f"{where}: '{key}' comes from a '<<' merge; change the anchor it is merged "
            "from, or give the key a value here"
        )
    trailing = take_trailing(target)
    for key in own:
        if key not in new:
            del target[key]
    for key, value in new.items():
        if current.get(key, _MISSING) != value:
            _set(target, key, value, own=key in own, where=f"{where}.{key}")
    put_trailing(target, trailing)


_MISSING = object()


def _set(target: CommentedMap, key: str, value: Plain, *, own: bool, where: str) -> None:
    """Set one changed key: in place (keeping its position and comments) when it is written here."""
    old = target.get(key) if own else None
    if isinstance(old, CommentedMap) and isinstance(value, dict) and not shared(old):
        update_map(old, value, where)
    elif isinstance(old, CommentedSeq) and isinstance(value, list) and not shared(old):
        update_seq(old, value, where)
    else:
        target[key] = styled_like(old, value)


def update_seq(target: CommentedSeq, new: list[Plain], where: str) -> None:
    """Make `target` read as `new`, keeping its style and the items (and their comments) kept.

    Items are matched as a diff would match lines, so removing one item takes
    its own comment with it and leaves the others' where they were.
    """
    trailing = take_trailing(target)
    old = [repr(plain_value(item)) for item in target]
    matcher = difflib.SequenceMatcher(a=old, b=[repr(value) for value in new], autojunk=False)
    for tag, i1, i2, j1, j2 in reversed(matcher.get_opcodes()):
        if tag == "equal":
            continue
        if tag == "replace" and i2 - i1 == j2 - j1:
            for index, value in zip(range(i1, i2), new[j1:j2], strict=True):
                _set_item(target, index, value, f"{where}[{index}]")
            continue
        for index in reversed(range(i1, i2)):
            del target[index]
        for offset, value in enumerate(new[j1:j2]):
            target.insert(i1 + offset, new_node(value))
    put_trailing(target, trailing)


def _set_item(target: CommentedSeq, index: int, value: Plain, where: str) -> None:
    old = target[index]
    if isinstance(old, CommentedMap) and isinstance(value, dict) and not shared(old):
        update_map(old, value, where)
    else:
        target[index] = styled_like(old, value)


def append_key(target: CommentedMap, key: str, value: Plain) -> None:
    """Append `key` at the end of `target`, after its last entry but before what follows it."""
    trailing = take_trailing(target)
    if not len(target):
        target.fa.set_block_style()  # `jobs: {}` grows into a block mapping
    target[key] = new_node(value)
    put_trailing(target, trailing)


def remove_key(target: CommentedMap, key: str) -> None:
    """Remove `key`; the text that introduced the next entry is kept for it."""
    keys = list(target.keys())
    index = keys.index(key)
    trailing = take_trailing(target[key])
    if index > 0:
        take_trailing(target[keys[index - 1]])
        put_trailing(target[keys[index - 1]], trailing)
    elif index + 1 < len(keys):
        put_leading(target, keys[index + 1], trailing)
    del target[key]


def keep_anchors(node: object) -> None:
    """Mark every anchor to be written even when no alias is left (after deleting the last one)."""
    if shared(node):
        node.anchor.always_dump = True  # type: ignore[attr-defined]  # checked by shared
    if isinstance(node, CommentedMap):
        for _, value in node.non_merged_items():
            keep_anchors(value)
    elif isinstance(node, CommentedSeq):
        for item in node:
            keep_anchors(item)
