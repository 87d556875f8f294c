"""One broken configuration per validation rule (SPEC R7).

Each file under `configs/bad/` states on its first line what it must produce:
`# expect: LINE job 'NAME': fragment`, `# expect: LINE group 'NAME': fragment`
or `# expect: LINE - fragment` for a problem that belongs to no job.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tuisched.domain.errors import ConfigError
from tuisched.runtime.configfiles import load_config

BAD = Path(__file__).parent / "configs" / "bad"
_EXPECT = re.compile(r"# expect: (\d+) (?:(job|group) '([^']*)'|-):? (.+)")


def _expectation(path: Path) -> tuple[int, str | None, str | None, str]:
    match = _EXPECT.fullmatch(path.read_text().splitlines()[0])
    assert match, f"{path.name} has no '# expect:' line"
    line, scope, name, fragment = match.groups()
    return int(line), scope, name, fragment


@pytest.mark.parametrize("path", sorted(BAD.glob("*.yaml")), ids=lambda p: p.stem)
def test_bad_config_is_rejected_with_file_line_and_job(path: Path) -> None:
    line, scope, name, fragment = _expectation(path)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    found = [
        p
        for p in caught.value.problems
        if p.line == line
        and fragment in p.message
        and p.job == (name if scope == "job" else None)
        and p.group == (name if scope == "group" else None)
    ]
    listed = "\n".join(str(p) for p in caught.value.problems)
    assert found, f"expected line {line} {scope} {name!r}: {fragment!r}; got:\n{listed}"
    rendered = str(found[0])
    assert rendered.startswith(f"{path.absolute()}:{line}: ")
    if scope is not None:
        assert f"{scope} '{name}': " in rendered


def test_every_rule_has_its_file() -> None:
    # R7's list, each with at least one broken file here.
    needed = {
        "empty_name", "duplicate_name", "start_after_stop", "every_missing_start",
        "every_zero_step", "every_negative_step", "every_non_numeric_step",
        "every_unknown_unit", "unknown_kind", "two_kinds", "schedule_and_after",
        "neither_schedule_nor_after", "after_unknown_job", "dependency_cycle",
        "unknown_group_member", "malformed_cron", "malformed_duration",
        "malformed_datetime", "unknown_timezone", "bad_email_address", "unknown_key",
        "yaml11_boolean", "yaml11_octal", "yaml11_sexagesimal", "empty_file",
        "truncated_jobs", "truncated_mid_value",
    }  # fmt: skip
    assert needed <= {path.stem for path in BAD.glob("*.yaml")}
