"""Read a YAML file into located nodes, refusing what PyYAML would silently hide.

PyYAML's `safe_load` loses line numbers, keeps the last of two duplicate keys,
and applies YAML 1.1 typing (`on` becomes True, `12:30` becomes 750, `0755`
becomes 493). We compose the node graph instead and keep every scalar's text,
so the configuration reader decides what a value means from what the operator
wrote, and can point at the line when it is wrong.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from tuisched.errors import Problem

_ALLOWED_TAGS = frozenset(
    f"tag:yaml.org,2002:{name}"
    for name in ("str", "int", "float", "bool", "null", "timestamp", "seq", "map", "merge")
)
_MERGE_KEY = "<<"
# libyaml's composer is several times faster on large files and gives the same nodes.
_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MAX_NODES = 1_000_000


@dataclass(frozen=True, slots=True)
class Scalar:
    """A scalar exactly as written: its text, whether it was quoted, and its line."""

    text: str
    line: int
    plain: bool
    """True when unquoted and untagged, i.e. YAML would have guessed its type."""

    @property
    def is_null(self) -> bool:
        """True for an empty value, `~` or `null` written plain."""
        return self.plain and self.text in ("", "~", "null", "Null", "NULL")


@dataclass(frozen=True, slots=True)
class Seq:
    """A sequence and its line."""

    items: tuple[Value, ...]
    line: int


@dataclass(frozen=True, slots=True)
class Entry:
    """One key of a mapping: the key's line and its value."""

    key_line: int
    value: Value


@dataclass(frozen=True, slots=True)
class Map:
    """A mapping with string keys, in file order."""

    entries: dict[str, Entry]
    line: int


Value = Scalar | Seq | Map

Scope = Callable[[tuple[str, ...]], dict[str, str]]
"""Maps the keys leading to a problem to the Problem fields naming its owner (job, group)."""


def _no_scope(_keys: tuple[str, ...]) -> dict[str, str]:
    return {}


@dataclass(slots=True)
class _Reader:
    file: Path
    scope: Scope = _no_scope
    problems: list[Problem] = field(default_factory=list)
    seen: dict[int, Value] = field(default_factory=dict)
    keys: list[str] = field(default_factory=list)
    """The keys leading to the node being read."""
    resolver: yaml.resolver.Resolver = field(default_factory=yaml.resolver.Resolver)

    def problem(self, line: int, message: str) -> None:
        owner = self.scope(tuple(self.keys))
        self.problems.append(Problem(file=self.file, line=line, message=message, **owner))

    def convert(self, node: Node) -> Value:
        # Aliases share nodes: convert each once, which also defuses alias bombs.
        cached = self.seen.get(id(node))
        if cached is not None:
            return cached
        if len(self.seen) > _MAX_NODES:
            raise _TooLarge
        value = self._convert(node)
        self.seen[id(node)] = value
        return value

    def _convert(self, node: Node) -> Value:
        line = node.start_mark.line + 1
        if node.tag not in _ALLOWED_TAGS and node.tag != "!":
            self.problem(line, f"YAML tag '{node.tag}' is not allowed here")
        if isinstance(node, ScalarNode):
            return Scalar(text=node.value, line=line, plain=self._is_plain(node))
        if isinstance(node, SequenceNode):
            return Seq(items=tuple(self.convert(item) for item in node.value), line=line)
        if isinstance(node, MappingNode):
            return self._mapping(node, line)
        raise TypeError(f"unexpected YAML node {node!r}")  # PyYAML composes only these three

    def _is_plain(self, node: ScalarNode) -> bool:
        if node.style:  # None (PyYAML) or "" (libyaml) for a plain scalar
            return False
        # types-PyYAML leaves Resolver.resolve untyped.
        implicit = self.resolver.resolve(  # type: ignore[no-untyped-call]
            ScalarNode, node.value, (True, False)
        )
        return bool(node.tag == implicit)

    def _mapping(self, node: MappingNode, line: int) -> Map:
        entries: dict[str, Entry] = {}
        merged: dict[str, Entry] = {}
        for key_node, value_node in node.value:
            key_line = key_node.start_mark.line + 1
            if not isinstance(key_node, ScalarNode):
                self.problem(key_line, "a mapping key must be a plain word, not a list or mapping")
                continue
            if key_node.value == _MERGE_KEY and not key_node.style:
                self._merge(value_node, merged)
                continue
            self.keys.append(key_node.value)
            if key_node.value in entries:
                first = entries[key_node.value].key_line
                self.problem(
                    key_line,
                    f"duplicate key '{key_node.value}' (first at line {first}); "
                    "YAML would silently keep only the last one",
                )
            else:
                entries[key_node.value] = Entry(key_line=key_line, value=self.convert(value_node))
            self.keys.pop()
        return Map(entries={**merged, **entries}, line=line)

    def _merge(self, value_node: Node, into: dict[str, Entry]) -> None:
        sources = value_node.value if isinstance(value_node, SequenceNode) else [value_node]
        for source in sources:
            value = self.convert(source)
            if not isinstance(value, Map):
                self.problem(value.line, "'<<' merges mappings only")
                continue
            for key, entry in value.entries.items():
                into.setdefault(key, entry)


class _TooLarge(Exception):
    pass


def read_yaml(
    file: Path, text: str, scope: Scope = _no_scope
) -> tuple[Value | None, list[Problem]]:
    """Compose `text` (the contents of `file`) into located values.

    Returns the document's root value (None when there is none) and every
    problem found: syntax errors, duplicate keys, foreign tags, an empty
    document or several documents. `scope` names the owner of a problem
    from the keys that lead to it.
    """
    reader = _Reader(file=file, scope=scope)
    try:
        documents = list(yaml.compose_all(text, Loader=_LOADER))
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        at_end = mark is not None and mark.index >= len(text.rstrip())
        if at_end and error.context_mark is not None:
            # A truncated file: point at what was left open, not at the end.
            mark = error.context_mark
        line = mark.line + 1 if mark is not None else 1
        reason = error.problem or error.context or "malformed YAML"
        reader.problem(line, f"YAML syntax error: {reason}")
        return None, reader.problems
    except yaml.YAMLError as error:
        reader.problem(1, f"YAML error: {error}")
        return None, reader.problems
    if not documents or documents[0] is None:
        reader.problem(1, "the file is empty: a configuration needs at least a 'jobs:' section")
        return None, reader.problems
    if len(documents) > 1:
        second = documents[1]
        reader.problem(
            second.start_mark.line + 1 if second is not None else 1,
            "the file holds several YAML documents ('---'); tuisched reads exactly one",
        )
    try:
        root = reader.convert(documents[0])
    except _TooLarge:
        reader.problem(1, "the document is too large (alias expansion?)")
        return None, reader.problems
    return root, reader.problems


def read_yaml_file(file: Path, scope: Scope = _no_scope) -> tuple[Value | None, list[Problem], str]:
    """Read and compose `file`; also returns its text ("" when unreadable)."""
    try:
        raw = file.read_bytes()
    except OSError as error:
        problem = Problem(file=file, line=1, message=f"cannot read the file: {error.strerror}")
        return None, [problem], ""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        problem = Problem(file=file, line=line, message="the file is not valid UTF-8 here")
        return None, [problem], ""
    root, problems = read_yaml(file, text, scope)
    return root, problems, text
