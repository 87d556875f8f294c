"""A reader that goes away early (`tuisched jobs --json | head -1`) ends every command
quietly, with the status a shell gives `cat` then (141), never a traceback."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .runtime_fixtures import REPO, write_config

MANY = "\n".join(
    f"job-{n:03}: {{command: [/bin/true], schedule: {{every: 1 minute, start: 2026-01-01T00:00}}}}"
    for n in range(400)
)
"""Jobs enough that `jobs --json` writes more than a pipe holds (64 KiB)."""


@pytest.fixture(scope="session")
def ran_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder whose configuration's `chatty` ran once, in the foreground, for real: made
    once a session, however the tests are spread and ordered (a `tuisched run` costs a
    second of CPU), and copied by each test."""
    folder = tmp_path_factory.mktemp("ran-once")
    path = write_config(folder, MANY + '\nchatty: {command: "seq 1 100000", schedule: manual}')
    ran = subprocess.run(
        [sys.executable, "-m", "tuisched", "run", "chatty", "-c", str(path)], cwd=REPO,
        capture_output=True, timeout=60, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr  # a run in the history, its output in the files
    return folder


@pytest.fixture
def config(tmp_path: Path, ran_once: Path) -> Path:
    """The configuration, with its history and output: this test's own copy."""
    shutil.copytree(ran_once, tmp_path, dirs_exist_ok=True)
    return tmp_path / "tuisched.yaml"


def _closed_at_once(*argv: str) -> tuple[int, str]:
    """`tuisched ARGV` writing into a pipe whose reader closed it before reading a byte:
    (status, stderr)."""
    with subprocess.Popen(
        [sys.executable, "-m", "tuisched", *argv], cwd=REPO,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    ) as command:  # fmt: skip
        assert command.stdout is not None
        command.stdout.close()
        err = command.stderr.read() if command.stderr else ""
        return command.wait(timeout=60), err


def test_every_command_that_prints_ends_quietly_when_its_reader_goes(config: Path) -> None:
    crontab = str(REPO / "tests" / "data" / "crontabs" / "debian-etc-crontab")
    for argv in (["jobs", "--json"], ["jobs"], ["history"], ["history", "--json"],
                 ["stats", "--json"], ["stats"], ["next", "job-001", "-n", "1000"],
                 ["simulate", "--json"], ["completion", "zsh"], ["logs", "chatty"],
                 ["validate"], ["import-crontab", crontab]):  # fmt: skip
        status, err = _closed_at_once(*argv, "-c", str(config))
        assert status == 141, (argv, err)
        assert "Traceback" not in err, argv
        assert "BrokenPipeError" not in err, argv


def test_head_takes_one_line_and_tuisched_says_nothing(config: Path) -> None:
    for argv in (["jobs", "--json"], ["simulate", "--json"], ["logs", "chatty"]):
        with subprocess.Popen(
            [sys.executable, "-m", "tuisched", *argv, "-c", str(config)], cwd=REPO,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        ) as command, subprocess.Popen(
            ["head", "-1"], stdin=command.stdout, stdout=subprocess.PIPE
        ) as head:  # fmt: skip
            assert command.stdout is not None
            command.stdout.close()  # head holds the only reading end now
            first, _ = head.communicate(timeout=60)
            err = command.stderr.read().decode() if command.stderr else ""
            assert command.wait(timeout=60) == 141, argv
        assert first.count(b"\n") == 1
        said = err.splitlines()  # simulate says what it assumed; nothing else says a word
        assert said == ([] if argv[0] != "simulate" else said[:1]), (argv, err)
        assert "Traceback" not in err


def test_a_foreground_run_whose_reader_goes_runs_to_its_end(config: Path) -> None:
    status, err = _closed_at_once("run", "chatty", "-c", str(config))
    assert status == 0  # the run's own outcome: it was not cut short
    assert err.startswith("chatty#")
    assert err.endswith(": SUCCESS (completed) exit 0: 100000\n")
    assert err.count("\n") == 1
