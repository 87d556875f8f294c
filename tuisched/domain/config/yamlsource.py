"""Read a YAML file into located values, refusing what PyYAML would silently hide.

PyYAML's `safe_load` loses line numbers, keeps the last of two duplicate keys,
and applies YAML 1.1 typing (`on` becomes True, `12:30` becomes 750, `0755`
becomes 493). We read the parser's events instead and keep every scalar's
text, so the configuration reader decides what a value means from what the
operator wrote, and can point at the line when it is wrong.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from yaml.events import (
    AliasEvent,
    CollectionEndEvent,
    CollectionStartEvent,
    DocumentStartEvent,
    Event,
    MappingEndEvent,
    MappingStartEvent,
    NodeEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
)

from tuisched.domain.errors import Problem

_ALLOWED_TAGS = frozenset(
    f"tag:yaml.org,2002:{name}"
    for name in ("str", "int", "float", "bool", "null", "timestamp", "seq", "map", "merge")
)
_MERGE_KEY = "<<"
_LINE_BREAK = re.compile("\r\n|[\n\r\x85\u2028\u2029]")
"""What ends a line for the YAML parser (its marks count lines so)."""
MAX_DEPTH = 64
"""Nesting a configuration may reach; deeper is refused (and never recursed into)."""
# libyaml's parser is several times faster on large files and gives the same events.
FAST_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


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


def _line(event: Event) -> int:
    """The 1-based line where `event` begins."""
    return event.start_mark.line + 1 if event.start_mark is not None else 1


def _no_scope(_keys: tuple[str, ...]) -> dict[str, str]:
    return {}


@dataclass(slots=True)
class _Reader:
    """Builds located values straight from the parser's events.

    No node graph is built (PyYAML's nodes carry two marks each and, for a
    100,000-job file, outweigh the values themselves), and PyYAML's type
    guessing never runs. An alias yields the very value its anchor named, so
    alias bombs cost nothing.
    """

    file: Path
    events: Iterator[Event]
    scope: Scope = _no_scope
    problems: list[Problem] = field(default_factory=list)
    anchors: dict[str, Value] = field(default_factory=dict)
    keys: list[str] = field(default_factory=list)
    """The keys leading to the value being read."""
    depth: int = 0
    """Lists and mappings open around the value being read."""

    def problem(self, line: int, message: str) -> None:
        owner = self.scope(tuple(self.keys))
        self.problems.append(Problem(file=self.file, line=line, message=message, **owner))

    def documents(self) -> list[tuple[Value, int]]:
        """Every document's root value and first line."""
        found = []
        for event in self.events:
            if isinstance(event, DocumentStartEvent):
                root = self.value(next(self.events))
                found.append((root, _line(event)))
        return found

    def value(self, event: Event) -> Value:
        """The value that begins with `event` (its end events consumed too)."""
        if isinstance(event, AliasEvent):
            return self._alias(event)
        line = _line(event)
        tag = getattr(event, "tag", None)
        if tag not in (None, "!") and tag not in _ALLOWED_TAGS:
            hint = ""
            if isinstance(event, ScalarEvent) and tag.startswith(
                "!"
            ):  # `command: !x`: no tag meant
                from tuisched.domain.config.hints import indicator_hint  # noqa: PLC0415  (see _syntax_problem)

                hint = indicator_hint(self._key, f"{tag} {event.value}".strip())
            self.problem(line, f"YAML tag '{tag}' is not allowed here{hint}")
        if isinstance(event, ScalarEvent):
            plain = tag is None and event.implicit[0]
            value: Value = Scalar(text=event.value, line=line, plain=plain)
        elif isinstance(event, SequenceStartEvent):
            value = self._sequence(line)
        elif isinstance(event, MappingStartEvent):
            value = self._mapping(line)
        else:  # pragma: no cover  (the parser's grammar allows nothing else here)
            raise TypeError(f"unexpected YAML event {event!r}")
        anchor = getattr(event, "anchor", None)
        if anchor:
            self.anchors[anchor] = value
        return value

    @property
    def _key(self) -> str | None:
        """The key of the value being read (None at the top or in a list)."""
        return self.keys[-1] if self.keys else None

    def _alias(self, event: AliasEvent) -> Value:
        value = self.anchors.get(event.anchor or "")
        if value is None:
            line = _line(event)
            written = f"*{event.anchor}"
            from tuisched.domain.config.hints import indicator_hint  # noqa: PLC0415  (see _syntax_problem)

            hint = indicator_hint(self._key, written)
            self.problem(line, f"alias '{written}' names no anchor defined before it{hint}")
            # What the operator meant, most likely: the readers check it as text.
            return Scalar(text=written, line=line, plain=False)
        return value

    def _sequence(self, line: int) -> Seq:
        if self._too_deep(line):
            return Seq(items=(), line=line)
        items = []
        self.depth += 1
        for event in self.events:
            if isinstance(event, SequenceEndEvent):
                break
            items.append(self.value(event))
        self.depth -= 1
        return Seq(items=tuple(items), line=line)

    def _mapping(self, line: int) -> Map:
        if self._too_deep(line):
            return Map(entries={}, line=line)
        entries: dict[str, Entry] = {}
        merged: dict[str, Entry] = {}
        self.depth += 1
        for key_event in self.events:
            if isinstance(key_event, MappingEndEvent):
                break
            self._entry(key_event, entries, merged)
        self.depth -= 1
        return Map(entries={**merged, **entries}, line=line)

    def _too_deep(self, line: int) -> bool:
        """At MAX_DEPTH: say so, and skip the collection's events without recursing."""
        if self.depth < MAX_DEPTH:
            return False
        self.problem(line, f"the YAML is nested too deeply here (more than {MAX_DEPTH} levels)")
        open_ = 1
        for event in self.events:
            if isinstance(event, SequenceStartEvent | MappingStartEvent):
                open_ += 1
            elif isinstance(event, SequenceEndEvent | MappingEndEvent):
                open_ -= 1
                if not open_:
                    break
        return True

    def _entry(self, key_event: Event, entries: dict[str, Entry], merged: dict[str, Entry]) -> None:
        key_line = _line(key_event)
        if not isinstance(key_event, ScalarEvent):
            self.value(key_event)  # read past it
            self.problem(key_line, "a mapping key must be a plain word, not a list or mapping")
            self.value(next(self.events))
            return
        key = key_event.value
        if key == _MERGE_KEY and key_event.implicit[0]:
            self._merge(self.value(next(self.events)), merged)
            return
        self.keys.append(key)
        value = self.value(next(self.events))
        if key in entries:
            first = entries[key].key_line
            self.problem(
                key_line,
                f"duplicate key '{key}' (first at line {first}); "
                "YAML would silently keep only the last one",
            )
        else:
            entries[key] = Entry(key_line=key_line, value=value)
        self.keys.pop()

    def _merge(self, value: Value, into: dict[str, Entry]) -> None:
        for source in value.items if isinstance(value, Seq) else (value,):
            if not isinstance(source, Map):
                self.problem(source.line, "'<<' merges mappings only")
                continue
            for key, entry in source.entries.items():
                into.setdefault(key, entry)


def _syntax_problem(file: Path, text: str, error: yaml.MarkedYAMLError, scope: Scope) -> Problem:
    """The parser's error at its line, with what to write instead where a hint fits, and
    the job (or group) whose lines hold it.

    The hints load on the first error only: their crontab and time-zone tables would
    cost every command that reads a good file some 12 ms."""
    from tuisched.domain.config.hints import SYNTAX_HINTS, Stop, first_hint  # noqa: PLC0415

    mark = error.problem_mark or error.context_mark
    at_end = mark is not None and mark.index >= len(text.rstrip())
    if at_end and error.context_mark is not None:
        # A truncated file: point at what was left open, not at the end.
        mark = error.context_mark
    line = mark.line + 1 if mark is not None else 1
    stop = Stop(_LINE_BREAK.split(text), line, mark.column if mark is not None else 0)
    reason = error.problem or error.context or "malformed YAML"
    message = f"YAML syntax error: {reason}{first_hint(SYNTAX_HINTS, stop)}"
    return Problem(file=file, line=line, message=message, **scope(stop.enclosing))


def read_yaml(
    file: Path, text: str, scope: Scope = _no_scope
) -> tuple[Value | None, list[Problem]]:
    """Compose `text` (the contents of `file`) into located values.

    Returns the document's root value (None when there is none) and every
    problem found: syntax errors, duplicate keys, foreign tags, an empty
    document or several documents. `scope` names the owner of a problem
    from the keys that lead to it.
    """
    reader = _Reader(file=file, events=iter(yaml.parse(text, Loader=FAST_LOADER)), scope=scope)
    try:
        documents = reader.documents()
    except yaml.MarkedYAMLError as error:
        return None, [_syntax_problem(file, text, error, scope)]
    except yaml.YAMLError as error:
        return None, [Problem(file=file, line=1, message=f"YAML error: {error}")]
    if not documents or (isinstance(documents[0][0], Scalar) and documents[0][0].is_null):
        reader.problem(1, "the file is empty: a configuration needs at least a 'jobs:' section")
        return None, reader.problems
    if len(documents) > 1:
        reader.problem(
            documents[1][1],
            "the file holds several YAML documents ('---'); tuisched reads exactly one",
        )
    return documents[0][0], reader.problems


def read_section(file: Path, text: str, name: str) -> Value | None:
    """The value of the top-level key `name` in `text` (the contents of `file`), built
    from the parser's events while the rest of the file is only parsed: what the command
    line's verbs read `settings` with (a fraction of a second at 10,000 jobs, where
    building every job takes seconds).

    An alias in `name` resolves as in `read_yaml` (when it names an anchor of a value
    passed over, the whole file is read into values); a merge (`<<`) at the top gives
    `name` where the file does not write it. When `name` is written twice the last
    counts (as PyYAML keeps it; `read_yaml` reports the duplicate). None when the file
    is not a mapping or has no `name`. Problems that `read_yaml` reports are not
    looked for.

    Raises:
        yaml.YAMLError: the text is not YAML.
    """
    reader = _Reader(file=file, events=iter(yaml.parse(text, Loader=FAST_LOADER)))
    found, passed = _section(reader, name)
    if passed and any(p.message.startswith("alias") for p in reader.problems):
        reader = _Reader(file=file, events=iter(yaml.parse(text, Loader=FAST_LOADER)))
        documents = reader.documents()
        root = documents[0][0] if documents else None
        entry = root.entries.get(name) if isinstance(root, Map) else None
        found = entry.value if entry is not None else None
    return found


def _section(reader: _Reader, name: str) -> tuple[Value | None, bool]:
    """`read_section`'s value, and whether a value passed over defined an anchor."""
    events = reader.events
    for event in events:
        if isinstance(event, MappingStartEvent):
            break  # the first document's top mapping
        if isinstance(event, ScalarEvent | SequenceStartEvent | AliasEvent):
            return None, False  # not a mapping
    else:
        return None, False
    found: Value | None = None
    merged: dict[str, Entry] = {}
    passed = False
    for key in events:
        if isinstance(key, MappingEndEvent):
            break
        if not isinstance(key, ScalarEvent):
            passed = _pass_over(key, events) | _pass_over(next(events), events) or passed
        elif key.value == name:
            found = reader.value(next(events))
        elif key.value == _MERGE_KEY and key.implicit[0]:
            reader._merge(reader.value(next(events)), merged)
        else:
            passed = _pass_over(next(events), events) or passed
    if found is None and name in merged:
        found = merged[name].value
    return found, passed


def _pass_over(first: Event, events: Iterator[Event]) -> bool:
    """Read past the value that begins with `first`: whether it defines an anchor."""
    anchored = False
    depth = 0
    event = first
    while True:
        if isinstance(event, NodeEvent):  # a scalar, an alias or a collection's start
            anchored = anchored or (event.anchor is not None and type(event) is not AliasEvent)
            depth += isinstance(event, CollectionStartEvent)
        elif isinstance(event, CollectionEndEvent):
            depth -= 1
        if not depth:
            return anchored
        event = next(events)
