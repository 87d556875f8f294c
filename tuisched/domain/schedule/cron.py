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

Quartz's day rules are accepted beside plain values, in lists too: in the
day-of-month field `L` (last day), `L-N` (N days before it), `NW` (the weekday
nearest to day N, never leaving the month) and `LW` (last weekday); in the
day-of-week field `NL` (the last such weekday of the month) and `N#K` (the K-th).
They count as restrictions for the OR rule like any other value.

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
    # --- Quartz day rules (L, W, #) ---
    last_days: frozenset[int] = frozenset()
    """Day-of-month `L` (0) and `L-N` (N): that many days before the month's last day."""
    nearest_weekdays: frozenset[int] = frozenset()
    """Day-of-month `NW`: the weekday (Monday-Friday) nearest to day N, within the month."""
    last_weekday: bool = False
    """Day-of-month `LW`: the month's last weekday (Monday-Friday)."""
    last_weekdays: frozenset[int] = frozenset()
    """Day-of-week `NL`: the last such weekday of the month (0 is Sunday)."""
    nth_weekdays: frozenset[tuple[int, int]] = frozenset()
    """Day-of-week `N#K`: (weekday, K), the K-th such weekday of the month (K is 1-5)."""

    @property
    def calendar_days(self) -> bool:
        """Whether a day rule depends on the month's calendar (any of L, W, #)."""
        return bool(
            self.last_days
            or self.nearest_weekdays
            or self.last_weekday
            or self.last_weekdays
            or self.nth_weekdays
        )

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
        dom_rules = _DomRules.parse(dom)
        dow_rules = _DowRules.parse(dow)
        return cls(
            text=text,
            has_seconds=has_seconds,
            seconds=_parse_field(sec, _SECOND),
            minutes=_parse_field(minute, _MINUTE),
            hours=_parse_field(hour, _HOUR),
            days=dom_rules.plain,
            months=_parse_field(month, _MONTH),
            weekdays=frozenset(v % 7 for v in dow_rules.plain),
            dom_restricted=not free[3],
            dow_restricted=not free[5],
            fixed_time=not (free[1] or free[2] or (has_seconds and free[0])),
            last_days=dom_rules.last_days,
            nearest_weekdays=dom_rules.nearest,
            last_weekday=dom_rules.last_weekday,
            last_weekdays=dow_rules.last,
            nth_weekdays=dow_rules.nth,
        )

    def _check_can_fire(self) -> None:
        if self.calendar_days:
            # Rules such as `30W` in February or `5#5` only fire on some calendars:
            # search for a firing day (cheap: the parse is cached per text).
            if self.next_match(datetime(1999, 12, 31, 23, 59, 59)) is None:  # noqa: DTZ001
                raise CronError(f"cron: '{self.text}' never fires (no month has such a day)")
            return
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
        weekday = (day.weekday() + 1) % 7
        dom = day.day in self.days or (self.calendar_days and self._dom_rule_matches(day))
        dow = weekday in self.weekdays or (
            self.calendar_days and _dow_rule_matches(self, day, weekday)
        )
        if self.dom_restricted and self.dow_restricted:
            return dom or dow
        return dom and dow

    def _dom_rule_matches(self, day: date) -> bool:
        """Whether `day` is picked by `L`, `L-N`, `NW` or `LW`."""
        last = calendar.monthrange(day.year, day.month)[1]
        if last - day.day in self.last_days:
            return True
        if self.last_weekday and day.day == _nearest_weekday(day.replace(day=last), last):
            return True
        return any(
            n <= last and day.day == _nearest_weekday(day.replace(day=n), last)
            for n in self.nearest_weekdays
        )

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
        if self.calendar_days:
            return _describe_rule(self, dom, month, dow)
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
            raise CronError(f"cron: {spec.name} field '{_shown(text)}': empty list item")
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
            f"cron: {spec.name} field '{_shown(text)}': range {low_text}-{high_text} is reversed"
        )
    return range(low, high + 1, step)


def _digits(text: str) -> bool:
    """Whether `text` is ASCII digits only (`¹` and `٣` are digits to `str.isdigit`), few
    enough to be a number of a cron field (4,301 digits are more than `int()` takes)."""
    return text.isascii() and text.isdigit() and len(text) <= _MOST_DIGITS


def _shown(text: str) -> str:
    """`text` as an error shows it: cut past 40 characters (a field of 5,000 digits)."""
    return text if len(text) <= 40 else text[:40] + "…"


_MOST_DIGITS = 9
"""Digits a cron value or step may have: more is no field's, and is said as not a value."""


def _parse_step(step_text: str, text: str, spec: _Field) -> int:
    if not _digits(step_text):
        raise CronError(
            f"cron: {spec.name} field '{_shown(text)}': step '{_shown(step_text)}' is not a number"
        )
    step = int(step_text)
    if step == 0:
        raise CronError(f"cron: {spec.name} field '{_shown(text)}': step must not be 0")
    return step


def _parse_value(value: str, text: str, spec: _Field) -> int:
    upper = value.upper()
    if upper in spec.names:
        return spec.names.index(upper) + spec.name_base
    if not _digits(value):
        raise CronError(
            f"cron: {spec.name} field '{_shown(text)}': '{_shown(value)}' is not a value"
        )
    number = int(value)
    if not spec.low <= number <= spec.high:
        raise CronError(
            f"cron: {spec.name} field '{_shown(text)}': value {number} out of range "
            f"{spec.low}-{spec.high}"
        )
    return number


# --- Quartz day rules ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _DomRules:
    """The day-of-month field split into plain days and Quartz rules."""

    plain: frozenset[int]
    last_days: frozenset[int]
    nearest: frozenset[int]
    last_weekday: bool

    @classmethod
    def parse(cls, text: str) -> _DomRules:
        """Read `L`, `L-N`, `NW`, `LW` items; the rest is an ordinary field."""
        plain, rules = _split_rules(text, _DOM, "LW")
        last_days: set[int] = set()
        nearest: set[int] = set()
        last_weekday = False
        for item in rules:
            if item == "LW":
                last_weekday = True
            elif item == "L":
                last_days.add(0)
            elif item.startswith("L-"):
                last_days.add(_rule_number(item[2:], 0, 30, item=item, text=text, spec=_DOM))
            elif item.endswith("W"):
                nearest.add(_rule_number(item[:-1], 1, 31, item=item, text=text, spec=_DOM))
            else:
                raise _rule_error(item, text, _DOM, "use L, L-N, NW or LW")
        return cls(plain, frozenset(last_days), frozenset(nearest), last_weekday)


@dataclass(frozen=True, slots=True)
class _DowRules:
    """The day-of-week field split into plain weekdays and Quartz rules."""

    plain: frozenset[int]
    last: frozenset[int]
    nth: frozenset[tuple[int, int]]

    @classmethod
    def parse(cls, text: str) -> _DowRules:
        """Read `NL` and `N#K` items (N a number or a name); the rest is an ordinary field."""
        plain, rules = _split_rules(text, _DOW, "L#")
        last: set[int] = set()
        nth: set[tuple[int, int]] = set()
        for item in rules:
            if item == "L":
                raise _rule_error(
                    item, text, _DOW, "say which weekday, e.g. 5L for the last Friday"
                )
            if "#" in item:
                day_text, _, count = item.partition("#")
                day = _parse_value(day_text, text, _DOW) % 7
                nth.add((day, _rule_number(count, 1, 5, item=item, text=text, spec=_DOW)))
            elif item.endswith("L"):
                last.add(_parse_value(item[:-1], text, _DOW) % 7)
            else:
                raise _rule_error(item, text, _DOW, "use NL or N#K")
        return cls(plain, frozenset(last), frozenset(nth))


def _split_rules(text: str, spec: _Field, letters: str) -> tuple[frozenset[int], list[str]]:
    """Plain values of the field, and its items holding one of `letters` (upper-cased).

    Names are checked first, so `SAT` or `JUL` never reads as a rule.
    """
    if not text:
        raise CronError(f"cron: {spec.name} field is empty")
    plain: list[str] = []
    rules: list[str] = []
    for item in text.split(","):
        upper = item.upper()
        is_rule = any(c in upper for c in letters) and not _is_named(upper, spec)
        (rules if is_rule else plain).append(upper if is_rule else item)
    if rules and any("/" in rule for rule in rules):
        bad = next(rule for rule in rules if "/" in rule)
        raise _rule_error(bad, text, spec, "a rule takes no step")
    values = _parse_field(",".join(plain), spec) if plain else frozenset()
    return values, rules


def _is_named(upper: str, spec: _Field) -> bool:
    """Whether a list item is made of names only (`SAT`, `MON-FRI`, `SUN/2`)."""
    words = upper.replace("/", "-").split("-")
    return all(word in spec.names or _digits(word) for word in words)


def _rule_number(value: str, low: int, high: int, *, item: str, text: str, spec: _Field) -> int:
    if not _digits(value) or not low <= int(value) <= high:
        raise _rule_error(item, text, spec, f"the number must be {low}-{high}")
    return int(value)


def _rule_error(item: str, text: str, spec: _Field, advice: str) -> CronError:
    return CronError(
        f"cron: {spec.name} field '{_shown(text)}': '{item}' is not a day rule ({advice})"
    )


def _nearest_weekday(day: date, last: int) -> int:
    """The day of the month of the weekday nearest to `day`, never leaving its month
    (Quartz: `1W` on a Saturday is Monday the 3rd)."""
    weekday = day.weekday()
    if weekday == 5:  # Saturday: Friday before, or Monday after on the 1st
        return day.day - 1 if day.day > 1 else day.day + 2
    if weekday == 6:  # Sunday: Monday after, or Friday before on the last day
        return day.day + 1 if day.day < last else day.day - 2
    return day.day


def _dow_rule_matches(expr: CronExpr, day: date, weekday: int) -> bool:
    """Whether `day` (whose weekday is `weekday`, 0 Sunday) is picked by `NL` or `N#K`."""
    last = weekday in expr.last_weekdays
    if last and day.day + 7 > calendar.monthrange(day.year, day.month)[1]:
        return True
    return (weekday, (day.day - 1) // 7 + 1) in expr.nth_weekdays


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


_ORDINALS = ("first", "second", "third", "fourth", "fifth")


def _describe_rule(expr: CronExpr, dom: str, month: str, dow: str) -> str | None:
    """Words for one Quartz day rule alone in its field, every month: "on the last
    day of the month", "on the third Friday of the month"; else None."""
    if month != "*" or "," in dom or "," in dow:
        return None
    if dow == "*":
        if expr.last_days == {0}:
            return "on the last day of the month"
        if expr.last_weekday:
            return "on the last weekday of the month"
        if len(expr.nearest_weekdays) == 1:
            (day,) = expr.nearest_weekdays
            return f"on the weekday nearest day {day} of the month"
        return None
    if dom != "*":
        return None
    if len(expr.last_weekdays) == 1:
        (weekday,) = expr.last_weekdays
        return f"on the last {_WEEKDAY_WORDS[weekday]} of the month"
    (weekday, count), *_ = expr.nth_weekdays
    return f"on the {_ORDINALS[count - 1]} {_WEEKDAY_WORDS[weekday]} of the month"


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
