"""The configuration file and the live configuration, kept in step (SPEC R16, R17).

The file is the source of truth. A change through the API is applied to the
file's text (comments kept), validated, written atomically, and only then
applied to the schedule. A replaced or added job is written and checked through
its own block of the file (`tuisched.runtime.configedits`: only what the change
reaches is checked, as a reload would check it); other changes go through the
whole document and a check of the whole file. The file on disk is known by the hash of
its content: a change noticed on disk whose content is what we wrote is our
own write; anything else is an offline edit, reported with a diff and
applied on request (or at once with `settings.auto_reload`). An API change
is refused while the file holds an offline edit: nothing typed by hand is
ever overwritten. A change that leaves the text as it is writes nothing and is
no change (nothing to undo). The last applied change can be undone, and is
described (`ConfigChange`: what, when, its diff) so an operator knows what
undoing it takes back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from tuisched.domain.bus import EventBus
from tuisched.domain.config.diff import ConfigDiff, config_diff
from tuisched.domain.errors import ConfigError, ExcerptMismatch, JobActionError, Problem
from tuisched.domain.events import ConfigChangedOnDisk, ConfigLoaded, ConfigRejected
from tuisched.domain.model import Config
from tuisched.domain.views import ConfigChange
from tuisched.runtime import configedits
from tuisched.runtime.configfiles import parse_config
from tuisched.runtime.configtext import read_config_text
from tuisched.runtime.document import ConfigDocument, atomic_write
from tuisched.runtime.document.blocks import JobBlocks
from tuisched.runtime.threads import Lane, in_thread

UNDO_DEPTH = 20
"""Changes that can be undone, newest first."""


def backup_path(path: Path) -> Path:
    """Where the previous version of `path` is kept (`tuisched.yaml.bak`)."""
    return path.with_name(path.name + ".bak")


@dataclass(slots=True)
class ConfigSource:
    """Owns the configuration: its file, its live version, and the undo history."""

    path: Path
    text: str
    """The file's content as last loaded or written by us."""
    config: Config
    apply: Callable[[Config, ConfigDiff, str], Awaitable[None]]
    """Puts a new configuration in force (the schedule); called after the file is written."""
    bus: EventBus
    clock: Callable[[], datetime]
    pending: str | None = None
    """The file's content when it differs from `text`: an offline edit not applied yet."""
    _blocks: JobBlocks | None = None
    """Where each job's block is in `text`, once asked for (None: not found yet, and
    `config` was read from `text` as a whole, so its lines say where the jobs are)."""
    _undo: list[tuple[str, ConfigChange]] = field(default_factory=list)
    """The text before each change that can be undone, and the change; newest last."""
    _changes: int = 0
    """Changes put in force since start (numbers them)."""
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    @classmethod
    def read(cls, path: Path) -> tuple[str, Config]:
        """The text and the configuration of `path` (ConfigError if it is not valid)."""
        path = path.absolute()
        text = read_config_text(path)
        return text, parse_config(text, path)

    @property
    def can_undo(self) -> bool:
        """Whether there is a change to undo."""
        return bool(self._undo)

    @property
    def last_change(self) -> ConfigChange | None:
        """The change `undo` would take back now, or None."""
        return self._undo[-1][1] if self._undo else None

    # --- the file changed on disk -------------------------------------------------

    async def look(self) -> None:
        """Read the file (off the loop): note an offline edit, or nothing if it is ours.

        A file that cannot be read now (deleted, caught between an editor's
        unlink and rename) is noted only if it is there and refused (a FIFO, a
        device, too large): the next save tells the rest.
        """
        try:
            text = await in_thread(Lane.CONFIG, read_config_text, self.path)
        except ConfigError as error:
            if self.path.exists():
                self.pending = ""
                self._publish_change(None, error.problems)
            return
        await self.on_disk_text(text)

    async def on_disk_text(self, text: str) -> None:
        """The file says `text` now: an offline edit unless it is what is in force."""
        if text == self.text:
            self.pending = None
            return
        self.pending = text
        config, now = self.config, self.clock()
        try:
            diff = await in_thread(Lane.CONFIG, _diff_of, text, self.path, config, now)
        except ConfigError as error:
            self._publish_change(None, error.problems)
            return
        self._publish_change(diff, ())
        if self.config.settings.auto_reload:
            await self.reload()

    def _publish_change(self, diff: ConfigDiff | None, problems: tuple[Problem, ...]) -> None:
        self.bus.publish(
            ConfigChangedOnDisk(at=self.clock(), path=self.path, diff=diff, problems=problems)
        )

    async def reload(self) -> bool:
        """Apply what the file says now. A file that does not validate changes nothing."""
        async with self._lock:
            try:
                text = await in_thread(Lane.CONFIG, read_config_text, self.path)
                config, diff = await self._checked(text)
            except ConfigError as error:
                self._reject(error)
                return False
            await self._swap(text, config, diff, "reload", remember=("reload", ""))
            return True

    async def _checked(self, text: str) -> tuple[Config, ConfigDiff]:
        """The configuration `text` gives, and what it changes (off the loop: it takes a while
        on a big file). Raises ConfigError."""
        return await in_thread(Lane.CONFIG, _parsed, text, self.path, self.config, self.clock())

    def _reject(self, error: ConfigError, *, reason: str = "") -> None:
        problems = error.problems or (Problem(file=self.path, line=1, message=reason),)
        self.bus.publish(ConfigRejected(at=self.clock(), path=self.path, problems=problems))

    # --- changes through the API --------------------------------------------------

    async def edit(
        self, change: Callable[[ConfigDocument], None], *, action: str = "replace",
        subject: str = "",
    ) -> ConfigChange | None:  # fmt: skip
        """Apply `change` to the file's text, validate, write atomically, then schedule;
        the change made (`action` on `subject`, see `ConfigChange`), or None when the text
        stays as it is (nothing written).

        Raises:
            JobActionError: the change does not fit (a name exists, or is missing), or
                the file holds an offline edit that would be overwritten.
            ConfigError: the resulting configuration is not valid; nothing is written.
        """
        async with self._lock:
            await self._refuse_if_edited_on_disk()
            return await self._edit_whole(change, (action, subject))

    async def _edit_whole(
        self, change: Callable[[ConfigDocument], None], what: tuple[str, str]
    ) -> ConfigChange | None:
        """`edit` through the whole document (ruamel.yaml, then the whole file checked)."""
        text = await in_thread(Lane.CONFIG, _edited, self.text, self.path, change)
        if text == self.text:
            return None
        config, diff = await self._checked(text)
        await self._write(text)
        return await self._swap(text, config, diff, "edit", remember=what)

    async def replace_job(self, name: str, definition: Mapping[str, object]) -> ConfigChange | None:
        """Make job `name` read as `definition`: only its block of the file is rewritten
        (every other byte kept) and only what the change reaches is checked; written
        atomically, then scheduled. A file whose jobs cannot be cut apart is edited whole.
        The change made, or None when the job already reads so (nothing written).

        Raises:
            UnknownJobError: no job by that name.
            JobActionError: the file holds an offline edit that would be overwritten.
            ConfigError: the result is not valid; nothing is written.
        """
        return await self._edit_job(_REPLACE, name, definition)

    async def add_job(self, name: str, definition: Mapping[str, object]) -> ConfigChange | None:
        """Add job `name` after the last job, as `replace_job` replaces one.

        Raises:
            JobActionError: a job by that name exists, or the file holds an offline edit.
            ConfigError: the result is not valid; nothing is written.
        """
        return await self._edit_job(_ADD, name, definition)

    async def _edit_job(
        self, how: _JobEdit, name: str, definition: Mapping[str, object]
    ) -> ConfigChange | None:
        """Make the edit through the job's block; through the whole document if it cannot."""
        what = (how.action, f"job {name}")
        async with self._lock:
            await self._refuse_if_edited_on_disk()
            blocks, config = await self._blocks_now()
            now = self.clock()
            try:
                done = await in_thread(
                    Lane.CONFIG, how.by_block, blocks, config, name, definition, now
                )
            except ExcerptMismatch:
                return await self._edit_whole(lambda doc: how.whole(doc, name, definition), what)
            if done.text == self.text:  # saved as it was: no write, nothing to undo
                return None
            await self._write(done.text)
            # The other jobs of `done.config` keep the lines they were read at: the blocks
            # say where they are now.
            return await self._swap(
                done.text, done.config, done.diff, "edit", remember=what, blocks=done.blocks
            )

    async def check_job(
        self, name: str, definition: Mapping[str, object], *, adding: bool = False
    ) -> Config:
        """The configuration replacing (or `adding`) job `name` would give, checked as
        `replace_job` checks it, without writing anything (see `preview`)."""
        how = _ADD if adding else _REPLACE
        (blocks, config), now = await self._blocks_now(), self.clock()
        try:
            done = await in_thread(Lane.CONFIG, how.by_block, blocks, config, name, definition, now)
        except ExcerptMismatch:
            return await in_thread(
                Lane.CONFIG, self.preview, lambda doc: how.whole(doc, name, definition)
            )
        return done.config

    async def job_definition(self, name: str) -> dict[str, object] | None:
        """Job `name`'s definition as the file writes it (text values), read from its block."""
        (blocks, config), path = await self._blocks_now(), self.path
        try:
            return await in_thread(Lane.CONFIG, configedits.job_definition, blocks, config, name)
        except ExcerptMismatch:
            return await in_thread(Lane.CONFIG, lambda: ConfigDocument(blocks.text, path).job(name))

    async def _blocks_now(self) -> tuple[JobBlocks, Config]:
        """Where each job's block is in `text` (found off the loop, once per text), and
        the configuration in force with that text."""
        text, config, blocks = self.text, self.config, self._blocks
        if blocks is None:
            blocks = await in_thread(Lane.CONFIG, configedits.blocks_of, text, config)
            if self.text is text:
                self._blocks = blocks
        return blocks, config

    def preview(self, change: Callable[[ConfigDocument], None]) -> Config:
        """The configuration `change` would give, validated, without writing anything.

        Raises:
            JobActionError: the change does not fit (a name exists, or is missing).
            ConfigError: the result would not be valid (each problem located).
        """
        document = ConfigDocument(self.text, self.path)
        change(document)
        return parse_config(document.text(), self.path)

    async def undo(self, *, change: int | None = None) -> ConfigChange:
        """Restore the file and the schedule as they were before the last change; the
        change taken back. With `change`, only if the last change is still that one.

        Raises:
            JobActionError: nothing to undo, the last change is not `change` (another
                was made since), or the file holds an offline edit.
        """
        async with self._lock:
            if not self._undo:
                raise JobActionError("there is no change to undo")
            text, last = self._undo[-1]
            if change is not None and last.number != change:
                raise JobActionError(
                    f"nothing undone: another change was made since ({_described(last)}); "
                    "ask again to see it"
                )
            await self._refuse_if_edited_on_disk()
            config, diff = await self._checked(text)
            await self._write(text)
            self._undo.pop()
            await self._swap(text, config, diff, "undo", remember=None)
            return last

    async def _write(self, text: str) -> None:
        """Write `text` to the file atomically, the previous version kept as the backup."""
        await in_thread(Lane.CONFIG, atomic_write, self.path, text, backup=backup_path(self.path))

    async def _refuse_if_edited_on_disk(self) -> None:
        try:
            on_disk = await in_thread(Lane.CONFIG, read_config_text, self.path)
        except ConfigError:
            on_disk = ""
        if on_disk != self.text:
            raise JobActionError(
                f"{self.path} was changed on disk since it was loaded; reload it "
                "(or undo the edit by hand) before changing it here, so nothing typed "
                "by hand is overwritten"
            )

    async def _swap(
        self, text: str, config: Config, diff: ConfigDiff, origin: str, *,
        remember: tuple[str, str] | None, blocks: JobBlocks | None = None,
    ) -> ConfigChange | None:  # fmt: skip
        """Put `text` and its `config` in force (`blocks`: where its jobs are, when
        `config` was not read from `text` as a whole); with `remember` (its action and
        subject), as a change that can be undone, which is returned."""
        made = None
        if remember is not None:
            self._changes += 1
            action, subject = remember
            made = ConfigChange(
                number=self._changes, action=action, subject=subject, at=self.clock(),
                lines=tuple(diff.lines()),
            )  # fmt: skip
            self._undo = [*self._undo, (self.text, made)][-UNDO_DEPTH:]
        self.text, self.config, self.pending, self._blocks = text, config, None, blocks
        await self.apply(config, diff, origin)
        self.bus.publish(
            ConfigLoaded(
                at=self.clock(), path=self.path, jobs=len(config.jobs),
                groups=len(config.groups), origin=origin, diff=diff,
            )
        )  # fmt: skip
        return made


def _described(change: ConfigChange) -> str:
    """`replace job backup at 12:03:07+00:00`, for a refusal."""
    what = f"{change.action} {change.subject}".strip()
    return f"{what} at {change.at.isoformat(timespec='seconds')}"


@dataclass(frozen=True, slots=True)
class _JobEdit:
    """One kind of job edit: through the job's block, or through the whole document."""

    action: str
    """The `EditAction` it is (`add`, `replace`)."""
    by_block: Callable[
        [JobBlocks, Config, str, Mapping[str, object], datetime], configedits.JobEdit
    ]
    whole: Callable[[ConfigDocument, str, Mapping[str, object]], None]


_REPLACE = _JobEdit("replace", configedits.replace_job, ConfigDocument.replace_job)
_ADD = _JobEdit("add", configedits.add_job, ConfigDocument.add_job)


def _parsed(text: str, path: Path, live: Config, now: datetime) -> tuple[Config, ConfigDiff]:
    """`text` validated as the file at `path`, and what it changes from `live` (blocking)."""
    config = parse_config(text, path)
    return config, config_diff(live, config, now)


def _diff_of(text: str, path: Path, live: Config, now: datetime) -> ConfigDiff:
    """What `text` would change from `live` (blocking; ConfigError if it does not validate)."""
    return _parsed(text, path, live, now)[1]


def _edited(text: str, path: Path, change: Callable[[ConfigDocument], None]) -> str:
    """`text` with `change` made to it, comments kept (blocking: a big file takes a while)."""
    document = ConfigDocument(text, path)
    change(document)
    return document.text()
