"""Processes that leave their run's process group (`setsid`, `env -i`) are still found:
stopped with the run, reported when they outlive it, stopped at shutdown, and stopped
by the next start after a `kill -9` of the scheduler."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tuisched.domain.events import RunFinished, RunStarted

from ..runtime_fixtures import running, write_config
from ..test_headless import _alive, _gone_within
from ..test_python_forks import _keeper_of

REPO = Path(__file__).resolve().parents[2]

# Two escapes: a new session, and a new session with an empty environment (so that
# TUISCHED_RUN_ID cannot find it either). Each pid is written to `pids`.
ESCAPE = "setsid sleep 300 & echo $! >> {pids}; env -i setsid sleep 301 & echo $! >> {pids}; "


def _pids(path: Path, count: int = 2, within: float = 10) -> list[int]:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if path.exists():
            found = [int(line) for line in path.read_text().split()]
            if len(found) >= count:
                return found
        time.sleep(0.02)  # the job writes them; no event to await
    raise AssertionError(f"{path} never held {count} pids")


async def _until(condition: object, within: float = 10) -> None:
    async with asyncio.timeout(within):
        while not condition():  # type: ignore[operator]  # noqa: ASYNC110
            await asyncio.sleep(0.05)


async def test_escaped_processes_are_stopped_with_their_run(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    command = ESCAPE.format(pids=pids) + "sleep 300"
    path = write_config(tmp_path, f"escape: {{command: '{command}', schedule: manual}}")
    async with running(path) as (runtime, events):
        runtime.actions.run_now("escape")
        (started,) = await events.wait_for(RunStarted)
        escaped = await asyncio.to_thread(_pids, pids)
        assert all(_alive(pid) for pid in escaped)
        assert started.run.pid is not None
        root_session = os.getsid(started.run.pid)
        # Each is in a session of its own once `setsid` has run (just after the pid is known).
        await _until(lambda: all(os.getsid(pid) != root_session for pid in escaped))
        record = tmp_path / "state" / "processes.json"
        await _until(  # a scan finds them under the run and records them
            lambda: record.exists() and all(str(pid) in record.read_text() for pid in escaped)
        )
        await runtime.actions.stop_run(started.run.run_id)
        await events.wait_for(RunFinished)
        for pid in escaped:
            await asyncio.to_thread(_gone_within, pid, 5)


async def test_processes_a_run_leaves_running_are_stopped_at_shutdown(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    pids = tmp_path / "pids"
    command = ESCAPE.format(pids=pids)  # and ends at once: no scan sees what it left
    path = write_config(tmp_path, f"escape: {{command: '{command}', schedule: manual}}")
    async with running(path) as (runtime, events):
        runtime.actions.run_now("escape")
        (finished,) = await events.wait_for(RunFinished)
        escaped = await asyncio.to_thread(_pids, pids)
        assert all(_alive(pid) for pid in escaped)  # they outlived the run...
    for pid in escaped:  # ...and the stop stopped them
        await asyncio.to_thread(_gone_within, pid, 5)
    assert "stopping 2 processes that ended runs left running" in caplog.text
    del finished


@pytest.mark.parametrize("keeper", ["alive", "killed too"])
def test_what_the_runs_left_is_stopped_after_a_kill_9_even_without_environment(
    tmp_path: Path, keeper: str
) -> None:
    """The keeper stops what the scheduler's record names when the scheduler dies; killed
    too (the OOM killer, say), the next start does."""
    pids = tmp_path / "pids"
    command = ESCAPE.format(pids=pids) + "sleep 300"
    # Far enough ahead that a slow start (parallel workers beside a CPU hog) still finds the slot.
    soon = (datetime.now(UTC) + timedelta(seconds=12)).strftime("%Y-%m-%dT%H:%M:%S")
    path = write_config(tmp_path, f"escape: {{command: '{command}', schedule: {{at: '{soon}'}}}}")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    record = tmp_path / "state" / "processes.json"

    def scheduler() -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "tuisched", "--no-ui", "-c", str(path)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip

    first = scheduler()
    try:
        escaped = _pids(pids, within=20)
        deadline = time.monotonic() + 10
        while not (record.exists() and all(str(pid) in record.read_text() for pid in escaped)):
            assert time.monotonic() < deadline, "the processes were never recorded"
            time.sleep(0.05)  # the scheduler scans once a second
        if keeper == "killed too":
            os.kill(_keeper_of(first.pid), signal.SIGKILL)
    finally:
        first.kill()  # kill -9: the scheduler cleans nothing up
        first.communicate(timeout=10)
    if keeper == "alive":
        for pid in escaped:
            _gone_within(pid, 15)
        return
    assert all(_alive(pid) for pid in escaped)  # orphans now, adopted by init
    second = scheduler()
    try:
        for pid in escaped:
            _gone_within(pid, 15)
    finally:
        second.send_signal(signal.SIGTERM)
        _, err = second.communicate(timeout=15)
    assert re.search(
        r"(leftover )?process(es)? (left by the runs of a dead scheduler )?killed", err
    ), err


async def test_processes_a_run_leaves_running_are_reported_when_it_ends(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    pids, gate = tmp_path / "pids", tmp_path / "gate"
    command = ESCAPE.format(pids=pids) + f"while [ ! -e {gate} ]; do sleep 0.02; done"
    path = write_config(tmp_path, f"escape: {{command: '{command}', schedule: manual}}")
    record = tmp_path / "state" / "processes.json"
    async with running(path) as (runtime, events):
        run = runtime.actions.run_now("escape")
        escaped = await asyncio.to_thread(_pids, pids)
        await _until(  # seen under the run while it runs
            lambda: record.exists() and all(str(pid) in record.read_text() for pid in escaped)
        )
        gate.touch()  # the run ends; what it started goes on
        await events.wait_for(RunFinished)
        assert f"run {run.run_id} of escape ended and left 2 processes running" in caplog.text
    for pid in escaped:
        await asyncio.to_thread(_gone_within, pid, 5)
