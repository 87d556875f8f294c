"""Bad input from the command line: one clear line and an exit status, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ..runtime_fixtures import write_config

REPO = Path(__file__).resolve().parents[2]


def tuisched(*argv: str, cwd: Path) -> tuple[int, str, str]:
    done = subprocess.run(
        [sys.executable, "-m", "tuisched", *argv],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=30,
        check=False,
        env={**os.environ, "PYTHONPATH": str(REPO), "TUISCHED_CONFIG": ""},
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize("command", [[], ["--no-ui"], ["jobs"], ["run", "x"]])
def test_no_configuration_says_how_to_name_or_make_one(tmp_path: Path, command: list[str]) -> None:
    status, _, err = tuisched(*command, cwd=tmp_path)
    assert status == 78
    assert f"{tmp_path}/tuisched.yaml:1: cannot read the file: No such file or directory" in err
    assert "name a configuration with -c PATH or $TUISCHED_CONFIG, or create one" in err


def test_a_folder_a_fifo_or_a_device_is_refused_without_reading(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo.yaml")  # reading it would block forever
    for given, reason in (
        (tmp_path, "Is a directory; name the YAML file itself, not its folder"),
        (tmp_path / "fifo.yaml", "not a regular file (a pipe or a device?)"),
        (Path("/dev/zero"), "not a regular file (a pipe or a device?)"),
    ):
        status, out, _ = tuisched("validate", "-c", str(given), cwd=tmp_path)
        assert (status, out) == (1, f"{given}:1: cannot read the file: {reason}\n")
        status, _, err = tuisched("--no-ui", "-c", str(given), cwd=tmp_path)
        assert status == 78
        assert reason in err


def test_text_that_is_not_utf8_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "tuisched.yaml"
    path.write_bytes(b"jobs:\n  a: {command: [\xff], schedule: manual}\n")
    status, out, _ = tuisched("validate", "-c", str(path), cwd=tmp_path)
    assert (status, out) == (1, f"{path}:2: the file is not valid UTF-8 here\n")


def test_control_characters_in_a_name_stay_on_one_line(tmp_path: Path) -> None:
    path = write_config(tmp_path, '"a\\nb": {command: [x], schedule: manual}')
    status, out, _ = tuisched("validate", "-c", str(path), cwd=tmp_path)
    assert status == 1
    assert out.count("\n") == 1
    assert "job 'a\\nb': bad job name 'a\\nb'" in out


def test_a_bad_now_is_a_usage_error(tmp_path: Path) -> None:
    path = write_config(
        tmp_path, "a: {command: [x], schedule: {every: 5s, start: 2026-01-01T00:00}}"
    )
    status, _, err = tuisched("next", "a", "--now", "soon", "-c", str(path), cwd=tmp_path)
    assert status == 2
    assert "--now: bad date-time 'soon'" in err
    status, out, _ = tuisched("next", "a", "-n", "2", "--now", "2026-01-01T00:00:07", "-c",
                              str(path), cwd=tmp_path)  # fmt: skip
    assert (status, out) == (0, "2026-01-01T00:00:10+00:00\n2026-01-01T00:00:15+00:00\n")
