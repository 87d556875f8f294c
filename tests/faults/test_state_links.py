"""Links planted in the state directory are refused; its files are narrowed to 0600."""

from __future__ import annotations

import asyncio
import logging
import stat
from pathlib import Path

import pytest

from tuisched.domain.errors import StateError
from tuisched.domain.events import RunFinished
from tuisched.domain.runs import RunState
from tuisched.runtime.configfiles import load_config
from tuisched.runtime.runtime import Runtime

from ..runtime_fixtures import running, write_config

JOBS = "talk: {command: [echo, hello], schedule: manual}"


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A file an attacker would like the scheduler to write to."""
    path = tmp_path / "victim.txt"
    path.write_text("precious\n")
    path.chmod(0o644)
    return path


def _state(tmp_path: Path) -> Path:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    return state


@pytest.mark.parametrize("name", ["audit.log", "tuisched.lock", "history.db"])
def test_a_linked_file_is_refused_and_the_target_untouched(
    tmp_path: Path, victim: Path, name: str
) -> None:
    config = write_config(tmp_path, JOBS)
    (_state(tmp_path) / name).symlink_to(victim)
    runtime = Runtime(load_config(config))
    with pytest.raises(StateError, match=f"{name} is a symbolic link"):
        asyncio.run(runtime.start())
    assert victim.read_text() == "precious\n"
    assert stat.S_IMODE(victim.stat().st_mode) == 0o644


async def test_a_linked_actions_log_is_not_written_through(
    tmp_path: Path, victim: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = write_config(tmp_path, JOBS)
    (_state(tmp_path) / "actions.log").symlink_to(victim)
    async with running(config) as (runtime, events):
        for count in (1, 2, 3):  # every action: done, and said once, with no traceback
            runtime.actions.run_now("talk")
            await events.wait_for(RunFinished, count=count)
    assert victim.read_text() == "precious\n"
    assert caplog.text.count("actions.log is a symbolic link") == 1, caplog.text
    assert "Traceback" not in caplog.text


async def test_a_linked_output_folder_keeps_the_output_in_memory(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = write_config(tmp_path, JOBS)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (_state(tmp_path) / "output").mkdir(mode=0o700)
    (tmp_path / "state" / "output" / "talk").symlink_to(elsewhere)
    caplog.set_level(logging.WARNING)
    async with running(config) as (runtime, events):
        runtime.actions.run_now("talk")
        (finished,) = await events.wait_for(RunFinished)
    assert finished.run.state is RunState.SUCCESS  # the run itself is not disturbed
    assert finished.run.output_tail == "hello"
    assert list(elsewhere.iterdir()) == []
    assert "talk is a symbolic link" in caplog.text


async def test_a_linked_output_root_is_not_written_through(tmp_path: Path) -> None:
    config = write_config(tmp_path, JOBS)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (_state(tmp_path) / "output").symlink_to(elsewhere)  # the whole output folder
    async with running(config) as (runtime, events):
        runtime.actions.run_now("talk")
        (finished,) = await events.wait_for(RunFinished)
    assert finished.run.state is RunState.SUCCESS
    assert finished.run.output_tail == "hello"
    assert list(elsewhere.iterdir()) == []  # (said once an episode: an earlier test may have)


async def test_existing_state_files_are_narrowed_to_the_owner(tmp_path: Path) -> None:
    config = write_config(tmp_path, JOBS)
    state = _state(tmp_path)
    for name in ("actions.log", "audit.log"):
        (state / name).write_text("")
        (state / name).chmod(0o644)
    async with running(config) as (runtime, events):
        runtime.actions.run_now("talk")
        await events.wait_for(RunFinished)
    for name in ("actions.log", "audit.log", "history.db", "tuisched.lock"):
        assert stat.S_IMODE((state / name).stat().st_mode) == 0o600, name
    assert stat.S_IMODE((state / "output" / "talk").stat().st_mode) == 0o700
