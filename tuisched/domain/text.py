"""Text for people: what comes from outside made safe to show, counts and columns.

`plain_text` is the one gate between job output and the screen: whatever a job
prints is decoded with replacement characters and stripped of terminal escape
sequences and control characters, so it is never interpreted. `counted` says
"1 job" and "2 jobs", and `columns` lines a table up as `column -t` does: every
human output uses them, so no count reads "1 jobs" and no table goes ragged.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_ESCAPES = re.compile(
    r"""
    \x1b\[ [0-?]* [ -/]* [@-~]            # CSI: colours, cursor moves, erase
  | \x1b\] [^\x07\x1b\n]* (?:\x07|\x1b\\)? # OSC: titles, hyperlinks, clipboard
  | \x1b [PX^_] [^\x1b\n]* (?:\x1b\\)?     # DCS, SOS, PM, APC strings
  | \x1b [ -/]* [0-~]                      # other ESC sequences (charset, keypad...)
  | \x1b                                   # a lone ESC
    """,
    re.VERBOSE,
)
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""Bidirectional controls: they reorder what follows on screen (U+202E shows
`evil\u202eexe.txt` as `eviltxt.exe`), so each is shown as U+FFFD instead."""


def plain_text(data: bytes | str) -> str:
    """Make job output safe to show: text that no terminal or markup engine interprets.

    Bytes are decoded as UTF-8 with U+FFFD for invalid sequences. Terminal
    escape sequences (CSI, OSC, DCS and other ESC sequences) are removed, as
    are control characters other than newline and tab; bidirectional controls
    become U+FFFD, so they cannot reorder what is shown; `\\r\\n` and a lone
    `\\r` become `\\n`. Text that merely looks like markup (`[bold]x[/bold]`)
    is kept unchanged: the caller must still display it literally.

    Args:
        data: Raw output bytes, or text already decoded.

    Returns:
        The plain text.
    """
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    text = _ESCAPES.sub("", text)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _BIDI.sub("\ufffd", _CONTROLS.sub("", text))


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """`1 job`, `0 jobs`, `2 jobs`; `plural` for the nouns that do not take an s.

    Example: `counted(3, "entry", "entries")` is `3 entries`.
    """
    if count == 1:
        return f"1 {noun}"
    return f"{count} {plural or noun + 's'}"


def columns(rows: Sequence[Sequence[str]], *, gap: int = 2) -> list[str]:
    """`rows` as lines whose cells line up, each column as wide as its widest cell.

    The last cell of each row is not padded (it may be long, or empty), and no
    line ends in spaces. Rows may be shorter than others: their missing cells
    are empty.
    """
    if not rows:
        return []
    count = max(len(row) for row in rows)
    widths = [max((len(row[i]) for row in rows if i < len(row) - 1), default=0)
              for i in range(count)]  # fmt: skip
    lines = []
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row[:-1], widths, strict=False)]
        lines.append((" " * gap).join([*cells, *row[-1:]]).rstrip())
    return lines
