"""Sizes as operators write them: `64MiB`, `1GiB`, `500MB`, `1048576`."""

from __future__ import annotations

import re

_UNITS = {
    "": 1, "b": 1,
    "kb": 1000, "mb": 1000**2, "gb": 1000**3, "tb": 1000**4,
    "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4,
    "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4,
}  # fmt: skip
_SIZE = re.compile(r"([0-9]{1,16})\s*([a-z]{0,3})")


def parse_size(text: str) -> int:
    """Parse `text` into a number of bytes.

    `KiB`, `MiB`, `GiB`, `TiB` (and `K`, `M`, `G`, `T`) count in 1024s;
    `KB`, `MB`, `GB`, `TB` in 1000s; a bare number is bytes. Case does not
    matter; the number is whole.

    Raises:
        ValueError: with a message that shows the accepted forms.
    """
    found = _SIZE.fullmatch(text.strip().lower())
    if found is None or found.group(2) not in _UNITS:
        raise ValueError(f"bad size '{text}': write it like 64MiB, 1GiB, 500MB or 1048576")
    return int(found.group(1)) * _UNITS[found.group(2)]


def format_size(size: int) -> str:
    """`size` bytes in the largest binary unit that keeps it whole (`64MiB`, `1500B`)."""
    for unit, factor in (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if size >= factor and size % factor == 0:
            return f"{size // factor}{unit}"
    return f"{size}B"
