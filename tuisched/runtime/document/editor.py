"""The configuration document: jobs and groups added, replaced and deleted in its text."""

from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path

from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError

from tuisched.domain.errors import JobActionError, TuischedError, UnknownJobError
from tuisched.runtime.document.comments import put_trailing, take_trailing
from tuisched.runtime.document.edits import (
    append_key,
    keep_anchors,
    remove_key,
    update_map,
    update_seq,
)
from tuisched.runtime.document.values import Plain, mapping_as_text, new_node, plain_value, shared
from tuisched.runtime.document.yamlio import guess_indent, round_trip_yaml

# --- the document --------------------------------------------------------------


class ConfigDocument:
    """A configuration file's text, edited in place.

    Comments, blank lines, quotes, key order and indentation are kept
    everywhere the edit did not touch. Nothing here validates: the caller
    checks the result with `tuisched.runtime.configfiles.parse_config(doc.text(), path)`
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
        self._yaml = round_trip_yaml()
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
        keep_anchors(root)
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
        self._replace(jobs, name, mapping_as_text(definition), f"job '{name}'")

    def delete_job(self, name: str) -> None:
        """Delete job `name` and remove it from every group's `jobs:` list.

        Raises:
            UnknownJobError: no job by that name.
        """
        jobs = self._section("jobs")
        if name not in jobs:
            raise UnknownJobError(name)
        remove_key(jobs, name)
        for group in self._section("groups").values():
            members = group.get("jobs") if isinstance(group, CommentedMap) else None
            if isinstance(members, CommentedSeq) and name in members:
                update_seq(members, [plain_value(m) for m in members if plain_value(m) != name], "")

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
        self._replace(groups, name, mapping_as_text(definition), f"group '{name}'")

    def delete_group(self, name: str) -> None:
        """Delete group `name` (its jobs stay).

        Raises:
            JobActionError: no group by that name.
        """
        groups = self._section("groups")
        if name not in groups:
            raise JobActionError(f"no group named '{name}'")
        remove_key(groups, name)

    # --- sections --------------------------------------------------------------

    def _copy(self, section: str, name: str) -> dict[str, object] | None:
        entries = self._root.get(section)
        if not isinstance(entries, CommentedMap) or name not in entries:
            return None
        value = plain_value(entries[name])
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
        value = mapping_as_text(definition)
        section = self._root.get(key)
        if isinstance(section, CommentedMap):
            append_key(section, name, value)
        elif key in self._root:  # written but empty (`jobs:`)
            self._root[key] = new_node({name: value})
        elif key == "groups" and "jobs" in self._root:
            self._root.insert(list(self._root.keys()).index("jobs"), key, new_node({name: value}))
        else:
            append_key(self._root, key, {name: value})

    def _replace(self, entries: CommentedMap, name: str, new: dict[str, Plain], where: str) -> None:
        old = entries[name]
        if isinstance(old, CommentedMap) and not shared(old):
            update_map(old, new, where)
        else:
            trailing = take_trailing(old)
            entries[name] = new_node(new)
            put_trailing(entries[name], trailing)
