"""Detach and attach (SPEC R22), as an operator does it: the real `tuisched` in tmux.

The console's terminal goes away (its tmux server is killed) and the
scheduler carries on; `tuisched attach` shows it again; consoles attached
together see each other's actions; `q` detaches.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from .conftest import REPO
from .runtime_fixtures import write_config
from .test_cli import run
from .test_console_tmux import Tmux, pytestmark  # noqa: F401  (skipped without tmux)

LONG = "i=0; while [ ! -e {release} ]; do i=$((i+1)); echo line $i; sleep 0.2; done; echo done"
"""A long job that runs until the test releases it: its end is controlled, not slept on."""


def _console(tmux: Tmux, config: Path, verb: str = "") -> None:
    command = f"{sys.executable} -m tuisched {verb} -c {config}; echo EXIT=$?; sleep 60"
    tmux("new-session", "-d", "-s", "t", "-x", "80", "-y", "24", "-c", str(REPO), command)


def _hosting(consoles: list[Tmux], config: Path) -> Tmux:
    """A console hosting the scheduler of `config` in a tmux of its own, once it ticks."""
    tmux = Tmux()
    consoles.append(tmux)
    _console(tmux, config)
    tmux.wait_for("tick |")
    return tmux


def _eventually(condition: Callable[[], object], within: float = 20) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, "never happened"
        time.sleep(0.1)  # watching other processes: bounded by `within`


def _status(config: Path) -> dict[str, object] | None:
    status, out, _ = run("status", "--json", "-c", str(config))
    return json.loads(out) if status == 0 else None


@pytest.fixture
def consoles() -> Iterator[list[Tmux]]:
    """tmux servers for consoles; at the end, no tmux and no scheduler is left."""
    made: list[Tmux] = []
    yield made
    for server in made:
        server.close()


@pytest.fixture
def ticking(tmp_path: Path) -> Iterator[Path]:
    """A configuration with a 1-second ticker and a long job; its scheduler is stopped after."""
    config = write_config(
        tmp_path,
        f"""
        tick: {{command: [/bin/true], schedule: {{every: 1s, start: 2026-01-01T00:00}}}}
        long: {{command: "{LONG.format(release=tmp_path / "RELEASE")}", schedule: manual}}
        """,
    )
    yield config
    (tmp_path / "RELEASE").touch()
    status = _status(config)
    if status is not None:  # a scheduler left headless: stop it as an operator would
        pid = int(str(status["pid"]))
        os.kill(pid, signal.SIGTERM)
        _eventually(lambda: _status(config) is None)


def _ticks(config: Path) -> int:
    audit = config.parent / "state" / "audit.log"
    return sum(line.startswith("tick | ") for line in audit.read_text().splitlines())


def _open_long_detail(tmux: Tmux) -> str:
    """The detail view of the long job, once it shows the live output of its run."""
    tmux.wait_for("long")
    tmux.press("Down", then="long")
    time.sleep(0.3)  # let the cursor land before Enter (a key in flight, not a state)
    tmux("send-keys", "-t", "t", "Enter")
    return tmux.wait_for("(running, pid ")


def test_killing_the_terminal_leaves_the_scheduler_and_attach_shows_the_same_run(
    ticking: Path, consoles: list[Tmux]
) -> None:
    first = _hosting(consoles, ticking)  # the ticker runs
    first.press("Down", then="long")
    time.sleep(0.3)
    first.press("r", then="Run long now?")
    first.press("y", then="line ")
    first("send-keys", "-t", "t", "Enter")
    screen = first.wait_for("(running, pid ")
    run_id, pid = re.search(r"live output of run (\w+) \(running, pid (\d+)\)", screen).groups()

    first("kill-server")  # the SSH connection drops
    before = _ticks(ticking)
    _eventually(lambda: _ticks(ticking) >= before + 2)  # ticks keep landing
    status = _status(ticking)
    assert status is not None
    assert (status["state"], status["running"]) == ("running", 1)
    log = (ticking.parent / "state" / "tuisched.log").read_text()
    assert "console closed (the terminal was lost): the scheduler runs on headless" in log

    second = Tmux()
    consoles.append(second)
    _console(second, ticking, "attach")
    screen = _open_long_detail(second)
    assert f"live output of run {run_id} (running, pid {pid})" in screen  # the same run
    shown = [int(n) for n in re.findall(r"line (\d+)", screen)]
    later = second.wait_for(f"line {max(shown) + 3}")  # its live output goes on
    assert "line 1" in later or max(shown) > 15  # from its start (while the view holds it)

    (ticking.parent / "RELEASE").touch()
    _eventually(lambda: _status(ticking) is not None and _status(ticking)["running"] == 0)
    history = json.loads(run("history", "long", "--json", "-c", str(ticking))[1])
    assert (history[0]["run_id"], history[0]["state"]) == (run_id, "SUCCESS")
    second.press("escape", then="1 Jobs")
    second.press("q", then="Leave the console")
    second.press("d", then="EXIT=0")  # detaching a client leaves the scheduler as it was
    assert _status(ticking) is not None


def test_a_pause_in_one_attached_console_shows_in_the_other_within_a_second(
    ticking: Path, consoles: list[Tmux]
) -> None:
    host, watcher = _hosting(consoles, ticking), Tmux()
    consoles.append(watcher)
    _console(watcher, ticking, "attach --read-only")
    screen = watcher.wait_for("read-only")
    assert "r Run" not in screen  # a viewer is offered no action
    host.press("p", then="Pause tick?")
    host("send-keys", "-t", "t", "y")
    seen = time.monotonic()
    host.wait_for("paused")
    watcher.wait_for("paused", within=1.0 + (time.monotonic() - seen))
    actions = (ticking.parent / "state" / "actions.log").read_text()
    assert re.search(r"\| \w+@\S+ \(console[^|]*\) \| pause \| job tick", actions), actions
    watcher.press("q", then="EXIT=0")  # a viewer just leaves
    assert _status(ticking) is not None


def test_q_detaches_a_hosting_console_and_the_shell_gets_its_prompt_back(
    ticking: Path, consoles: list[Tmux]
) -> None:
    tmux = _hosting(consoles, ticking)
    tmux.press("q", then="Leave the console")
    screen = tmux.press("d", then="EXIT=0")
    said = re.search(r"the scheduler runs on headless as pid (\d+)", screen.replace("\n", ""))
    assert said is not None, screen
    status = _status(ticking)
    assert status is not None
    assert status["pid"] == int(said.group(1))
    before = _ticks(ticking)
    _eventually(lambda: _ticks(ticking) >= before + 2)


def test_starting_the_console_again_attaches_and_a_stop_from_it_ends_the_scheduler(
    ticking: Path, consoles: list[Tmux]
) -> None:
    host, second = _hosting(consoles, ticking), Tmux()
    consoles.append(second)
    _console(second, ticking)  # plain `tuisched` again: it attaches, and says so
    second.wait_for("attached to the scheduler already running on")
    second.press("q", then="Leave the console")
    second.press("s", then="EXIT=0")
    host.wait_for("EXIT=0")  # the hosting console saw its scheduler stop, and closed
    assert "the scheduler stopped" in host.screen()
    assert _status(ticking) is None


def test_read_only_never_starts_a_scheduler(ticking: Path) -> None:
    status, _, err = run("--read-only", "-c", str(ticking))
    assert status == 69
    assert err.startswith(f"tuisched: no scheduler is running on {ticking.parent}/state;")
    status, _, err = run("attach", "-c", str(ticking))
    assert status == 69
    assert "no scheduler is running" in err
    assert not (ticking.parent / "state" / "tuisched.lock").exists()


def test_sigterm_to_a_hosting_console_drains_as_headless_does(
    ticking: Path, consoles: list[Tmux]
) -> None:
    tmux = _hosting(consoles, ticking)
    shell = int(tmux("display-message", "-p", "-t", "t", "#{pane_pid}"))
    # The process the shell started (it waits for the console's): the shell's child.
    started = Path(f"/proc/{shell}/task/{shell}/children").read_text().split()
    os.kill(int(started[0]), signal.SIGTERM)
    tmux.wait_for("EXIT=0")
    log = (ticking.parent / "state" / "tuisched.log").read_text()
    assert "scheduler stopping (SIGTERM)" in log
    assert log.rstrip().endswith("scheduler stopped")
    assert _status(ticking) is None


def test_an_attached_console_says_so_and_leaves_when_its_scheduler_is_killed(
    ticking: Path, consoles: list[Tmux]
) -> None:
    headless = subprocess.Popen(
        [sys.executable, "-m", "tuisched", "--no-ui", "-c", str(ticking)], cwd=REPO,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        _eventually(lambda: _status(ticking) is not None)
        tmux = Tmux()
        consoles.append(tmux)
        _console(tmux, ticking, "attach")
        tmux.wait_for("tick |")
        headless.kill()  # kill -9: no goodbye on the socket
        headless.wait(timeout=10)
        screen = tmux.wait_for("EXIT=0")
        assert "the scheduler stopped: no scheduler is running on" in screen.replace("\n", "")
    finally:
        if headless.poll() is None:
            headless.kill()
