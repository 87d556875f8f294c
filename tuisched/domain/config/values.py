"""Typed readers for located YAML values, each reporting a Problem when wrong.

`Values` reads what the operator wrote (`yamlsource` keeps the text of every
scalar) and decides its meaning here, never by YAML 1.1's guesses: a bare
`on` is the word "on", `12:30` is a time of day, `0755` is refused as an
integer because YAML 1.1 would read it as octal.
"""

from __future__ import annotations

import enum
import functools
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from email.utils import parseaddr
from pathlib import Path
from typing import TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from tuisched.domain.config.hints import (
    boolean_hint,
    duration_hint,
    nearest,
    unknown_key_hint,
    zone_hint,
)
from tuisched.domain.config.yamlsource import Entry, Map, Scalar, Seq, Value
from tuisched.domain.errors import Problem
from tuisched.domain.schedule.duration import parse_duration
from tuisched.domain.sizes import format_size, parse_size

__all__ = ["FIRST_YEAR", "LAST_YEAR", "MAX_INTEGER", "MAX_ZONE_NAME", "Values", "nearest"]

E = TypeVar("E", bound=enum.Enum)
T = TypeVar("T")

_INT = re.compile(r"[-+]?(0|[1-9][0-9]*)")
_ADDRESS = re.compile(r"[^@\s<>]+@[^@\s<>.]+(\.[^@\s<>.]+)*")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_KIND_NAMES = {Scalar: "a single value", Seq: "a list", Map: "a mapping"}


MAX_INTEGER = 1_000_000
"""The largest number a setting takes unless it says otherwise (priorities, retries...)."""
MAX_ZONE_NAME = 64
"""No IANA zone name is longer; a longer one is refused before any lookup."""
FIRST_YEAR = 1900
LAST_YEAR = 9000
"""Date-times a configuration may name: far enough for any schedule, and far from the
edges of what date arithmetic can represent."""


def _zone(name: str) -> ZoneInfo | None:
    """The zone called `name`, or None for a name no zone has (too long for a file, too)."""
    if len(name) > MAX_ZONE_NAME:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return None


def _kind(value: Value) -> str:
    return _KIND_NAMES[type(value)]


@dataclass(slots=True)
class Values:
    """Collects problems while reading values; the scope names the job or group."""

    file: Path
    problems: list[Problem] = field(default_factory=list)
    base: Path = Path()
    """Folder that relative paths in the configuration are relative to."""
    job: str | None = None
    group: str | None = None

    def problem(self, line: int, message: str) -> None:
        """Record a problem at `line` in the current scope."""
        self.problems.append(
            Problem(file=self.file, line=line, message=message, job=self.job, group=self.group)
        )

    @contextmanager
    def scope(self, *, job: str | None = None, group: str | None = None) -> Iterator[None]:
        """Attribute problems found inside to `job` or `group`."""
        saved = self.job, self.group
        self.job, self.group = job, group
        try:
            yield
        finally:
            self.job, self.group = saved

    # --- structure ----------------------------------------------------------

    def mapping(self, value: Value, what: str, allowed: frozenset[str]) -> dict[str, Entry] | None:
        """Read a mapping, reporting each unknown key with where it belongs (`cron:`
        beside `schedule:`) or the nearest valid one."""
        if not isinstance(value, Map):
            self.problem(value.line, f"{what} must be a mapping, not {_kind(value)}")
            return None
        for key, entry in value.entries.items():
            if key not in allowed:
                hint = unknown_key_hint(key, allowed)
                self.problem(entry.key_line, f"unknown key '{key}' in {what}{hint}")
        return {key: entry for key, entry in value.entries.items() if key in allowed}

    def scalar(self, value: Value, what: str) -> Scalar | None:
        """The value if it is a non-empty scalar."""
        if not isinstance(value, Scalar):
            self.problem(value.line, f"{what} must be a single value, not {_kind(value)}")
            return None
        if value.is_null:
            self.problem(value.line, f"{what} has no value")
            return None
        return value

    def string_list(self, value: Value, what: str) -> list[tuple[str, int]] | None:
        """A scalar or a list of scalars, as (text, line) pairs."""
        items = value.items if isinstance(value, Seq) else (value,)
        result = []
        for item in items:
            scalar = self.scalar(item, f"each item of {what}")
            if scalar is not None:
                result.append((scalar.text, scalar.line))
        return result if len(result) == len(items) else None

    # --- fields of a mapping --------------------------------------------------

    def opt(
        self,
        fields: dict[str, Entry],
        key: str,
        reader: Callable[[Value, str], T | None],
        what: str,
    ) -> T | None:
        """Read `fields[key]` with `reader` when present."""
        return reader(fields[key].value, what) if key in fields else None

    def put(
        self,
        kwargs: dict[str, object],
        fields: dict[str, Entry],
        key: str,
        reader: Callable[[Value, str], object],
        *,
        prefix: str = "",
    ) -> None:
        """Read `fields[key]` into `kwargs[key]` when present; None marks a problem."""
        if key in fields:
            kwargs[key] = reader(fields[key].value, f"{prefix}.{key}" if prefix else key)

    def path(self, value: Value, what: str) -> Path | None:
        """A path; a relative one is relative to the configuration's folder."""
        text = self.text(value, what)
        return self.base / Path(text).expanduser() if text is not None else None

    def enum(self, kind: type[E]) -> Callable[[Value, str], E | None]:
        """A reader for one of `kind`'s values."""
        choices = _choices(kind)

        def read(value: Value, what: str) -> E | None:
            word = self.choice(value, what, choices)
            return kind(word) if word is not None else None

        return read

    # --- scalars ------------------------------------------------------------

    def text(self, value: Value, what: str) -> str | None:
        """Any non-empty scalar, exactly as written."""
        scalar = self.scalar(value, what)
        if scalar is None:
            return None
        if not scalar.text.strip():
            self.problem(scalar.line, f"{what} is empty")
            return None
        return scalar.text

    def boolean(self, value: Value, what: str) -> bool | None:
        """`true` or `false`; YAML 1.1's yes/no/on/off are refused as ambiguous."""
        scalar = self.scalar(value, what)
        if scalar is None:
            return None
        word = scalar.text.lower()
        if word in ("true", "false"):
            return word == "true"
        hint = boolean_hint(scalar.text)
        self.problem(scalar.line, f"{what} must be true or false, not '{scalar.text}'{hint}")
        return None

    def integer(
        self,
        value: Value,
        what: str,
        *,
        minimum: int | None = None,
        maximum: int = MAX_INTEGER,
    ) -> int | None:
        """A decimal integer; `0755`, `1_000`, `0x1F` and `12:30` are refused.

        Numbers beyond `maximum` (and below `-maximum` without a `minimum`) are
        refused too: no setting means anything there.
        """
        scalar = self.scalar(value, what)
        if scalar is None:
            return None
        if not _INT.fullmatch(scalar.text):
            hint = ""
            if re.fullmatch(r"0[0-9]+", scalar.text):
                hint = " (a leading zero makes YAML 1.1 read it as octal)"
            elif ":" in scalar.text:
                hint = " (YAML 1.1 reads 12:30 as the number 750)"
            self.problem(scalar.line, f"{what} must be a whole number, not '{scalar.text}'{hint}")
            return None
        number = int(scalar.text) if len(scalar.text) <= 20 else maximum + 1
        low = -maximum if minimum is None else minimum
        if number < low and minimum is not None:
            self.problem(scalar.line, f"{what} must be at least {minimum}, not {number}")
            return None
        if not low <= number <= maximum:
            self.problem(scalar.line, f"{what} must be from {low} to {maximum}, not {scalar.text}")
            return None
        return number

    def duration(self, value: Value, what: str) -> timedelta | None:
        """A duration such as `90s`, `5m`, `2h`, `1d`, `1h30m`."""
        scalar = self.scalar(value, what)
        if scalar is None:
            return None
        try:
            return parse_duration(scalar.text)
        except ValueError as error:
            fix = duration_hint(scalar.text)
            said = f"bad duration '{scalar.text}': {fix}" if fix else str(error)
            self.problem(scalar.line, f"{what}: {said}")
            return None

    def size(self, value: Value, what: str, *, minimum: int, maximum: int) -> int | None:
        """A size in bytes such as `64MiB`, `1GiB`, `500MB`, from `minimum` to `maximum`."""
        scalar = self.scalar(value, what)
        if scalar is None:
            return None
        try:
            size = parse_size(scalar.text)
        except ValueError as error:
            self.problem(scalar.line, f"{what}: {error}")
            return None
        if not minimum <= size <= maximum:
            low, high = format_size(minimum), format_size(maximum)
            self.problem(scalar.line, f"{what} must be from {low} to {high}, not {scalar.text}")
            return None
        return size

    def choice(self, value: Value, what: str, choices: tuple[str, ...]) -> str | None:
        """One of `choices`, written exactly."""
        scalar = self.scalar(value, what)
        if scalar is None:
            return None
        if scalar.text not in choices:
            listed = ", ".join(choices)
            self.problem(scalar.line, f"{what} must be one of {listed}, not '{scalar.text}'")
            return None
        return scalar.text

    def zone(self, value: Value, what: str) -> ZoneInfo | None:
        """An IANA time zone name such as `Europe/Berlin`."""
        name = self.text(value, what)
        if name is None:
            return None
        found = _zone(name)
        if found is None:
            shown = name if len(name) <= MAX_ZONE_NAME else name[:MAX_ZONE_NAME] + "…"
            self.problem(value.line, f"{what}: unknown time zone '{shown}'{zone_hint(shown)}")
        return found

    def local_datetime(self, value: Value, what: str) -> datetime | None:
        """An ISO 8601 date-time, bare or quoted; naive when written without offset."""
        scalar = self.scalar(value, what)
        if scalar is None:
            return None
        try:
            moment = datetime.fromisoformat(scalar.text.strip())
        except ValueError:
            self.problem(
                scalar.line,
                f"{what}: bad date-time '{scalar.text}'; write it like 2026-05-04T02:30",
            )
            return None
        if not FIRST_YEAR <= moment.year <= LAST_YEAR:
            self.problem(
                scalar.line,
                f"{what}: {scalar.text} is out of range (years {FIRST_YEAR} to {LAST_YEAR})",
            )
            return None
        return moment

    def address(self, text: str, line: int, what: str) -> str | None:
        """An e-mail address, optionally with a display name (`Ops <ops@example.org>`)."""
        _, bare = parseaddr(text)
        if not bare or not _ADDRESS.fullmatch(bare):
            self.problem(line, f"{what}: bad e-mail address '{text}'")
            return None
        return text

    def env_name(self, value: Value, what: str) -> str | None:
        """The name of an environment variable (never its value)."""
        name = self.text(value, what)
        if name is not None and not _ENV_NAME.fullmatch(name):
            self.problem(value.line, f"{what} must name an environment variable, not '{name}'")
            return None
        return name


@functools.cache
def _choices(kind: type[enum.Enum]) -> tuple[str, ...]:
    return tuple(str(member.value) for member in kind)
