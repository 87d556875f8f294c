"""Keys typed ahead in the real `tuisched` in tmux at 80x24 (issue 28): each `send-keys`
call is one burst, no pause between its keys, as a laggy SSH link delivers them; the
console hosts the scheduler. Every key lands where it would have landed typed slowly."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from .conftest import REPO
from .runtime_fixtures import write_config
from .test_console_tmux import Tmux
from .test_ledger import down_for_an_hour

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

JOBS = """
backup: {command: [/bin/echo, backup], schedule: {every: 1 hour, start: 2026-01-01T00:00}}
report: {command: "seq 1 40 | sed 's/^/line /'", schedule: manual}
reindex: {command: [/bin/true], schedule: manual}
cleanup: {command: [/bin/echo, cleanup], schedule: manual}
"""


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    server = Tmux()
    yield server
    server.close()


def _console(tmux: Tmux, config: Path) -> None:
    """`tuisched -c CONFIG` (hosting its scheduler) in the 80x24 window, once it shows."""
    command = f"{sys.executable} -m tuisched -c {config}; echo EXIT=$?; sleep 30"
    tmux("new-session", "-d", "-s", "t", "-x", "80", "-y", "24", "-c", str(REPO), command)
    tmux.wait_for("1 Jobs")


def _burst(tmux: Tmux, *keys: str) -> None:
    """`keys` in one `send-keys` call: written to the terminal together."""
    tmux("send-keys", "-t", "t", *keys)


def _until(condition: Callable[[], bool], tmux: Tmux | None = None, within: float = 20) -> None:
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            screen = tmux.screen() if tmux is not None else ""
            raise AssertionError(f"condition not met in time; the screen:\n{screen}")
        time.sleep(0.1)  # polling a file another process writes; bounded by `within`


@pytest.fixture
def busy() -> Iterator[None]:
    """A core kept busy beside the console, as on a loaded machine."""
    loop = subprocess.Popen([sys.executable, "-c", "while 1: pass"])
    yield
    loop.kill()
    loop.wait()


def test_escape_then_keys_in_one_burst_close_the_form_and_filter(
    tmp_path: Path, tmux: Tmux
) -> None:
    config = write_config(tmp_path, JOBS)
    before = config.read_text()
    _console(tmux, config)
    tmux.press("e", then="Edit job backup")
    _burst(tmux, "Escape", "/", "c", "l", "e", "a", "n")
    _until(lambda: "Edit job" not in tmux.screen() and "report" not in tmux.screen())
    screen = tmux.wait_for("cleanup")
    assert "backup" not in screen.split("Jobs", 1)[1]  # the filter took the keys
    assert config.read_text() == before  # the command was not replaced by what was typed


@pytest.mark.parametrize("loaded", [False, True], ids=["idle", "busy-loop"])
def test_tab_then_typing_then_ctrl_s_and_yes_in_one_burst(
    tmp_path: Path, tmux: Tmux, loaded: bool, request: pytest.FixtureRequest
) -> None:
    if loaded:
        request.getfixturevalue("busy")
    config = write_config(tmp_path, JOBS)
    _console(tmux, config)
    tmux.press("e", then="Edit job backup")
    _burst(tmux, "Tab", "Tab", "1 day", "Tab", "Tab", "Tab", "30m", "C-s", "y")
    _until(lambda: "every: 1 day" in config.read_text(), tmux)
    text = config.read_text()
    assert "timeout: 30m" in text
    assert "command: [/bin/echo, backup]" in text
    tmux.wait_for("backup saved")


@pytest.mark.parametrize("loaded", [False, True], ids=["idle", "busy-loop"])
def test_filter_enter_and_an_action_key_in_one_burst(
    tmp_path: Path, tmux: Tmux, loaded: bool, request: pytest.FixtureRequest
) -> None:
    if loaded:
        request.getfixturevalue("busy")
    config = write_config(tmp_path, JOBS)
    _console(tmux, config)  # (the scheduler may still be starting: the keys wait for nothing)
    _burst(tmux, "/", "reindex", "Enter", "p")
    screen = tmux.wait_for("Pause reindex?")
    assert "reindexp" not in screen
    tmux.press("y", then="paused")


def test_the_palette_a_dialog_and_the_ledger_in_bursts(tmp_path: Path, tmux: Tmux) -> None:
    config = down_for_an_hour(tmp_path)
    _console(tmux, config)
    tmux.wait_for("m to decide")
    _burst(tmux, "m", "Down", "s", "y")  # the ledger: skip the second job's slots
    tmux.wait_for("skipped by")
    screen = tmux.screen()
    assert "nothing to stop" not in screen
    _burst(tmux, "Escape", "C-p", "run once", "Down", "Enter", "Tab", "Enter")  # Yes
    tmux.wait_for("once |")  # the audit pane: the run ended


def _masked(screen: str) -> str:
    """The screen without what the clock changes (times, durations, run ids) and without
    the name of the day's folder (`slow` or `fast`)."""
    screen = re.sub(r"/(slow|fast)/", "/<day>/", screen)
    screen = re.sub(r"[0-9a-f]{12}", "<id>", re.sub(r"\d", "#", screen))
    return screen.replace("##:##:## +", "##:## +")  # a moment on a whole minute has no seconds


def _steady(tmux: Tmux, within: float = 20) -> str:
    """The screen once it has stopped changing (but for the clock)."""
    deadline = time.monotonic() + within
    last = _masked(tmux.screen())
    while time.monotonic() < deadline:
        time.sleep(0.25)  # polling a screen we do not own; bounded by `within`
        now = _masked(tmux.screen())
        if now == last:
            return now
        last = now
    raise AssertionError(f"the screen never settled:\n{last}")


DAY = [
    # edit backup's schedule in the form, and save
    "e", "Tab", "Tab", "2 hours", "C-s", "y",
    # filter, mark two jobs and pause them
    "/", "re", "Enter", "Space", "Space", "p", "y",
    # the output of report's run, searched
    "k", "l", "/", "line 3", "Enter", "n", "Escape",
    # the ledger, then back to every job
    "Escape", "m", "Escape",
]  # fmt: skip
"""A day's work, key by key (`send-keys` names; a word is typed as its letters)."""
NOTICES = ("backup saved", "2 jobs paused")
"""What the day's work notices: gone after a few seconds, they are not compared."""


def _day(
    tmp_path: Path, tmux: Tmux, expected: str | None = None
) -> tuple[str, str, list[dict[str, object]]]:
    """Do the day's work, key by key with waits (`expected` None), or in one burst;
    the file, the final screen (before quitting) and the jobs then."""
    tmp_path.mkdir()
    config = write_config(tmp_path, JOBS)
    _console(tmux, config)
    ran = subprocess.run(
        [sys.executable, "-m", "tuisched", "trigger", "report", "-c", str(config), "--wait"],
        capture_output=True, text=True, timeout=60, check=False, cwd=REPO,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    tmux.wait_for("report |")
    if expected is None:
        for key in DAY:
            for letter in [key] if len(key) == 1 or key[0].isupper() or "-" in key else key:
                _burst(tmux, letter)
                _steady(tmux)
    else:
        _burst(tmux, *DAY)
    if expected is None:
        _steady(tmux)
        _until(lambda: not any(notice in tmux.screen() for notice in NOTICES))
        screen = _steady(tmux)
    else:  # the burst's screen, once its notices have gone (or as it is after 20 s)
        with contextlib.suppress(AssertionError):
            _until(lambda: _masked(tmux.screen()) == expected)
        screen = _masked(tmux.screen())
    _burst(tmux, "q", "s")
    tmux.wait_for("EXIT=0")
    listed = subprocess.run(
        [sys.executable, "-m", "tuisched", "jobs", "--json", "-c", str(config)],
        capture_output=True, text=True, timeout=60, check=True, cwd=REPO,
    )  # fmt: skip
    jobs = [_unclocked(job) for job in json.loads(listed.stdout)]
    return config.read_text(), screen, jobs


def _unclocked(job: dict[str, object]) -> dict[str, object]:
    """A job of `jobs --json` without what the clock changes: the two days can fall on
    either side of backup's 2-hourly slot."""
    return {**job, **{key: re.sub(r"\d", "#", str(job[key])) for key in ("next_run", "why")}}


@pytest.mark.timeout(120)  # about 35 s; more on a loaded machine
def test_a_days_work_in_bursts_ends_as_typed_slowly(tmp_path: Path) -> None:
    results: list[tuple[str, str, list[dict[str, object]]]] = []
    for day in ("slow", "fast"):
        server = Tmux()
        expected = results[0][1] if results else None
        try:
            results.append(_day(tmp_path / day, server, expected))
        finally:
            server.close()
    (slow_file, slow_screen, slow_jobs), (file, screen, jobs) = results
    assert "every: 2 hours" in slow_file
    assert file == slow_file
    assert jobs == slow_jobs
    assert [job["name"] for job in jobs if job["state"] == "paused"] == ["report", "reindex"]
    assert screen == slow_screen, f"slowly:\n{slow_screen}\nin bursts:\n{screen}"
