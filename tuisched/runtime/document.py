"""Edit a configuration file's text in place, and write it back atomically.

R16 asks that adding, modifying and deleting jobs and groups keep the
operator's comments, blank lines, quotes and key order. PyYAML cannot write
a file back with its comments, so this module uses ruamel.yaml's round-trip
mode, and uses it **only for writing**: what a configuration *means* is still
decided by `tuisched.domain.config.config` (PyYAML events, every scalar taken as the text
written, one error report). Two readers would drift; a writer that only has
to reproduce text cannot disagree with the reader about meaning, because
every value it writes is a string that the reader takes verbatim.

ruamel.yaml is configured for that job (TRAPS.md):

- a *text-only resolver*: a plain scalar is a string unless it is a null form
  (empty, `~`, `null`) or the merge key `<<`, exactly as `tuisched.domain.config.yamlsource`
  reads it. Loading never turns `2026-01-01T00:00`, `0755`, `yes` or `12:30`
  into other types, and dumping a string never adds quotes or `!!str` tags
  that were not in the file;
- `preserve_quotes`, so `"..."` and `'...'` stay as written, and a changed
  value keeps its old quotes;
- a very wide `width`, so long lines are never re-wrapped;
- the file's own indentation (mapping indent, sequence indent, dash offset),
  guessed from its text.

Values handed in through the API are converted to the text tuisched reads back
with the same meaning: booleans become `true`/`false`, numbers their decimal
text; the emitter quotes only what YAML syntax requires (`*/15 * * * *`,
`a: b`), with double quotes. New mappings are written in block style, new
lists of plain values in flow style (`[/bin/echo, hi]`), as the sample
configuration writes them.

ruamel.yaml keeps the comments and blank lines that follow a value with that
value (often with the last key of the job *before* the one they introduce).
Edits that remove or append a mapping's last key move that trailing text
along, so a comment stays above the job it describes.

Known limit: the whole file is re-emitted with one indentation; a file that
mixes indentations is normalised to the first one found.
"""

from __future__ import annotations

import contextlib
import difflib
import errno
import io
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedBase, CommentedMap, CommentedSeq
from ruamel.yaml.emitter import Emitter
from ruamel.yaml.error import CommentMark, YAMLError
from ruamel.yaml.resolver import BaseResolver
from ruamel.yaml.scalarstring import ScalarString
from ruamel.yaml.tokens import CommentToken

from tuisched.domain.errors import JobActionError, TuischedError, UnknownJobError

Plain = str | list["Plain"] | dict[str, "Plain"] | None
"""A configuration value as tuisched reads it: text, null, lists and mappings."""

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


def _yaml() -> YAML:
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
        return _mapping_as_text(value)
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        return [as_text(item) for item in value]
    raise TypeError(f"a configuration cannot hold {type(value).__name__} values: {value!r}")


def _mapping_as_text(value: Mapping[Any, object]) -> dict[str, Plain]:
    for key in value:
        if not isinstance(key, str):
            raise TypeError(f"configuration keys are strings, not {key!r}")
    return {key: as_text(item) for key, item in value.items()}


def _plain(node: object) -> Plain:
    """A loaded value as plain Python text values (merged keys included, as tuisched reads)."""
    if isinstance(node, CommentedMap):
        return {str(key): _plain(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_plain(item) for item in node]
    if node is None:
        return None
    return str(node)  # a ScalarString, or what an explicit tag made of the text


def _node(value: Plain) -> object:
    """A new value to insert: block mappings; flow lists when they hold only text."""
    if isinstance(value, dict):
        mapping = CommentedMap((key, _node(item)) for key, item in value.items())
        mapping.fa.set_block_style()
        return mapping
    if isinstance(value, list):
        sequence = CommentedSeq(_node(item) for item in value)
        if all(item is None or isinstance(item, str) for item in value):
            sequence.fa.set_flow_style()
        else:
            sequence.fa.set_block_style()
        return sequence
    return value


def _like(old: object, new: Plain) -> object:
    """`new` as a node, keeping `old`'s quotes when both are text."""
    if isinstance(new, str) and isinstance(old, ScalarString):
        return type(old)(new)
    return _node(new)


def _shared(node: object) -> bool:
    """True for a value that carries an anchor: editing it in place would edit its aliases."""
    anchor = getattr(node, "anchor", None)
    return bool(anchor is not None and anchor.value)


# --- trailing comments -------------------------------------------------------


def _last_slot(node: object) -> tuple[CommentedBase, object] | None:
    """Where ruamel.yaml keeps the comment after `node`'s last scalar: (container, key)."""
    if isinstance(node, CommentedMap) and (own := _own_keys(node)):
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


def _take_trailing(node: object) -> str:
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


def _put_trailing(node: object, trailing: str) -> None:
    """Attach `trailing` (from `_take_trailing`) after `node`'s last line."""
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


def _put_leading(target: CommentedMap, key: str, text: str) -> None:
    """Write `text` (whole lines) just above `key`, before what is there already."""
    tokens = []
    for line in text.splitlines():
        content = line.lstrip(" ")
        tokens.append(CommentToken(content + "\n", CommentMark(len(line) - len(content))))
    entry = target.ca.items.setdefault(key, [None, None, None, None])
    entry[1] = tokens + (entry[1] or [])


# --- editing mappings in place --------------------------------------------------


def _own_keys(mapping: CommentedMap) -> list[str]:
    """Keys written in `mapping` itself, not brought in by a `<<` merge."""
    return [key for key, _ in mapping.non_merged_items()]


def _update_map(target: CommentedMap, new: dict[str, Plain], where: str) -> None:
    """Make `target` read as `new`, touching only the keys whose value changed.

    Raises:
        JobActionError: `new` drops a key that a `<<` merge provides (the merge
            line stays as written, so the key cannot go without editing the anchor).
    """
    current = _plain(target)
    assert isinstance(current, dict)  # noqa: S101  (a CommentedMap reads as a dict)
    own = _own_keys(target)
    for key in current.keys() - own - new.keys():
        raise JobActionError(
            f"{where}: '{key}' comes from a '<<' merge; change the anchor it is merged "
            "from, or give the key a value here"
        )
    trailing = _take_trailing(target)
    for key in own:
        if key not in new:
            del target[key]
    for key, value in new.items():
        if current.get(key, _MISSING) != value:
            _set(target, key, value, own=key in own, where=f"{where}.{key}")
    _put_trailing(target, trailing)


_MISSING = object()


def _set(target: CommentedMap, key: str, value: Plain, *, own: bool, where: str) -> None:
    """Set one changed key: in place (keeping its position and comments) when it is written here."""
    old = target.get(key) if own else None
    if isinstance(old, CommentedMap) and isinstance(value, dict) and not _shared(old):
        _update_map(old, value, where)
    elif isinstance(old, CommentedSeq) and isinstance(value, list) and not _shared(old):
        _update_seq(old, value, where)
    else:
        target[key] = _like(old, value)


def _update_seq(target: CommentedSeq, new: list[Plain], where: str) -> None:
    """Make `target` read as `new`, keeping its style and the items (and their comments) kept.

    Items are matched as a diff would match lines, so removing one item takes
    its own comment with it and leaves the others' where they were.
    """
    trailing = _take_trailing(target)
    old = [repr(_plain(item)) for item in target]
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
            target.insert(i1 + offset, _node(value))
    _put_trailing(target, trailing)


def _set_item(target: CommentedSeq, index: int, value: Plain, where: str) -> None:
    old = target[index]
    if isinstance(old, CommentedMap) and isinstance(value, dict) and not _shared(old):
        _update_map(old, value, where)
    else:
        target[index] = _like(old, value)


def _append(target: CommentedMap, key: str, value: Plain) -> None:
    """Append `key` at the end of `target`, after its last entry but before what follows it."""
    trailing = _take_trailing(target)
    if not len(target):
        target.fa.set_block_style()  # `jobs: {}` grows into a block mapping
    target[key] = _node(value)
    _put_trailing(target, trailing)


def _remove(target: CommentedMap, key: str) -> None:
    """Remove `key`; the text that introduced the next entry is kept for it."""
    keys = list(target.keys())
    index = keys.index(key)
    trailing = _take_trailing(target[key])
    if index > 0:
        _take_trailing(target[keys[index - 1]])
        _put_trailing(target[keys[index - 1]], trailing)
    elif index + 1 < len(keys):
        _put_leading(target, keys[index + 1], trailing)
    del target[key]


def _keep_anchors(node: object) -> None:
    """Mark every anchor to be written even when no alias is left (after deleting the last one)."""
    if _shared(node):
        node.anchor.always_dump = True  # type: ignore[attr-defined]  # checked by _shared
    if isinstance(node, CommentedMap):
        for _, value in node.non_merged_items():
            _keep_anchors(value)
    elif isinstance(node, CommentedSeq):
        for item in node:
            _keep_anchors(item)


# --- the document --------------------------------------------------------------


class ConfigDocument:
    """A configuration file's text, edited in place.

    Comments, blank lines, quotes, key order and indentation are kept
    everywhere the edit did not touch. Nothing here validates: the caller
    checks the result with `tuisched.domain.config.config.parse_config(doc.text(), path)`
    before writing it (a deleted job may still be named by another job's
    `after` or `requires`, for example).
    """

    def __init__(self, text: str, path: Path) -> None:
        """Load `text`, the contents of `path`.

        Raises:
            TuischedError: ruamel.yaml cannot load the text (a syntax error,
                a duplicate key, several documents) or its top is not a mapping.
        """
        self.path = path
        self._yaml = _yaml()
        mapping, sequence, offset = guess_indent(text)
        self._yaml.indent(mapping=mapping, sequence=sequence, offset=offset)
        self._root = self._load(text)

    def _load(self, text: str) -> CommentedMap:
        try:
            root = self._yaml.load(text)
        except YAMLError as error:
            raise TuischedError(f"{self.path}: cannot edit this file: {error}") from error
        if root is None:
            return CommentedMap()
        if not isinstance(root, CommentedMap):
            raise TuischedError(f"{self.path}: cannot edit this file: its top is not a mapping")
        _keep_anchors(root)
        return root

    def text(self) -> str:
        """The edited document."""
        out = io.StringIO()
        self._yaml.dump(self._root, out)
        return out.getvalue()

    # --- jobs ----------------------------------------------------------------

    def job(self, name: str) -> dict[str, object] | None:
        """A plain copy of job `name`'s definition (text values, merged keys included), or None."""
        return self._copy("jobs", name)

    def add_job(self, name: str, definition: Mapping[str, object]) -> None:
        """Append job `name` at the end of `jobs:` (created at the end of the file if missing).

        Raises:
            JobActionError: a job by that name exists.
            TypeError: `definition` holds a value a configuration cannot hold.
        """
        if name in self._section("jobs"):
            raise JobActionError(f"a job named '{name}' already exists")
        self._add("jobs", name, definition)

    def replace_job(self, name: str, definition: Mapping[str, object]) -> None:
        """Make job `name` read as `definition`, editing only what changed.

        Keys whose value is unchanged keep their comments and position;
        changed keys are set in place (nested mappings and lists edited item
        by item, a quoted value keeping its quotes); removed keys are deleted;
        new keys are appended. A `<<` merge line stays as written.

        Raises:
            UnknownJobError: no job by that name.
            JobActionError: `definition` drops a key that a `<<` merge provides.
        """
        jobs = self._section("jobs")
        if name not in jobs:
            raise UnknownJobError(name)
        self._replace(jobs, name, _mapping_as_text(definition), f"job '{name}'")

    def delete_job(self, name: str) -> None:
        """Delete job `name` and remove it from every group's `jobs:` list.

        Raises:
            UnknownJobError: no job by that name.
        """
        jobs = self._section("jobs")
        if name not in jobs:
            raise UnknownJobError(name)
        _remove(jobs, name)
        for group in self._section("groups").values():
            members = group.get("jobs") if isinstance(group, CommentedMap) else None
            if isinstance(members, CommentedSeq) and name in members:
                _update_seq(members, [_plain(m) for m in members if _plain(m) != name], "")

    # --- groups --------------------------------------------------------------

    def group(self, name: str) -> dict[str, object] | None:
        """A plain copy of group `name`'s definition, or None."""
        return self._copy("groups", name)

    def add_group(self, name: str, definition: Mapping[str, object]) -> None:
        """Append group `name` at the end of `groups:` (created before `jobs:` if missing).

        Raises:
            JobActionError: a group by that name exists.
        """
        if name in self._section("groups"):
            raise JobActionError(f"a group named '{name}' already exists")
        self._add("groups", name, definition)

    def replace_group(self, name: str, definition: Mapping[str, object]) -> None:
        """Make group `name` read as `definition`, editing only what changed (see `replace_job`).

        Raises:
            JobActionError: no group by that name.
        """
        groups = self._section("groups")
        if name not in groups:
            raise JobActionError(f"no group named '{name}'")
        self._replace(groups, name, _mapping_as_text(definition), f"group '{name}'")

    def delete_group(self, name: str) -> None:
        """Delete group `name` (its jobs stay).

        Raises:
            JobActionError: no group by that name.
        """
        groups = self._section("groups")
        if name not in groups:
            raise JobActionError(f"no group named '{name}'")
        _remove(groups, name)

    # --- sections --------------------------------------------------------------

    def _copy(self, section: str, name: str) -> dict[str, object] | None:
        entries = self._root.get(section)
        if not isinstance(entries, CommentedMap) or name not in entries:
            return None
        value = _plain(entries[name])
        return dict(value) if isinstance(value, dict) else None

    def _section(self, key: str) -> CommentedMap:
        """The top-level mapping `key` (`jobs` or `groups`); an empty one if missing or null."""
        section = self._root.get(key)
        if isinstance(section, CommentedMap):
            return section
        if section is not None:
            raise TuischedError(f"{self.path}: cannot edit '{key}:': it is not a mapping")
        return CommentedMap()

    def _add(self, key: str, name: str, definition: Mapping[str, object]) -> None:
        """Append entry `name` to section `key`, creating the section with it if needed."""
        value = _mapping_as_text(definition)
        section = self._root.get(key)
        if isinstance(section, CommentedMap):
            _append(section, name, value)
        elif key in self._root:  # written but empty (`jobs:`)
            self._root[key] = _node({name: value})
        elif key == "groups" and "jobs" in self._root:
            self._root.insert(list(self._root.keys()).index("jobs"), key, _node({name: value}))
        else:
            _append(self._root, key, {name: value})

    def _replace(self, entries: CommentedMap, name: str, new: dict[str, Plain], where: str) -> None:
        old = entries[name]
        if isinstance(old, CommentedMap) and not _shared(old):
            _update_map(old, new, where)
        else:
            trailing = _take_trailing(old)
            entries[name] = _node(new)
            _put_trailing(entries[name], trailing)


def atomic_write(path: Path, text: str, *, backup: Path | None = None) -> None:
    """Replace the contents of `path` with `text` so that a crash leaves the old or the new file.

    The new text goes to a temporary file in the same folder, is flushed and
    fsynced, takes the original's mode and owner, and is renamed over `path`;
    then the folder is fsynced so the rename itself survives a power cut. A
    symbolic link is followed: the file it points to is replaced.

    Args:
        path: the file to replace (created, mode 0600, when missing).
        text: the new contents, written as UTF-8.
        backup: where to keep the previous contents first (replaced the same
            atomic way); nothing is backed up when `path` does not exist yet.

    Raises:
        OSError: the write failed; the original file is untouched and no
            temporary file is left behind.
    """
    target = Path(os.path.realpath(path))
    try:
        previous: os.stat_result | None = target.stat()
    except FileNotFoundError:
        previous = None
    if backup is not None and previous is not None:
        backup_target = Path(os.path.realpath(backup))
        _replace_file(backup_target, target.read_bytes(), previous)
        if backup_target.parent != target.parent:
            _fsync_folder(backup_target.parent)
    _replace_file(target, text.encode("utf-8"), previous)
    _fsync_folder(target.parent)


def _replace_file(target: Path, data: bytes, like: os.stat_result | None) -> None:
    """Write `data` to a temporary file beside `target` and rename it over `target`."""
    fd, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            if like is not None:
                _copy_owner_and_mode(file.fileno(), like)
            os.fsync(file.fileno())
        Path(temp).replace(target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def _copy_owner_and_mode(fd: int, like: os.stat_result) -> None:
    os.fchmod(fd, like.st_mode & 0o7777)
    # Only root may give a file away; otherwise the file stays the writer's, its mode kept.
    with contextlib.suppress(PermissionError):
        os.fchown(fd, like.st_uid, like.st_gid)


def _fsync_folder(folder: Path) -> None:
    """Make a rename in `folder` durable (a no-op where the file system cannot fsync folders)."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    except OSError as error:
        if error.errno != errno.EINVAL:
            raise
    finally:
        os.close(fd)
