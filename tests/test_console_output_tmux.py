"""The output viewer in the real `tuisched` in tmux at 80x24, over a 200,000-line log:
every key answers within a few seconds (bounded waits on the screen, no fixed sleeps)."""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import REPO
from .runtime_fixtures import write_config
from .test_console_tmux import Tmux

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

ANSWER_SECONDS = 5
"""How long any key may take to show its effect."""
BIG = r"""
big:
  command: >-
    seq 1 200000 | sed 's/^/line /'; echo 'NEEDLE one';
    seq 1 50 | sed 's/^/middle /'; echo 'NEEDLE two';
    seq 1 100 | sed 's/^/after /'; sleep 60
  schedule: manual
"""


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    server = Tmux()
    yield server
    server.close()


def _answer(tmux: Tmux, key: str, then: str) -> str:
    """Send `key`; the screen must show `then` within `ANSWER_SECONDS`."""
    tmux("send-keys", "-t", "t", key)
    return tmux.wait_for(then, within=ANSWER_SECONDS)


def _wait_until(condition: object, within: float) -> None:
    deadline = time.monotonic() + within
    while not condition() and time.monotonic() < deadline:  # type: ignore[operator]
        time.sleep(0.1)  # polling a file another process writes; bounded by `within`


def test_a_200000_line_log_searched_wrapped_and_followed_in_tmux(
    tmp_path: Path, tmux: Tmux
) -> None:
    config = write_config(tmp_path, BIG)
    marker = tmp_path / "pager-saw"
    pager = tmp_path / "pager.sh"  # a pager that notes the file it was given
    # Written whole, then renamed: the file is never seen half-written.
    pager.write_text(f'#!/bin/sh\necho "$1" > "{marker}.part" && mv "{marker}.part" "{marker}"\n')
    pager.chmod(0o755)
    command = f"PAGER={pager} {sys.executable} -m tuisched -c {config}; echo EXIT=$?; sleep 30"
    tmux("new-session", "-d", "-s", "t", "-x", "80", "-y", "24", "-c", str(REPO), command)
    tmux.wait_for("1 Jobs")
    _answer(tmux, "r", "Run big now?")
    tmux("send-keys", "-t", "t", "y")
    tmux.wait_for("after 100")  # the running pane's last output line: all written
    screen = _answer(tmux, "l", "follow on")
    assert "running" in screen
    screen = tmux.wait_for("after 100", within=ANSWER_SECONDS)  # followed to its end
    assert all(len(line) <= 80 for line in screen.splitlines())
    _answer(tmux, "/", "search:")
    tmux("send-keys", "-t", "t", "NEEDLE")
    screen = _answer(tmux, "Enter", "NEEDLE one")  # past the end, then from the top
    assert "wrapped" in screen
    assert "follow off" in screen  # a search stops following
    screen = _answer(tmux, "n", "NEEDLE two")
    assert "NEEDLE one" not in screen
    screen = _answer(tmux, "N", "NEEDLE one")
    assert "NEEDLE two" not in screen
    _answer(tmux, "w", "wrap on")
    _answer(tmux, "w", "wrap off")
    screen = _answer(tmux, "f", "follow on")
    tmux.wait_for("after 100", within=ANSWER_SECONDS)
    _answer(tmux, "f", "follow off")
    _answer(tmux, "g", "line 1 0%")
    _answer(tmux, "G", "after 100")
    tmux("send-keys", "-t", "t", "o")  # the pager has the terminal, then gives it back
    _wait_until(marker.exists, ANSWER_SECONDS)
    assert marker.read_text().strip().endswith(".log")
    tmux.wait_for("follow off", within=ANSWER_SECONDS)
    tmux("send-keys", "-t", "t", "Escape")
    tmux.wait_for("1 Jobs", within=ANSWER_SECONDS)
    _answer(tmux, "q", "Leave the console")
    _answer(tmux, "s", "in progress")  # a run in progress: wait for it, or stop it
    _answer(tmux, "s", "EXIT=0")
