"""Crontab expressions: parsing, matching and the next match on the wall clock.

Pure and time-zone free: everything here works on *naive wall-clock*
date-times. `tuisched.domain.schedule.slots` turns wall times into instants (and applies the
DST policy). Semantics are crontab(5)'s as Vixie/Debian cron implement them:

- 5 fields (minute hour day-of-month month day-of-week, seconds = 0) or 6
  fields (seconds first, as in Quartz);
- weekday numbers follow crontab in both forms: 0 and 7 are Sunday, 1 Monday;
- when day-of-month and day-of-week are *both* restricted (neither field
  starts with `*` or `?`) a day matches when either matches (OR), otherwise
  both must match (AND). `*/2` starts with `*`, so it ANDs (Vixie's rule).

APScheduler's own crontab parser differs on both points, which is why user
expressions never reach it.
"""

from __future__ import annotations

import calendar
import functools
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from tuisched.domain.errors import CronError

__all__ = ["CronExpr"]

_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_MONTH_NAMES = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_DAY_NAMES = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
_WEEKDAY_WORDS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
_MONTH_WORDS = tuple(calendar.month_name[1:])
_MAX_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
"""Longest length of each month (February in a leap year)."""
_HORIZON_YEARS = 50
"""How far `next_match` looks. Any expression that can fire does so well within this
(the rarest, February 29 on a given weekday, recurs within 40 years)."""


@dataclass(frozen=True, slots=True)
class _Field:
    """How one crontab field is read."""

    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()
    name_base: int = 0
    """Value of the first name (JAN is 1, SUN is 0)."""


_SECOND = _Field("second", 0, 59)
_MINUTE = _Field("minute", 0, 59)
_HOUR = _Field("hour", 0, 23)
_DOM = _Field("day-of-month", 1, 31)
_MONTH = _Field("month", 1, 12, _MONTH_NAMES, 1)
# 7 is accepted as Sunday (and folded to 0 after parsing), as crontab(5) does.
_DOW = _Field("day-of-week", 0, 7, _DAY_NAMES, 0)


@dataclass(frozen=True, slots=True)
class CronExpr:
    """A parsed crontab expression.

    Build it with `CronExpr.parse`; the value sets are what the fields allow,
    with day-of-week 7 folded to 0 (Sunday).
    """

    text: str
    """The expression as written."""
    has_seconds: bool
    """True for the 6-field form (seconds first)."""
    seconds: frozenset[int]
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    """Days of the month, 1-31."""
    months: frozenset[int]
    """Months, 1-12."""
    weekdays: frozenset[int]
    """Days of the week, 0-6, 0 is Sunday."""
    dom_restricted: bool
    """The day-of-month field does not start with `*` or `?`."""
    dow_restricted: bool
    """The day-of-week field does not start with `*` or `?`."""
    fixed_time: bool
    """The expression names wall-clock times: its minute and hour fields (and
    seconds, in the 6-field form) do not start with `*` or `?`. Such schedules
    get the fixed-time DST policy (see `tuisched.domain.schedule.slots.localize`)."""

    @classmethod
    def parse(cls, text: str) -> CronExpr:
        """Parse a 5- or 6-field expression or an `@` macro.

        Equal texts give the same (immutable) object, so 100,000 jobs sharing
        a handful of expressions hold a handful of parsed forms.

        Raises:
            CronError: the expression is malformed or can never fire; the message
                names the field and the problem, e.g. ``cron: day-of-week field
                '8': value 8 out of range 0-7``.
        """
        return _parse_cached(text)

    @classmethod
    def _parse(cls, text: str) -> CronExpr:
        parts = _expand_macro(text.strip()).split()
        if len(parts) not in (5, 6):
            raise CronError(
                f"cron: expected 5 fields (minute hour day-of-month month day-of-week) "
                f"or 6 (seconds first), got {len(parts)} in '{text}'"
            )
        has_seconds = len(parts) == 6
        if not has_seconds:
            parts.insert(0, "0")
        expr = cls._from_fields(text, parts, has_seconds=has_seconds)
        expr._check_can_fire()
        return expr

    @classmethod
    def _from_fields(cls, text: str, parts: list[str], *, has_seconds: bool) -> CronExpr:
        sec, minute, hour, dom, month, dow = parts
        fields = zip((sec, minute, hour, month), (_SECOND, _MINUTE, _HOUR, _MONTH), strict=True)
        for part, spec in fields:
            if "?" in part:  # as croniter and Quartz: '?' means "no value" for days only
                raise CronError(
                    f"cron: {spec.name} field '{part}': '?' is allowed only in the "
                    "day-of-month and day-of-week fields"
                )
        free = [p.startswith(("*", "?")) for p in parts]
        return cls(
            text=text,
            has_seconds=has_seconds,
            seconds=_parse_field(sec, _SECOND),
            minutes=_parse_field(minute, _MINUTE),
            hours=_parse_field(hour, _HOUR),
            days=_parse_field(dom, _DOM),
            months=_parse_field(month, _MONTH),
            weekdays=frozenset(v % 7 for v in _parse_field(dow, _DOW)),
            dom_restricted=not free[3],
            dow_restricted=not free[5],
            fixed_time=not (free[1] or free[2] or (has_seconds and free[0])),
        )

    def _check_can_fire(self) -> None:
        # With OR every weekday matches some day of every month; with AND every
        # (month, day) pair that exists falls on each weekday within 28 years.
        if self.dom_restricted and self.dow_restricted:
            return
        if not any(d <= _MAX_DAYS[m - 1] for m in self.months for d in self.days):
            raise CronError(f"cron: '{self.text}' never fires (no month has such a day)")

    # --- matching -------------------------------------------------------------

    def day_matches(self, day: date) -> bool:
        """Whether `day` is a firing day (day-of-month OR/AND day-of-week, and month)."""
        if day.month not in self.months:
            return False
        dom = day.day in self.days
        dow = (day.weekday() + 1) % 7 in self.weekdays
        if self.dom_restricted and self.dow_restricted:
            return dom or dow
        return dom and dow

    def matches(self, wall: datetime) -> bool:
        """Whether the wall-clock time `wall` (naive; microseconds ignored) fires."""
        return (
            wall.second in self.seconds
            and wall.minute in self.minutes
            and wall.hour in self.hours
            and self.day_matches(wall.date())
        )

    def next_match(self, wall: datetime) -> datetime | None:
        """The first naive wall time strictly after `wall` that matches.

        Jumps field by field (month, day, hour, minute, second) rather than
        ticking, so a yearly expression costs a handful of steps.

        Returns:
            The match, or None when there is none within 50 years.
        """
        t = wall.replace(microsecond=0, tzinfo=None) + timedelta(seconds=1)
        limit = t.year + _HORIZON_YEARS
        while t.year <= limit:
            moved = self._advance(t)
            if moved is None:
                return t
            t = moved
        return None

    def _advance(self, t: datetime) -> datetime | None:
        """The next candidate after the first field of `t` that fails, or None if `t` matches."""
        steps: tuple[Callable[[datetime], datetime | None], ...] = (
            self._advance_month,
            self._advance_day,
            self._advance_hour,
            self._advance_minute,
            self._advance_second,
        )
        for step in steps:
            moved = step(t)
            if moved is not None:
                return moved
        return None

    def _advance_month(self, t: datetime) -> datetime | None:
        if t.month in self.months:
            return None
        month = _first_at_least(self.months, t.month)
        year = t.year if month is not None else t.year + 1
        return datetime(year, month or min(self.months), 1)  # noqa: DTZ001 - naive wall clock

    def _advance_day(self, t: datetime) -> datetime | None:
        if self.day_matches(t.date()):
            return None
        last = calendar.monthrange(t.year, t.month)[1]
        for day in range(t.day + 1, last + 1):
            if self.day_matches(t.date().replace(day=day)):
                return t.replace(day=day, hour=0, minute=0, second=0)
        return _month_start(t.year, t.month + 1)

    def _advance_hour(self, t: datetime) -> datetime | None:
        if t.hour in self.hours:
            return None
        hour = _first_at_least(self.hours, t.hour)
        if hour is None:
            return datetime.combine(t.date() + timedelta(days=1), datetime.min.time())
        return t.replace(hour=hour, minute=0, second=0)

    def _advance_minute(self, t: datetime) -> datetime | None:
        if t.minute in self.minutes:
            return None
        minute = _first_at_least(self.minutes, t.minute)
        if minute is None:
            return t.replace(minute=0, second=0) + timedelta(hours=1)
        return t.replace(minute=minute, second=0)

    def _advance_second(self, t: datetime) -> datetime | None:
        if t.second in self.seconds:
            return None
        second = _first_at_least(self.seconds, t.second)
        if second is None:
            return t.replace(second=0) + timedelta(minutes=1)
        return t.replace(second=second)

    # --- words ------------------------------------------------------------------

    def describe(self) -> str:
        """The expression in words where it is simple, else ``cron <expression>``.

        Examples: "every minute", "every 15 minutes", "at 05:00 every day",
        "at 05:00 on Monday-Friday", "at 06:00 on day 1 of the month",
        "at 00:00 on 29 February".
        """
        fields = self._fields()
        words = _describe_frequent(fields)
        if words is None and self.fixed_time:
            words = self._describe_fixed(fields)
        return words or f"cron {self.text}"

    def _fields(self) -> list[str]:
        parts = _expand_macro(self.text.strip()).split()
        if len(parts) == 5:
            parts.insert(0, "0")
        return [p.replace("?", "*") for p in parts]

    def _describe_fixed(self, fields: list[str]) -> str | None:
        """ "at 05:00 every day", or up to four times: "at 00:00 and 12:00 every day"."""
        if len(self.seconds) != 1 or len(self.minutes) * len(self.hours) > 4:
            return None
        (second,) = self.seconds
        times = [
            f"{h:02d}:{m:02d}" + (f":{second:02d}" if second else "")
            for h in sorted(self.hours)
            for m in sorted(self.minutes)
        ]
        clock = times[0] if len(times) == 1 else f"{', '.join(times[:-1])} and {times[-1]}"
        days = self._describe_days(fields)
        return None if days is None else f"at {clock} {days}"

    def _describe_days(self, fields: list[str]) -> str | None:
        dom, month, dow = fields[3], fields[4], fields[5]
        if (dom, month, dow) == ("*", "*", "*"):
            return "every day"
        if dom == "*" and month == "*" and self.dow_restricted:
            return f"on {_weekday_words(self.weekdays)}"
        if len(self.days) != 1 or self.dow_restricted or dow != "*":
            return None
        (day,) = self.days
        if month == "*":
            return f"on day {day} of the month"
        if len(self.months) == 1:
            (month_no,) = self.months
            return f"on {day} {_MONTH_WORDS[month_no - 1]}"
        return None


# --- parsing helpers -----------------------------------------------------------


def _expand_macro(text: str) -> str:
    if not text.startswith("@"):
        return text
    macro = text.lower()
    if macro == "@reboot":
        raise CronError("cron: @reboot is not supported: tuisched runs jobs on a schedule only")
    if macro not in _MACROS:
        known = ", ".join(_MACROS)
        raise CronError(f"cron: unknown macro '{text}' (known: {known})")
    return _MACROS[macro]


def _parse_field(text: str, spec: _Field) -> frozenset[int]:
    """The values one field allows; raises CronError naming the field."""
    if not text:
        raise CronError(f"cron: {spec.name} field is empty")
    values: set[int] = set()
    for item in text.split(","):
        if not item:
            raise CronError(f"cron: {spec.name} field '{text}': empty list item")
        values.update(_parse_item(item, text, spec))
    return frozenset(values)


def _parse_item(item: str, text: str, spec: _Field) -> range:
    """One list item: `*`, `?`, `N`, `A-B`, each optionally `/STEP`."""
    base, slash, step_text = item.partition("/")
    step = _parse_step(step_text, text, spec) if slash else 1
    if base in ("*", "?"):
        return range(spec.low, spec.high + 1, step)
    low_text, dash, high_text = base.partition("-")
    low = _parse_value(low_text, text, spec)
    # `N/step` means N-max/step; a plain `N` is just N.
    high = _parse_value(high_text, text, spec) if dash else (spec.high if slash else low)
    if high < low:
        raise CronError(
            f"cron: {spec.name} field '{text}': range {low_text}-{high_text} is reversed"
        )
    return range(low, high + 1, step)


def _digits(text: str) -> bool:
    """Whether `text` is ASCII digits only (`¹` and `٣` are digits to `str.isdigit`)."""
    return text.isascii() and text.isdigit()


def _parse_step(step_text: str, text: str, spec: _Field) -> int:
    if not _digits(step_text):
        raise CronError(f"cron: {spec.name} field '{text}': step '{step_text}' is not a number")
    step = int(step_text)
    if step == 0:
        raise CronError(f"cron: {spec.name} field '{text}': step must not be 0")
    return step


def _parse_value(value: str, text: str, spec: _Field) -> int:
    upper = value.upper()
    if upper in spec.names:
        return spec.names.index(upper) + spec.name_base
    if not _digits(value):
        hint = " (L, W and # are not supported)" if any(c in value for c in "LW#") else ""
        raise CronError(f"cron: {spec.name} field '{text}': '{value}' is not a value{hint}")
    number = int(value)
    if not spec.low <= number <= spec.high:
        raise CronError(
            f"cron: {spec.name} field '{text}': value {number} out of range {spec.low}-{spec.high}"
        )
    return number


# --- matching helpers ------------------------------------------------------------


def _first_at_least(values: frozenset[int], low: int) -> int | None:
    return min((v for v in values if v >= low), default=None)


def _month_start(year: int, month: int) -> datetime:
    """Midnight on the 1st of `month` (which may be 13: January of the next year)."""
    year, index = divmod(year * 12 + month - 1, 12)
    return datetime(year, index + 1, 1)  # noqa: DTZ001 - naive wall clock


# --- description helpers ---------------------------------------------------------


def _describe_frequent(fields: list[str]) -> str | None:
    """Words for `*`/`*/N` patterns repeating within a day, else None."""
    second, minute, hour, *days = fields
    if days != ["*", "*", "*"]:
        return None
    if (second, minute, hour) == ("*", "*", "*"):
        return "every second"
    if second != "0":
        return None
    if hour == "*":
        if minute == "*":
            return "every minute"
        if minute == "0":
            return "every hour"
        return _every(minute, "minute")
    return _every(hour, "hour") if minute == "0" else None


def _every(field: str, unit: str) -> str | None:
    if not field.startswith("*/") or not field[2:].isdigit():
        return None
    step = int(field[2:])
    return f"every {unit}" if step == 1 else f"every {step} {unit}s"


def _weekday_words(weekdays: frozenset[int]) -> str:
    """`Monday-Friday`, `Saturday and Sunday`, `Monday, Wednesday and Friday`."""
    order = sorted(weekdays, key=lambda d: (d - 1) % 7)  # Monday first
    if len(order) > 2 and all((b - a) % 7 == 1 for a, b in itertools.pairwise(order)):
        return f"{_WEEKDAY_WORDS[order[0]]}-{_WEEKDAY_WORDS[order[-1]]}"
    names = [_WEEKDAY_WORDS[d] for d in order]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


@functools.lru_cache(maxsize=4096)
def _parse_cached(text: str) -> CronExpr:
    return CronExpr._parse(text)
