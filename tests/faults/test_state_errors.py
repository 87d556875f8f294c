"""A state directory or history that cannot be used gives one clear line, never a traceback."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tuisched.domain.errors import StateError
from tuisched.runtime.configfiles import load_config
from tuisched.runtime.runtime import Runtime

from ..runtime_fixtures import write_config
from ..test_cli import run

JOBS = "tick: {command: [/bin/true], schedule: manual}"


def _one_clear_line(err: str) -> str:
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


def test_headless_with_a_state_dir_that_cannot_be_created_exits_73(tmp_path: Path) -> None:
    (tmp_path / "blocker").write_text("a file where a folder should be\n")
    config = write_config(tmp_path, JOBS, settings="state_dir: blocker/state")
    status, _, err = run("--no-ui", "-c", str(config))
    assert status == 73
    line = _one_clear_line(err)
    assert f"not started: cannot use the state directory {tmp_path}/blocker/state" in line
    assert "Not a directory" in line


def test_history_over_a_corrupt_database_says_so_in_one_line(tmp_path: Path) -> None:
    config = write_config(tmp_path, JOBS)
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (state / "history.db").write_bytes(b"this is not a database" * 100)
    for command in (["history"], ["jobs"]):
        status, out, err = run(*command, "-c", str(config))
        assert (status, out) == (1, ""), command
        line = _one_clear_line(err)
        assert line.startswith(f"tuisched: the history database {state}/history.db is damaged")
        assert "file is not a database" in line
        assert "move it away to start an empty history" in line


def test_garbage_in_the_middle_of_the_history_is_named_and_never_written_over(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path, JOBS)
    # A history of a few pages: one run's rows, tables and indexes take more than three.
    assert run("run", "tick", "-c", str(config))[0] == 0
    database = tmp_path / "state" / "history.db"
    data = bytearray(database.read_bytes())
    assert len(data) > 3 * 4096
    data[2 * 4096 : 3 * 4096] = bytes(range(256)) * 16  # the third page is garbage
    database.write_bytes(bytes(data))
    for command in (["--no-ui"], ["run", "tick"]):
        status, _, err = run(*command, "-c", str(config))
        assert status in (1, 73), (command, err)
        line = _one_clear_line(err)
        assert f"the history database {database} is damaged" in line, line
        assert "tuisched will not write to it" in line
        assert ".recover" in line
    assert database.read_bytes() == bytes(data)  # never written over


def test_history_that_is_a_folder_says_so(tmp_path: Path) -> None:
    config = write_config(tmp_path, JOBS)
    (tmp_path / "state" / "history.db").mkdir(parents=True)
    status, _, err = run("history", "-c", str(config))
    assert status == 1
    line = _one_clear_line(err)
    assert line.startswith("tuisched: cannot open ")
    assert line.endswith("history.db: Is a directory")


def test_the_runtime_refuses_a_state_dir_under_a_file_without_leaving_anything(
    tmp_path: Path,
) -> None:
    (tmp_path / "blocker").write_text("")
    config = write_config(tmp_path, JOBS, settings="state_dir: blocker/state")
    runtime = Runtime(load_config(config))
    with pytest.raises(StateError, match="cannot use the state directory"):
        asyncio.run(runtime.start())
