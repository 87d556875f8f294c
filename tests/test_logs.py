"""`tuisched logs` answers only for the job it was given, and says why a run has no output:
with a scheduler running (through its socket) and without one (from the files it left)."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .runtime_fixtures import REPO, listening, write_config
from .test_cli import run

JOBS = """
hello: {command: "echo hello", schedule: manual}
tick: {command: [/bin/true], schedule: {every: 1h, start: 2026-01-01T00:00}}
broken: {command: [/nonexistent/prog], schedule: manual}
"""


@pytest.fixture(scope="session")
def ran_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder whose configuration's `hello` ran once, in the foreground, for real: made
    once a session, however the tests are spread and ordered (a `tuisched run` costs a
    second of CPU), and copied by each test."""
    folder = tmp_path_factory.mktemp("ran-once")
    path = write_config(folder, JOBS)
    assert run("run", "hello", "-c", str(path))[0] == 0
    return folder


@pytest.fixture(params=["running", "stopped"])
def config(request: pytest.FixtureRequest, tmp_path: Path, ran_once: Path) -> Iterator[Path]:
    """A configuration whose `hello` ran once, with its scheduler running or not; its
    folder (the file, the history and the output) is this test's own copy."""
    shutil.copytree(ran_once, tmp_path, dirs_exist_ok=True)
    path = tmp_path / "tuisched.yaml"
    with listening(path) if request.param == "running" else contextlib.nullcontext():
        yield path


def _run_ids(config: Path, job: str) -> list[str]:
    runs = json.loads(run("history", job, "--json", "-c", str(config))[1])
    return [each["run_id"] for each in runs]


def test_a_run_of_another_job_is_refused_naming_its_job(config: Path) -> None:
    (hello,) = _run_ids(config, "hello")
    status, out, err = run("logs", "tick", "--run", hello, "-c", str(config))
    assert (status, out) == (1, "")  # nothing of hello's output under tick's name
    assert err == (
        f"tuisched: run {hello} is a run of job 'hello', not of 'tick' "
        f"(tuisched logs hello --run {hello})\n"
    )
    assert run("logs", "hello", "--run", hello, "-c", str(config)) == (0, "hello\n", "")


def test_an_unknown_job_is_no_job_with_the_nearest_name(config: Path) -> None:
    status, _, err = run("logs", "nosuch", "-c", str(config))
    assert (status, err) == (1, f"tuisched: no job named 'nosuch' in {config}\n")
    status, _, err = run("logs", "helo", "-c", str(config))
    hint = "; did you mean 'hello'?"
    assert (status, err) == (1, f"tuisched: no job named 'helo' in {config}{hint}\n")
    status, _, err = run("logs", "tick", "-c", str(config))  # a job indeed, without runs
    assert (status, err) == (1, "tuisched: job 'tick' has no run yet\n")


def test_a_run_that_could_not_launch_says_why(config: Path) -> None:
    if (config.parent / "state" / "control.sock").exists():  # the running scheduler runs it
        assert run("trigger", "broken", "--wait", "-c", str(config))[0] == 127
    else:
        assert run("run", "broken", "-c", str(config))[0] == 127
    (broken,) = _run_ids(config, "broken")
    said = (
        f"tuisched: run broken#{broken} did not start: program not found: /nonexistent/prog "
        "(NOT_STARTED, launch_failed)\n"
    )
    assert run("logs", "broken", "-c", str(config)) == (1, "", said)
    assert run("logs", "broken", "--run", broken, "-c", str(config)) == (1, "", said)


def test_a_queued_run_has_not_started_yet_and_follow_waits_for_it(tmp_path: Path) -> None:
    config = write_config(tmp_path, JOBS + 'slow: {command: "sleep 30", schedule: manual}',
                          settings="max_workers: 1")  # fmt: skip
    with listening(config):
        slow = run("trigger", "slow", "-c", str(config))[1].strip()
        deadline = time.monotonic() + 20
        while json.loads(run("status", "--json", "-c", str(config))[1])["running"] != 1:
            assert time.monotonic() < deadline, "slow never ran"
            time.sleep(0.1)  # the run starts in another process
        queued = run("trigger", "hello", "-c", str(config))[1].strip()  # behind slow
        said = f"tuisched: run hello#{queued} has not started yet (QUEUED)\n"
        assert run("logs", "hello", "--run", queued, "-c", str(config)) == (1, "", said)
        with subprocess.Popen(
            [sys.executable, "-m", "tuisched", "logs", "hello", "--run", queued, "-f",
             "-c", str(config)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True,
        ) as follower:  # fmt: skip
            assert run("stop", slow, "-c", str(config))[0] == 0  # hello gets the worker
            out, err = follower.communicate(timeout=30)
        assert (follower.returncode, out, err) == (0, "hello\n", "")
