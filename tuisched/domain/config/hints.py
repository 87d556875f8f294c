"""What to write instead: hints for the mistakes operators make most in a configuration.

A YAML parser says where it stopped ("did not find expected alphabetic or
numeric character") and a reader says what it refused ("unknown time zone
'CEST'"); neither says what the operator meant. Each table below pairs a
mistake that crontab and YAML habits make common with what to write instead.
The readers add the first hint that fits to their problem, after "; ":

    the line the YAML parser stopped on    SYNTAX_HINTS     syntax_hint()
    a time zone that is no zone name       ZONE_HINTS       zone_hint()
    a duration written another way         DURATION_HINTS   duration_hint()
    a boolean written as YAML 1.1 allows   YAML11_BOOLEANS  boolean_hint()
    a schedule written as crontab has it   SCHEDULE_HINTS   schedule_hint()
    a cron expression with more in it      CRON_HINTS       cron_hint()
    a `jobs:` section that is no mapping   JOBS_HINTS       jobs_hint()
    a key one level too high               KEY_HOMES        unknown_key_hint()

A hint is advice: the configuration is still refused, and the operator edits
the file. Where no row fits, a hint says nothing rather than guess.
"""

from __future__ import annotations

import difflib
import functools
import json
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar
from zoneinfo import available_timezones

from tuisched.domain.config.crontab import derive_name
from tuisched.domain.config.keys import AFTER_KEYS, KIND_KEYS, SCHEDULE_KEYS, TOP_KEYS
from tuisched.domain.errors import CronError
from tuisched.domain.schedule.cron import CronExpr

S = TypeVar("S")


@dataclass(frozen=True, slots=True)
class Hint(Generic[S]):
    """One row of a table: a mistake, how to recognise it, and what to write instead."""

    mistake: str
    """What the operator did (for the reader of the table; never shown)."""
    fits: Callable[[S], object]
    """Whether the subject shows the mistake (anything true: a match will do)."""
    advice: Callable[[S], str]


def first_hint(table: Sequence[Hint[S]], subject: S) -> str:
    """`; ADVICE` from the first row of `table` that fits `subject`, or nothing."""
    for hint in table:
        if hint.fits(subject):
            return f"; {hint.advice(subject)}"
    return ""


def quoted(text: str) -> str:
    """`text` as a YAML quoted value: in double quotes, or in single ones when it holds
    a double quote or a backslash (which double quotes would read as escapes)."""
    if ('"' in text or "\\" in text) and "'" not in text:
        return f"'{text}'"
    return json.dumps(text, ensure_ascii=False)


def nearest(word: str, choices: Collection[str]) -> str:
    """`; did you mean 'x'?` for the closest choice, or nothing."""
    close = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


# --- crontab lines and cron expressions ----------------------------------------------


def is_cron(text: str) -> bool:
    """Whether `text` is a cron expression tuisched reads (5 or 6 fields, or `@daily`)."""
    try:
        CronExpr.parse(text)
    except CronError:
        return False
    return True


def crontab_entry(text: str) -> tuple[str, str] | None:
    """The schedule and the command of `text` when it is a crontab(5) line
    (`0 5 * * * /usr/bin/backup.sh`, `@daily cmd`), else None. Several lines that
    YAML folded into one (`0 5 * * * a 0 6 * * * b`) give the first."""
    words = text.split()
    count = 1 if text.startswith("@") else 5
    if len(words) <= count or is_cron(text) or not is_cron(" ".join(words[:count])):
        return None  # no command, a valid 6-field expression (seconds first), or no schedule
    end = next(
        (at for at in range(count + 1, len(words) - 5) if is_cron(" ".join(words[at : at + 5]))),
        len(words),
    )
    return " ".join(words[:count]), " ".join(words[count:end])


def as_job(text: str) -> str:
    """What to write for the crontab line `text`: the job it means, on one line."""
    cron, command = crontab_entry(text) or ("", "")
    return (
        f"'{cron} {command}' is a crontab line; write it as a job: {derive_name(command)}: "
        f"{{command: {quoted(command)}, schedule: {{cron: {quoted(cron)}}}}} "
        "(tuisched import-crontab converts a whole crontab)"
    )


_NICKNAMES = frozenset({"yearly", "annually", "monthly", "weekly", "daily", "midnight", "hourly"})


def _times(text: str) -> str:
    """The schedule of the crontab line `text`, quoted."""
    return quoted((crontab_entry(text) or ("", ""))[0])


SCHEDULE_HINTS: tuple[Hint[str], ...] = (
    Hint(
        "a cron expression as the schedule itself (`schedule: 0 5 * * *`)",
        is_cron,
        lambda text: f"write it under 'cron:', quoted: schedule: {{cron: {quoted(text)}}}",
    ),
    Hint(
        "a whole crontab line as the schedule (`schedule: 0 5 * * * backup.sh`)",
        crontab_entry,
        lambda text: f"the command goes in 'command:'; write schedule: {{cron: {_times(text)}}}",
    ),
    Hint(
        "a cron nickname as the schedule (`schedule: daily`)",
        lambda text: text.lower().lstrip("@") in _NICKNAMES,
        lambda text: f'write schedule: {{cron: "@{text.lower().lstrip("@")}"}}',
    ),
)
CRON_HINTS: tuple[Hint[str], ...] = (
    Hint(
        "a whole crontab line as the cron expression (`cron: 0 5 * * * backup.sh`)",
        crontab_entry,
        lambda text: (
            f"the command goes in 'command:'; the cron expression holds the times "
            f"only: cron: {_times(text)}"
        ),
    ),
    Hint(
        "a cron nickname without its '@' (`cron: daily`)",
        lambda text: text.lower() in _NICKNAMES,
        lambda text: f'write cron: "@{text.lower()}"',
    ),
)


def schedule_hint(text: str) -> str:
    """`; ADVICE` for `schedule: TEXT`, which is neither a mapping nor `manual`."""
    return first_hint(SCHEDULE_HINTS, text.strip())


def cron_hint(text: str) -> str:
    """`; ADVICE` for `cron: TEXT`, which is no cron expression, or nothing."""
    return first_hint(CRON_HINTS, text.strip())


# --- the line the YAML parser stopped on ---------------------------------------------

_KEY_VALUE = re.compile(
    r"(?P<indent>[ \t]*)(?:-[ \t]+)?(?P<key>[^\s#'\"{}\[\]:,>|*&!%@`?-][^:#]*?)[ \t]*:"
    r"(?:[ \t]+(?P<value>.*?))?[ \t]*(?:[ \t]#.*)?"
)
"""`KEY: VALUE` (or `- KEY: VALUE`), the value without a comment after it."""
_CRON_VALUE = re.compile(r"\bcron:[ \t]+(?P<expr>[^\"'\s,}#][^,}#]*?)[ \t]*(?:[,}#]|$)")
_INDICATORS = {
    "*": "names an alias",
    "!": "names a tag",
    "%": "starts a directive",
    "@": "is reserved",
    "`": "is reserved",
    "|": "starts a block of lines",
    ">": "starts a folded block of lines",
    "[": "starts a list",
    "{": "starts a mapping",
    "- ": "starts a list item",
    "? ": "starts a complex key",
}
"""What YAML makes of a value that starts with these; quoted, each is plain text."""
INLINE_KEYS: Mapping[str, frozenset[str]] = {"schedule": SCHEDULE_KEYS, "after": AFTER_KEYS}
"""Keys whose mapping operators write on the key's own line (`after: job: x`)."""
_OPENS = re.compile(r"(?:[&!]\S*[ \t]*)*(?:[|>][-+0-9]*)?")
"""A value that opens a block below its key: nothing, an anchor or a tag, `|` or `>`."""
_NOUNS = {"command": "command", "cron": "cron expression", "description": "description"}


@dataclass(frozen=True, slots=True)
class Stop:
    """Where the YAML parser stopped: the file's lines, a 1-based line and a column."""

    lines: Sequence[str]
    number: int
    column: int

    @property
    def text(self) -> str:
        return self.lines[self.number - 1] if 0 < self.number <= len(self.lines) else ""

    @property
    def key(self) -> str:
        found = _KEY_VALUE.fullmatch(self.text)
        return found["key"] if found else ""

    @property
    def value(self) -> str:
        """The line's value as written, without a comment after it ('' when none)."""
        found = _KEY_VALUE.fullmatch(self.text)
        return (found["value"] or "") if found else ""

    @property
    def body(self) -> str:
        """The line without its indentation, list dash or trailing blanks."""
        return re.sub(r"^[ \t]*(?:-[ \t]+)?", "", self.text).rstrip()

    @property
    def noun(self) -> str:
        return _NOUNS.get(self.key, "value")

    @property
    def enclosing(self) -> tuple[str, ...]:
        """The keys whose values the stop's line is inside, outermost first (as the lines'
        indentation shows: a broken file has no other structure to go by)."""
        indent = _indent(self.text)
        return tuple(key for i, key, _ in reversed(_keys_above(self)) if i < indent)

    @property
    def inline_key(self) -> str:
        """The key that starts the value (`cron` in `schedule: cron: 0 5 * * *`), or ''."""
        return self.value.partition(": ")[0] if ": " in self.value else ""

    @property
    def inline_value(self) -> str:
        """The value after `inline_key`, quoted unless it was."""
        value = self.value.partition(": ")[2].strip()
        return value if value[:1] in ("'", '"') else quoted(value)

    @property
    def indicator(self) -> str:
        """The YAML indicator the value starts with ('' when none, or when the value is
        a whole list or mapping in brackets, which is likely meant as one)."""
        value = self.value
        if value[:1] + value[-1:] in ("[]", "{}"):
            return ""
        return next((start for start in _INDICATORS if value.startswith(start)), "")

    @property
    def cron(self) -> str:
        """An unquoted cron expression on the line ('' when none)."""
        found = _CRON_VALUE.search(self.text)
        return found["expr"] if found else ""


def _indent(text: str) -> int:
    """The columns of blanks before `text` (a tab taken as the next multiple of 8)."""
    expanded = text.expandtabs(8)
    return len(expanded) - len(expanded.lstrip(" "))


def _tab_indented(stop: Stop) -> bool:
    lead = stop.text[: len(stop.text) - len(stop.text.lstrip(" \t"))]
    return "\t" in lead or stop.text[stop.column : stop.column + 1] == "\t"


def _colon_in_value(stop: Stop) -> bool:
    value = stop.value
    return bool(value) and value[0] not in "\"'[{" and (": " in value or value.endswith(":"))


def _quoted_in_part(stop: Stop) -> bool:
    value = stop.value
    closing = value.find(value[0], 1) if value[:1] in ("'", '"') else -1
    return 0 < closing < len(value) - 1


def _keys_above(stop: Stop) -> list[tuple[int, str, int]]:
    """The keys above the stop, nearest first, each less indented than the one before:
    (indent, key, line). The stop's key should line up with one of them."""
    found: list[tuple[int, str, int]] = []
    for number in range(min(stop.number, len(stop.lines) + 1) - 1, 0, -1):
        key = _KEY_VALUE.fullmatch(stop.lines[number - 1])
        indent = _indent(stop.lines[number - 1])
        if key is not None and (not found or indent < found[-1][0]):
            found.append((indent, key["key"], number))
    return found


def _misaligned(stop: Stop) -> bool:
    """The stop's key lines up with no key above it, and does not open under the key
    just above (which holds a value already)."""
    above = _keys_above(stop)
    if not stop.key or not above or above[0][2] != _line_above(stop):
        return False  # the line above is no key (a list, a block of text): no telling
    indent = _indent(stop.text)
    nearest_line = _KEY_VALUE.fullmatch(stop.lines[above[0][2] - 1])
    opens = nearest_line is not None and _OPENS.fullmatch(nearest_line["value"] or "")
    return not (opens and indent > above[0][0]) and indent not in {i for i, _, _ in above}


def _line_above(stop: Stop) -> int:
    """The number of the nearest line above the stop that is neither blank nor a comment."""
    for number in range(min(stop.number, len(stop.lines) + 1) - 1, 0, -1):
        text = stop.lines[number - 1].strip()
        if text and not text.startswith("#"):
            return number
    return 0


def _spaces(count: int) -> str:
    return f"{count} space" if count == 1 else f"{count} spaces"


def _line_up(stop: Stop) -> str:
    indent = _indent(stop.text)
    above = _keys_above(stop)
    deeper = [row for row in above if row[0] > indent][-1:]
    shallower = [row for row in above if row[0] < indent][:1]
    choices = " or ".join(
        f"{_spaces(i)} as '{key}' on line {n}" for i, key, n in deeper + shallower
    )
    return (
        f"'{stop.key}' is indented {_spaces(indent)}, like no key above it: line it up ({choices})"
    )


SYNTAX_HINTS: tuple[Hint[Stop], ...] = (
    Hint("a tab in the indentation", _tab_indented, lambda _: "indent with spaces, not tabs"),
    Hint(
        "a crontab line pasted as a job (`*/5 * * * * cmd`)",
        lambda stop: crontab_entry(stop.body),
        lambda stop: as_job(stop.body),
    ),
    Hint(
        "a cron expression as the schedule itself (`schedule: */5 * * * *`)",
        lambda stop: stop.key == "schedule" and is_cron(stop.value),
        lambda stop: schedule_hint(stop.value)[2:],
    ),
    Hint(
        "a mapping written after a key on its line (`schedule: cron: 0 5 * * *`)",
        lambda stop: stop.inline_key in INLINE_KEYS.get(stop.key, ()),
        lambda stop: (
            f"write a mapping on one line in braces: {stop.key}: "
            f"{{{stop.inline_key}: {stop.inline_value}}}"
        ),
    ),
    Hint(
        "a cron expression left unquoted (`*/5` starts an alias, `@` is reserved)",
        lambda stop: stop.cron,
        lambda stop: f"quote the cron expression: cron: {quoted(stop.cron)}",
    ),
    Hint(
        "': ' inside a value, which YAML reads as a key of its own (`echo time: now`)",
        _colon_in_value,
        lambda stop: f"quote a {stop.noun} that holds ': ': {stop.key}: {quoted(stop.value)}",
    ),
    Hint(
        "a value starting with a character that means something to YAML (`%`, `[`, `>`)",
        lambda stop: stop.indicator,
        lambda stop: (
            f"a value starting with '{stop.indicator.strip()}' {_INDICATORS[stop.indicator]} "
            f"in YAML; quote the {stop.noun}: {stop.key}: {quoted(stop.value)}"
        ),
    ),
    Hint(
        'a value quoted in part (`"echo" hi`)',
        _quoted_in_part,
        lambda stop: (
            f"a quoted value ends at its closing quote; quote the whole {stop.noun}: "
            f"{stop.key}: {quoted(stop.value)}"
        ),
    ),
    Hint(
        'a quote opened and never closed (`command: "echo hi`)',
        lambda stop: stop.value[:1] in ("'", '"') and stop.value.find(stop.value[0], 1) < 0,
        lambda stop: f"the {stop.value[0]} that opens the {stop.noun} here is never closed",
    ),
    Hint("a key indented like none of the keys above it", _misaligned, _line_up),
)
"""Read top to bottom: the first row that fits gives the hint."""


def syntax_hint(lines: Sequence[str], number: int, column: int) -> str:
    """`; ADVICE` for a YAML syntax error at `column` of line `number`, or nothing."""
    return first_hint(SYNTAX_HINTS, Stop(lines, number, column))


def indicator_hint(key: str | None, text: str) -> str:
    """`; ADVICE` for a value that YAML took for an alias or a tag (`*foo`, `!x`)."""
    where = f"{key}: " if key else ""
    meaning = _INDICATORS[text[:1]]
    return (
        f"; a value starting with '{text[:1]}' {meaning} in YAML; quote it: {where}{quoted(text)}"
    )


def braces_hint() -> str:
    """`; ADVICE` for a command that YAML read as a mapping (`{ echo a; echo b; }`)."""
    return f"; a value starting with '{{' {_INDICATORS['{']} in YAML; quote a command that does"


# --- the jobs section, and keys in the wrong place -----------------------------------


@dataclass(frozen=True, slots=True)
class Section:
    """What `jobs:` holds when it is no mapping: the text of its first item (a single
    value), or that item's keys with the text of each value (a mapping)."""

    text: str
    keys: Mapping[str, str]


JOBS_HINTS: tuple[Hint[Section], ...] = (
    Hint(
        "crontab lines pasted under `jobs:`",
        lambda section: crontab_entry(section.text),
        lambda section: as_job(section.text),
    ),
    Hint(
        "a list of jobs, each with a `name:` (`- name: backup`)",
        lambda section: section.keys.get("name"),
        lambda section: (
            f"write each job as its name and ':' ({section.keys['name']}:), with its "
            f"keys indented under it, not as a list item '- name: {section.keys['name']}'"
        ),
    ),
    Hint(
        "a list of named jobs (`- backup:`)",
        lambda section: section.keys,
        lambda _: "write each job's name without the '- ' (jobs is a mapping, not a list)",
    ),
)


def jobs_hint(text: str, keys: Mapping[str, str]) -> str:
    """`; ADVICE` for a `jobs:` section that is no mapping (see `Section`)."""
    return first_hint(JOBS_HINTS, Section(text, keys))


KEY_HOMES: Mapping[str, str] = {
    **dict.fromkeys(sorted(SCHEDULE_KEYS), "schedule"),  # `cron:` beside `schedule:`
    **dict.fromkeys(sorted(AFTER_KEYS), "after"),
}
"""Keys written one level too high, and the key they belong under."""


def unknown_key_hint(
    key: str, allowed: Collection[str], homes: Mapping[str, str] = KEY_HOMES
) -> str:
    """`; ADVICE` for an unknown `key`: where it belongs, else the closest allowed one."""
    if key in homes and homes[key] in allowed:
        return f"; indent it under '{homes[key]}:'"
    return nearest(key, allowed)


def top_key_hint(key: str, value_keys: Collection[str], settings: Collection[str]) -> str:
    """`; ADVICE` for an unknown top-level `key` (whose value has `value_keys` when it is a
    mapping): a setting or a job left at the top, else the closest top-level key."""
    homes = dict.fromkeys(settings, "settings")
    if set(KIND_KEYS) & set(value_keys):
        homes[key] = "jobs"
    return unknown_key_hint(key, TOP_KEYS, homes)


def unindented_keys_hint(keys: Sequence[str]) -> str:
    """`; ADVICE` for a job with no keys whose `keys` follow it at its own level."""
    return f"; indent its keys ({', '.join(keys)}) under its name"


def stray_key_hint(key: str) -> str:
    """`; ADVICE` for a job's key written where job names go."""
    return f"; write the job's name above '{key}', and indent the job's keys under it"


# --- time zones ----------------------------------------------------------------------

ZONE_ABBREVIATIONS: Mapping[str, str] = {
    # Europe
    "CEST": "Europe/Berlin", "MEZ": "Europe/Berlin", "MESZ": "Europe/Berlin",
    "WEST": "Europe/Lisbon", "EEST": "Europe/Athens", "MSK": "Europe/Moscow",
    # the Americas
    "PST": "America/Los_Angeles", "PDT": "America/Los_Angeles", "PT": "America/Los_Angeles",
    "MDT": "America/Denver", "MT": "America/Denver",
    "CDT": "America/Chicago", "CT": "America/Chicago",
    "EDT": "America/New_York", "ET": "America/New_York",
    "AKST": "America/Anchorage", "AKDT": "America/Anchorage",
    "ADT": "America/Halifax", "NST": "America/St_Johns", "NDT": "America/St_Johns",
    "BRT": "America/Sao_Paulo", "ART": "America/Argentina/Buenos_Aires",
    # Asia
    "IDT": "Asia/Jerusalem", "GST": "Asia/Dubai", "PKT": "Asia/Karachi",
    "NPT": "Asia/Kathmandu", "ICT": "Asia/Bangkok", "WIB": "Asia/Jakarta",
    "SGT": "Asia/Singapore", "HKT": "Asia/Hong_Kong", "PHT": "Asia/Manila",
    "KST": "Asia/Seoul", "JST": "Asia/Tokyo",
    # Oceania
    "AWST": "Australia/Perth", "ACST": "Australia/Adelaide", "ACDT": "Australia/Adelaide",
    "AEST": "Australia/Sydney", "AEDT": "Australia/Sydney",
    "NZST": "Pacific/Auckland", "NZDT": "Pacific/Auckland",
    # Africa
    "WAT": "Africa/Lagos", "CAT": "Africa/Maputo", "SAST": "Africa/Johannesburg",
    "EAT": "Africa/Nairobi",
}  # fmt: skip
"""Abbreviations operators write for a zone, and a zone of the places that use it.

Those that are zone names themselves (UTC, GMT, EST, MST, HST, CET, EET, WET)
are not here: they are read as the zones of those names."""
SHARED_ABBREVIATIONS: Mapping[str, Mapping[str, str]] = {
    "IST": {"India": "Asia/Kolkata", "Ireland": "Europe/Dublin", "Israel": "Asia/Jerusalem"},
    "BST": {"Britain": "Europe/London", "Bangladesh": "Asia/Dhaka"},
    "CST": {"central North America": "America/Chicago", "China": "Asia/Shanghai"},
    "AST": {"the Atlantic coast": "America/Halifax", "Arabia": "Asia/Riyadh"},
}
"""Abbreviations that places far apart use: each place is named with its zone."""
_OFFSET = re.compile(r"(?:UTC|GMT)?\s*(?P<sign>[+-])(?P<hours>\d{1,2})(?::?(?P<minutes>\d\d))?")
_ABBREVIATION = re.compile(r"[A-Za-z]{2,5}")


@functools.cache
def _zones() -> tuple[str, ...]:
    return tuple(sorted(available_timezones()))


def _abbreviation(name: str) -> str:
    return f"{name} is an abbreviation; use a zone name such as {ZONE_ABBREVIATIONS[name.upper()]}"


def _shared_abbreviation(name: str) -> str:
    places = [f"{zone} ({place})" for place, zone in SHARED_ABBREVIATIONS[name.upper()].items()]
    such = ", ".join(places[:-1]) + f" or {places[-1]}"
    return f"{name} is an abbreviation that several places use; use a zone name such as {such}"


def _offset(name: str) -> str:
    found = _OFFSET.fullmatch(name.strip())
    if found is None or (found["minutes"] or "00") != "00":
        return "a UTC offset is no zone name; use the zone name of the place"
    hours, sign = int(found["hours"]), found["sign"]
    fixed = f"Etc/GMT{'-' if sign == '+' else '+'}{hours}"
    return (
        "a UTC offset is no zone name; use the zone name of the place (it follows "
        f"summer time), or {fixed} for UTC{sign}{hours} all year (its sign is reversed)"
    )


def _same_letters(name: str) -> str | None:
    """The zone whose name differs from `name` only in case, spaces or a missing area
    (`utc`, `europe/berlin`, `Berlin`, `new york`)."""
    wanted = name.strip().replace(" ", "_").lower()
    whole = (zone for zone in _zones() if zone.lower() == wanted)
    city = (zone for zone in _zones() if zone.lower().rpartition("/")[2] == wanted)
    return next(whole, None) or next(city, None)


def _close_spelling(name: str) -> str | None:
    """A zone spelled almost like `name`, in its area (`Europe/Berln`). None for a name
    without an area: the letters of a short word say nothing about where it is."""
    area, slash, _ = name.partition("/")
    if not slash:
        return None
    in_area = [zone for zone in _zones() if zone.startswith(f"{area}/")]
    close = difflib.get_close_matches(name, in_area or _zones(), n=1, cutoff=0.6)
    return close[0] if close else None


ZONE_HINTS: tuple[Hint[str], ...] = (
    Hint("an abbreviation (CEST, PST)", lambda n: n.upper() in ZONE_ABBREVIATIONS, _abbreviation),
    Hint(
        "an abbreviation that places far apart use (IST)",
        lambda n: n.upper() in SHARED_ABBREVIATIONS,
        _shared_abbreviation,
    ),
    Hint("a UTC offset (UTC+2, +02:00)", lambda n: _OFFSET.fullmatch(n.strip()), _offset),
    Hint(
        "a zone name in other letters (utc, Berlin)",
        _same_letters,
        lambda n: f"did you mean '{_same_letters(n)}'?",
    ),
    Hint(
        "a misspelt zone name (Europe/Berln)",
        _close_spelling,
        lambda n: f"did you mean '{_close_spelling(n)}'?",
    ),
    Hint(
        "an abbreviation the table lacks",
        _ABBREVIATION.fullmatch,
        lambda n: f"{n} looks like an abbreviation; use a zone name (Area/City) of the place",
    ),
)


def zone_hint(name: str) -> str:
    """`; ADVICE` for `name`, which no time zone has, or nothing."""
    return first_hint(ZONE_HINTS, name)


# --- booleans ------------------------------------------------------------------------

YAML11_BOOLEANS: Mapping[str, str] = {
    "yes": "true", "y": "true", "on": "true",
    "no": "false", "n": "false", "off": "false",
}  # fmt: skip
"""Words YAML 1.1 reads as booleans (and YAML 1.2 as text), and the boolean meant."""


def boolean_hint(text: str) -> str:
    """`; ADVICE` for a boolean written as YAML 1.1 allowed (`yes`, `off`), or nothing."""
    meant = YAML11_BOOLEANS.get(text.strip().lower())
    if meant is None:
        return ""
    return f"; write {meant} (YAML 1.1 reads '{text}' as {meant}, YAML 1.2 as text)"


# --- durations -----------------------------------------------------------------------

_SMALLER = {"w": "d", "d": "h", "h": "m", "m": "s"}
_UNIT_WORDS = {
    "second": "s", "seconds": "s", "sec": "s", "secs": "s",
    "minute": "m", "minutes": "m", "min": "m", "mins": "m",
    "hour": "h", "hours": "h", "hr": "h", "hrs": "h",
    "day": "d", "days": "d", "week": "w", "weeks": "w",
}  # fmt: skip
_WORDED = re.compile(rf"(\d+)\s*({'|'.join(sorted(_UNIT_WORDS, key=len, reverse=True))})")

DURATION_HINTS: tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], str]], ...] = (
    (  # `timeout: 90`
        re.compile(r"\d+"),
        lambda m: f"a number alone could be seconds or minutes: write {m[0]}s or {m[0]}m",
    ),
    (  # `1h30`: the last number without its unit
        re.compile(r"(?:\d+[wdhms])*\d+([wdhm])\d+"),
        lambda m: f"write {m[0]}{_SMALLER[m[1]]}",
    ),
    (  # `5 minutes`
        _WORDED,
        lambda m: f"write {m[1]}{_UNIT_WORDS[m[2]]}",
    ),
    (  # `1:30`
        re.compile(r"(\d+):(\d\d)"),
        lambda m: f"write {m[1]}h{m[2]}m or {m[1]}m{m[2]}s",
    ),
)
"""A duration written another way, and how to write it; the first that matches wins."""


def duration_hint(text: str) -> str:
    """`ADVICE` for a duration that cannot be read, or nothing."""
    written = text.strip().lower()
    for pattern, advice in DURATION_HINTS:
        found = pattern.fullmatch(written)
        if found is not None:
            return advice(found)
    return ""
