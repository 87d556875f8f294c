"""Runners with real processes, threads and files: outcomes, statuses and side effects."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests import jobs_for_tests
from tuisched.domain.model import CommandSpec, JobKind, PythonSpec, WaitForSpec
from tuisched.domain.runs import Outcome, Result, RunState
from tuisched.runtime.clock import ManualClock
from tuisched.runtime.execution import (
    LaunchError,
    Runner,
    install_child_watcher,
    make_runner,
    spawn,
    waitfor,
    watch_root,
)
from tuisched.runtime.execution.output import OutputCapture

ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"}
GRACE = 0.3
T = TypeVar("T")


@pytest.fixture(autouse=True, scope="module")
def _default_child_watcher_afterwards() -> Iterator[None]:
    """Tests install the pidfd watcher like the engine does; leave no trace for other modules."""
    yield
    if sys.version_info < (3, 12):
        asyncio.get_event_loop_policy().set_child_watcher(None)


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` in a fresh loop set up like the engine's, with a hard time limit."""

    async def main() -> T:
        install_child_watcher()
        async with asyncio.timeout(30):
            return await coro

    return asyncio.run(main())


async def until(condition: Callable[[], bool], seconds: float = 5.0) -> None:
    """Await `condition` becoming true (checked every 20 ms), failing after `seconds`."""
    async with asyncio.timeout(seconds):
        # The conditions here (processes gone from /proc) have no event to await.
        while not condition():  # noqa: ASYNC110
            await asyncio.sleep(0.02)


def sh(
    script: str, *, cwd: Path | None = None, success_codes: frozenset[int] = frozenset({0})
) -> CommandSpec:
    """A shell command job: running one is exactly what these tests are about."""
    return CommandSpec(shell=script, cwd=cwd, success_codes=success_codes)


def live_members(pgid: int) -> list[int]:
    """Pids in process group `pgid` that are not zombies (read from /proc)."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue  # exited while we looked
        if int(fields[2]) == pgid and fields[0] not in "ZX":
            pids.append(int(stat.parent.name))
    return pids


class Lines:
    """An `on_lines` listener the tests can await."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._changed = asyncio.Event()

    def __call__(self, lines: tuple[str, ...]) -> None:
        self.lines.extend(lines)
        self._changed.set()

    async def seen(self, line: str) -> None:
        async with asyncio.timeout(10):
            while line not in self.lines:
                self._changed.clear()
                await self._changed.wait()


def runner_for(
    kind: JobKind, output: OutputCapture | None = None, *, env: dict[str, str] = ENV
) -> tuple[Runner, OutputCapture]:
    capture = output if output is not None else OutputCapture(None)
    return make_runner(kind, env=env, output=capture, kill_grace=GRACE), capture


async def run_to_end(kind: JobKind, output: OutputCapture | None = None) -> tuple[Outcome, str]:
    runner, capture = runner_for(kind, output)
    await runner.start()
    outcome = await runner.wait()
    return outcome, capture.tail()


# --- commands: results --------------------------------------------------------


async def test_a_command_is_held_by_the_spawning_thread_before_the_loop_hears_of_it() -> None:
    """The run keeper learns of a command's process in the thread that spawned it, as soon
    as it exists: a busy loop can take seconds to come back to a finished spawn, and a
    scheduler killed in between left a run the keeper did not know going on (while its
    node's lease ran out and another node ran it again)."""
    loop_thread = threading.current_thread()
    told: list[tuple[int, bool]] = []
    runner = make_runner(
        sh("exit 0"), env=ENV, output=OutputCapture(None), kill_grace=GRACE,
        held=lambda pid: told.append((pid, threading.current_thread() is not loop_thread)),
    )  # fmt: skip
    pid = await runner.start()
    assert told == [(pid, True)]
    assert (await runner.wait()).state is RunState.SUCCESS


def test_argv_command_succeeds_with_exit_code_and_last_line() -> None:
    spec = CommandSpec(argv=(sys.executable, "-c", "print('hello'); print('world')"))
    outcome, output = run(run_to_end(spec))
    assert outcome == Outcome(
        state=RunState.SUCCESS, result=Result.COMPLETED, status="exit 0: world", exit_code=0
    )
    assert output == "hello\nworld"


def test_shell_command_merges_stderr_and_fails_on_exit_code() -> None:
    spec = sh("echo one; echo two >&2; echo three; exit 3")
    outcome, output = run(run_to_end(spec))
    assert (outcome.state, outcome.result) == (RunState.FAILED, Result.COMPLETED)
    assert (outcome.exit_code, outcome.status) == (3, "exit 3: three")
    assert output == "one\ntwo\nthree"


def test_success_codes_decide_success() -> None:
    spec = sh("exit 3", success_codes=frozenset({0, 3}))
    outcome, _ = run(run_to_end(spec))
    assert (outcome.state, outcome.status) == (RunState.SUCCESS, "exit 3")


def test_cwd_and_exactly_the_given_environment(tmp_path: Path) -> None:
    env = {**ENV, "GREETING": "hi there"}
    spec = sh('pwd; echo "$GREETING"; echo "${HOME-no home}"', cwd=tmp_path)
    runner, capture = runner_for(spec, env=env)

    async def go() -> Outcome:
        await runner.start()
        return await runner.wait()

    assert run(go()).state is RunState.SUCCESS
    assert capture.tail() == f"{tmp_path}\nhi there\nno home"


def test_stdin_is_dev_null() -> None:
    outcome, output = run(run_to_end(sh("cat; echo done")))
    assert (outcome.state, output) == (RunState.SUCCESS, "done")


def test_status_is_the_last_line_while_running_and_stop_sends_sigterm() -> None:
    spec = sh("echo first; echo second; exec sleep 300")
    lines = Lines()

    async def go() -> tuple[Outcome, int, int, str]:
        runner, _ = runner_for(spec, OutputCapture(None, on_lines=lines))
        pid = await runner.start()
        assert pid is not None
        await lines.seen("second")
        live_status = runner.status
        session, group = os.getsid(pid), os.getpgid(pid)
        runner.stop(Result.STOPPED)
        return await runner.wait(), session - pid, group - pid, live_status

    outcome, session_offset, group_offset, live_status = run(go())
    assert live_status == "second"
    assert (session_offset, group_offset) == (0, 0), "own session and process group"
    assert outcome == Outcome(
        state=RunState.FAILED,
        result=Result.STOPPED,
        status="killed by SIGTERM: second",
        exit_code=-15,
    )


# --- commands: the whole process group ---------------------------------------


async def _stop_group(shell: str, result: Result, *, kill: bool = False) -> tuple[Outcome, int]:
    """Start `shell` (which prints `ready` once its children run), stop it, wait."""
    lines = Lines()
    runner, _ = runner_for(sh(shell), OutputCapture(None, on_lines=lines))
    pgid = await runner.start()
    assert pgid is not None
    await lines.seen("ready")
    assert len(live_members(pgid)) >= 3
    runner.stop(result, kill=kill)
    runner.stop(Result.STOPPED)  # idempotent: the first result wins
    outcome = await runner.wait()
    await until(lambda: not live_members(pgid))
    return outcome, pgid


def test_timeout_stop_kills_the_whole_process_group() -> None:
    outcome, pgid = run(_stop_group("sleep 300 & sleep 300 & echo ready; wait", Result.TIMED_OUT))
    assert (outcome.state, outcome.result) == (RunState.FAILED, Result.TIMED_OUT)
    assert outcome.status == "killed by SIGTERM: ready"
    # Zombies may linger until init reaps them; /proc tells them from live processes.
    assert not live_members(pgid)


def test_a_group_ignoring_sigterm_is_killed_after_the_grace() -> None:
    shell = "trap '' TERM; sleep 300 & sleep 300 & echo ready; wait; wait; echo survived"

    async def go() -> tuple[Outcome, int]:
        clock = ManualClock()
        lines = Lines()
        capture = OutputCapture(None, on_lines=lines)
        runner = make_runner(
            sh(shell), env=dict(os.environ), output=capture, kill_grace=60, clock=clock
        )
        pgid = await runner.start()
        assert pgid is not None
        await lines.seen("ready")
        runner.stop(Result.STOPPED)
        await clock.advance(59.9)
        assert len(live_members(pgid)) >= 3  # SIGTERM ignored, and the grace is not over
        await clock.advance(0.1)
        outcome = await runner.wait()
        await until(lambda: not live_members(pgid))
        return outcome, pgid

    outcome, pgid = run(go())
    assert (outcome.result, outcome.status) == (Result.STOPPED, "killed by SIGKILL: ready")
    assert not live_members(pgid)


def test_kill_true_sends_sigkill_at_once() -> None:
    shell = "trap '' TERM; sleep 300 & sleep 300 & echo ready; wait"
    outcome, _ = run(_stop_group(shell, Result.SHUTDOWN, kill=True))
    assert (outcome.result, outcome.status) == (Result.SHUTDOWN, "killed by SIGKILL: ready")


def test_leftover_processes_are_killed_when_the_job_exits() -> None:
    # The background sleep does not hold the pipe, so only the final sweep can get it.
    spec = sh("sleep 300 >/dev/null 2>&1 & echo $!")

    async def go() -> tuple[Outcome, int]:
        runner, _ = runner_for(spec)
        pgid = await runner.start()
        assert pgid is not None
        outcome = await runner.wait()
        await until(lambda: not live_members(pgid))
        return outcome, pgid

    outcome, _ = run(go())
    assert outcome.state is RunState.SUCCESS


def test_a_grandchild_holding_the_pipe_does_not_keep_the_run_alive() -> None:
    spec = sh("sleep 30 & echo hi")

    async def go() -> tuple[Outcome, float, int]:
        runner, _ = runner_for(spec)
        started = time.monotonic()
        pgid = await runner.start()
        assert pgid is not None
        outcome = await runner.wait()
        elapsed = time.monotonic() - started
        await until(lambda: not live_members(pgid))
        return outcome, elapsed, pgid

    outcome, elapsed, _ = run(go())
    assert (outcome.state, outcome.status) == (RunState.SUCCESS, "exit 0: hi")
    assert elapsed < 2.0


def test_cancelling_wait_kills_the_group() -> None:
    lines = Lines()

    async def go() -> int:
        runner, _ = runner_for(
            sh("sleep 300 & echo ready; wait"), OutputCapture(None, on_lines=lines)
        )
        pgid = await runner.start()
        assert pgid is not None
        waiting = asyncio.create_task(runner.wait())
        await lines.seen("ready")
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        await until(lambda: not live_members(pgid))
        return pgid

    assert not live_members(run(go()))


def test_a_child_is_followed_where_pidfds_do_not_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without pidfds (an old kernel, a sandbox), a thread waits for the child instead."""

    def no_pidfds(pid: int, flags: int = 0) -> int:
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(os, "pidfd_open", no_pidfds)
    outcome, tail = run(run_to_end(sh("echo from the child; exit 3")))
    assert (outcome.exit_code, outcome.state) == (3, RunState.FAILED)
    assert tail == "from the child"


def test_a_spawn_cancelled_midway_leaves_no_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """The spawn happens in a thread: a start cancelled meanwhile kills what it started."""
    killed: list[int] = []
    kill = spawn._kill

    def noting(process: subprocess.Popen[bytes]) -> None:
        killed.append(process.pid)
        kill(process)

    monkeypatch.setattr(spawn, "_kill", noting)

    async def go() -> int:
        runner, _ = runner_for(CommandSpec(argv=("sleep", "300")))
        starting = asyncio.create_task(runner.start())
        await asyncio.sleep(0)  # the spawn is handed to its thread
        starting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await starting
        await until(lambda: bool(killed))
        await until(lambda: not live_members(killed[0]))
        return killed[0]

    assert not live_members(run(go()))


def test_stop_before_start_launches_nothing() -> None:
    async def go() -> tuple[int | None, Outcome]:
        runner, _ = runner_for(sh("echo never"))
        runner.stop(Result.SHUTDOWN)
        return await runner.start(), await runner.wait()

    pid, outcome = run(go())
    assert pid is None
    assert (outcome.state, outcome.result) == (RunState.NOT_STARTED, Result.SHUTDOWN)


def test_stop_after_the_end_changes_nothing() -> None:
    async def go() -> Outcome:
        runner, _ = runner_for(sh("echo done"))
        await runner.start()
        outcome = await runner.wait()
        runner.stop(Result.STOPPED)
        return outcome

    assert run(go()).result is Result.COMPLETED


# --- commands: output of any size ----------------------------------------------


def test_fifty_megabytes_without_a_newline(tmp_path: Path) -> None:
    path = tmp_path / "run.out"
    pieces: list[int] = []
    capture = OutputCapture(
        path, file_cap=1_000_000, on_lines=lambda lines: pieces.extend(map(len, lines))
    )
    spec = sh("head -c 50000000 /dev/zero | tr '\\0' 'x'")
    outcome, tail = run(run_to_end(spec, capture))
    assert outcome.state is RunState.SUCCESS
    assert capture.total_bytes == 50_000_000
    assert capture.truncated
    assert capture.head() == "x" * 64 * 1024
    assert tail == "x" * 64 * 1024
    assert (len(pieces), max(pieces)) == (50_000, 1000)
    marker = b"\n[output truncated at 1000000 bytes]\n"
    assert path.stat().st_size == 1_000_000 + len(marker)
    assert path.read_bytes().endswith(marker)
    assert path.stat().st_mode & 0o777 == 0o600


def test_binary_output_is_captured_and_shown_as_plain_text() -> None:
    capture = OutputCapture(None)
    spec = sh("head -c 1000000 /dev/urandom")
    outcome, tail = run(run_to_end(spec, capture))
    assert outcome.state is RunState.SUCCESS
    assert capture.total_bytes == 1_000_000
    assert len(capture.head()) <= 64 * 1024
    assert not any(ch < " " and ch not in "\n\t" for ch in tail + outcome.status)
    assert "\x1b" not in capture.head()


def test_large_output_with_lines_does_not_deadlock() -> None:
    spec = CommandSpec(argv=(sys.executable, "-c", "for i in range(200000): print(i)"))
    outcome, tail = run(run_to_end(spec))
    assert outcome.status == "exit 0: 199999"
    assert tail.splitlines()[-2:] == ["199998", "199999"]


# --- launch failures -----------------------------------------------------------


def _launch(kind: JobKind) -> str:
    async def go() -> None:
        runner, _ = runner_for(kind)
        await runner.start()

    with pytest.raises(LaunchError) as caught:
        run(go())
    return str(caught.value)


def test_missing_program() -> None:
    reason = _launch(CommandSpec(argv=("/usr/bin/no-such-program", "x")))
    assert reason == "program not found: /usr/bin/no-such-program"


def test_missing_cwd(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    assert _launch(sh("true", cwd=missing)) == f"cwd does not exist: {missing}"


def test_not_executable(tmp_path: Path) -> None:
    script = tmp_path / "script.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o644)
    reason = _launch(CommandSpec(argv=("./script.sh",), cwd=tmp_path))
    assert reason == "permission denied: ./script.sh"


@pytest.mark.parametrize(
    ("target", "reason"),
    [
        ("nope_pkg.mod:attr", "cannot import 'nope_pkg.mod:attr': No module named 'nope_pkg'"),
        (
            "tests.jobs_for_tests:missing",
            "cannot import 'tests.jobs_for_tests:missing': "
            "module 'tests.jobs_for_tests' has no attribute 'missing'",
        ),
        (
            "tests.jobs_for_tests:NOT_CALLABLE",
            "cannot start 'tests.jobs_for_tests:NOT_CALLABLE': "
            "TypeError: NOT_CALLABLE is not callable",
        ),
        (
            "tests.jobs_for_tests:NoRun",
            "cannot start 'tests.jobs_for_tests:NoRun': TypeError: NoRun has no run() method",
        ),
        (
            "tests.jobs_for_tests:FailsInInit",
            "cannot start 'tests.jobs_for_tests:FailsInInit': OSError: no database",
        ),
        ("no_colon", "cannot import 'no_colon': expected 'package.module:attr'"),
    ],
)
def test_bad_python_target(target: str, reason: str) -> None:
    assert _launch(PythonSpec(target=target, in_thread=True)) == reason


# --- python jobs ---------------------------------------------------------------


def _job(name: str) -> PythonSpec:
    return PythonSpec(target=f"tests.jobs_for_tests:{name}", in_thread=True)


@pytest.fixture
def release_threads() -> Iterator[None]:
    """Free the threads that tests leave running on purpose."""
    jobs_for_tests.RELEASE.clear()
    yield
    jobs_for_tests.RELEASE.set()


def test_plain_callable_succeeds() -> None:
    outcome, output = run(run_to_end(_job("succeed")))
    assert outcome == Outcome(state=RunState.SUCCESS, result=Result.COMPLETED)
    assert output == ""


def test_plain_callable_failure_has_its_traceback_in_the_output() -> None:
    outcome, output = run(run_to_end(_job("fail")))
    assert (outcome.state, outcome.result) == (RunState.FAILED, Result.COMPLETED)
    assert outcome.status == "ValueError: bad input"
    assert output.startswith("Traceback (most recent call last):")
    assert 'raise ValueError("bad input")' in output
    assert output.endswith("ValueError: bad input")


def test_sys_exit_fails_the_run_not_the_scheduler() -> None:
    outcome, _ = run(run_to_end(_job("exit_two")))
    assert (outcome.state, outcome.status) == (RunState.FAILED, "SystemExit: 2")


def test_class_job_reports_status_and_message_data() -> None:
    async def go() -> tuple[Outcome, Runner]:
        runner, _ = runner_for(_job("Reporter"))
        assert await runner.start() is None
        return await runner.wait(), runner

    outcome, runner = run(go())
    assert outcome == Outcome(
        state=RunState.SUCCESS, result=Result.COMPLETED, status="processed 3 files"
    )
    assert runner.status == "processed 3 files"
    assert dict(runner.message_data) == {"files": 3, "folder": "/data"}


def test_broken_status_and_message_data_read_as_empty() -> None:
    async def go() -> tuple[Outcome, Runner]:
        runner, _ = runner_for(_job("BrokenStatus"))
        await runner.start()
        return await runner.wait(), runner

    outcome, runner = run(go())
    assert (outcome.state, outcome.status) == (RunState.SUCCESS, "")
    assert (runner.status, dict(runner.message_data)) == ("", {})


def test_class_stop_makes_run_return() -> None:
    jobs_for_tests.STARTED.clear()

    async def go() -> tuple[Outcome, str]:
        runner = make_runner(_job("Stoppable"), env={}, output=OutputCapture(None))
        await runner.start()
        await asyncio.to_thread(jobs_for_tests.STARTED.wait, 10)
        live_status = runner.status
        runner.stop(Result.STOPPED)
        return await runner.wait(), live_status

    outcome, live_status = run(go())
    assert live_status == "working"
    assert outcome == Outcome(
        state=RunState.FAILED, result=Result.STOPPED, status="stopped by request"
    )


@pytest.mark.usefixtures("release_threads")
def test_a_callable_that_ignores_stop_is_left_running_after_the_grace() -> None:
    async def go() -> tuple[Outcome, list[threading.Thread]]:
        runner, _ = runner_for(_job("ignore_stop"))
        await runner.start()
        runner.stop(Result.TIMED_OUT)
        outcome = await runner.wait()
        left = [t for t in threading.enumerate() if t.name.endswith(":ignore_stop")]
        return outcome, left

    outcome, left = run(go())
    assert outcome == Outcome(
        state=RunState.FAILED,
        result=Result.TIMED_OUT,
        status="did not stop within 0.3s; its thread was left running",
    )
    assert left
    assert all(t.daemon for t in left)


@pytest.mark.usefixtures("release_threads")
def test_a_failing_stop_is_recorded() -> None:
    async def go() -> Outcome:
        runner, _ = runner_for(_job("StopRaises"))
        await runner.start()
        runner.stop(Result.STOPPED, kill=True)
        return await runner.wait()

    outcome = run(go())
    assert (outcome.state, outcome.result) == (RunState.FAILED, Result.STOPPED)
    assert outcome.reason == "stop() raised RuntimeError: cannot stop now"
    assert outcome.status.endswith("its thread was left running")


# --- wait_for ------------------------------------------------------------------


@pytest.fixture
def awatch_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Path, dict[str, Any]]]:
    """Record each `awatch` the sensor opens; by then its watch is in place."""
    calls: list[tuple[Path, dict[str, Any]]] = []
    real = waitfor.awatch

    async def spy(path: Path, **kwargs: Any) -> AsyncIterator[Any]:
        calls.append((path, dict(kwargs)))
        # Take the sensor's periodic re-check out of play: only a real file event can
        # end these waits, so a watch that misses the event fails the test (timeout).
        kwargs["rust_timeout"] = 3_600_000
        async for changes in real(path, **kwargs):
            yield changes

    monkeypatch.setattr(waitfor, "awatch", spy)
    return calls


def test_wait_for_a_file_already_there(
    tmp_path: Path, awatch_calls: list[tuple[Path, dict[str, Any]]]
) -> None:
    (tmp_path / "ready.flag").touch()
    outcome, _ = run(run_to_end(WaitForSpec(path=str(tmp_path / "*.flag"))))
    assert outcome == Outcome(
        state=RunState.SUCCESS,
        result=Result.COMPLETED,
        status=f"found {tmp_path / 'ready.flag'}",
    )
    assert awatch_calls == []


async def _wait_for_while(
    spec: WaitForSpec,
    calls: list[tuple[Path, dict[str, Any]]],
    action: Callable[[Runner], None],
) -> Outcome:
    """Start the sensor, do `action` once it watches, and wait for the outcome."""
    runner, _ = runner_for(spec)
    await runner.start()
    waiting = asyncio.create_task(runner.wait())
    await until(lambda: bool(calls))
    action(runner)
    return await waiting


def test_wait_for_a_file_saved_by_atomic_rename(
    tmp_path: Path, awatch_calls: list[tuple[Path, dict[str, Any]]]
) -> None:
    def save(_: Runner) -> None:
        temporary = tmp_path / ".data.csv.tmp"
        temporary.write_text("a,b\n")
        temporary.replace(tmp_path / "data.csv")

    spec = WaitForSpec(path=str(tmp_path / "*.csv"))
    outcome = run(_wait_for_while(spec, awatch_calls, save))
    assert (outcome.state, outcome.status) == (RunState.SUCCESS, f"found {tmp_path / 'data.csv'}")
    [(root, options)] = awatch_calls
    assert (root, options["recursive"], options["watch_filter"]) == (tmp_path, False, None)


def test_wait_for_a_file_in_folders_that_do_not_exist_yet(
    tmp_path: Path, awatch_calls: list[tuple[Path, dict[str, Any]]]
) -> None:
    def create(_: Runner) -> None:
        (tmp_path / "in" / "2026").mkdir(parents=True)
        (tmp_path / "in" / "2026" / "report.txt").write_text("done")

    spec = WaitForSpec(path=str(tmp_path / "in" / "*" / "report.txt"))
    outcome = run(_wait_for_while(spec, awatch_calls, create))
    assert outcome.status == f"found {tmp_path / 'in' / '2026' / 'report.txt'}"
    assert [(root, options["recursive"]) for root, options in awatch_calls] == [(tmp_path, True)]


def test_wait_for_stopped_by_timeout(
    tmp_path: Path, awatch_calls: list[tuple[Path, dict[str, Any]]]
) -> None:
    pattern = str(tmp_path / "never.txt")

    def time_out(runner: Runner) -> None:
        runner.stop(Result.TIMED_OUT)

    outcome = run(_wait_for_while(WaitForSpec(path=pattern), awatch_calls, time_out))
    assert outcome == Outcome(
        state=RunState.FAILED, result=Result.TIMED_OUT, status=f"no file matched {pattern}"
    )


@pytest.mark.parametrize(
    ("relative", "root", "recursive"),
    [
        ("a.txt", ".", False),
        ("*.txt", ".", False),
        ("sub/a.txt", ".", True),
        ("sub/*/a.txt", ".", True),
        ("existing/**/a.txt", "existing", True),
        ("existing/a?.txt", "existing", False),
        ("existing/deeper/x.txt", "existing", True),
    ],
)
def test_watch_root(tmp_path: Path, relative: str, root: str, recursive: bool) -> None:
    (tmp_path / "existing").mkdir()
    assert watch_root(str(tmp_path / relative)) == (tmp_path / root, recursive)


def test_watch_root_of_a_path_with_no_existing_folder() -> None:
    assert watch_root("/no-such-root-dir/x/*.txt") == (Path("/"), True)


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.12+ keeps its own watcher")
def test_install_child_watcher_uses_pidfds_on_3_11() -> None:
    async def go() -> object:
        install_child_watcher()
        install_child_watcher()  # twice is harmless
        return asyncio.get_event_loop_policy().get_child_watcher()

    assert isinstance(run(go()), asyncio.PidfdChildWatcher)
