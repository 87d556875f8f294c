"""Text from outside (job output, statuses, names) made safe to show.

`plain_text` is the one gate between job output and the screen: whatever a job
prints is decoded with replacement characters and stripped of terminal escape
sequences and control characters, so it is never interpreted.
"""

from __future__ import annotations

import re

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
