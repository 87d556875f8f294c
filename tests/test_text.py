"""Words for people (issue 27): counts that agree with their number, columns that line up."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tuisched.domain.text import columns, counted

PACKAGE = Path(__file__).resolve().parent.parent / "tuisched"


@pytest.mark.parametrize(
    ("count", "noun", "plural", "text"),
    [
        (0, "job", None, "0 jobs"), (1, "job", None, "1 job"), (2, "slot", None, "2 slots"),
        (1, "process", "processes", "1 process"), (3, "process", "processes", "3 processes"),
        (1, "missed slot", None, "1 missed slot"),
    ],
)  # fmt: skip
def test_a_count_agrees_with_its_number(
    count: int, noun: str, plural: str | None, text: str
) -> None:
    assert counted(count, noun, plural) == text


def test_columns_are_as_wide_as_their_widest_cell_and_lines_end_without_spaces() -> None:
    rows = [["TIME", "JOB", "NOTE"], ["09:00", "a-long-name", ""], ["10:00", "x", "late"]]
    assert columns(rows) == [
        "TIME   JOB          NOTE",
        "09:00  a-long-name",
        "10:00  x            late",
    ]
    assert columns([]) == []


_COUNTED_NOUNS = (
    "jobs|slots|runs|groups|lines|problems|alerts|attempts|writes|claims|results|"
    "processes|entries|bytes|days|events|times"
)
_BARE_COUNT = re.compile(
    r"\{(?![A-Z_]+[\w.]*\})[^{}]*\} (?:[a-z]+ )?(?:" + _COUNTED_NOUNS + r")\b"  # `{n} jobs`
    r"|%d (?:[a-z]+ )?(?:" + _COUNTED_NOUNS + r")\b"  # `"%d writes", n` in a log line
    r"|\w\(s\)|\(es\)"  # `run(s)`, `process(es)`
)
_LEFT_AS_IS = {
    # Children that import nothing of tuisched (their cost is counted in megabytes).
    "runtime/execution/keeper_process.py", "runtime/execution/forkserver.py",
}  # fmt: skip
_NOT_A_COUNT = (
    "{dependant.name} runs ",
    "{run.run_id} runs on node",  # a verb, not a noun
    "{others[0]} already runs {config}",  # a verb
    "{target} runs {runs}, not",  # a verb
    "{state_dir} runs {theirs}, not",  # a verb
    "${(Q)line[1]} jobs --names",  # a command line in a zsh script
    "~{len(self.changed)} jobs",  # a diffstat: `+1 -0 ~1 jobs`
    "more than {limit} slots of",  # a limit (10,000), always plural
    "window is {days:.0f} days long",  # longer than MAX_WINDOW, always plural
    "({len(runs)} runs)",
    "those {len(named)} slots are",  # two or more, by their branch
    "{len(held)} runs failed",
    "of the {len(jobs)} marked jobs",  # two or more, by their branch
    "{length - LINE_BYTES:,} more bytes",  # a byte count of a cut line: thousands
    "truncated at {self._cap} bytes",  # the size limit (1 MiB or more)
    "more than %d alerts kept",  # MAX_KEPT
    "({len(walls)} times)",  # more than _SHOWN_TIMES
)


def test_no_human_output_counts_without_agreeing() -> None:
    """Every count in a message goes through `counted`: no `1 jobs`, no `run(s)`.

    A number that is a constant (`{MAX_KEPT}`) is always plural and may stay.
    """
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if str(path.relative_to(PACKAGE)) in _LEFT_AS_IS:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("  #")[0]
            if any(allowed in code for allowed in _NOT_A_COUNT):
                continue
            if ('"' in code or "'" in code) and _BARE_COUNT.search(code):
                found.append(f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}")
    assert not found, "\n".join(found)
