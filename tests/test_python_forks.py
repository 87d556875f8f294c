"""Python jobs in processes of their own, forked by a fork server: each run is a process
of its own, with its own copy of the module's state, its own environment (also where
/proc shows it) and its own output; an edit of the module takes effect at the next run;
stop and timeout reach the whole process group; a server that dies or hangs is replaced
and its runs fail saying so; and after a kill -9 of the scheduler the next start stops
every process of the python runs it left."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tuisched.domain.errors import LaunchError
from tuisched.domain.events import RunFinished
from tuisched.domain.model import PythonSpec
from tuisched.domain.runs import Outcome, Result, RunState
from tuisched.runtime.execution import close_fork_servers, forking, kill_forked, make_runner
from tuisched.runtime.execution.output import OutputCapture
from tuisched.runtime.execution.pyprocess import ProcessPythonRunner

from .runtime_fixtures import running, write_config
from .test_headless import _alive, _gone_within

REPO = Path(__file__).resolve().parent.parent
GRACE = 0.5
NO_RETURN = "the job's process ended without returning"


@pytest.fixture
async def forks() -> AsyncIterator[None]:
    """Stop the test loop's fork servers at the end, as the runtime does at its stop."""
    yield
    await close_fork_servers()


def runner_for(
    target: str, run_id: str = "0123456789ab", **variables: str
) -> tuple[ProcessPythonRunner, OutputCapture]:
    env = {**os.environ, "TUISCHED_JOB": "job", "TUISCHED_RUN_ID": run_id, **variables}
    capture = OutputCapture(None)
    runner = make_runner(PythonSpec(target=target), env=env, output=capture, kill_grace=GRACE)
    assert isinstance(runner, ProcessPythonRunner)
    return runner, capture


async def run_job(target: str, run_id: str = "0123456789ab", **variables: str) -> tuple[
    Outcome, str
]:  # fmt: skip
    runner, capture = runner_for(target, run_id, **variables)
    await runner.start()
    outcome = await runner.wait()
    return outcome, capture.tail()


def parent_of(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_bytes()
    return int(stat[stat.rfind(b")") + 2 :].split()[1])


# --- what a run is ---------------------------------------------------------------------


@pytest.mark.usefixtures("forks")
async def test_each_run_is_a_fork_with_its_own_process_environment_and_output() -> None:
    seen = []
    for run_id in ("aaaaaaaaaaaa", "bbbbbbbbbbbb"):
        outcome, output = await run_job("tests.jobs_for_tests:describe_process", run_id)
        assert outcome.state is RunState.SUCCESS, outcome
        seen.append(json.loads(output.splitlines()[-1]))
    for run_id, process in zip(("aaaaaaaaaaaa", "bbbbbbbbbbbb"), seen, strict=True):
        assert process["run_id"] == run_id
        assert process["in_proc_environ"]  # found like a command's, by /proc/PID/environ
        assert process["session_leader"]
        assert process["stdin"] == "/dev/null"
        # The module was imported once, by the server the process was forked from.
        assert process["imported_in"] == process["ppid"] != process["pid"]
    assert seen[0]["ppid"] == seen[1]["ppid"]
    assert seen[0]["pid"] != seen[1]["pid"]


@pytest.mark.usefixtures("forks")
async def test_each_run_has_its_own_copy_of_the_modules_state() -> None:
    outputs = [(await run_job("tests.jobs_for_tests:count_up"))[1] for _ in range(3)]
    assert outputs == ["1", "1", "1"]


@pytest.mark.usefixtures("forks")
@pytest.mark.parametrize(
    ("target", "status"),
    [
        ("tests.jobs_for_tests:fail", "ValueError: bad input"),
        ("tests.jobs_for_tests:exit_two", "SystemExit: 2"),
        ("tests.jobs_for_tests:hard_exit", f"{NO_RETURN}: exit 3"),
        ("tests.jobs_for_tests:segfault", f"{NO_RETURN}: killed by SIGSEGV"),
    ],
)
async def test_how_a_run_ends_is_reported_as_for_a_process_of_its_own(
    target: str, status: str
) -> None:
    outcome, output = await run_job(target)
    assert (outcome.state, outcome.result, outcome.status) == (
        RunState.FAILED,
        Result.COMPLETED,
        status,
    )
    if target.endswith(":fail"):
        assert output.startswith("Traceback (most recent call last):")


@pytest.mark.usefixtures("forks")
async def test_a_variable_with_a_nul_byte_fails_the_launch() -> None:
    runner, _ = runner_for("tests.jobs_for_tests:succeed", TUISCHED_SLOT="a\0b")
    with pytest.raises(LaunchError, match="NUL byte"):
        await runner.start()


# --- edits and modules that cannot be imported ahead ---------------------------------


@pytest.mark.usefixtures("forks")
async def test_an_edited_module_runs_its_new_code_at_the_next_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    module = tmp_path / "edited_job.py"
    module.write_text("import os\n\ndef run():\n    print('one', os.getppid())\n")
    _, first = await run_job("edited_job:run")
    _, again = await run_job("edited_job:run")
    module.write_text("import os\n\ndef run():\n    print('two!', os.getppid())\n")
    _, edited = await run_job("edited_job:run")
    assert first == again  # "one" from the same server
    assert first.startswith("one ")
    word, server = edited.split()
    assert word == "two!"
    assert server != first.split()[1]  # a new server imported the edited module


@pytest.mark.usefixtures("forks")
async def test_a_module_that_starts_a_thread_at_import_is_imported_by_each_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tuisched.runtime.execution.forking")
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "threaded_job.py").write_text(
        "import os, threading, time\n"
        "IMPORTED_IN = os.getpid()\n"
        "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
        "def run():\n"
        "    print(IMPORTED_IN == os.getpid())\n"
    )
    outcome, output = await run_job("threaded_job:run")
    assert outcome.state is RunState.SUCCESS
    assert output == "True"  # imported in the run's own process, never forked with a thread
    assert "importing it started a thread" in caplog.text


@pytest.mark.usefixtures("forks")
async def test_a_module_that_reads_its_run_id_when_imported_gets_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "run_id_job.py").write_text(
        "import os\nRUN = os.environ['TUISCHED_RUN_ID']\ndef run():\n    print(RUN)\n"
    )
    outputs = [(await run_job("run_id_job:run", run_id))[1] for run_id in ("a" * 12, "b" * 12)]
    assert outputs == ["a" * 12, "b" * 12]


# --- stop and timeout ------------------------------------------------------------------


@pytest.mark.usefixtures("forks")
async def test_a_stop_ends_the_whole_process_group(tmp_path: Path) -> None:
    out = tmp_path / "pids"
    runner, _ = runner_for("tests.jobs_for_tests:with_children", TUISCHED_TEST_OUT=str(out))
    pid = await runner.start()
    pids = await asyncio.to_thread(_pids_in, Path(f"{out}.0123456789ab"))
    assert pids[0] == pid
    runner.stop(Result.STOPPED)
    outcome = await runner.wait()
    assert (outcome.state, outcome.result) == (RunState.FAILED, Result.STOPPED)
    for each in pids:  # itself, the program it started, and its own fork
        await asyncio.to_thread(_gone_within, each, 5)


async def test_a_timeout_stops_a_python_run_in_its_process(tmp_path: Path) -> None:
    path = write_config(
        tmp_path,
        """
        warm: {python: "tests.jobs_for_tests:succeed", schedule: manual}
        stuck: {python: "tests.jobs_for_tests:until_gate", schedule: manual, timeout: 1s}
        """,
    )
    os.environ["TUISCHED_TEST_GATE"] = str(tmp_path / "never")
    try:
        async with running(path) as (runtime, events):
            runtime.actions.run_now("warm")  # the module's server is up: the second is a fork
            await events.wait_for(RunFinished)
            runtime.actions.run_now("stuck")
            (finished,) = await events.wait_for(RunFinished, lambda e: e.run.job == "stuck")
    finally:
        del os.environ["TUISCHED_TEST_GATE"]
    assert (finished.run.state, finished.run.result) == (RunState.FAILED, Result.TIMED_OUT)
    assert finished.run.pid is not None
    assert not _alive(finished.run.pid)


# --- servers that die or hang ----------------------------------------------------------


@pytest.mark.usefixtures("forks")
async def test_a_run_whose_server_dies_fails_saying_so_and_the_next_gets_a_new_server(
    tmp_path: Path,
) -> None:
    runner, _ = runner_for(
        "tests.jobs_for_tests:until_gate", TUISCHED_TEST_GATE=str(tmp_path / "gate")
    )
    pid = await runner.start()
    assert pid is not None
    os.kill(parent_of(pid), signal.SIGKILL)
    outcome = await runner.wait()
    assert outcome.state is RunState.FAILED
    assert outcome.status.startswith("the python fork server ended (killed by SIGKILL)")
    assert outcome.status.endswith("the run was stopped")
    await asyncio.to_thread(_gone_within, pid, 5)  # not left running unsupervised
    again, _ = await run_job("tests.jobs_for_tests:succeed")
    assert again.state is RunState.SUCCESS


@pytest.mark.usefixtures("forks")
async def test_a_hung_server_is_killed_and_the_run_fails_saying_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(forking, "ANSWER_SECONDS", 0.3)
    _, output = await run_job("tests.jobs_for_tests:describe_process")
    server = json.loads(output)["ppid"]
    os.kill(server, signal.SIGSTOP)  # alive, and answering nothing
    runner, _ = runner_for("tests.jobs_for_tests:describe_process")
    with pytest.raises(LaunchError, match=r"did not answer a fork request within 0\.3s"):
        await runner.start()
    await asyncio.to_thread(_gone_within, server, 5)
    again, output = await run_job("tests.jobs_for_tests:describe_process")
    assert again.state is RunState.SUCCESS
    assert json.loads(output)["ppid"] != server


@pytest.mark.usefixtures("forks")
@pytest.mark.parametrize("job", ["until_gate", "until_gate_leaving_a_child"])
async def test_a_server_that_hangs_under_a_run_is_killed_when_the_run_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, job: str
) -> None:
    """With `until_gate_leaving_a_child`, the output stays open after the run's process
    ended (a child of it holds it, as a server stopped right after its fork would with
    its own copy): the process's end is watched as well (beside a CPU hog, a server
    stopped before it closed its copy hung this test for good)."""
    monkeypatch.setattr(forking, "ANSWER_SECONDS", 0.3)
    gate = tmp_path / "gate"
    runner, _ = runner_for(f"tests.jobs_for_tests:{job}", TUISCHED_TEST_GATE=str(gate))
    pid = await runner.start()
    assert pid is not None
    server = parent_of(pid)
    os.kill(server, signal.SIGSTOP)  # it will never report the run's end
    gate.touch()
    outcome = await runner.wait()
    assert outcome.state is RunState.FAILED
    assert f"it did not report the end of process {pid} within 0.3s" in outcome.status
    await asyncio.to_thread(_gone_within, server, 5)


# --- after a kill -9 of the scheduler --------------------------------------------------


def test_the_journal_names_what_the_next_start_kills(tmp_path: Path) -> None:
    journals = tmp_path / "forks"
    journals.mkdir()
    sleeper = subprocess.Popen(["sleep", "300"], start_new_session=True)
    other = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        start = _start_ticks(sleeper.pid)
        (journals / "123.runs").write_text(
            f"server 1 1\nrun00000000a {sleeper.pid} {start}\n"
            f"run00000000b {other.pid} {start - 1}\n"  # a recycled pid: not that process
            "run00000000c 12"  # the line a kill cut short
        )
        killed, run_ids = kill_forked(journals)
        assert sleeper.wait(5) == -signal.SIGKILL
        assert other.poll() is None
    finally:
        for process in (sleeper, other):
            process.kill()
            process.wait()
    assert killed == 1
    assert run_ids == {"run00000000a", "run00000000b"}
    assert list(journals.iterdir()) == []


def _keeper_of(scheduler: int) -> int:
    """The pid of `scheduler`'s run keeper (its child running keeper_process.py)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError):
                stat = (entry / "stat").read_bytes()
                parent = int(stat[stat.rfind(b")") + 2 :].split()[1])
                if parent == scheduler and b"keeper_process" in (entry / "cmdline").read_bytes():
                    return int(entry.name)
        time.sleep(0.05)  # it starts with the scheduler; no event to await
    raise AssertionError(f"no run keeper under {scheduler}")


@pytest.mark.parametrize("keeper", ["alive", "killed too"])
def test_every_process_of_the_python_runs_ends_after_a_kill_9(tmp_path: Path, keeper: str) -> None:
    """The keeper ends the runs with their scheduler; killed too (say, by the OOM killer),
    the next start stops them from the fork servers' journals."""
    out = tmp_path / "pids"
    # Every second (however long the scheduler takes to start), one run at a time.
    every = '{every: "1 second", start: "2020-01-01T00:00"}'
    job = '{name}: {{python: "tests.jobs_for_tests:with_children", schedule: {schedule}}}'
    names = ("one", "two", "three")
    path = write_config(tmp_path, "\n".join(job.format(name=n, schedule=every) for n in names))
    env = {**os.environ, "PYTHONPATH": str(REPO), "TUISCHED_TEST_OUT": str(out)}
    state = tmp_path / "state"

    def scheduler() -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "tuisched", "--no-ui", "-c", str(path)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO,
        )  # fmt: skip

    first = scheduler()
    try:
        runs = _all_pids(tmp_path, count=3, within=30)
        servers = {parent_of(pids[0]) for pids in runs}
        if keeper == "killed too":
            os.kill(_keeper_of(first.pid), signal.SIGKILL)
    finally:
        first.kill()  # kill -9 while the runs go on
        first.communicate(timeout=10)
    processes = [pid for pids in runs for pid in pids]
    if keeper == "alive":
        try:
            for pid in processes:
                _gone_within(pid, 10)  # the keeper ended each run's group
        finally:
            for pid in processes:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        return
    try:
        assert all(_alive(pid) for pid in processes)  # a run outlives its scheduler
        for server in servers:
            _gone_within(server, 5)  # the fork servers die with the scheduler
        journaled = " ".join(path.read_text() for path in (state / "forks").iterdir())
        assert all(str(pids[0]) in journaled for pids in runs)
        (state / "processes.json").unlink(missing_ok=True)  # only what the runs left
        path.write_text(path.read_text().replace(every, "manual"))  # it only cleans up
        second = scheduler()
        try:
            for pid in processes:
                _gone_within(pid, 20)
        finally:
            second.send_signal(signal.SIGTERM)
            _, err = second.communicate(timeout=20)
    finally:
        for pid in processes:  # whatever the test found, leave nothing behind
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert re.search(r"\d+ leftover process(es)? killed", err), err


def _pids_in(path: Path, within: float = 10) -> list[int]:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().endswith("\n"):
            return [int(pid) for pid in path.read_text().split()]
        time.sleep(0.02)  # the job writes them; no event to await
    raise AssertionError(f"{path} never held the pids")


def _all_pids(folder: Path, *, count: int, within: float) -> list[list[int]]:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        found = [p for p in folder.glob("pids.*") if p.read_text().endswith("\n")]
        if len(found) >= count:
            return [[int(pid) for pid in p.read_text().split()] for p in found]
        time.sleep(0.05)  # the jobs write them; no event to await
    raise AssertionError(f"the {count} runs never wrote their pids")


def _start_ticks(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_bytes()
    return int(stat[stat.rfind(b")") + 2 :].split()[19])


def test_files_of_the_standard_library_are_not_watched_but_site_packages_in_it_are() -> None:
    from tuisched.runtime.execution.forkserver import Watched

    stdlib = Path(os.__file__).parent
    assert Watched._in_stdlib(str(stdlib / "json" / "decoder.py"))
    assert not Watched._in_stdlib(str(stdlib / "site-packages" / "requests" / "api.py"))
    assert not Watched._in_stdlib(str(REPO / "tests" / "jobs_for_tests.py"))


async def test_runtimes_on_one_loop_share_its_fork_servers_until_the_last_stops() -> None:
    clock = forking.SystemClock()
    forking.open_fork_servers(None, clock)
    servers = forking.fork_servers()
    forking.open_fork_servers(None, clock)  # a second runtime on the same loop
    assert forking.fork_servers() is servers
    await close_fork_servers()
    assert forking.fork_servers() is servers  # the first one still runs
    await close_fork_servers()
    assert forking.fork_servers() is not servers
    await close_fork_servers()
