"""Durations as operators write them: `90s`, `5m`, `2h`, `1d`, `1h30m`, `1w`."""

from __future__ import annotations

import re
from datetime import timedelta

_UNITS = {"w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1}
MAX_SECONDS = 100 * 366 * 86400
"""No duration means anything beyond a century (and date arithmetic has its limits)."""
_MICROSECOND = timedelta(microseconds=1)
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
    """A duration for people, the one style of every human output.

    Two significant figures below ten of a unit, whole units above, and two
    units from a minute on, the smaller zero-padded (as `hyperfine` and
    `systemctl` show times, without their spaces): `850µs`, `1.5ms`, `85ms`,
    `1.2s`, `42s`, `2m05s`, `1h02m`, `3d04h`. JSON keeps numbers (seconds).
    Negative durations (a clock that stepped back) count as zero.
    """
    micros = max(round(value / _MICROSECOND), 0)
    if micros < 1000:
        return f"{micros}µs" if micros else "0s"
    for size, unit in ((1000, "ms"), (1_000_000, "s")):
        amount = micros / size
        if round(amount, 1) < 10:
            return f"{amount:.1f}{unit}"
        if round(amount) < (1000 if unit == "ms" else 60):
            return f"{round(amount)}{unit}"
    return _two_units(round(micros / 1_000_000))


def _two_units(seconds: int) -> str:
    """`2m05s`, `1h02m`, `3d04h`: the largest unit and the next, the rest dropped."""
    if seconds < 3600:
        minutes, rest = divmod(seconds, 60)
        return f"{minutes}m{rest:02d}s"
    minutes = seconds // 60
    if minutes < 24 * 60:
        hours, rest = divmod(minutes, 60)
        return f"{hours}h{rest:02d}m"
    days, rest = divmod(minutes // 60, 24)
    return f"{days}d{rest:02d}h"


def format_age(value: timedelta) -> str:
    """A time still counting (a run's elapsed time, an uptime) for people, in whole
    seconds: `3s`, `42s`, then two units, the smaller zero-padded: `2m05s`, `1h02m`,
    `3d04h`. Never negative: a clock a little behind another reads `0s`."""
    seconds = max(int(value.total_seconds()), 0)
    return f"{seconds}s" if seconds < 60 else _two_units(seconds)
