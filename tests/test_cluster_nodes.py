"""Cluster mode end to end: nodes as real `tuisched --no-ui` processes on one real
PostgreSQL (CLUSTER.md's fault plan). Timings are shrunk (heartbeat 1 s, lease
4 s, dead after 2 s) so each wait is short and bounded; the database itself is read
by the test to judge (its clock says when a run started).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tuisched.runtime.cluster.link import LAPSED

from . import preloaded
from .pg_fixtures import PASSWORD, PostgresServer, start_server, wait_until
from .preloaded import ForkedProcess, spawn
from .runtime_fixtures import takes_connections
from .tcp_proxy import TcpProxy

pytestmark = pytest.mark.timeout(120)

TUISCHED = [sys.executable, "-m", "tuisched"]
TIMING = "poll: 1s, heartbeat: 1s, lease: 4s, dead_after: 2s"
START = '"2026-01-01T00:00:00Z"'


def config(
    folder: Path,
    url: str,
    jobs: str,
    *,
    name: str,
    max_workers: int = 8,
    extra: str = "",
    timing: str = TIMING,
) -> Path:
    """A node's configuration: its own state directory, the shared database."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "tuisched.yaml"
    path.write_text(
        f"settings:\n  timezone: UTC\n  state_dir: {folder / 'state'}\n"
        f"  max_workers: {max_workers}\n  shutdown_grace: 2s\n"
        f"  cluster: {{database: '{url}', password_env: TEST_PG_PASSWORD, name: {name}, "
        f"{timing}{extra}}}\njobs:\n{jobs}",
        encoding="utf-8",
    )
    return path


class Node:
    """One `tuisched --no-ui` process."""

    def __init__(self, path: Path, env: dict[str, str] | None = None,
                 prefix: list[str] | None = None, log: str = "node.log") -> None:  # fmt: skip
        self.path = path
        self.log = path.parent / log
        environment = {**os.environ, "TEST_PG_PASSWORD": PASSWORD, **(env or {})}
        self.env = env or {}
        self.process: subprocess.Popen[bytes] | ForkedProcess
        with self.log.open("wb") as out:  # the child keeps its own copy
            if prefix:
                self.process = subprocess.Popen(
                    [*prefix, *TUISCHED, "-c", str(path), "--no-ui"],
                    stdout=out, stderr=subprocess.STDOUT, env=environment,
                )  # fmt: skip
            else:
                self.process = spawn(["-c", str(path), "--no-ui"], stdout=out,
                                     stderr=subprocess.STDOUT, env=environment)  # fmt: skip

    @property
    def pid(self) -> int:
        return self.process.pid

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def listening(self) -> bool:
        """Whether its control socket takes connections (a file left by a killed node
        does not)."""
        state = self.path.parent / "state"
        if name := self.env.get("TUISCHED_NODE_NAME"):  # nodes of one file: one folder each
            state = state / "nodes" / name
        return takes_connections(state / "control.sock")

    def stop(self, sig: int = signal.SIGTERM, within: float = 20) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        return self.process.wait(within)

    def cli(self, *args: str, **env_vars: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "TEST_PG_PASSWORD": PASSWORD, **env_vars}
        return preloaded.run(["-c", str(self.path), *args], timeout=30, env=env)


class Cluster:
    """A database for one test, and the nodes started on it (all stopped at the end)."""

    def __init__(self, server: PostgresServer, base: Path) -> None:
        self.server = server
        self.database = server.create_database()
        self.url = server.url(self.database)
        self.base = base
        self.nodes: list[Node] = []

    def node(self, jobs: str, *, name: str, url: str | None = None, **kwargs: Any) -> Node:
        env = kwargs.pop("env", None)
        prefix = kwargs.pop("prefix", None)
        path = config(self.base / name, url or self.url, jobs, name=name, **kwargs)
        node = Node(path, env, prefix)
        self.nodes.append(node)
        return node

    def rows(self, statement: str, *params: object) -> list[tuple[Any, ...]]:
        conninfo = self.url.replace("postgres@", f"postgres:{PASSWORD}@")
        with psycopg.connect(conninfo, autocommit=True, connect_timeout=5) as connection:
            return connection.execute(statement, params).fetchall()  # type: ignore[arg-type]

    def alive(self, count: int) -> None:
        """Wait until `count` nodes have joined, and each node running listens on its
        control socket (opened just after the join: a verb sent at once finds it)."""
        wait_until(lambda: self.alive_count() >= count, within=30)
        wait_until(lambda: all(node.listening() for node in self.nodes
                               if node.process.poll() is None), within=30)  # fmt: skip

    def alive_count(self) -> int:
        try:
            return int(self.rows("SELECT count(*) FROM tuisched_nodes WHERE state = 'alive'")
                       [0][0])  # fmt: skip
        except psycopg.Error:
            return 0  # no tables yet

    def node_of(self, owner: str) -> Node:
        pid = int(owner.split(":")[1])
        return next(node for node in self.nodes if node.pid == pid)

    def close(self) -> None:
        for node in self.nodes:
            if node.process.poll() is None:
                node.process.kill()
                node.process.wait(10)


@pytest.fixture
def cluster(postgres: PostgresServer, tmp_path: Path) -> Iterator[Cluster]:
    made = Cluster(postgres, tmp_path)
    try:
        yield made
    finally:
        made.close()


def _every(name: str, seconds: float, command: str, extra: str = "") -> str:
    return (f"  {name}:\n    command: [/bin/sh, -c, '{command}']\n"
            f"    schedule: {{every: {seconds}s, start: {START}}}\n{extra}")  # fmt: skip


def _manual(name: str, command: str, extra: str = "") -> str:
    return f"  {name}:\n    command: [/bin/sh, -c, '{command}']\n    schedule: manual\n{extra}"


_EXECUTION = """\
log=$1
started=$(date +%s.%N)
trap 'echo "end $TUISCHED_RUN_ID $(date +%s.%N) $node $me alive=" >> "$log"; exit 143' TERM
sleep 60 &
child=$!
since() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1,20; }
me="$$:$(since $$ | cut -d' ' -f2) $child:$(since $child | cut -d' ' -f2)"
node=${TUISCHED_NODE:-none}
alive=""
if [ -f "$log" ]; then
  for proc in $(awk '$1 == "start" {print $5; print $6}' "$log"); do
    now=$(since "${proc%%:*}")
    case "$now" in
      ""|"Z "*|"X "*) ;;
      *) [ "${now#* }" = "${proc#*:}" ] && alive="$alive,$proc" ;;
    esac
  done
fi
echo "start $TUISCHED_RUN_ID $started $node $me alive=${alive#,}" >> "$log"
wait
"""


def _logged(name: str, log: Path, extra: str = "    recover: true\n") -> str:
    """A manual job that records each of its executions itself in `log`: a `start` line
    (taken as it starts) and, on SIGTERM, an `end` line, each with its run id, the
    machine's time, its node, and its shell's and child's pid and start time. A start
    line also names the processes of earlier executions still running as it began: an
    execution SIGKILLed before its trap wrote `end` leaves no end line, and what the
    next one saw is then what tells whether they overlapped."""
    script = log.parent / "execution.sh"
    script.write_text(_EXECUTION, encoding="utf-8")
    return _manual(name, f"exec /bin/sh {script} {log}", extra)


def _ticking(name: str, seconds: float, log: Path, extra: str = "") -> str:
    """A job every `seconds` that records each of its executions itself in `log`: its slot
    and run id."""
    return _every(name, seconds, f"echo $TUISCHED_SLOT $TUISCHED_RUN_ID >> {log}", extra)


def _ran(log: Path) -> Counter[datetime]:
    """How many times each slot ran, by the job's own record."""
    if not log.exists():
        return Counter()
    return Counter(datetime.fromisoformat(line.split()[0]) for line in log.read_text().split("\n")
                   if line.strip())  # fmt: skip


def _none_lost(log: Path, every: float = 1, rows: Sequence[tuple[Any, ...]] = ()) -> None:
    """No slot between the first and the last the job ran is missing from its record
    (`rows`, the job's rows, are shown when one is)."""
    slots = sorted(_ran(log))
    gaps = [(a, b) for a, b in itertools.pairwise(slots) if (b - a).total_seconds() != every]
    around = [row for row in rows if any(a <= row[0] <= b for a, b in gaps)]
    assert not gaps, f"slots lost between: {gaps}; their rows: {around}"


def _each_slot_ran_once(
    log: Path,
    rows: list[tuple[Any, ...]],
    unknown: frozenset[datetime] | set[datetime] = frozenset(),
) -> None:
    """The job's own record and the history agree: no slot ran twice, and every slot the
    history holds as a success ran (`rows`: (slot, state) of the job); the `unknown`
    slots' runs may or may not have run their command (once at most)."""
    ran = _ran(log)
    twice = {slot: count for slot, count in ran.items() if count > 1}
    assert not twice, f"slots run more than once: {twice}"
    succeeded = {slot for slot, state in rows if state == "success"}
    recorded = set(ran) - set(unknown)
    assert succeeded == recorded, (sorted(succeeded ^ recorded), "history and record differ")


@dataclass(frozen=True)
class _Execution:
    """One execution of a `_logged` job, by its own record."""

    run_id: str
    started: float
    node: str
    processes: frozenset[str]
    """Its shell's and its child's `pid:start-time`."""
    alive: frozenset[str]
    """The processes of earlier executions that were running as it began."""
    ended: float | None = None
    """When its trap wrote `end` (None: it did not, SIGKILLed or still running)."""


def _executions(log: Path) -> dict[str, _Execution]:
    """What the job recorded, by run id, in the order the executions began."""
    runs: dict[str, _Execution] = {}
    for line in log.read_text().splitlines():
        word, run_id, at, node, shell, child, alive = line.split()
        if word == "start":
            seen = frozenset(filter(None, alive.removeprefix("alive=").split(",")))
            runs[run_id] = _Execution(run_id, float(at), node, frozenset({shell, child}), seen)
        else:
            runs[run_id] = dataclasses.replace(runs[run_id], ended=float(at))
    return runs


def _ended_before(first: _Execution, then: _Execution) -> bool:
    """Whether `first` had ended when `then` began: its end was written before, or it
    wrote none and none of its processes ran as `then` began (SIGKILLed in time)."""
    if first.ended is not None:
        return first.ended <= then.started
    return not first.processes & then.alive


def _one_at_a_time(executions: dict[str, _Execution]) -> None:
    """Fail if two executions overlapped."""
    ordered = sorted(executions.values(), key=lambda execution: execution.started)
    for index, then in enumerate(ordered):
        for first in ordered[:index]:
            assert _ended_before(first, then), f"two executions at once: {first} and {then}"


def _at_least(cluster: Cluster, count: int, statement: str, *params: object,
              within: float = 30) -> None:  # fmt: skip
    """Wait until `statement` (a `SELECT count(...)`) says `count` or more: time passing,
    measured by the slots the nodes went through, so a busy machine waits longer."""
    wait_until(lambda: int(cluster.rows(statement, *params)[0][0]) >= count, within=within)


# --- the race ------------------------------------------------------------------------


def test_three_nodes_run_every_slot_once_never_early_and_share_the_work(
    cluster: Cluster,
) -> None:
    # `overlap: allow`: this test is about each slot running once, not about overlap. With
    # the default (skip) a slot is skipped while the job's lock is held past `steal_after`
    # (2 s), and on a machine this busy a run's end can take that long to be written.
    allow = "    overlap: allow\n"
    jobs = "".join(_every(f"j{i:03d}", 2, "true", allow) for i in range(150))
    nodes = [cluster.node(jobs, name=f"n{i}") for i in range(3)]
    cluster.alive(3)
    began = cluster.rows("SELECT now()")[0][0]
    # Six slots after all three joined, every run of them ended: a window of three or more.
    _at_least(cluster, 7, "SELECT count(DISTINCT slot) FROM tuisched_runs WHERE slot > %s "
              "AND job = 'j149' AND state = 'success'", began, within=60)  # fmt: skip
    stopping = cluster.rows("SELECT now()")[0][0]
    for node in nodes:
        assert node.stop() == 0, node.text()[-2000:]
    rows = cluster.rows(
        "SELECT job, slot, state, owner, started_at FROM tuisched_runs WHERE trigger = 'schedule'"
    )
    per_slot = Counter((job, slot) for job, slot, *_ in rows)
    assert max(per_slot.values()) == 1, "a slot has two rows"
    # Every slot after the first that all three nodes were up for ran, up to two periods
    # before the stops began: the slots the stops overlap (all three nodes stopping, one
    # after the other, on a busy machine) may have runs not started, rightly.
    slots = sorted({slot for _, slot in per_slot})
    window = [slot for slot in slots[1:] if slot <= stopping - timedelta(seconds=4)]
    assert len(window) >= 3, (slots, stopping)
    for slot in window:
        done = [row for row in rows if row[1] == slot]
        assert len(done) == 150, f"slot {slot}: {len(done)} of 150 rows"
        assert all(state == "success" for _, _, state, _, _ in done), Counter(r[2] for r in done)
    early = [row for row in rows if row[4] is not None and row[4] < row[1]]
    assert early == [], "runs started before their slot by the database's clock"
    shares = Counter(owner for _, slot, _, owner, _ in rows if slot in window)
    assert len(shares) == 3, shares
    fair = sum(shares.values()) / 3
    assert all(abs(count - fair) <= 0.15 * fair for count in shares.values()), shares


# --- a node dies -----------------------------------------------------------------------


def test_a_killed_node_s_run_is_abandoned_and_recovered_elsewhere_and_slots_go_on(
    cluster: Cluster,
) -> None:
    log = cluster.base / "executions"
    jobs = _logged("long", log) + _every("tick", 1, "true")
    first = cluster.node(jobs, name="a")
    second = cluster.node(jobs, name="b")
    cluster.alive(2)
    assert first.cli("trigger", "long").returncode == 0
    wait_until(
        lambda: cluster.rows(
            "SELECT owner FROM tuisched_runs WHERE job = 'long' AND state = 'running'"
        ),
        within=20,
    )
    owner = cluster.rows("SELECT owner FROM tuisched_runs WHERE job = 'long'")[0][0]
    victim = cluster.node_of(owner)
    survivor = second if victim is first else first
    victim.stop(signal.SIGKILL)
    killed_at = cluster.rows("SELECT now()")[0][0]
    wait_until(
        lambda: cluster.rows(
            "SELECT 1 FROM tuisched_runs WHERE job = 'long' AND state = 'abandoned'"
        ),
        within=15,
    )
    abandoned_at = cluster.rows(
        "SELECT ended_at FROM tuisched_runs WHERE job = 'long' AND state = 'abandoned'"
    )[0][0]
    assert (abandoned_at - killed_at).total_seconds() < 4 + 1 + 1  # lease + a pass + margin
    wait_until(lambda: cluster.rows(
        "SELECT 1 FROM tuisched_runs WHERE job = 'long' AND attempt = 1 AND state = 'running'"),
        within=10)  # fmt: skip
    recovered = cluster.rows("SELECT owner FROM tuisched_runs WHERE job = 'long' AND attempt = 1")
    assert len(recovered) == 1
    assert int(recovered[0][0].split(":")[1]) == survivor.pid
    # The killed node's keeper ended its run before the recovery began (the job says so).
    wait_until(lambda: len(_executions(log)) == 2)
    _one_at_a_time(_executions(log))
    # The ticks went on on the survivor, one per slot, with at most a short gap.
    _at_least(cluster, 3, "SELECT count(*) FROM tuisched_runs WHERE job = 'tick' AND slot > %s",
              killed_at, within=15)  # fmt: skip
    ticks = cluster.rows(
        "SELECT slot, state FROM tuisched_runs WHERE job = 'tick' AND slot > %s ORDER BY slot",
        killed_at,
    )
    assert len(ticks) >= 3
    assert len({slot for slot, _ in ticks}) == len(ticks)
    dead = json.loads(survivor.cli("nodes", "--json").stdout)
    assert [n["state"] for n in dead if n["pid"] == victim.pid] == ["dead"]
    assert survivor.stop() == 0
    _one_at_a_time(_executions(log))


def test_a_stopped_node_past_its_lease_comes_back_and_its_late_result_changes_nothing(
    cluster: Cluster,
) -> None:
    # Long enough to outlast the other node's start on a busy machine: its keeper ends it.
    jobs = _manual("work", "sleep 60")
    zombie = cluster.node(jobs, name="z")
    cluster.alive(1)
    assert zombie.cli("trigger", "work").returncode == 0
    wait_until(lambda: cluster.rows("SELECT 1 FROM tuisched_runs WHERE state = 'running'"))
    other = cluster.node(jobs, name="o")
    cluster.alive(2)
    zombie.process.send_signal(signal.SIGSTOP)
    try:
        wait_until(
            lambda: cluster.rows("SELECT 1 FROM tuisched_runs WHERE state = 'abandoned'"), within=15
        )
    finally:
        zombie.process.send_signal(signal.SIGCONT)
    # Its keeper ended the run at the fence; the node, back, has no claim left to write.
    wait_until(lambda: "ended after this node's claims lapsed" in zombie.text(), within=15)
    states = cluster.rows("SELECT state, result FROM tuisched_runs WHERE job = 'work'")
    assert states == [("abandoned", "abandoned")]
    assert zombie.stop() == 0
    assert other.stop() == 0


def _long_run_then_another_node(cluster: Cluster, log: Path, *, name: str) -> tuple[Node, Node]:
    """Node `name` running a long `recover: true` run that records itself in `log`, then a
    second node (`o`) joined beside it."""
    jobs = _logged("long", log)
    first = cluster.node(jobs, name=name)
    cluster.alive(1)
    assert first.cli("trigger", "long").returncode == 0
    wait_until(lambda: log.exists() and "start" in log.read_text())
    other = cluster.node(jobs, name="o")
    cluster.alive(2)
    return first, other


def test_a_stopped_node_s_run_ends_at_its_fence_before_its_recovery_starts_elsewhere(
    cluster: Cluster, tmp_path: Path
) -> None:
    log = tmp_path / "executions"
    zombie, other = _long_run_then_another_node(cluster, log, name="z")
    zombie.process.send_signal(signal.SIGSTOP)  # past the lease: its keeper acts for it
    try:
        wait_until(lambda: cluster.rows(
            "SELECT 1 FROM tuisched_runs WHERE job = 'long' AND attempt = 1 AND owner LIKE %s",
            f"%:{other.pid}:%"), within=20)  # fmt: skip
        wait_until(lambda: len(_executions(log)) == 2)
    finally:
        zombie.process.send_signal(signal.SIGCONT)
    _one_at_a_time(_executions(log))
    wait_until(lambda: zombie.text().count("joined as node") == 2, within=30)
    assert (
        "no word from the scheduler within its fence"
        in (cluster.base / "z" / "state" / "keeper.log").read_text()
    )
    assert zombie.stop() == 0
    assert other.stop() == 0
    _one_at_a_time(_executions(log))


def test_a_node_stopped_past_its_fence_but_not_its_lease_ends_its_run_and_it_is_run_once_more(
    cluster: Cluster, tmp_path: Path
) -> None:
    log = tmp_path / "executions"
    stalled, other = _long_run_then_another_node(cluster, log, name="s")
    keeper_log = cluster.base / "s" / "state" / "keeper.log"
    stalled.process.send_signal(signal.SIGSTOP)
    try:  # back as soon as its keeper has acted: past the fence, within the lease
        wait_until(lambda: keeper_log.exists() and "within its fence" in keeper_log.read_text())
    finally:
        stalled.process.send_signal(signal.SIGCONT)
    # It comes back holding a run its keeper ended: that run is closed by the reapers and
    # run once more (recover: true), on whichever node; never beside the first.
    wait_until(lambda: cluster.rows(
        "SELECT 1 FROM tuisched_runs WHERE job = 'long' AND attempt = 1 AND state = 'running'"),
        within=20)  # fmt: skip
    wait_until(lambda: len(_executions(log)) == 2)
    _one_at_a_time(_executions(log))
    rows = cluster.rows("SELECT attempt, state FROM tuisched_runs WHERE job = 'long' "
                        "ORDER BY attempt")  # fmt: skip
    assert rows == [(0, "abandoned"), (1, "running")], rows
    assert stalled.stop() == 0
    assert other.stop() == 0
    _one_at_a_time(_executions(log))


# --- steering from any node ----------------------------------------------------------


def test_pause_trigger_and_stop_from_one_node_reach_the_others(cluster: Cluster) -> None:
    # tock goes on while tick is paused: what says that slots went by meanwhile.
    jobs = _every("tick", 1, "true") + _manual("manual", "sleep 30") + _every("tock", 1, "true")
    a, b, c = (cluster.node(jobs, name=name) for name in "abc")
    cluster.alive(3)
    assert a.cli("pause", "tick").returncode == 0
    paused_at = cluster.rows("SELECT now()")[0][0]

    def paused_everywhere() -> bool:
        return all(
            {job["name"]: job["state"] for job in json.loads(node.cli("jobs", "--json").stdout)}
            ["tick"] == "paused" for node in (b, c)
        )  # fmt: skip

    # (within the nodes' poll, 1 s, plus what two command lines take to start on a busy
    # machine: the wake-up's own speed is the next tests')
    wait_until(paused_everywhere, within=15)
    seen = cluster.rows("SELECT now()")[0][0]
    _at_least(cluster, 2, "SELECT count(*) FROM tuisched_runs WHERE job = 'tock' "
              "AND state = 'success' AND slot > %s", seen, within=15)  # fmt: skip
    late = cluster.rows(
        "SELECT count(*) FROM tuisched_runs WHERE job = 'tick' AND started_at > %s + '0.5 s'",
        paused_at,
    )[0][0]
    assert late == 0, "a paused job kept running on another node"
    assert c.cli("resume", "tick").returncode == 0
    wait_until(lambda: not paused_everywhere(), within=15)

    done = b.cli("trigger", "manual", "--json")
    assert done.returncode == 0, done.stderr
    run_id = json.loads(done.stdout)["run_id"]
    wait_until(
        lambda: cluster.rows(
            "SELECT 1 FROM tuisched_runs WHERE run_id = %s AND state = 'running'", run_id
        )
    )
    _status_names_the_node_running(cluster, run_id, (a, b, c))
    (owner,) = [n for n in (a, b, c) if cluster.rows(
        "SELECT 1 FROM tuisched_runs WHERE run_id = %s AND owner LIKE %s", run_id,
        f"%:{n.pid}:%")]  # fmt: skip
    again = owner.cli("trigger", "manual")  # `overlap: skip`, and its run holds the job here
    assert again.returncode == 1
    assert f"trigger 'manual': still running: run {run_id} since " in again.stderr
    assert "--queue" not in again.stderr  # the cluster would skip it: no offer to queue
    queued = owner.cli("trigger", "manual", "--queue")
    assert queued.returncode == 1
    assert "cannot wait behind a run in cluster mode (overlap: skip)" in queued.stderr
    stopped = c.cli("stop", run_id)
    assert stopped.returncode == 0, stopped.stderr
    wait_until(
        lambda: cluster.rows(
            "SELECT 1 FROM tuisched_runs WHERE run_id = %s AND state <> 'running'", run_id
        ),
        within=10,
    )
    assert cluster.rows("SELECT result FROM tuisched_runs WHERE run_id = %s", run_id) == [
        ("stopped",)
    ]
    for node in (a, b, c):
        assert node.stop() == 0


def _status_names_the_node_running(cluster: Cluster, run_id: str, nodes: Sequence[Node]) -> None:
    """`status` on a node that does not run `run_id` lists it with the node that does."""
    ((owner,),) = cluster.rows(
        "SELECT n.name FROM tuisched_runs AS r JOIN tuisched_nodes AS n ON n.node_id = r.owner "
        "WHERE r.run_id = %s",
        run_id,
    )
    other = next(node for node in nodes if node.path.parent.name != owner)

    def listed() -> list[dict[str, Any]]:
        runs = json.loads(other.cli("status", "--json").stdout)["runs"]
        return [run for run in runs if run["run_id"] == run_id]

    wait_until(lambda: [run["node"] for run in listed()] == [owner], within=5)  # its next poll
    heading, *rows = other.cli("status").stdout.split("\n\n", 1)[1].splitlines()
    assert heading.split()[-1] == "NODE"
    (row,) = [row for row in rows if row.startswith(run_id)]
    assert row.split()[-1] == owner


def test_pauses_and_resumes_across_busy_nodes_leave_every_slot_a_row_and_run_none_twice(
    cluster: Cluster,
) -> None:
    # Busy nodes (60 jobs a second between them), and a pause and a resume of tick asked
    # on different nodes, again and again: each slot of tick ran once or waits in the
    # downtime ledger (MISSED), by the rows and by the job's own record.
    log = cluster.base / "ticks"
    jobs = _ticking("tick", 1, log) + "".join(_every(f"load{i:02d}", 1, "true") for i in range(60))
    a, b = (cluster.node(jobs, name=name) for name in "ab")
    cluster.alive(2)
    wait_until(lambda: len(_ran(log)) >= 2)
    for round_ in range(4):
        pauser, resumer = (a, b) if round_ % 2 == 0 else (b, a)
        assert pauser.cli("pause", "tick").returncode == 0
        paused = cluster.rows("SELECT now()")[0][0]
        # paused across one slot or more (two to five slots of the load jobs, which go on)
        _at_least(cluster, 2 + round_, "SELECT count(DISTINCT slot) FROM tuisched_runs "
                  "WHERE job = 'load00' AND slot > %s", paused)  # fmt: skip
        assert resumer.cli("resume", "tick").returncode == 0
        ran = len(_ran(log))
        wait_until(lambda ran=ran: len(_ran(log)) > ran, within=30)  # running again
    ran = len(_ran(log))
    wait_until(lambda: len(_ran(log)) >= ran + 2, within=30)
    for node in (a, b):
        assert node.stop() == 0
    rows = cluster.rows("SELECT slot, state FROM tuisched_runs WHERE job = 'tick'")
    _each_slot_ran_once(log, rows)
    slots = sorted(slot for slot, _ in rows)
    assert len(slots) == len(set(slots)), "a slot has two rows"
    gaps = [(x, y) for x, y in itertools.pairwise(slots) if (y - x).total_seconds() != 1]
    assert not gaps, f"slots with no row at all between: {gaps}"
    # A due row a pause closed is NOT_STARTED (the job was paused): a row all the same.
    # After the newest run, a slot may be left due by the stop (on a busy machine).
    newest = max(slot for slot, state in rows if state == "success")
    assert {state for slot, state in rows if slot <= newest} <= {
        "success", "missed", "not_started"}, rows  # fmt: skip
    assert {state for slot, state in rows if slot > newest} <= {"due", "missed"}, rows


def test_a_pause_wakes_the_other_nodes_at_once_and_a_killed_listener_listens_again(
    cluster: Cluster,
) -> None:
    slow_poll = TIMING.replace("poll: 1s", "poll: 30s")  # only the wake-up can be this fast
    jobs = _every("tick", 3600, "true")
    a, b = (cluster.node(jobs, name=name, timing=slow_poll) for name in "ab")
    cluster.alive(2)

    def paused_on_b() -> bool:
        return json.loads(b.cli("jobs", "--json").stdout)[0]["state"] == "paused"

    def listeners() -> list[tuple[Any, ...]]:
        return cluster.rows("SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                            "AND application_name LIKE 'tuisched-listen %%'")  # fmt: skip

    # Well under the 30 s poll, on a busy machine too (each look is a command line).
    soon = 15
    wait_until(lambda: len(listeners()) == 2, within=10)
    time.sleep(1)  # past the first pass after joining, which reads everything anyway
    asked = time.monotonic()
    assert a.cli("pause", "tick").returncode == 0
    wait_until(paused_on_b, within=soon)
    assert time.monotonic() - asked < soon, "the pause waited for the poll"
    for (pid,) in listeners():  # kill only the wake-up connections
        cluster.rows("SELECT pg_terminate_backend(%s)", pid)
    wait_until(lambda: len(listeners()) == 2, within=10)
    time.sleep(1)  # past the pass that reads what was missed while not listening
    asked = time.monotonic()
    assert a.cli("resume", "tick").returncode == 0
    wait_until(lambda: not paused_on_b(), within=soon)
    assert time.monotonic() - asked < soon
    assert "the wake-up connection was lost" in b.text()
    for node in (a, b):
        assert node.stop() == 0


def test_run_now_prefers_the_node_asked_and_trigger_wait_follows_it_to_another_node(
    cluster: Cluster,
) -> None:
    jobs = _manual("block", "sleep 30") + _manual("quick", "exit 3")
    busy = cluster.node(jobs, name="busy", max_workers=1)
    free = cluster.node(jobs, name="free")
    cluster.alive(2)
    here = busy.cli("trigger", "block", "--json")
    assert here.returncode == 0, here.stderr
    block = json.loads(here.stdout)["run_id"]
    wait_until(lambda: cluster.rows(
        "SELECT 1 FROM tuisched_runs WHERE run_id = %s AND owner LIKE %s", block,
        f"%:{busy.pid}:%"))  # fmt: skip
    followed = busy.cli("trigger", "quick", "--wait", "--json")
    assert followed.returncode == 3, followed.stderr  # the run's own exit code
    ended = json.loads(followed.stdout)
    assert ended["node"].split(":")[1] == str(free.pid)
    for node in (busy, free):
        assert node.stop() == 0


def test_an_after_dependant_runs_once_per_upstream_run_whichever_node_ran_it(
    cluster: Cluster,
) -> None:
    jobs = _every("up", 1, "true") + (
        "  report:\n    command: [/bin/sh, -c, 'true']\n    after: {job: up, on: success}\n"
    )
    nodes = [cluster.node(jobs, name=f"d{i}") for i in range(2)]
    cluster.alive(2)
    # Upstream runs on both nodes, and dependants after them.
    _at_least(cluster, 2, "SELECT count(DISTINCT owner) FROM tuisched_runs WHERE job = 'up' "
              "AND state = 'success'")  # fmt: skip
    _at_least(cluster, 4, "SELECT count(*) FROM tuisched_runs WHERE job = 'report' "
              "AND state = 'success'")  # fmt: skip
    for node in nodes:
        assert node.stop() == 0
    ups = dict(
        cluster.rows("SELECT slot, owner FROM tuisched_runs WHERE job = 'up' AND state = 'success'")
    )
    reports = cluster.rows("SELECT slot, trigger, state FROM tuisched_runs WHERE job = 'report'")
    assert len(ups) >= 3
    assert Counter(slot for slot, _, _ in reports).most_common(1)[0][1] == 1  # never twice
    ran = {slot for slot, trigger, state in reports if state == "success"}
    assert all(trigger == "dependency" for _, trigger, _ in reports)
    # Every upstream success made its dependant run (the last one may be cut by the stop).
    assert len(set(ups) - ran) <= 1, (sorted(ups), sorted(ran))
    assert len(set(ups.values())) == 2, "one node ran every upstream run"


def test_a_job_defined_differently_on_one_node_is_flagged_and_not_run_there(
    cluster: Cluster,
) -> None:
    log, odd_log = cluster.base / "x", cluster.base / "odd-x"
    same = _ticking("x", 1, log)
    a = cluster.node(same, name="a")
    b = cluster.node(same, name="b")
    cluster.alive(2)
    # A job's rows left due by a node that is gone, and that no node defines now.
    cluster.rows(
        "INSERT INTO tuisched_runs (run_id, job, slot, trigger, attempt, state, "
        "due_at) VALUES ('stale0000001', 'gone', now(), 'schedule', 0, 'due', now()) "
        "RETURNING run_id"
    )
    # Another schedule for x (slots at half seconds), and a job of its own.
    odd_x = (f"  x:\n    command: [/bin/sh, -c, 'echo $TUISCHED_SLOT >> {odd_log}']\n"
             "    schedule: {every: 2s, start: '2026-01-01T00:00:00.500Z'}\n")  # fmt: skip
    odd = cluster.node(odd_x + _every("solo", 1, "true"), name="odd")
    cluster.alive(3)
    wait_until(lambda: "defines solo, x differently from the cluster" in odd.text())
    nodes = {n["name"]: n for n in json.loads(a.cli("nodes", "--json").stdout)}
    assert nodes["odd"]["drifted_jobs"] == ["solo", "x"]
    assert nodes["a"]["drifted_jobs"] == nodes["b"]["drifted_jobs"] == []
    assert nodes["odd"]["config_hash"] != nodes["a"]["config_hash"]
    # The node itself says so, not only `tuisched nodes`.
    said = json.loads(odd.cli("status", "--json").stdout)["cluster"]
    assert said == "db connected, drifted: solo, x", said
    wait_until(
        lambda: cluster.rows(
            "SELECT 1 FROM tuisched_runs WHERE run_id = 'stale0000001' AND state = 'not_started'"
        )
    )
    since = cluster.rows("SELECT now() - '1 s'::interval")[0][0]
    # slots of both schedules come and go
    _at_least(cluster, 3, "SELECT count(*) FROM tuisched_runs WHERE job = 'x' "
              "AND state = 'success' AND started_at > %s", since)  # fmt: skip
    # Nothing due or running before the newest success: the slots are through.
    wait_until(lambda: cluster.rows(
        "SELECT 1 FROM tuisched_runs AS done WHERE job = 'x' AND state = 'success' "
        "AND NOT EXISTS (SELECT 1 FROM tuisched_runs AS r WHERE r.job = 'x' "
        "AND r.state IN ('due', 'running') AND r.slot < done.slot)"), within=15)  # fmt: skip
    # The odd node first: alone after the others left, its definition would be the
    # cluster's (the one most live nodes hold), and it would rightly run its own slots.
    for node in (odd, a, b):
        assert node.stop() == 0
    rows = cluster.rows("SELECT job, slot, owner, started_at FROM tuisched_runs "
                        "WHERE job IN ('x', 'solo')")  # fmt: skip
    assert rows
    assert all(job == "x" for job, *_ in rows), "a slot of the job only one node defines"
    assert all(slot.microsecond == 0 for _, slot, _, _ in rows), "a slot of the odd schedule"
    recent = [owner for _, _, owner, started in rows if started is not None and started > since]
    assert recent
    assert all(int(owner.split(":")[1]) != odd.pid for owner in recent)
    assert "no slot of x is offered from this node" in odd.text()
    # What ran is what the jobs say ran: each slot of the cluster's x once, none of odd's.
    x_rows = cluster.rows("SELECT slot, state, preferred, owner FROM tuisched_runs "
                          "WHERE job = 'x'")  # fmt: skip
    _each_slot_ran_once(log, [row[:2] for row in x_rows])
    _none_lost(log, rows=x_rows)
    assert not [row for row in x_rows if row[2] and f":{odd.pid}:" in row[2]], (
        "a slot of x prefers the node that does not run it"
    )
    assert not odd_log.exists()


def test_a_rolling_restart_loses_no_slot(cluster: Cluster) -> None:
    # overlap allow: on a busy machine a run's end can reach the database after the next
    # slot, which `skip` (rightly) records as skipped: a decision, not a slot lost.
    jobs = _every("tick", 1, "true", "    overlap: allow\n")
    nodes = [cluster.node(jobs, name=f"r{i}") for i in range(3)]
    cluster.alive(3)
    began = cluster.rows("SELECT now()")[0][0]
    for index, node in enumerate(list(nodes)):
        assert node.stop() == 0
        nodes[index] = cluster.node(jobs, name=f"r{index}")
        cluster.alive(3)
    # Forked from a preloaded interpreter, the nodes restart within a second: the window
    # judged must still hold a few slots (the database's clock says when).
    wait_until(lambda: cluster.rows("SELECT now() - %s > interval '4 s'", began)[0][0])
    ended = cluster.rows("SELECT now()")[0][0]
    window = (began, ended - timedelta(seconds=1))
    # A slot that preferred the node just stopped waits `steal_after` for another node:
    # judge the window once every run in it has ended.
    wait_until(lambda: not cluster.rows(
        "SELECT 1 FROM tuisched_runs WHERE job = 'tick' AND slot > %s AND slot < %s "
        "AND state IN ('due', 'running')", *window), within=30)  # fmt: skip
    slots = [row[0] for row in cluster.rows(
        "SELECT slot FROM tuisched_runs WHERE job = 'tick' AND slot > %s AND slot < %s "
        "AND state = 'success' ORDER BY slot", *window)]  # fmt: skip
    assert slots, "no tick slot ran during the rolling restart"
    expected = int((slots[-1] - slots[0]).total_seconds()) + 1
    every = cluster.rows(  # what became of each slot, for the failure's message
        "SELECT slot, state, result, status, owner, preferred FROM tuisched_runs "
        "WHERE job = 'tick' AND slot > %s AND slot < %s ORDER BY slot, created_at",
        *window,
    )
    assert len(slots) == expected == len(set(slots)), "\n".join(map(str, every))
    for node in nodes:
        assert node.stop() == 0


def test_nodes_of_one_file_on_one_machine_are_told_apart_by_their_names(
    cluster: Cluster,
) -> None:
    path = config(cluster.base / "one", cluster.url, _every("tick", 1, "true"), name="file")
    named = [Node(path, {"TUISCHED_NODE_NAME": name}, log=f"{name}.log") for name in "ab"]
    cluster.nodes.extend(named)
    cluster.alive(2)
    plain = Node(path, log="plain.log")
    cluster.nodes.append(plain)
    cluster.alive(3)
    again = Node(path, log="again.log")
    cluster.nodes.append(again)
    assert again.process.wait(30) == 75
    assert "TUISCHED_NODE_NAME=NAME" in again.text()
    listed = json.loads(plain.cli("nodes", "--json").stdout)
    assert sorted(n["name"] for n in listed if n["state"] == "alive") == ["a", "b", "file"]
    # The database's own view tells them apart too (`application_name`).
    sessions = {name for (name,) in cluster.rows(
        "SELECT application_name FROM pg_stat_activity WHERE application_name LIKE 'tuisched %%'"
    )}  # fmt: skip
    assert {"tuisched a", "tuisched b", "tuisched file"} <= sessions, sessions
    status = json.loads(plain.cli("status", "--json", TUISCHED_NODE_NAME="b").stdout)
    assert status["pid"] == named[1].pid
    assert (cluster.base / "one" / "state" / "nodes" / "b" / "tuisched.lock").exists()
    for node in (*named, plain):
        assert node.stop() == 0


# --- the database misbehaves -----------------------------------------------------------


def test_a_node_whose_database_refuses_it_says_what_to_fix_and_exits_78(
    cluster: Cluster, postgres: PostgresServer
) -> None:
    node = cluster.node(_every("x", 1, "true"), name="w", env={"TEST_PG_PASSWORD": "wrong"})
    assert node.process.wait(30) == 78
    said = node.text()
    assert "refused the password of role 'postgres'" in said
    assert PASSWORD not in said
    assert "wrong" not in said
    missing = cluster.node(_every("x", 1, "true"), name="m", url=postgres.url("no_such_database"))
    assert missing.process.wait(30) == 78
    assert "no_such_database" in missing.text()
    # A fresh database that takes no writes: the tables cannot be made there.
    fresh = postgres.create_database()
    postgres.sql(f"ALTER DATABASE {fresh} SET default_transaction_read_only = on")
    read_only = cluster.node(_every("x", 1, "true"), name="r", url=postgres.url(fresh))
    assert read_only.process.wait(30) == 78
    said = read_only.text()
    assert "takes no writes (read-only)" in said
    assert "Traceback" not in said


def test_a_database_down_at_start_is_waited_for_and_sigterm_still_ends_the_node(
    cluster: Cluster, tmp_path: Path
) -> None:
    proxy_port = _free_port()
    url = cluster.url.replace(f":{cluster.server.port}/", f":{proxy_port}/")
    node = cluster.node(_every("tick", 1, "true"), name="d", url=url)
    wait_until(lambda: "nothing accepts connections" in node.text(), within=20)
    wait_until(node.listening, within=20)
    status = node.cli("status", "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["cluster"].startswith("db connecting since")
    started = time.monotonic()
    assert node.stop() == 0
    assert time.monotonic() - started < 10


def test_a_read_only_database_is_a_shown_state_and_the_node_goes_on_after_it(
    cluster: Cluster,
) -> None:
    log = cluster.base / "ticks"
    node = cluster.node(_ticking("tick", 1, log), name="ro")
    cluster.alive(1)
    server, database = cluster.server, cluster.database

    def everyone_reconnects(setting: str) -> None:
        server.sql(f"ALTER DATABASE {database} {setting}")
        cluster.rows(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )

    def status() -> str:
        said = node.cli("status", "--json")
        return str(json.loads(said.stdout)["cluster"]) if said.returncode == 0 else ""

    everyone_reconnects("SET default_transaction_read_only = on")
    wait_until(lambda: status().startswith("db read-only since"), within=15)
    assert "takes no writes (read-only)" in node.text()
    # Only the database's default changes back: the node's sessions, begun read-only,
    # stay so until the node replaces them.
    server.sql(f"ALTER DATABASE {database} RESET default_transaction_read_only")
    wait_until(lambda: status() == "db connected", within=40)
    back = cluster.rows("SELECT now()")[0][0]
    # Until the slots of the read-only time are through (run late) and the node is back
    # to slots on time: nothing due or running before the newest success after `back`.
    wait_until(lambda: cluster.rows(
        "SELECT 1 FROM tuisched_runs AS done WHERE state = 'success' AND slot > %s "
        "AND NOT EXISTS (SELECT 1 FROM tuisched_runs AS r WHERE r.state IN ('due', 'running') "
        "AND r.slot < done.slot)", back), within=15)  # fmt: skip
    assert node.stop() == 0
    # The slots of the read-only time ran once it was over (within their grace), once each.
    rows = cluster.rows("SELECT slot, state, result, status, owner, due_at, preferred, "
                        "started_at, run_id, fence FROM tuisched_runs")  # fmt: skip
    # A run in flight as the database turned read-only may end (on a busy machine) after
    # the node's fence has passed with no good heartbeat: its node no longer holds its
    # claim and records it ABANDONED, as a reaper would, whether or not the command got to
    # run. Such a slot may be in the record once or not at all; nothing else may differ.
    lapsed = {row[0] for row in rows if row[1] == "abandoned" and row[3] == LAPSED}
    _each_slot_ran_once(log, [row[:2] for row in rows], unknown=lapsed)
    _none_lost(log, rows=rows)


async def test_resets_and_latency_between_a_node_and_its_database_lose_no_slot(
    cluster: Cluster,
) -> None:
    proxy = TcpProxy(cluster.server.port)
    await proxy.start()
    try:
        url = cluster.url.replace(f":{cluster.server.port}/", f":{proxy.port}/")
        node = cluster.node(_every("tick", 1, "true"), name="far", url=url)
        await asyncio.to_thread(cluster.alive, 1)
        began = (await asyncio.to_thread(cluster.rows, "SELECT now()"))[0][0]

        async def ticks_after(count: int) -> None:
            """Until `count` ticks started after now ran (by the database's clock)."""
            now = (await asyncio.to_thread(cluster.rows, "SELECT now()"))[0][0]
            await asyncio.to_thread(
                _at_least, cluster, count, "SELECT count(*) FROM tuisched_runs WHERE "
                "job = 'tick' AND state = 'success' AND started_at > %s", now,
            )  # fmt: skip

        for _ in range(3):  # every connection reset at once, three times
            proxy.reset()
            await ticks_after(1)
        proxy.latency = 0.05  # 100 ms a round trip
        await ticks_after(4)
        proxy.latency = 0.0
        await ticks_after(2)
        ended = (await asyncio.to_thread(cluster.rows, "SELECT now()"))[0][0]
        assert await asyncio.to_thread(node.stop) == 0
        found = await asyncio.to_thread(
            cluster.rows,
            "SELECT slot, state, result, run_id FROM tuisched_runs WHERE job = 'tick' "
            "AND slot > %s AND slot < %s ORDER BY slot",
            began,
            ended - timedelta(seconds=1),
        )
        rows = [(slot, state, result) for slot, state, result, _ in found]
        slots = [row[0] for row in rows]
        expected = int((slots[-1] - slots[0]).total_seconds()) + 1
        assert len(slots) == expected == len(set(slots)), rows  # a row for each slot, once
        assert expected >= 8
        # A slot that came while the run before it was still running on the slow link (its
        # end not written yet) is skipped as `overlap: skip` says, and recorded so. A run
        # during which the node went without a good heartbeat for longer than its fence (a
        # machine this busy, three resets at once) is ABANDONED, and the node says so.
        lapsed = {run_id for _, state, _, run_id in found if state == "abandoned"}
        said = node.text()
        assert all(f"run {run_id} of tick ended after this node's claims lapsed" in said
                   for run_id in lapsed), said  # fmt: skip
        assert {(state, result) for _, state, result in rows} <= {
            ("success", "completed"),
            ("not_started", "skipped"),
            ("abandoned", "abandoned"),
        }, rows
        assert sum(state == "success" for _, state, _ in rows) >= expected // 2, rows
    finally:
        await proxy.stop()


async def test_a_blackholed_node_fences_itself_and_the_others_take_its_work(
    cluster: Cluster,
) -> None:
    proxy = TcpProxy(cluster.server.port)  # on this loop; the blocking waits go to threads
    await proxy.start()

    async def until(condition: Callable[[], object], within: float = 15) -> None:
        await asyncio.to_thread(wait_until, condition, within)

    try:
        url = cluster.url.replace(f":{cluster.server.port}/", f":{proxy.port}/")
        log = cluster.base / "executions"
        jobs = _logged("long", log) + _every("tick", 1, "true")
        cut = cluster.node(jobs, name="cut", url=url)
        await asyncio.to_thread(cluster.alive, 1)
        triggered = await asyncio.to_thread(cut.cli, "trigger", "long")
        assert triggered.returncode == 0, triggered.stderr
        await until(
            lambda: cluster.rows(
                "SELECT 1 FROM tuisched_runs WHERE job = 'long' AND state = 'running'"
            )
        )
        direct = cluster.node(jobs, name="direct")
        await asyncio.to_thread(cluster.alive, 2)
        proxy.blackhole()
        await until(lambda: "stops claiming" in cut.text())
        await until(lambda: cluster.rows(
            "SELECT 1 FROM tuisched_runs WHERE job = 'long' AND attempt = 1 AND owner LIKE %s",
            f"%:{direct.pid}:%"))  # fmt: skip
        await until(lambda: len(_executions(log)) == 2)
        _one_at_a_time(_executions(log))  # its keeper ended the first at the fence
        proxy.restore()
        await until(lambda: cut.text().count("joined as node") == 2, within=30)
        assert await asyncio.to_thread(cut.stop) == 0
        assert await asyncio.to_thread(direct.stop) == 0
        _one_at_a_time(_executions(log))
    finally:
        proxy.restore()
        await proxy.stop()


async def test_a_run_that_ends_while_its_node_is_cut_off_is_recorded_as_it_ended(
    cluster: Cluster, tmp_path: Path
) -> None:
    proxy = TcpProxy(cluster.server.port)
    await proxy.start()

    async def until(condition: Callable[[], object], within: float = 15) -> None:
        await asyncio.to_thread(wait_until, condition, within)

    gate = tmp_path / "gate"
    try:
        url = cluster.url.replace(f":{cluster.server.port}/", f":{proxy.port}/")
        jobs = _manual("short", f"while [ ! -e {gate} ]; do sleep 0.05; done; echo done")
        cut = cluster.node(jobs, name="cut", url=url)
        await asyncio.to_thread(cluster.alive, 1)
        triggered = await asyncio.to_thread(cut.cli, "trigger", "short")
        assert triggered.returncode == 0, triggered.stderr
        await until(lambda: cluster.rows("SELECT 1 FROM tuisched_runs WHERE state = 'running'"))
        direct = cluster.node(jobs, name="direct")
        await asyncio.to_thread(cluster.alive, 2)
        proxy.blackhole()
        gate.touch()  # the run ends now, while its node cannot say so
        await until(
            lambda: cluster.rows(
                "SELECT 1 FROM tuisched_runs WHERE job = 'short' AND state = 'abandoned'"
            )
        )
        proxy.restore()
        await until(
            lambda: cluster.rows(
                "SELECT 1 FROM tuisched_runs WHERE job = 'short' AND state = 'success'"
            ),
            within=30,
        )
        (status,) = cluster.rows("SELECT status FROM tuisched_runs WHERE job = 'short'")[0]
        assert "recorded late" in status
        assert await asyncio.to_thread(cut.stop) == 0
        assert await asyncio.to_thread(direct.stop) == 0
    finally:
        proxy.restore()
        await proxy.stop()


async def test_slots_passed_during_an_outage_are_said_in_one_line_a_job(
    cluster: Cluster,
) -> None:
    proxy = TcpProxy(cluster.server.port)
    await proxy.start()
    try:
        url = cluster.url.replace(f":{cluster.server.port}/", f":{proxy.port}/")
        jobs = _every("tick", 1, "true", "    grace: 2s\n")
        cut = cluster.node(jobs, name="cut", url=url)
        await asyncio.to_thread(cluster.alive, 1)
        proxy.blackhole()
        await asyncio.to_thread(wait_until, lambda: "stops claiming" in cut.text(), 15)
        await asyncio.sleep(3)  # the outage goes on: slots go by, past their grace of 2 s
        proxy.restore()
        await asyncio.to_thread(wait_until, lambda: "claims again" in cut.text(), 30)
        await asyncio.to_thread(wait_until, lambda: "not offered" in cut.text(), 30)
        lines = [line for line in cut.text().splitlines() if "not offered" in line]
        assert len(lines) == 1, lines
        assert re.search(r"cluster: (1 slot|\d+ slots) of tick from", lines[0]), lines
        assert await asyncio.to_thread(cut.stop) == 0
    finally:
        proxy.restore()
        await proxy.stop()


def test_postgresql_restarted_fast_and_immediate_the_nodes_go_on(tmp_path: Path) -> None:
    (tmp_path / "pg").mkdir()
    server = start_server(tmp_path / "pg")
    if server is None:
        pytest.skip("no PostgreSQL server")
    made = Cluster(server, tmp_path)
    try:
        node = made.node(_every("tick", 1, "true"), name="p")
        other = made.node(_every("tick", 1, "true"), name="q")
        made.alive(2)
        for mode in ("fast", "immediate"):
            server.stop(mode)
            wait_until(lambda: "reconnecting" in node.text(), within=15)
            time.sleep(1)
            server.start()
            restarted = made.rows("SELECT now()")[0][0]
            wait_until(lambda at=restarted: made.rows(
                "SELECT 1 FROM tuisched_runs WHERE job = 'tick' AND state = 'success' "
                "AND started_at > %s", at), within=20)  # fmt: skip
        # A pause made while the other node may still be reconnecting reaches it.
        server.stop("fast")
        server.start()
        wait_until(lambda: node.cli("pause", "tick").returncode == 0, within=20)
        wait_until(lambda: json.loads(other.cli("jobs", "--json").stdout)[0]["state"]
                   == "paused", within=10)  # fmt: skip
        assert other.stop() == 0
        assert node.stop() == 0
        per_slot = Counter(row[0] for row in made.rows("SELECT slot FROM tuisched_runs"))
        assert max(per_slot.values()) == 1
    finally:
        made.close()
        server.stop("immediate")


def _libfaketime() -> Path | None:
    """libfaketime's preload library (Debian's `faketime` package), if installed."""
    found = sorted(Path("/usr/lib").glob("*/faketime/libfaketimeMT.so.1"))
    return found[0] if found else None


@pytest.mark.skipif(_libfaketime() is None, reason="faketime (libfaketime) is missing")
@pytest.mark.parametrize("offset", ["+30s", "-30s", "jumps"])
def test_a_node_with_a_skewed_clock_never_starts_a_slot_early(
    cluster: Cluster, offset: str, tmp_path: Path
) -> None:
    # The honest node has one worker and each run takes 1.5 s: the skewed one must help.
    jobs = _every("tick", 1, "sleep 1.5", "    overlap: allow\n")
    honest = cluster.node(jobs, name="honest", max_workers=1)
    # Preloaded in the node only (not through the `faketime` wrapper, which would stand
    # between the test and the node's signals); its children keep true time.
    clock = tmp_path / "faketime"  # "jumps": read again at each call, changed mid-run
    clock.write_text("+0s", encoding="utf-8")
    fake = {"FAKETIME": offset} if offset != "jumps" else {
        "FAKETIME_TIMESTAMP_FILE": str(clock), "FAKETIME_NO_CACHE": "1"}  # fmt: skip
    skewed = cluster.node(jobs, name="skewed", env={
        "LD_PRELOAD": str(_libfaketime()), "FAKETIME_DONT_RESET": "1", **fake,
    })  # fmt: skip
    cluster.alive(2)
    said = skewed.cli("status", "--json")
    assert said.returncode == 0, said.stderr

    def runs_after(count: int) -> None:
        """Until `count` runs started after now (by the database's clock)."""
        now = cluster.rows("SELECT now()")[0][0]
        _at_least(cluster, count, "SELECT count(*) FROM tuisched_runs WHERE started_at > %s",
                  now)  # fmt: skip

    if offset == "jumps":
        runs_after(2)
        clock.write_text("+45s", encoding="utf-8")  # forward...
        runs_after(2)
        clock.write_text("-20s", encoding="utf-8")  # ...and back past the true time
        runs_after(3)
    else:
        runs_after(5)
    for node in (honest, skewed):
        assert node.stop() == 0, node.text()[-1500:]
    # Every run that started, whatever its end: a run of the skewed node may be ended when
    # libfaketime moves its monotonic clock too (45 s without a heartbeat, to the node).
    rows = cluster.rows(
        "SELECT slot, started_at, owner FROM tuisched_runs WHERE started_at IS NOT NULL"
    )
    owners = Counter(int(owner.split(":")[1]) for _, _, owner in rows)
    assert owners[skewed.pid] > 0, "the skewed node started nothing"
    assert all(started >= slot for slot, started, _ in rows), "a run started before its slot"
    assert max(Counter(slot for slot, _, _ in rows).values()) == 1


@pytest.mark.skipif(_libfaketime() is None, reason="faketime (libfaketime) is missing")
def test_a_node_restarted_with_its_clock_ahead_records_no_slot_to_come_as_missed(
    cluster: Cluster,
) -> None:
    log = cluster.base / "ticks"
    jobs = _ticking("tick", 1, log, "    overlap: allow\n")
    honest = cluster.node(jobs, name="honest")
    ahead = {"LD_PRELOAD": str(_libfaketime()), "FAKETIME_DONT_RESET": "1", "FAKETIME": "+30s"}
    first = cluster.node(jobs, name="ahead", env=ahead)
    cluster.alive(2)
    wait_until(lambda: cluster.rows("SELECT 1 FROM tuisched_runs WHERE owner LIKE %s",
                                    f"%:{first.pid}:%"), within=20)  # fmt: skip
    assert first.stop() == 0
    # Restarted: it was down from its last heartbeat (by its own clock, 30 s ahead) to now
    # (by the same clock). The slots still to come by the database's clock are not missed.
    again = cluster.node(jobs, name="ahead", env=ahead)
    cluster.alive(2)
    back = cluster.rows("SELECT now()")[0][0]
    wait_until(lambda: "missed slots" in again.text() or cluster.rows(
        "SELECT 1 FROM tuisched_runs WHERE owner LIKE %s AND started_at > %s",
        f"%:{again.pid}:%", back), within=20)  # fmt: skip
    # slots go on for a few seconds after the restart (four or more, run)
    _at_least(cluster, 4, "SELECT count(*) FROM tuisched_runs WHERE job = 'tick' "
              "AND state = 'success' AND slot > %s", back)  # fmt: skip
    for node in (honest, again):
        assert node.stop() == 0, node.text()[-1500:]
    missed = cluster.rows("SELECT slot FROM tuisched_runs WHERE state = 'missed'")
    assert missed == [], f"slots recorded missed: {missed}"
    done = {slot for (slot,) in cluster.rows(
        "SELECT slot FROM tuisched_runs WHERE job = 'tick' AND state = 'success' AND slot > %s",
        back)}  # fmt: skip
    last = max(done)
    expected = int((last - back).total_seconds())
    assert len(done) >= expected >= 3, sorted(done)
    _each_slot_ran_once(log, cluster.rows("SELECT slot, state FROM tuisched_runs"))
    _none_lost(log)


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
