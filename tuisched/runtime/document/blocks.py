"""Where each job's block is in the configuration file's text, so one job is read and
rewritten without loading the whole document.

ruamel.yaml's round trip of a whole file costs seconds at 10,000 jobs (its
scanner is pure Python), and an edit needs it for one job only. A job's block
is the text from its key line (`  backup:`) to its last line of content: the
lines after it that are more indented than its key, without the blank and
comment lines that end it (they introduce the next job, and stay where they
are). Only that text is loaded, edited and written back; every other byte of
the file is kept as it was.

Where each block starts comes from the configuration that was read from the
same text (`Job.line`), and is moved along when a block is replaced. The cut
is checked, not trusted: `tuisched.domain.config.excerpt` reads the excerpt
back and compares it with the live jobs, and a file the cut does not fit (a
flow-style `jobs: {...}`, anchors shared between jobs) is edited whole, as
before.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

_JOBS_LINE = "jobs:\n"
"""Line 1 of an excerpt: the blocks under it keep their own indentation and lines."""


@dataclass(frozen=True, slots=True)
class Block:
    """One job's block: its first line (1-based) and its text's span in the file."""

    line: int
    start: int
    """Offset of the block's first character (its key line's indentation)."""
    end: int
    """Offset just past its last line's newline (or the end of the text)."""


@dataclass(frozen=True, slots=True)
class JobBlocks:
    """The blocks of a text's jobs, found from the lines their keys are on."""

    text: str
    starts: Mapping[str, tuple[int, int]]
    """Each job's key line and that line's offset."""

    @classmethod
    def of(cls, text: str, lines: Mapping[str, int]) -> JobBlocks:
        """The blocks of `text`, whose jobs' keys are on `lines` (from the configuration
        read from this very text). One pass over the text."""
        starts: dict[str, tuple[int, int]] = {}
        line, offset = 1, 0
        for name, wanted in sorted(lines.items(), key=lambda item: item[1]):
            while line < wanted:
                found = text.find("\n", offset)
                if found < 0:
                    break
                line, offset = line + 1, found + 1
            if line == wanted:
                starts[name] = (line, offset)
        return cls(text=text, starts=starts)

    def block(self, name: str) -> Block | None:
        """Job `name`'s block, or None when its key is not where the configuration said."""
        start = self.starts.get(name)
        if start is None:
            return None
        line, offset = start
        first_end = self._line_end(offset)
        indent = _indent(self.text[offset:first_end])
        end = cursor = first_end
        while cursor < len(self.text):
            next_end = self._line_end(cursor)
            content = self.text[cursor:next_end]
            stripped = content.strip()
            if stripped and not stripped.startswith("#"):
                if _indent(content) <= indent:
                    break
                end = next_end
            cursor = next_end
        return Block(line=line, start=offset, end=end)

    def _line_end(self, offset: int) -> int:
        """The offset just past the newline of the line at `offset` (or the text's end)."""
        found = self.text.find("\n", offset)
        return len(self.text) if found < 0 else found + 1

    def excerpt(self, names: Collection[str]) -> str:
        """The text with only the blocks of `names` kept, each on its own lines, under a
        `jobs:` on line 1 (see `tuisched.domain.config.excerpt`).

        Raises:
            KeyError: a name has no block.
        """
        blocks = sorted((self._found(name) for name in names), key=lambda block: block.line)
        parts, line = [_JOBS_LINE], 2
        for block in blocks:
            parts.append("\n" * (block.line - line))
            text = self.text[block.start : block.end]
            parts.append(text if text.endswith("\n") else text + "\n")
            line = block.line + text.count("\n") + (not text.endswith("\n"))
        return "".join(parts)

    def _found(self, name: str) -> Block:
        block = self.block(name)
        if block is None or block.line < 2:
            raise KeyError(name)
        return block

    def own_text(self, name: str) -> str:
        """Job `name`'s block under a `jobs:` line: a document of that job alone.

        Raises:
            KeyError: the job has no block.
        """
        block = self._found(name)
        text = self.text[block.start : block.end]
        return _JOBS_LINE + (text if text.endswith("\n") else text + "\n")

    def replaced(self, name: str, new: str) -> JobBlocks:
        """The text with job `name`'s block replaced by `new` (whole lines), and its blocks.

        Raises:
            KeyError: the job has no block.
        """
        block = self._found(name)
        old = self.text[block.start : block.end]
        if not old.endswith("\n"):  # the last line of a file without a final newline
            new = new.removesuffix("\n")
        text = self.text[: block.start] + new + self.text[block.end :]
        shift, lines = len(new) - len(old), new.count("\n") - old.count("\n")
        starts = {
            job: (line + lines, offset + shift) if offset > block.start else (line, offset)
            for job, (line, offset) in self.starts.items()
        }
        return JobBlocks(text=text, starts=starts)

    def added(self, name: str, after: str, new: str) -> JobBlocks:
        """The text with job `name`'s block `new` (whole lines) just after job `after`'s
        block (before the blank and comment lines that follow it), and its blocks.

        Raises:
            KeyError: job `after` has no block.
        """
        block = self._found(after)
        old = self.text[block.start : block.end]
        gap = not old.endswith("\n")  # the last line of a file without a final newline
        if gap:
            new = "\n" + new.removesuffix("\n")
        text = self.text[: block.end] + new + self.text[block.end :]
        shift, lines = len(new), new.count("\n")
        starts = {
            job: (line + lines, offset + shift) if offset >= block.end else (line, offset)
            for job, (line, offset) in self.starts.items()
        }
        starts[name] = (block.line + old.count("\n") + gap, block.end + gap)
        return JobBlocks(text=text, starts=starts)

    def last(self) -> str | None:
        """The job whose key comes last in the text, if any."""
        return max(self.starts, key=lambda name: self.starts[name][0], default=None)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def block_of(document_text: str) -> str:
    """The job block of a one-job document (`jobs:` then the block), as written back.

    Raises:
        ValueError: the document does not start with the `jobs:` line.
    """
    if not document_text.startswith(_JOBS_LINE):
        raise ValueError("not a one-job document")
    return document_text[len(_JOBS_LINE) :]
