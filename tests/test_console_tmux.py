"""The real `tuisched` command in tmux at 80x24: keys in, screen out, as a person would."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import REPO
from .runtime_fixtures import write_config

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


MARK = "TUISCHED_TEST_TMUX"
"""In the environment of a test's tmux server, and so of everything its sessions start."""


class Tmux:
    """One tmux server of its own (`-L`), one 80x24 window."""

    def __init__(self) -> None:
        self.socket = f"tuisched-test-{uuid.uuid4().hex[:8]}"

    def __call__(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.socket, *args],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
            env={**os.environ, MARK: self.socket},  # the server keeps the environment it began with
        )
        return done.stdout

    def close(self) -> None:
        """Kill the server, and what its sessions left running: a console whose terminal
        goes becomes a headless scheduler (as when an SSH link drops), which would run on
        beside the rest of the suite."""
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, check=False)
        mark = f"{MARK}={self.socket}".encode()
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit() or int(proc.name) == os.getpid():
                continue
            try:
                started_here = mark in (proc / "environ").read_bytes().split(b"\0")
            except OSError:  # gone, or not ours
                continue
            if started_here:
                with contextlib.suppress(OSError):
                    os.kill(int(proc.name), signal.SIGKILL)

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", "t")

    def press(self, key: str, *, then: str, also: str | None = None) -> str:
        """Send `key` to the window, then wait for the screen to show `then` (or `also`)."""
        self("send-keys", "-t", "t", key)
        return self.wait_for(then, *([also] if also else []))

    def wait_for(self, *texts: str, within: float = 20) -> str:
        """The screen once it shows one of `texts` (polled; the test fails after `within`
        s)."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            screen = self.screen()
            if any(text in screen for text in texts):
                return screen
            time.sleep(0.1)  # polling a screen we do not own; bounded by `within`
        said = " or ".join(map(repr, texts))
        raise AssertionError(f"{said} never showed; the screen was:\n{self.screen()}")


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    server = Tmux()
    yield server
    server.close()


def test_the_console_in_tmux_runs_a_job_edits_the_file_and_quits(
    tmp_path: Path, tmux: Tmux
) -> None:
    config = write_config(
        tmp_path,
        """
        greet: {command: [echo, hello from tmux], schedule: manual}
        tick: {command: [/bin/true], schedule: {every: 1 hour, start: 2026-01-01T00:00}}
        """,
    )
    editor = tmp_path / "editor.sh"  # an "editor" that adds a job and saves
    editor.write_text(
        '#!/bin/sh\necho "  added: {command: [/bin/true], schedule: manual}" >> "$1"\n'
    )
    editor.chmod(0o755)
    command = f"EDITOR={editor} {sys.executable} -m tuisched -c {config}; echo EXIT=$?; sleep 30"
    tmux("new-session", "-d", "-s", "t", "-x", "80", "-y", "24", "-c", str(REPO), command)
    screen = tmux.wait_for("1 Jobs")
    assert "greet" in screen
    assert "tick" in screen
    assert all(len(line) <= 80 for line in screen.splitlines())
    tmux("send-keys", "-t", "t", "r")
    tmux.wait_for("Run greet now?")
    tmux("send-keys", "-t", "t", "y")
    screen = tmux.wait_for("✔ ok")
    assert "greet |" in tmux.wait_for("greet |")  # the audit pane
    tmux("send-keys", "-t", "t", "E")  # the console steps aside for $EDITOR, then returns
    screen = tmux.wait_for("config changed on disk: +1 -0 ~0 jobs")
    assert "1 Jobs" in screen
    tmux.press("R", then="Reload the configuration from disk?")
    tmux.press("y", then="added")
    tmux.press("q", then="Leave the console")
    tmux.press("s", then="EXIT=0")


def test_the_scheduler_keeps_firing_while_the_editor_is_open(tmp_path: Path, tmux: Tmux) -> None:
    config = write_config(
        tmp_path, "tick: {command: [/bin/true], schedule: {every: 1s, start: 2026-01-01T00:00}}"
    )
    marker = tmp_path / "editor-done"
    editor = tmp_path / "editor.sh"  # an editor the operator keeps open for 3 s
    editor.write_text(f'#!/bin/sh\nsleep 3\ntouch "{marker}"\n')
    editor.chmod(0o755)
    command = f"EDITOR={editor} {sys.executable} -m tuisched -c {config}; echo EXIT=$?; sleep 30"
    tmux("new-session", "-d", "-s", "t", "-x", "80", "-y", "24", "-c", str(REPO), command)
    tmux.wait_for("tick |")  # the first slots ran
    tmux("send-keys", "-t", "t", "E")
    deadline = time.monotonic() + 20
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marker.exists()
    tmux.wait_for("1 Jobs")  # the console came back
    tmux.press("q", then="Leave the console")
    # Stop the scheduler. A tick may be running just then (on a busy machine it runs
    # long enough to be seen): the console asks, and waiting for it ends the scheduler.
    if "in progress" in tmux.press("s", then="EXIT=0", also="in progress"):
        tmux.press("w", then="EXIT=0")
    audit = (tmp_path / "state" / "audit.log").read_text().splitlines()
    assert not [line for line in audit if "MISSED" in line or "missed" in line]
    assert len([line for line in audit if line.startswith("tick | ")]) >= 4


@pytest.mark.parametrize(
    ("editor", "said"),
    [
        ("/nonexistent/editor", "cannot start the editor"),
        ("false", "the editor exited with status 1"),
        ("'unclosed", "cannot read $EDITOR"),
    ],
)
def test_a_missing_or_failing_editor_is_reported_and_the_console_stays(
    tmp_path: Path, tmux: Tmux, editor: str, said: str
) -> None:
    config = write_config(tmp_path, "greet: {command: [echo, hi], schedule: manual}")
    command = (
        f'EDITOR="{editor}" VISUAL= {sys.executable} -m tuisched -c {config}; '
        "echo EXIT=$?; sleep 30"
    )
    tmux("new-session", "-d", "-s", "t", "-x", "80", "-y", "24", "-c", str(REPO), command)
    tmux.wait_for("greet")
    tmux.press("E", then=said)  # a toast wraps long lines: the start of the message
    tmux.press("r", then="Run greet now?")
    tmux.press("y", then="greet |")
    tmux.press("q", then="Leave the console")
    tmux.press("s", then="EXIT=0")


def test_a_save_refused_by_a_hand_edit_keeps_the_form_and_what_was_typed(
    tmp_path: Path, tmux: Tmux
) -> None:
    config = write_config(
        tmp_path,
        "backup: {command: [/bin/echo, copy], schedule: {every: 1 hour, start: 2026-01-01T00:00}}",
    )
    command = f"{sys.executable} -m tuisched -c {config}; echo EXIT=$?; sleep 30"
    tmux("new-session", "-d", "-s", "t", "-x", "80", "-y", "24", "-c", str(REPO), command)
    tmux.wait_for("backup")
    tmux.press("e", then="Edit job backup")
    # the value field has the focus: the command becomes [/bin/echo, copy, now] (keys
    # bound to actions and printable ones in separate bursts: their order across one
    # burst is another part of issue 28)
    tmux("send-keys", "-t", "t", "C-e", "BSpace")
    tmux.wait_for("[/bin/echo, copy  ")
    tmux("send-keys", "-t", "t", "-l", ", now]")
    tmux.wait_for("[/bin/echo, copy, now]")
    by_hand = config.read_text() + "# a note typed by hand\n"
    config.write_text(by_hand)  # meanwhile, a hand edit: pending, not reloaded
    tmux.press("C-s", then="Save the changes to backup in tuisched.yaml?")
    screen = tmux.press("y", then="Not saved")
    assert "Edit job backup" in screen  # the form stays
    assert "[/bin/echo, copy, now]" in screen  # with what was typed
    assert "was changed on disk since it was loaded" in " ".join(screen.split())
    assert all(len(line) <= 80 for line in screen.splitlines())
    assert config.read_text() == by_hand
    tmux.press("Escape", then="Discard your changes to backup?")
    tmux.press("y", then="1 Jobs")
    tmux.press("q", then="Leave the console")
    tmux.press("s", then="EXIT=0")
    assert config.read_text() == by_hand


def test_two_ctrl_c_in_one_burst_stop_once_the_run_in_progress_has_ended(
    tmp_path: Path, tmux: Tmux
) -> None:
    go = tmp_path / "go"
    config = write_config(
        tmp_path,
        f'slow: {{command: "while [ ! -e {go} ]; do sleep 0.05; done", schedule: manual}}',
    )
    command = f"{sys.executable} -m tuisched -c {config}; echo EXIT=$?; sleep 30"
    tmux("new-session", "-d", "-s", "t", "-x", "80", "-y", "24", "-c", str(REPO), command)
    try:
        tmux.wait_for("1 Jobs")
        tmux.press("r", then="Run slow now?")
        tmux.press("y", then="run 1")
        legend = tmux.wait_for("s Stop").splitlines()[-1]
        assert legend.endswith("M Messages ␣ Mark↓")  # nothing cut at 80 columns
        tmux("send-keys", "-t", "t", "C-c", "C-c")  # one burst, as a laggy link sends them
        screen = tmux.wait_for("q or ctrl+c stops them now")
        assert "EXIT=" not in screen  # the run in progress is waited for, not cut short
        go.touch()
        tmux.wait_for("EXIT=0")
    finally:  # failed: a console whose tmux goes keeps its scheduler running headless
        from .test_console_hangup import _stop_all  # here: that module imports this one

        go.touch()
        _stop_all([config])
    audit = (tmp_path / "state" / "audit.log").read_text().splitlines()
    assert [line.split(" | ")[3] for line in audit if line.startswith("slow | ")] == ["completed"]
