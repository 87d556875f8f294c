"""Comments and blank lines that ruamel.yaml keeps with the value before them."""

from __future__ import annotations

from ruamel.yaml.comments import CommentedBase, CommentedMap, CommentedSeq
from ruamel.yaml.error import CommentMark
from ruamel.yaml.tokens import CommentToken

from tuisched.runtime.document.values import own_keys

# --- trailing comments -------------------------------------------------------


def _last_slot(node: object) -> tuple[CommentedBase, object] | None:
    """Where ruamel.yaml keeps the comment after `node`'s last scalar: (container, key)."""
    if isinstance(node, CommentedMap) and (own := own_keys(node)):
        return _last_slot(node[own[-1]]) or (node, own[-1])
    if isinstance(node, CommentedSeq) and len(node):
        return _last_slot(node[-1]) or (node, len(node) - 1)
    return None


def _slot_token(container: CommentedBase, key: object) -> CommentToken | None:
    entry = container.ca.items.get(key)
    position = 0 if isinstance(container, CommentedSeq) else 2
    if entry is None or len(entry) <= position:
        return None
    token = entry[position]
    return token if isinstance(token, CommentToken) else None


def take_trailing(node: object) -> str:
    """Detach the lines after `node`'s last line (blank lines, comments above what follows).

    The comment on the last line itself stays. Returns the detached text ("" if none).
    """
    slot = _last_slot(node)
    token = _slot_token(*slot) if slot else None
    if token is None:
        return ""
    first, newline, rest = token.value.partition("\n")
    if not rest:
        return ""
    token.value = first + newline
    return rest


def put_trailing(node: object, trailing: str) -> None:
    """Attach `trailing` (from `take_trailing`) after `node`'s last line."""
    slot = _last_slot(node)
    if not trailing or slot is None:
        return
    container, key = slot
    token = _slot_token(container, key)
    if token is None:
        token = CommentToken("\n", CommentMark(0))
        position = 0 if isinstance(container, CommentedSeq) else 2
        container.ca.items.setdefault(key, [None, None, None, None])[position] = token
    token.value = token.value.rstrip("\n") + "\n" + trailing


def put_leading(target: CommentedMap, key: str, text: str) -> None:
    """Write `text` (whole lines) just above `key`, before what is there already."""
    tokens = []
    for line in text.splitlines():
        content = line.lstrip(" ")
        tokens.append(CommentToken(content + "\n", CommentMark(len(line) - len(content))))
    entry = target.ca.items.setdefault(key, [None, None, None, None])
    entry[1] = tokens + (entry[1] or [])
