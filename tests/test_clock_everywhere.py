"""Every timer and every reading of the time below the front ends goes through the
injected `Clock` (tuisched/runtime/clock.py): a scan of the source of the domain and
the runtime for the calls that bypass it, with the few exceptions each given a reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import tuisched

ROOT = Path(tuisched.__file__).parent
SCANNED = ("domain", "runtime")
CLOCK = "runtime/clock.py"
"""The one module that reads the system's time and arms the loop's timers."""

OTHER_BRANCH = "moved to the Clock on another branch"
REAL_WAIT = (
    "bounds real work on another thread, process or socket, in real time: a test's clock "
    "advanced by an hour must not cut it short"
)
ALLOWED: dict[tuple[str, str], str] = {
    ("runtime/store/writer.py", "time.sleep()"): (
        "the writer's own thread waits out an outage's pause, which the Clock measures"
    ),
    ("runtime/importcheck.py", "time.monotonic()"): (
        "a deadline on a child's pipe, waited with a blocking select in a thread"
    ),
    ("runtime/execution/keeper.py", "time.monotonic()"): (
        "the fence line carries an instant of CLOCK_MONOTONIC, which the keeper process "
        "compares with its own: it must be the system's"
    ),
    ("runtime/execution/pyjob.py", "time.sleep()"): (
        "runs in the job's own process, apart from the runtime and its loop"
    ),
    ("runtime/mail.py", "asyncio.wait_for()"): f"an SMTP exchange on the mail lane: {REAL_WAIT}",
    ("runtime/engine/running.py", "asyncio.timeout()"): (
        f"a run's row landed by the history's writer thread: {REAL_WAIT}"
    ),
    ("runtime/control/server.py", "asyncio.wait(timeout=)"): (
        f"the keepalive of a client's event stream: {REAL_WAIT}"
    ),
    (
        "runtime/cluster/database.py",
        "asyncio.timeout()",
    ): f"a connection to PostgreSQL: {REAL_WAIT}",
    ("runtime/execution/base.py", "asyncio.wait(timeout=)"): (
        f"a pipe's end after its process exited: {REAL_WAIT}"
    ),
    ("runtime/execution/keeper.py", "asyncio.wait(timeout=)"): (
        f"the keeper process's exit: {REAL_WAIT}"
    ),
}
"""(module, call) -> why it may bypass the Clock."""

_TIME_MODULE = {"monotonic", "monotonic_ns", "time", "time_ns", "sleep", "perf_counter"}
_DATETIME_NOW = {"now", "utcnow", "today"}


def _name(node: ast.expr) -> str:
    """`a.b.c` for an attribute chain, the name for a name, '' for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _name(node.value)
        return f"{inner}.{node.attr}" if inner else ""
    return ""


def _is_zero(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value == 0 and node.value is not False


def _looks_like_a_loop(node: ast.expr) -> bool:
    """`loop`, `self._loop`, `asyncio.get_running_loop()` and the like."""
    if isinstance(node, ast.Call):
        return _name(node.func).rsplit(".", 1)[-1] in ("get_running_loop", "get_event_loop")
    return "loop" in _name(node).rsplit(".", 1)[-1].lower()


def _bypass(call: ast.Call) -> str | None:
    """The Clock-bypassing call `call` is, as the allow-list names it, or None."""
    func = call.func
    if not isinstance(func, ast.Attribute):
        return None
    owner = _name(func.value)
    if owner == "asyncio" and func.attr == "sleep":
        zero = len(call.args) == 1 and _is_zero(call.args[0]) and not call.keywords
        return None if zero else "asyncio.sleep()"
    if owner == "time" and func.attr in _TIME_MODULE:
        return f"time.{func.attr}()"
    if owner.rsplit(".", 1)[-1] in ("datetime", "date") and func.attr in _DATETIME_NOW:
        return f"datetime.{func.attr}()"
    if func.attr == "time" and not call.args and _looks_like_a_loop(func.value):
        return "loop.time()"
    if func.attr in ("call_later", "call_at") and _looks_like_a_loop(func.value):
        return f"loop.{func.attr}()"
    if owner == "asyncio" and func.attr in ("timeout", "timeout_at", "wait_for"):
        return f"asyncio.{func.attr}()"
    if (
        owner == "asyncio"
        and func.attr == "wait"
        and any(keyword.arg == "timeout" for keyword in call.keywords)
    ):
        return "asyncio.wait(timeout=)"
    return None


def violations(source: str) -> list[tuple[int, str]]:
    """Each call in `source` that reads the time or arms a timer without the Clock:
    (line, call), calls made through names imported from `time` or `asyncio` too."""
    found: list[tuple[int, str]] = []
    imported: dict[str, str] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module in ("time", "asyncio"):
            for alias in node.names:
                if node.module == "time" and alias.name in _TIME_MODULE:
                    imported[alias.asname or alias.name] = f"time.{alias.name}()"
                if node.module == "asyncio" and alias.name == "sleep":
                    imported[alias.asname or alias.name] = "asyncio.sleep()"
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        what = _bypass(node)
        if what is None and isinstance(node.func, ast.Name) and node.func.id in imported:
            zero = len(node.args) == 1 and _is_zero(node.args[0])
            what = None if zero and "sleep" in node.func.id else imported[node.func.id]
        if what is not None:
            found.append((node.lineno, what))
    return found


def _modules() -> list[Path]:
    return sorted(path for folder in SCANNED for path in (ROOT / folder).rglob("*.py"))


def _scan() -> dict[tuple[str, str], list[int]]:
    """(module, call) -> the lines where the call bypasses the Clock, outside clock.py."""
    found: dict[tuple[str, str], list[int]] = {}
    for path in _modules():
        module = path.relative_to(ROOT).as_posix()
        if module == CLOCK:
            continue
        for line, what in violations(path.read_text(encoding="utf-8")):
            found.setdefault((module, what), []).append(line)
    return found


def test_nothing_below_the_front_ends_reads_the_time_or_arms_a_timer_but_the_clock() -> None:
    found = _scan()
    bypassing = {
        f"tuisched/{module}:{line}: {what}"
        for (module, what), lines in found.items()
        if (module, what) not in ALLOWED
        for line in lines
    }
    assert not bypassing, (
        "use the injected Clock (tuisched/runtime/clock.py): now, monotonic, call_later, "
        f"sleep, wait, within; or allow it in {__name__}.ALLOWED with a reason: "
        f"{sorted(bypassing)}"
    )


def test_every_exception_is_still_needed_and_has_a_reason() -> None:
    found = _scan()
    stale = [entry for entry in ALLOWED if entry not in found]
    assert not stale, f"allowed but no longer there (remove them): {stale}"
    assert all(reason.strip() for reason in ALLOWED.values())


@pytest.mark.parametrize(
    ("snippet", "expected"),
    [
        ("import asyncio\nasync def f():\n    await asyncio.sleep(1)\n", "asyncio.sleep()"),
        ("import asyncio\nasync def f(x):\n    await asyncio.sleep(x)\n", "asyncio.sleep()"),
        ("import time\nt = time.monotonic()\n", "time.monotonic()"),
        ("import time\nt = time.time()\n", "time.time()"),
        ("import time\ntime.sleep(0.5)\n", "time.sleep()"),
        ("from time import monotonic\nt = monotonic()\n", "time.monotonic()"),
        ("from datetime import UTC, datetime\nd = datetime.now(UTC)\n", "datetime.now()"),
        ("import datetime\nd = datetime.datetime.now(datetime.UTC)\n", "datetime.now()"),
        ("import asyncio\nt = asyncio.get_running_loop().time()\n", "loop.time()"),
        ("def f(loop):\n    return loop.time()\n", "loop.time()"),
        ("class A:\n    def f(self):\n        return self._loop.time()\n", "loop.time()"),
        ("def f(loop, g):\n    loop.call_later(1, g)\n", "loop.call_later()"),
        (
            "import asyncio\nasync def f():\n    async with asyncio.timeout(1):\n        pass\n",
            "asyncio.timeout()",
        ),
        (
            "import asyncio\nasync def f(g):\n    await asyncio.wait_for(g(), 1)\n",
            "asyncio.wait_for()",
        ),
        (
            "import asyncio\nasync def f(g):\n    await asyncio.wait({g}, timeout=1)\n",
            "asyncio.wait(timeout=)",
        ),
    ],
)
def test_the_scan_finds_each_call_that_bypasses_the_clock(snippet: str, expected: str) -> None:
    assert [what for _, what in violations(snippet)] == [expected]


@pytest.mark.parametrize(
    "snippet",
    [
        "import asyncio\nasync def f():\n    await asyncio.sleep(0)\n",  # a turn of the loop
        "async def f(clock):\n    await clock.sleep(1)\n    return clock.monotonic()\n",
        "def f(clock):\n    return clock.now().time()\n",  # the time of day of an instant
        "import time\nstamp = time.strftime('%H')\n",
    ],
)
def test_the_scan_lets_the_clock_and_a_turn_of_the_loop_be(snippet: str) -> None:
    assert violations(snippet) == []
