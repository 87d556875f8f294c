"""The run keeper ends the runs of a scheduler that dies (`kill -9`) or falls silent past
its fence, and leaves alone what it was told has ended.

The keeper program is driven here as the scheduler drives it, through its standard
input; then a real `tuisched --no-ui` is killed with SIGKILL mid-run. Every process
is real, and each job writes its own pids, so what is checked is what ran.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tuisched.domain.events import RunStarted
from tuisched.runtime.execution import keeper_process
from tuisched.runtime.execution.keeper import Keeper

from ..runtime_fixtures import running, write_config
from ..test_headless import _alive, _gone_within
from .test_escaped_children import _pids

pytestmark = pytest.mark.timeout(60)

REPO = Path(__file__).resolve().parents[2]
PROGRAM = Path(keeper_process.__file__)


class _Keeper:
    """The keeper program, its standard input held by the test as a scheduler holds it."""

    def __init__(
        self, log: Path, grace: float = 0.5, record: Path | None = None,
        journals: Path | None = None,
    ) -> None:  # fmt: skip
        self.log = log
        with log.open("ab") as err:
            self.process = subprocess.Popen(
                [sys.executable, "-I", str(PROGRAM), repr(grace),
                 "" if record is None else str(record), "" if journals is None else str(journals)],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=err,
                start_new_session=True,
            )  # fmt: skip

    def say(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line.encode() + b"\n")
        self.process.stdin.flush()

    def fence(self, seconds: float, grace: float = 0.3) -> None:
        self.say(f"fence {time.monotonic() + seconds!r} {grace!r}")

    def gone(self) -> int:
        """Close its input as a killed scheduler would; its exit status."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        return self.process.wait(20)


def _children(pid: int) -> list[int]:
    return [
        int(child)
        for task in Path(f"/proc/{pid}/task").iterdir()
        for child in (task / "children").read_text().split()
    ]


def _argv(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_text().rstrip("\0").split("\0")


def _run(command: str) -> subprocess.Popen[bytes]:
    """A run as the scheduler starts one: a session and process group of its own."""
    return subprocess.Popen(["/bin/sh", "-c", command], start_new_session=True)


@pytest.fixture
def runs() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for run in started:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
        run.wait(10)


def test_a_held_run_and_its_group_end_when_the_scheduler_is_gone(
    tmp_path: Path, runs: list[subprocess.Popen[bytes]]
) -> None:
    pids = tmp_path / "pids"
    runs.append(run := _run(f"sleep 60 & echo $! >> {pids}; sleep 61 & echo $! >> {pids}; wait"))
    children = _pids(pids, 2)
    keeper = _Keeper(tmp_path / "keeper.log")
    keeper.say(f"hold {run.pid}")
    assert keeper.gone() == 0
    run.wait(10)
    for pid in children:
        _gone_within(pid, 10)
    assert f"the scheduler is gone: ending 1 run(s) (pid {run.pid})" in keeper.log.read_text()


def test_the_processes_the_record_names_end_with_the_scheduler_and_a_stranger_does_not(
    tmp_path: Path, runs: list[subprocess.Popen[bytes]]
) -> None:
    runs.append(stray := _run("sleep 60"))  # left its run: in a session of its own
    runs.append(stranger := _run("sleep 61"))  # its pid is recorded with another start
    start = keeper_process._started(stray.pid)
    other = keeper_process._started(stranger.pid)
    assert start is not None
    assert other is not None
    record = tmp_path / "processes.json"
    record.write_text(json.dumps({"run1": [[stray.pid, start], [stranger.pid, other + 1]]}))
    keeper = _Keeper(tmp_path / "keeper.log", record=record)
    assert keeper.gone() == 0
    assert stray.wait(10) == -signal.SIGTERM
    assert stranger.poll() is None
    assert f"ending 1 process(es) that left their runs (pid {stray.pid})" in keeper.log.read_text()


def _journal(folder: Path, **runs: subprocess.Popen[bytes]) -> None:
    """A fork server's journal naming `runs` (run id -> its process) as the server's run
    processes write it, with a line a kill cut short at its end."""
    folder.mkdir(exist_ok=True)
    lines = []
    for name, run in runs.items():
        start = keeper_process._started(run.pid)
        assert start is not None
        lines.append(f"{name} {run.pid} {start}\n")
    (folder / "4321.runs").write_text("".join(lines) + "cut 12")


def test_python_runs_the_journals_name_end_with_the_scheduler_though_never_held(
    tmp_path: Path, runs: list[subprocess.Popen[bytes]]
) -> None:
    """A python run's process writes its journal line before it runs its job; the
    scheduler holds it only once it hears of the fork. Killed before that (a busy
    machine), the scheduler leaves it to the keeper, which reads the journals."""
    runs.append(unheld := _run("sleep 60"))
    runs.append(held := _run("sleep 61"))
    runs.append(server := _run("sleep 62"))  # the fork server: it dies by itself
    _journal(tmp_path / "forks", r1=unheld, r2=held, server=server)
    runs.append(stranger := _run("sleep 63"))  # a recycled pid: another start time
    other = keeper_process._started(stranger.pid)
    assert other is not None
    with (tmp_path / "forks" / "4322.runs").open("w") as journal:
        journal.write(f"r3 {stranger.pid} {other + 1}\n")
    # What no fork server writes is not read: a FIFO (its open would block) and a link.
    os.mkfifo(tmp_path / "forks" / "4323.runs")
    runs.append(bystander := _run("sleep 64"))
    _journal(tmp_path / "elsewhere", r4=bystander)
    (tmp_path / "forks" / "4324.runs").symlink_to(tmp_path / "elsewhere" / "4321.runs")
    keeper = _Keeper(tmp_path / "keeper.log", journals=tmp_path / "forks")
    keeper.say(f"hold {held.pid}")
    assert keeper.gone() == 0
    assert unheld.wait(10) == -signal.SIGTERM
    assert held.wait(10) == -signal.SIGTERM
    assert server.poll() is None
    assert stranger.poll() is None
    assert bystander.poll() is None
    log = keeper.log.read_text()
    assert f"ending 1 python run(s) it had not been told of yet (pid {unheld.pid})" in log


def test_an_unheld_python_run_ends_at_the_fence_once(
    tmp_path: Path, runs: list[subprocess.Popen[bytes]]
) -> None:
    runs.append(unheld := _run("sleep 60"))
    _journal(tmp_path / "forks", r1=unheld)
    keeper = _Keeper(tmp_path / "keeper.log", journals=tmp_path / "forks")
    keeper.fence(0.3)  # then silence: a node stopped before it heard of the fork
    assert unheld.wait(10) == -signal.SIGTERM
    assert keeper.process.poll() is None  # it serves on: the node may come back
    assert keeper.gone() == 0
    told = "no word from the scheduler within its fence: ending 1 python run(s)"
    assert keeper.log.read_text().count(told) == 1


def test_the_fence_is_acted_on_once_until_a_newer_one_comes(tmp_path: Path) -> None:
    """After the fence has passed and the keeper has acted, it waits on the pipe alone
    (no busy loop on a fence long past), until a newer fence line comes."""
    now = [100.0]
    keeper = keeper_process.Keeper(0.3, monotonic=lambda: now[0], journals=str(tmp_path))
    keeper.take("fence 101 0.3")
    assert keeper.timeout(now[0]) == 1.0
    now[0] = 101.5
    keeper.act(now[0])
    assert keeper.timeout(now[0]) is None  # nothing was running: nothing to kill later
    keeper.take("fence 103 0.3")
    assert keeper.timeout(now[0]) == 1.5
    now[0] = 103.5
    keeper.act(now[0])
    keeper.take("hold 999999999")  # a run held after the fence passed: ended at once
    assert keeper.timeout(now[0]) == 0.0


def test_a_run_that_ignores_sigterm_is_killed_after_the_grace(
    tmp_path: Path, runs: list[subprocess.Popen[bytes]]
) -> None:
    ready = tmp_path / "ready"
    runs.append(run := _run(f"trap '' TERM; touch {ready}; while :; do sleep 0.1; done"))
    _pids_ready = time.monotonic() + 20
    while not ready.exists():
        assert time.monotonic() < _pids_ready, "the run never started"
        time.sleep(0.02)  # the job says it is ready; no event to await
    keeper = _Keeper(tmp_path / "keeper.log", grace=0.3)
    keeper.say(f"hold {run.pid}")
    assert keeper.gone() == 0
    assert run.wait(10) == -signal.SIGKILL


def test_a_freed_run_is_left_alone(tmp_path: Path, runs: list[subprocess.Popen[bytes]]) -> None:
    runs.append(run := _run("sleep 60"))
    keeper = _Keeper(tmp_path / "keeper.log")
    keeper.say(f"hold {run.pid}")
    keeper.say("nonsense that a keeper ignores")
    keeper.say("hold not-a-pid")
    keeper.say(f"free {run.pid}")
    assert keeper.gone() == 0
    assert run.poll() is None
    assert "ignored" in keeper.log.read_text()


def test_runs_end_when_the_fence_passes_without_word_and_go_on_while_it_is_renewed(
    tmp_path: Path, runs: list[subprocess.Popen[bytes]]
) -> None:
    runs.append(run := _run("sleep 60"))
    keeper = _Keeper(tmp_path / "keeper.log")
    keeper.say(f"hold {run.pid}")
    renewed_until = time.monotonic() + 1.0
    while time.monotonic() < renewed_until:  # a node beating: each beat moves the fence
        keeper.fence(0.3)
        time.sleep(0.1)  # the beat's own period, far under the fence
        assert run.poll() is None, "ended while the fence was renewed"
    silent = time.monotonic()  # the node falls silent (SIGSTOP, a partition)
    assert run.wait(10) == -signal.SIGTERM
    assert time.monotonic() - silent < 5
    # The keeper serves on: the node may come back and hold new runs.
    keeper.fence(30)
    runs.append(second := _run("sleep 60"))
    keeper.say(f"hold {second.pid}")
    keeper.say("fence none")
    assert keeper.gone() == 0
    assert second.wait(10) == -signal.SIGTERM
    log = keeper.log.read_text()
    assert "no word from the scheduler within its fence: ending 1 run(s)" in log


def test_a_killed_scheduler_s_running_command_and_its_children_end_with_it(
    tmp_path: Path,
) -> None:
    pids = tmp_path / "pids"
    command = f"echo $$ >> {pids}; sleep 60 & echo $! >> {pids}; wait"
    path = write_config(tmp_path, f"work: {{command: '{command}', schedule: manual}}")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    scheduler = subprocess.Popen(
        [sys.executable, "-m", "tuisched", "--no-ui", "-c", str(path)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:  # the control socket answers once the scheduler has started
            trigger = subprocess.run(
                [sys.executable, "-m", "tuisched", "-c", str(path), "trigger", "work"],
                capture_output=True, text=True, env=env, timeout=30, check=False,
            )  # fmt: skip
            if trigger.returncode == 0:
                break
            assert time.monotonic() < deadline, trigger.stderr
            time.sleep(0.1)  # not up yet
        started = _pids(pids, 2)
        assert all(_alive(pid) for pid in started)
        # The keeper reads the fork servers' journals too (the python runs not held yet).
        (keeper,) = [argv for argv in map(_argv, _children(scheduler.pid)) if str(PROGRAM) in argv]
        assert keeper[-1] == str(tmp_path / "state" / "forks")
    finally:
        scheduler.kill()  # kill -9: the scheduler cleans nothing up
        scheduler.communicate(timeout=10)
    for pid in started:
        _gone_within(pid, 10)  # its keeper ended them (they would sleep a minute)
    log = (tmp_path / "state" / "keeper.log").read_text()
    assert "the scheduler is gone: ending 1 run(s)" in log


async def test_a_link_planted_as_the_keeper_s_log_does_not_stop_the_scheduler(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("not the keeper's\n")
    (tmp_path / "state").mkdir(mode=0o700)
    (tmp_path / "state" / "keeper.log").symlink_to(target)
    path = write_config(tmp_path, "work: {command: [sleep, '60'], schedule: manual}")
    async with running(path) as (runtime, events):
        run = runtime.actions.run_now("work")
        (started,) = await events.wait_for(RunStarted)
        assert started.run.run_id == run.run_id
    assert "the run keeper says what it does nowhere" in caplog.text
    assert target.read_text() == "not the keeper's\n"


def test_what_a_held_run_started_in_sessions_of_its_own_ends_with_it(
    tmp_path: Path, runs: list[subprocess.Popen[bytes]]
) -> None:
    """Started since the scheduler's last record: no record names them, but their parent
    is the held run's, and the keeper looks under it before it ends the run."""
    pids = tmp_path / "pids"
    runs.append(run := _run(f"setsid sleep 60 & echo $! >> {pids}; "
                            f"env -i setsid sleep 61 & echo $! >> {pids}; wait"))  # fmt: skip
    escaped = _pids(pids, 2)
    keeper = _Keeper(tmp_path / "keeper.log")
    keeper.say(f"hold {run.pid}")
    assert keeper.gone() == 0
    run.wait(10)
    for pid in escaped:
        _gone_within(pid, 10)


async def test_a_keeper_start_given_up_mid_spawn_leaves_no_keeper_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A start cancelled (the console closed while its scheduler started) while the spawn
    thread makes the keeper: the keeper it made exits and is waited for, not left on a
    pipe nobody closes until the collector finds its `Popen` (a ResourceWarning, under a
    CPU hog, that failed an unrelated test)."""
    made: list[subprocess.Popen[bytes]] = []
    entered, go = threading.Event(), threading.Event()
    spawn = Keeper._spawn

    def held_spawn(self: Keeper) -> subprocess.Popen[bytes]:
        entered.set()
        go.wait(10)
        made.append(spawn(self))
        return made[-1]

    monkeypatch.setattr(Keeper, "_spawn", held_spawn)
    keeper = Keeper(tmp_path / "keeper.log", grace=0.5)
    starting = asyncio.ensure_future(keeper.start())
    assert await asyncio.to_thread(entered.wait, 10)  # the thread is making it now
    starting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await starting
    go.set()
    async with asyncio.timeout(10):
        while not made or made[0].returncode is None:  # noqa: ASYNC110  (reaped by the lane)
            await asyncio.sleep(0.02)
    assert made[0].returncode == 0
    assert made[0].stdin is not None
    assert made[0].stdin.closed
    await keeper.stop()  # nothing to stop: no keeper was taken
