"""Durations as operators write them: `90s`, `5m`, `2h`, `1d`, `1h30m`, `1w`."""

from __future__ import annotations

import re
from datetime import timedelta

_UNITS = {"w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1}
MAX_SECONDS = 100 * 366 * 86400
"""No duration means anything beyond a century (and date arithmetic has its limits)."""
_PART = re.compile(r"(\d+)([wdhms])")
_WHOLE = re.compile(r"(?:\d+[wdhms])+")


def parse_duration(text: str) -> timedelta:
    """Parse `text` into a timedelta.

    Units run from largest to smallest, each at most once (`1h30m`, not
    `30m1h`). A bare number is refused: `90` could mean seconds or minutes.

    Raises:
        ValueError: with a message that shows the accepted forms.
    """
    compact = text.strip().replace(" ", "")
    if not _WHOLE.fullmatch(compact):
        raise ValueError(f"bad duration '{text}': write it like 90s, 5m, 2h, 1d or 1h30m")
    seen: list[str] = []
    total = 0
    for amount, unit in _PART.findall(compact):
        if seen and list(_UNITS).index(unit) <= list(_UNITS).index(seen[-1]):
            raise ValueError(f"bad duration '{text}': units must go from largest to smallest")
        seen.append(unit)
        total += int(amount) * _UNITS[unit]
    if total > MAX_SECONDS:
        raise ValueError(f"bad duration '{text}': longer than 100 years")
    return timedelta(seconds=total)


def format_duration(value: timedelta) -> str:
    """Render `value` the way `parse_duration` reads it (`1h30m`, `0s`)."""
    seconds = int(value.total_seconds())
    if seconds == 0:
        return "0s"
    parts = []
    for unit, size in _UNITS.items():
        amount, seconds = divmod(seconds, size)
        if amount:
            parts.append(f"{amount}{unit}")
    return "".join(parts)


def format_elapsed(value: timedelta) -> str:
    """A run's duration for people: `0.04s`, `2.5s`, then `1m05s`, `2h03m` (seconds dropped)."""
    seconds = value.total_seconds()
    if seconds < 10:
        return f"{seconds:.2g}s" if seconds < 1 else f"{seconds:.1f}s"
    if seconds < 3600:
        minutes, rest = divmod(int(seconds), 60)
        return f"{minutes}m{rest:02d}s" if minutes else f"{rest}s"
    hours, rest = divmod(int(seconds) // 60, 60)
    return f"{hours}h{rest:02d}m"


def format_age(value: timedelta) -> str:
    """A time still counting (a run's elapsed time, an uptime) for people, in whole
    seconds: `3s`, `42s`, then two units, the smaller zero-padded: `2m05s`, `1h02m`,
    `3d04h`. Never negative: a clock a little behind another reads `0s`."""
    seconds = max(int(value.total_seconds()), 0)
    if seconds < 60:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes}m{seconds % 60:02d}s"
    if minutes < 24 * 60:
        return f"{minutes // 60}h{minutes % 60:02d}m"
    return f"{minutes // (24 * 60)}d{minutes // 60 % 24:02d}h"
