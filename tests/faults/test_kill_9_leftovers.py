"""Every process a run started is found after a `kill -9` of the scheduler and of its
keeper (the OOM killer can take both), and stopped by the next start: a python run's
own process and what it started, and what a run that had already ended left running
(`setsid`, `env -i`, a daemon's double fork), which no environment and no process
group leads back to.

Each job writes its own pids, and the test looks at those processes in /proc (pid and
start time, so a recycled pid is never taken for them): what is checked is what ran.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tuisched.domain.runs import RunState
from tuisched.runtime.execution.descendants import (
    ADOPTED,
    Descendants,
    helper_ended,
    helper_started,
)
from tuisched.runtime.execution.leftovers import kill_left_behind
from tuisched.runtime.store import HistoryStore

from ..runtime_fixtures import Scheduler, write_config
from ..test_python_forks import _keeper_of
from ..test_store import make_run

pytestmark = pytest.mark.timeout(120)

Proc = tuple[int, int]
"""A process: its pid and its start time (clock ticks after boot)."""


def _started(pid: int) -> int | None:
    """When `pid` started, or None if it is gone or a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()
    return None if fields[0] == b"Z" else int(fields[19])


def _alive(proc: Proc) -> bool:
    return _started(proc[0]) == proc[1]


def _procs(pids: list[int]) -> list[Proc]:
    """The processes of `pids`, named by pid and start time (each alive now)."""
    procs = [(pid, _started(pid)) for pid in pids]
    assert all(start is not None for _, start in procs), f"not all alive: {pids}"
    return [(pid, start) for pid, start in procs if start is not None]


def _wait_until(done: Callable[[], object], within: float, what: str) -> None:
    """Poll `done()`: the scheduler is another process, with nothing of ours to await."""
    deadline = time.monotonic() + within
    while not done():
        assert time.monotonic() < deadline, f"{what} within {within} s"
        time.sleep(0.02)


def _gone_within(procs: list[Proc], within: float, what: str) -> None:
    _wait_until(lambda: not any(_alive(proc) for proc in procs), within,
                f"{what}: {[proc for proc in procs if _alive(proc)]} still alive")  # fmt: skip


def _states(db: Path, job: str) -> dict[str, str]:
    """run id -> state of every run of `job` in the history."""
    try:
        with contextlib.closing(sqlite3.connect(db)) as connection:
            rows = connection.execute("SELECT run_id, state FROM runs WHERE job = ?", (job,))
            return dict(rows.fetchall())
    except sqlite3.OperationalError:  # not made yet, or locked this moment
        return {}


def _kill_scheduler_and_keeper(scheduler: Scheduler) -> None:
    """`kill -9` of the keeper, then of the scheduler: nothing ends the runs meanwhile."""
    try:
        os.kill(_keeper_of(scheduler.process.pid), signal.SIGKILL)
    finally:
        scheduler.process.kill()
        scheduler.finish()


@pytest.fixture
def leftovers() -> Iterator[list[Proc]]:
    """Processes the test found: whatever it concluded, none is left behind."""
    found: list[Proc] = []
    yield found
    for proc in found:
        if _alive(proc):
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc[0], signal.SIGKILL)


@pytest.mark.parametrize("keeper", ["alive", "killed too"])
def test_a_python_run_s_processes_end_at_the_next_start_and_none_runs_beside_the_next(
    tmp_path: Path, schedulers: list[Scheduler], leftovers: list[Proc], keeper: str
) -> None:
    """A python run (its process a fork of a fork server) and the program it started in
    a session of its own with an empty environment, the scheduler killed as soon as the
    job has written their pids (before a scan may have seen the program): the keeper ends
    both with the scheduler; killed too, the restart ends both before the job's next run
    (`overlap: skip`) starts, and the run is ABANDONED."""
    out = tmp_path / "pids"
    path = write_config(tmp_path, """
        long:
          python: "tests.jobs_for_tests:escaping_sleeper"
          schedule: {every: "1 second", start: "2020-01-01T00:00"}
          overlap: skip
    """)  # fmt: skip
    env = {**os.environ, "TUISCHED_TEST_OUT": str(out)}
    db = tmp_path / "state" / "history.db"

    def runs() -> dict[str, list[int]]:
        found = {}
        for file in tmp_path.glob("pids.*"):
            text = file.read_text()
            if text.endswith("\n"):
                found[file.name.removeprefix("pids.")] = [int(pid) for pid in text.split()]
        return found

    first = Scheduler(path, env=env)
    schedulers.append(first)
    _wait_until(runs, 30, "the first run never wrote its pids")
    ((run_id, pids),) = runs().items()
    procs = _procs(pids)
    leftovers.extend(procs)
    if keeper == "alive":
        first.process.kill()
        first.finish()
        _gone_within(procs, 15, "the run, ended by the keeper")
        return
    _kill_scheduler_and_keeper(first)
    assert all(_alive(proc) for proc in procs), "a run outlives its killed scheduler"

    second = Scheduler(path, env=env)
    schedulers.append(second)
    _wait_until(lambda: len(runs()) > 1, 30, "the restart never ran the job")
    beside = [proc for proc in procs if _alive(proc)]  # at the next run's start
    (next_pids,) = [pids for other, pids in runs().items() if other != run_id]
    leftovers.extend(_procs(next_pids))
    _wait_until(lambda: _states(db, "long").get(run_id) == "ABANDONED", 20,
                "the killed scheduler's run was never closed as abandoned")  # fmt: skip
    second.process.send_signal(signal.SIGTERM)
    assert second.finish() == 0
    _gone_within(procs, 5, "the killed scheduler's run")
    assert beside == [], "the killed scheduler's run went on beside the next one"
    _gone_within(leftovers, 5, "after the clean stop")
    assert any(re.search(r"leftover process(es)? killed", line) for line in second.lines), (
        second.lines
    )


ESCAPES = """\
setsid sleep 300 & echo $! >> "$1"
env -i setsid sleep 301 & echo $! >> "$1"
( env -i setsid sh -c 'sleep 302 & echo $! >> "$0"' "$1" & )
while [ "$(wc -l < "$1")" -lt 3 ]; do sleep 0.01; done
"""
"""A run that ends at once, leaving three processes that escaped its group: in a session
of their own, two with an empty environment, one a daemon's (its parent has exited)."""


@pytest.mark.parametrize("record", ["kept", "lost"])
def test_what_an_ended_run_left_running_is_stopped_after_a_kill_9(
    tmp_path: Path, schedulers: list[Scheduler], leftovers: list[Proc], record: str
) -> None:
    """Neither the run (it ended: it is not abandoned), a process group nor a parent leads
    to these processes, and only one kept its environment: the record of every process a
    run started does. The scheduler writes it within a fraction of a second of the run's
    end; the test waits for that much (and goes on all the same after a while: a
    scheduler that never records them fails below, on the processes themselves).

    "lost": the kill came before the record was written (the test removes it). The one
    that kept its environment carries the run's id, which the history knows as one of
    this scheduler's runs; the others are then beyond reach (no cgroup here)."""
    pids = tmp_path / "pids"
    script = tmp_path / "escape.sh"
    script.write_text(ESCAPES)
    # Far enough ahead that a slow start (parallel workers beside a CPU hog) still finds the slot.
    soon = (datetime.now(UTC) + timedelta(seconds=12)).strftime("%Y-%m-%dT%H:%M:%S")
    job = f"escape: {{command: [sh, '{script}', '{pids}'], schedule: {{at: '{soon}'}}}}"
    path = write_config(tmp_path, job)
    db = tmp_path / "state" / "history.db"
    written = tmp_path / "state" / "processes.json"

    first = Scheduler(path)
    schedulers.append(first)
    _wait_until(lambda: "SUCCESS" in _states(db, "escape").values(), 30,
                "the run never ended")  # fmt: skip
    procs = _procs([int(pid) for pid in pids.read_text().split()])
    leftovers.extend(procs)

    def recorded() -> bool:
        return written.exists() and all(str(pid) in written.read_text() for pid, _ in procs)

    with contextlib.suppress(AssertionError):
        _wait_until(recorded, 10, "recorded")
    _kill_scheduler_and_keeper(first)
    assert all(_alive(proc) for proc in procs), "they outlive the killed scheduler"
    if record == "lost":
        written.unlink()
        procs = procs[:1]  # `setsid sleep 300`, which kept the run's environment

    path.write_text(path.read_text().replace(f"{{at: '{soon}'}}", "manual"))  # only cleans up
    second = Scheduler(path)
    schedulers.append(second)
    try:
        _gone_within(procs, 20, "what the ended run left, after the restart")
    finally:
        second.process.send_signal(signal.SIGTERM)
        assert second.finish() == 0
    assert any(re.search(r"process(es)? left by the runs of a dead scheduler killed", line)
               for line in second.lines), second.lines  # fmt: skip


# --- the pieces ---------------------------------------------------------------------


def test_the_family_of_what_a_record_names_is_killed_but_a_stranger_and_this_process_are_not(
    tmp_path: Path, leftovers: list[Proc]
) -> None:
    """Under the recorded process, in sessions of their own (one with an empty
    environment) and in its group: all killed. A recycled pid (a start time that does not
    match) and this very process, named by a record all the same, are left alone."""
    pids = tmp_path / "pids"
    script = (f"setsid sleep 300 & echo $! >> {pids}; env -i setsid sleep 301 & echo $! >> {pids}; "
              f"sleep 302 & echo $! >> {pids}; wait")  # fmt: skip
    run = subprocess.Popen(["/bin/sh", "-c", script], start_new_session=True)
    stranger = subprocess.Popen(["sleep", "303"], start_new_session=True)
    try:
        _wait_until(lambda: pids.exists() and len(pids.read_text().split()) == 3, 10,
                    "the run never wrote its pids")  # fmt: skip
        family = _procs([run.pid, *(int(pid) for pid in pids.read_text().split())])
        leftovers.extend(family)
        (stranger_proc,) = _procs([stranger.pid])
        me = _procs([os.getpid()])
        record = tmp_path / "processes.json"
        record.write_text(json.dumps({
            "run00000000a": [list(family[0])],
            "run00000000b": [[stranger.pid, stranger_proc[1] + 1], list(me[0])],
        }))  # fmt: skip
        assert kill_left_behind(record, None, ()) == 4
        assert run.wait(10) == -signal.SIGKILL
        _gone_within(family, 10, "the recorded run's family")
        assert _alive(stranger_proc)
        assert not record.exists()
    finally:
        for process in (run, stranger):
            process.kill()
            process.wait(10)


def test_a_scan_records_what_this_process_adopted_but_not_its_own_helpers(
    tmp_path: Path,
) -> None:
    """A child in a session of its own that no run is known to have started is an orphan
    adopted from a run (this process is the runs' subreaper): recorded. A helper (the
    keeper, a fork server) is not."""
    record = tmp_path / "processes.json"
    orphan = subprocess.Popen(["sleep", "300"], start_new_session=True)
    helper = subprocess.Popen(["sleep", "301"], start_new_session=True)
    helper_started(helper.pid)
    try:
        descendants = Descendants(record)
        descendants.scan()
        adopted = json.loads(record.read_text())[ADOPTED]
        assert [orphan.pid, _started(orphan.pid)] in adopted
        assert helper.pid not in [pid for pid, _ in adopted]
        assert descendants.watching  # followed until it ends, and stopped at shutdown
        assert descendants.stop_all(signal.SIGTERM) >= 1
        assert orphan.wait(10) == -signal.SIGTERM
        assert helper.poll() is None
    finally:
        helper_ended(helper.pid)
        for process in (orphan, helper):
            process.kill()
            process.wait(10)


def test_a_run_that_starts_or_ends_asks_for_a_scan_and_its_own_process_is_recorded(
    tmp_path: Path,
) -> None:
    """The record names the run's process as soon as a scan saw it (not only what is
    under it), and a start or an end asks for that scan at once."""
    record = tmp_path / "processes.json"
    asked: list[str] = []
    descendants = Descendants(record, changed=lambda: asked.append("scan"))
    root = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        descendants.watch("run00000000a", root.pid)
        assert asked == ["scan"]
        descendants.scan()
        recorded = json.loads(record.read_text())
        assert recorded["run00000000a"] == [[root.pid, _started(root.pid)]]
        root.kill()
        root.wait(10)
        descendants.run_ended("run00000000a")
        assert asked == ["scan", "scan"]
        descendants.scan()
        assert "run00000000a" not in (json.loads(record.read_text()) if record.exists() else {})
        descendants.run_ended("run-never-watched")  # a thread's run: nothing to look for
        assert asked == ["scan", "scan"]
    finally:
        root.kill()
        root.wait(10)


def test_the_history_says_which_carried_run_ids_are_this_node_s_runs(tmp_path: Path) -> None:
    """Its own runs and its cluster claims, whatever their state; not another node's, not
    a run of `tuisched run` (node `host:run`), not an id it never saw."""
    with HistoryStore.open_sqlite(tmp_path / "history.db") as store:
        store.write_many([
            make_run("a", state=RunState.SUCCESS),
            make_run("b", node="n1:4242:x7"),
            make_run("c", node="n1:run"),
            make_run("d", node="n2"),
        ], [])  # fmt: skip
        assert store.runs_of("n1", ["a", "b", "c", "d", "e"]) == {"a", "b"}
        many = [f"{i:012x}" for i in range(1200)]  # more than one query holds
        assert store.runs_of("n1", [*many, "a"]) == {"a"}
