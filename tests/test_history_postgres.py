"""One node's history in PostgreSQL (`settings.history: postgresql://...`), for real: a
headless scheduler records its runs there, `tuisched history` reads them back, the password
never reaches a job, and a wrong one is one clear line at start."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from . import preloaded
from .conftest import REPO
from .pg_fixtures import PASSWORD, PostgresServer, wait_until
from .runtime_fixtures import write_config


def _config(tmp_path: Path, url: str) -> Path:
    path = write_config(
        tmp_path,
        """
        tick:
          command: "echo pw=${PGPASSWORD:-none}"
          schedule: {every: 1s, start: 2026-01-01T00:00}
        """,
    )
    path.write_text(path.read_text().replace("settings:", f"settings:\n  history: {url}", 1))
    return path


def _tuisched(*argv: str, password: str) -> subprocess.CompletedProcess[str]:
    return preloaded.run(argv, cwd=REPO, env={**os.environ, "PGPASSWORD": password})


def test_a_headless_scheduler_keeps_its_history_in_postgresql(
    tmp_path: Path,
    postgres: PostgresServer,
) -> None:
    config = _config(tmp_path, postgres.url(postgres.create_database()))
    scheduler = subprocess.Popen(
        [sys.executable, "-m", "tuisched", "--no-ui", "-c", str(config)], cwd=REPO,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PGPASSWORD": PASSWORD},
    )  # fmt: skip
    try:

        def recorded() -> list[dict[str, object]]:
            done = _tuisched("history", "tick", "--json", "-c", str(config), password=PASSWORD)
            assert done.returncode == 0, done.stderr
            return [run for run in json.loads(done.stdout) if run["state"] == "SUCCESS"]

        wait_until(lambda: len(recorded()) >= 2)
    finally:
        scheduler.send_signal(signal.SIGTERM)
        _, err = scheduler.communicate(timeout=30)
    assert scheduler.returncode == 0, err
    assert not (tmp_path / "state" / "history.db").exists()  # not in SQLite
    output = (tmp_path / "state" / "output" / "tick").glob("*.log")
    assert {path.read_text() for path in output} == {"pw=none\n"}  # the job never saw it


def test_a_wrong_password_is_one_line_at_start(
    tmp_path: Path,
    postgres: PostgresServer,
) -> None:
    url = postgres.url(postgres.create_database())
    config = _config(tmp_path, url)
    done = _tuisched("--no-ui", "-c", str(config), password="wrong")  # noqa: S106
    assert done.returncode == 73
    assert done.stderr.strip().endswith(
        f"not started: cannot open the history: the database at {url} refused the password of "
        "role 'postgres': check ~/.pgpass, $PGPASSFILE or $PGPASSWORD"
    )
    assert "wrong" not in done.stderr
    assert "Traceback" not in done.stderr
