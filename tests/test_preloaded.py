"""The preloaded interpreter the fixtures fork schedulers from gives its children what
an exec would: their own environment, folder, streams, exit status and signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from .preloaded import ForkedProcess, spawn
from .runtime_fixtures import write_config

JOB = "tick: {command: [/bin/true], schedule: manual}"


def test_a_child_has_the_environment_folder_and_streams_it_was_given(tmp_path: Path) -> None:
    config = write_config(tmp_path, JOB)
    env = {**os.environ, "TUISCHED_CONFIG": config.name}  # found from the folder given
    child = spawn(["validate"], env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                  stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert isinstance(child, ForkedProcess)
    out, err = child.communicate(timeout=30)
    assert (child.returncode, out, err) == (0, "OK: 1 job, 0 groups\n", "")

    missing = spawn(["validate"], env={**env, "TUISCHED_CONFIG": "nowhere.yaml"},
                    cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
    out, _ = missing.communicate(timeout=30)
    assert missing.returncode != 0
    assert b"nowhere.yaml" in out


def test_a_child_ends_as_a_signal_ends_it_and_its_status_is_reported(tmp_path: Path) -> None:
    config = write_config(tmp_path, JOB)
    (tmp_path / "k").mkdir()
    children = [
        spawn(["--no-ui", "-c", str(path)], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
              text=True)
        for path in (config, write_config(tmp_path / "k", JOB))
    ]  # fmt: skip
    stopped, killed = children
    try:
        for child in children:
            assert isinstance(child, ForkedProcess)
            assert child.stderr is not None
            while "scheduler started" not in (line := child.stderr.readline()):
                assert line, "the scheduler ended before it started"
            assert child.poll() is None
        stopped.send_signal(signal.SIGTERM)
        killed.kill()
        assert "scheduler stopped" in stopped.communicate(timeout=30)[1]
        assert stopped.returncode == 0
        killed.communicate(timeout=30)
        assert killed.returncode == -signal.SIGKILL
        killed.kill()  # a child already reaped is not signalled again
    finally:
        for child in children:  # none left running when an assertion failed
            if child.poll() is None:
                child.kill()
                child.wait(10)


def test_what_an_interpreter_reads_at_its_start_is_exec_d(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    child = spawn(["--version"], env=env, stdout=subprocess.PIPE, text=True)
    assert isinstance(child, subprocess.Popen)
    assert child.args == [sys.executable, "-m", "tuisched", "--version"]
    out, _ = child.communicate(timeout=30)
    assert out.startswith("tuisched ")
