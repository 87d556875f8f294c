"""A full disk loses nothing: runs go on, what cannot be written is kept in memory and
written when space returns, one warning per episode, and the scheduler stops cleanly.

A full disk is made without root: the scheduler runs in a child process whose
file size limit (RLIMIT_FSIZE) is set to 0, so every write that would grow a
file fails (EFBIG, SIGXFSZ ignored) exactly where a full disk fails (ENOSPC):
the history's write-ahead log, the audit log, the run output files.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from ..runtime_fixtures import write_config

REPO = Path(__file__).resolve().parents[2]

SCHEDULER = """
import asyncio, json, resource, signal, sys
from pathlib import Path
from tuisched.domain.events import RunFinished
from tuisched.runtime.configfiles import load_config
from tuisched.runtime.runtime import Runtime

async def main() -> None:
    runtime = Runtime(load_config(Path(sys.argv[1])), kill_grace=0.5)
    finished = []
    runtime.bus.subscribe(RunFinished, finished.append)
    await runtime.start()
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, hard))  # the disk is full from now on
    for _ in range(20):
        runtime.actions.run_now("chatty")
    async with asyncio.timeout(30):
        while len(finished) < 20:
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)  # the audit lines and history writes were tried
        during = runtime.unwritten
        if sys.argv[2] == "returns":
            resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))  # space returns
            while runtime.unwritten != (0, 0):
                await asyncio.sleep(0.1)
    await runtime.stop()
    states = sorted({e.run.state.value for e in finished})
    print(json.dumps({"during": during, "states": states}))

asyncio.run(main())
"""


def _scheduler(path: Path, space: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", SCHEDULER, str(path), space],
        capture_output=True, text=True, timeout=90, check=False, cwd=path.parent,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip


def test_a_full_disk_keeps_everything_in_memory_until_space_returns(tmp_path: Path) -> None:
    path = write_config(
        tmp_path, "chatty: {command: 'seq 1 2000; echo done', schedule: manual, overlap: allow}"
    )
    done = _scheduler(path, "returns")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    report = json.loads(done.stdout)
    writes, audit_bytes = report["during"]
    assert writes > 0  # the history did not take them while the disk was full...
    assert audit_bytes > 0  # ...nor did the audit log
    assert report["states"] == ["SUCCESS"]  # yet every run ran, and succeeded
    # One warning per episode and part, and one line when it works again.
    err = done.stderr
    assert err.count("history: cannot write") == 1, err
    assert err.count("history: writing works again") == 1, err
    assert err.count(f"cannot write the audit log {tmp_path}/state/audit.log") == 1, err
    # ...and nothing was lost: 20 rows, 20 audit lines.
    with sqlite3.connect(tmp_path / "state" / "history.db") as connection:
        rows = connection.execute("SELECT state FROM runs WHERE job = 'chatty'").fetchall()
    assert sorted(rows) == [("SUCCESS",)] * 20
    audit = (tmp_path / "state" / "audit.log").read_text().splitlines()
    assert len([line for line in audit if line.startswith("chatty | ")]) == 20


def test_a_disk_still_full_at_shutdown_stops_cleanly_and_says_what_is_lost(
    tmp_path: Path,
) -> None:
    path = write_config(
        tmp_path, "chatty: {command: 'seq 1 2000; echo done', schedule: manual, overlap: allow}"
    )
    done = _scheduler(path, "stays")
    assert done.returncode == 0, done.stderr  # a clean stop, no traceback
    assert "Traceback" not in done.stderr, done.stderr
    assert "not written before shutdown, lost: chatty#" in done.stderr
    assert "did not take" in done.stderr  # the audit lines, counted
    # The rows that did land are whole: the next start closes any left RUNNING.
    with sqlite3.connect(tmp_path / "state" / "history.db") as connection:
        assert connection.execute("PRAGMA integrity_check").fetchone() == ("ok",)
