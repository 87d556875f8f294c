"""Hostile configurations: every one ends, in bounded time, with one clear answer.

Hypothesis builds configurations out of values operators and attackers
write (huge and negative numbers, far dates, odd Unicode, control
characters, deep nesting, malformed cron and durations, long zone names...).
Each goes through `validate`, `next` and `jobs`, and a valid one also starts
and stops a runtime: the outcome is always an exit status of 0, 1 or 78 and
text, never an exception.
"""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from tempfile import TemporaryDirectory

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tuisched.domain.errors import ConfigError
from tuisched.frontends.cli import main
from tuisched.runtime.configfiles import load_config
from tuisched.runtime.runtime import Runtime

HOSTILE_TEXT = st.sampled_from(
    [
        "", " ", "0", "-1", "1e30", "1e400", "99999999999999999999", "-99999999999999999999",
        "nan", "inf", "¹", "٣", "²³", "\u202e", "a\nb", "a\x00b", "\x1b[31m", "x" * 300,
        "日本", "~", "null", "yes", "off", "0o17", "0x1f", "12:30", "1_000", "[", "{", "*",
        "?", "L", "W", "#", "5s", "1h30m", "0s", "-5s", "5 seconds", "1e3s", "999999999999d",
        "0001-01-01T00:00", "9999-12-31T23:59", "2026-02-30T00:00", "2026-13-01T00:00",
        "2026-03-29T02:30", "24:00", "UTC", "Europe/Berlin", "A" * 300, "../../etc/passwd",
        "/dev/zero", "Etc/GMT+14", "posix/UTC", ":UTC",
    ]
)  # fmt: skip
CRON_FIELD = st.sampled_from(
    ["*", "0", "59", "60", "-1", "*/0", "*/61", "1-0", "1-5/2", "?", "L", "MON", "JAN", "¹", "٣",
     "1,2,", ",", "7", "8", "0-7", "SUN-SAT", "*/1000000", "99999999999999999999", "#"]
)  # fmt: skip
SCALAR = st.one_of(
    HOSTILE_TEXT,
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
)
GOOD_NAME = st.sampled_from(["a", "b", "c", "d-1", "e.f"])
NAME = st.one_of(
    GOOD_NAME, GOOD_NAME, GOOD_NAME,
    st.sampled_from(["self", "x" * 101, ".a", "a b", "a\tb"]), HOSTILE_TEXT,
)  # fmt: skip


WHEN = st.sampled_from(
    ["2026-01-01T00:00", "1900-01-01T00:00", "9000-12-31T23:00", "2026-03-29T02:30",
     "2026-10-25T02:30", "2026-01-01T00:00+14:00", "2030-06-30T23:59:59.999999"]
)  # fmt: skip


@st.composite
def cron(draw: st.DrawFn) -> str:
    size = draw(st.sampled_from([5, 5, 6, 6, 0, 1, 7]))
    fields = draw(st.lists(CRON_FIELD, min_size=size, max_size=size))
    return " ".join(fields) if fields else draw(st.sampled_from(["@hourly", "@bogus", "@", ""]))


@st.composite
def schedule(draw: st.DrawFn) -> object:
    form = draw(st.sampled_from(["every", "cron", "at", "manual", "junk"]))
    if form == "manual":
        return "manual"
    if form == "junk":
        return draw(SCALAR)
    found: dict[str, object] = {}
    if form == "cron":
        found["cron"] = draw(cron())
    elif form == "at":
        found["at"] = draw(HOSTILE_TEXT)
    else:
        step = draw(
            st.sampled_from(["1 hour", "5s", "0 days", "-1 minute", "1 fortnight", "1 month"])
        )
        found["every"] = draw(st.one_of(st.just(step), HOSTILE_TEXT))
    for key in ("start", "stop"):
        if draw(st.booleans()):
            found[key] = draw(st.one_of(WHEN, WHEN, HOSTILE_TEXT))
    return found


@st.composite
def job(draw: st.DrawFn) -> dict[str, object]:
    command = st.sampled_from([["/bin/true"], ["/bin/true"], "true", [], ""])
    found: dict[str, object] = {"command": draw(command)}
    if draw(st.booleans()):
        found["schedule"] = draw(schedule())
    else:
        found["after"] = draw(
            st.one_of(NAME, st.fixed_dictionaries({"job": NAME, "delay": SCALAR}))
        )
    for key in ("timeout", "retries", "retry_delay", "priority", "grace", "wait_timeout",
                "timezone", "overlap", "misfire", "enabled", "description"):  # fmt: skip
        if draw(st.integers(0, 8)) == 0:
            found[key] = draw(SCALAR)
    if draw(st.integers(0, 5)) == 0:
        found["requires"] = draw(st.lists(NAME, max_size=3))
    return found


@st.composite
def configuration(draw: st.DrawFn) -> str:
    settings_: dict[str, object] = {"state_dir": "state"}
    for key in ("timezone", "max_workers", "shutdown_grace", "auto_reload"):
        if draw(st.booleans()):
            settings_[key] = draw(SCALAR)
    jobs = draw(st.dictionaries(NAME, job(), max_size=4))
    document: dict[str, object] = {"settings": settings_, "jobs": jobs}
    if draw(st.integers(0, 6)) == 0:
        depth = draw(st.integers(10, 3000))
        return json.dumps(document)[:-1] + ', "x-deep": ' + "[" * depth + "]" * depth + "}"
    if draw(st.integers(0, 6)) == 0:
        document["groups"] = {draw(NAME): {"jobs": draw(st.lists(NAME, max_size=3))}}
    return json.dumps(document)  # JSON is YAML: every odd value is written exactly


def _examples(texts: list[str]) -> Callable[[Callable[[str], None]], Callable[[str], None]]:
    """Hypothesis `@example` for each of `texts`."""

    def decorate(test: Callable[[str], None]) -> Callable[[str], None]:
        for text in reversed(texts):
            test = example(text)(test)
        return test

    return decorate


def _run(folder: Path, *argv: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        status = main([*argv, "-c", str(folder / "tuisched.yaml")])
    return status, err.getvalue()


def _start_and_stop(path: Path) -> None:
    try:
        config = load_config(path)
    except ConfigError:
        return

    async def scenario() -> None:
        runtime = Runtime(config, kill_grace=0.1)
        await runtime.start()
        await runtime.stop(grace=0)

    asyncio.run(scenario())


def _one_job(job: dict[str, object], settings_: dict[str, object] | None = None) -> str:
    """A configuration with `job` as job `a` (for the reproductions below)."""
    return json.dumps({"settings": {"state_dir": "state", **(settings_ or {})}, "jobs": {"a": job}})


CRON = {"command": ["/bin/true"]}
REPRODUCTIONS = [
    _one_job({**CRON, "schedule": {"cron": "\u00b9 * * * *"}}),  # ¹: isdigit, but int() refuses
    _one_job({**CRON, "schedule": {"cron": "\u0663 * * * *"}}),  # ٣: int() reads it as 3
    _one_job({**CRON, "schedule": {"cron": "? * * * *"}}),  # ? outside the day fields
    _one_job({**CRON, "schedule": {"cron": "0 0 ? * 1"}}),
    _one_job({**CRON, "schedule": "manual", "timeout": "1e30 s"}),
    _one_job({**CRON, "schedule": {"every": "1 hour", "start": "0001-01-01T00:00"}}),
    _one_job({**CRON, "schedule": {"cron": "0 0 1 1 *", "start": "0001-01-01T00:00"}}),
    _one_job({**CRON, "schedule": {"every": "1 hour", "start": "9999-12-31T23:00"}}),
    _one_job({**CRON, "schedule": "manual"}, {"timezone": "A" * 300}),
    _one_job({**CRON, "schedule": {"every": "5s", "start": "2026-01-01T00:00"}}),
    _one_job({**CRON, "schedule": "manual", "retries": 10**20, "priority": -(10**20)}),
    _one_job({**CRON, "schedule": "manual"}, {"max_workers": 10**20}),
    json.dumps({"settings": {"state_dir": "state"}, "jobs": {"a\nb": CRON, "c\u0000d": CRON}}),
    '{"jobs": ' + "[" * 5000 + "]" * 5000 + "}",
]


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,
)
@given(configuration())
@_examples(REPRODUCTIONS)
def test_a_hostile_configuration_gets_an_answer_not_a_traceback(text: str) -> None:
    with TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "tuisched.yaml").write_text(text)
        status, err = _run(folder, "validate")
        assert status in (0, 1), err
        if status == 0:
            status, err = _run(folder, "jobs", "--json")
            assert status == 0, err
            for name in json.loads(_capture_jobs(folder)):
                status, err = _run(folder, "next", name["name"], "-n", "3")
                assert status in (0, 1), err
            _start_and_stop(folder / "tuisched.yaml")
        else:
            assert err == "" or all(line.strip() for line in err.splitlines())


def _capture_jobs(folder: Path) -> str:
    out = io.StringIO()
    with redirect_stdout(out), redirect_stderr(io.StringIO()):
        main(["jobs", "--json", "-c", str(folder / "tuisched.yaml")])
    return out.getvalue()
