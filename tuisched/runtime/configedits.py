"""One job read, replaced or added through its own block of the file, not the whole document.

Reading a job for the console's form or detail view, and checking and making
an edit of it, used to load the whole file with ruamel.yaml and check the
whole result: seconds each at 10,000 jobs. Here only the job's block is
loaded (`tuisched.runtime.document.blocks`), edited with the same
comment-keeping `ConfigDocument`, spliced back into the text in place of the
old block (every other byte kept), and checked where the change can reach
(`tuisched.domain.config.excerpt`): the job, the jobs that depend on it, a
cycle through it, its alert templates. A new job is written after the last one.

Everything here blocks (it runs in the CONFIG lane) and raises
`ExcerptMismatch` when the file is not cut as expected (a flow-style
`jobs:`, YAML anchors shared between jobs...): the caller then does it the
whole-document way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime

import yaml
from yaml.events import AliasEvent

from tuisched.domain.config.diff import ConfigDiff, config_diff
from tuisched.domain.config.excerpt import (
    added_job,
    replaced_job,
    verify_excerpt,
)
from tuisched.domain.config.yamlsource import FAST_LOADER
from tuisched.domain.errors import ExcerptMismatch, JobActionError, UnknownJobError
from tuisched.domain.model import Config
from tuisched.runtime.configfiles import config_host
from tuisched.runtime.document import ConfigDocument
from tuisched.runtime.document.blocks import JobBlocks, block_of


@dataclass(frozen=True, slots=True)
class JobEdit:
    """A job replaced or added in the text: the new text, its blocks, configuration and diff."""

    text: str
    blocks: JobBlocks
    config: Config
    diff: ConfigDiff


def blocks_of(text: str, config: Config) -> JobBlocks:
    """The blocks of `text`, which `config` was read from as a whole (its lines are right)."""
    return JobBlocks.of(text, {name: job.line for name, job in config.jobs.items()})


def job_definition(blocks: JobBlocks, config: Config, name: str) -> dict[str, object] | None:
    """Job `name`'s definition read from its block alone (text values, as `ConfigDocument.job`).

    Raises:
        ExcerptMismatch: the block is not where (or what) the configuration says.
    """
    if name not in config.jobs:
        return None
    return _document(blocks, config, name).job(name)


def replace_job(
    blocks: JobBlocks, config: Config, name: str, definition: Mapping[str, object], now: datetime
) -> JobEdit:
    """The text with job `name` made to read as `definition` (only its block rewritten,
    comments kept), checked where the change reaches.

    Raises:
        UnknownJobError: no job by that name.
        JobActionError: the definition drops a key a `<<` merge provides.
        ConfigError: the edited file would be refused (each problem located in it).
        ExcerptMismatch: the file is not cut as expected; edit the whole document.
    """
    edited = edited_blocks(blocks, config, name, definition)
    new_config = replaced_job(config, name, edited.excerpt, config_host(config.path))
    return JobEdit(edited.text, edited, new_config, _diff(config, new_config, name, now))


def edited_blocks(
    blocks: JobBlocks, config: Config, name: str, definition: Mapping[str, object]
) -> JobBlocks:
    """The text with job `name`'s block rewritten to read as `definition`, unchecked.

    Raises:
        UnknownJobError, JobActionError, ExcerptMismatch: as `replace_job`.
    """
    if name not in config.jobs:
        raise UnknownJobError(name)
    document = _document(blocks, config, name)
    document.replace_job(name, definition)
    new_block = block_of(document.text())
    old = blocks.block(name)
    if old is None or _indent(new_block) != _indent(blocks.text[old.start : old.end]):
        raise ExcerptMismatch(f"job '{name}' is not written back at its indentation")
    return blocks.replaced(name, new_block)


def add_job(
    blocks: JobBlocks, config: Config, name: str, definition: Mapping[str, object], now: datetime
) -> JobEdit:
    """The text with job `name` added after the last job (only that job's block written,
    the rest of the file kept byte for byte), checked where the change reaches.

    Raises:
        JobActionError: a job by that name exists.
        ConfigError: the edited file would be refused (each problem located in it).
        ExcerptMismatch: the file is not cut as expected; edit the whole document.
    """
    edited = added_blocks(blocks, config, name, definition)
    new_config = added_job(config, name, edited.excerpt, config_host(config.path))
    return JobEdit(edited.text, edited, new_config, _diff(config, new_config, name, now))


def added_blocks(
    blocks: JobBlocks, config: Config, name: str, definition: Mapping[str, object]
) -> JobBlocks:
    """The text with job `name` added after the last job, unchecked (see `add_job`)."""
    if name in config.jobs:
        raise JobActionError(f"a job named '{name}' already exists")
    last = blocks.last()
    if last is None:
        raise ExcerptMismatch("no job to add the new one after")
    document = _document(blocks, config, last)
    before = document.text()
    document.add_job(name, definition)
    after = document.text()
    old = blocks.block(last)
    if old is None or not after.startswith(before):
        raise ExcerptMismatch(f"job '{name}' cannot be written after job '{last}'")
    new_block = after[len(before) :]
    if _indent(new_block) != _indent(blocks.text[old.start : old.end]):
        raise ExcerptMismatch(f"job '{name}' would not be written at the jobs' indentation")
    return blocks.added(name, last, new_block)


def _document(blocks: JobBlocks, config: Config, name: str) -> ConfigDocument:
    """Job `name`'s block as a one-job document, once it is checked to be the live job."""
    try:
        own = blocks.own_text(name)
        verify_excerpt(config, [name], blocks.excerpt([name]), config_host(config.path))
    except KeyError:
        raise ExcerptMismatch(f"job '{name}' has no block where it was read") from None
    if _anchored(own):  # rewriting it alone would leave other jobs' aliases dangling
        raise ExcerptMismatch(f"job '{name}' holds a YAML anchor")
    if "\r" in own:  # ruamel.yaml writes "\n": the whole file is rewritten with one ending
        raise ExcerptMismatch(f"job '{name}' has CRLF line endings")
    return ConfigDocument(own, config.path)


def _anchored(text: str) -> bool:
    """Whether `text` (a valid one-job document) defines or uses a YAML anchor."""
    for event in yaml.parse(text, Loader=FAST_LOADER):
        if isinstance(event, AliasEvent) or getattr(event, "anchor", None):
            return True
    return False


def _diff(old: Config, new: Config, name: str, now: datetime) -> ConfigDiff:
    """What replacing or adding job `name` changes (the other jobs are the same objects)."""
    before = {name: old.jobs[name]} if name in old.jobs else {}
    return config_diff(
        replace(old, jobs=before, groups={}),
        replace(new, jobs={name: new.jobs[name]}, groups={}),
        now,
    )


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip(" "))
