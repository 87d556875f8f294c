"""The `postgres` extra: a single node runs without psycopg; a configuration that needs
PostgreSQL says, in one line, what to install (issue 16, item 7).

tuisched runs as a real subprocess in which psycopg cannot be imported: a
`sitecustomize` on PYTHONPATH puts a finder first on `sys.meta_path` that
refuses psycopg, its pool and its binary, as if they were not installed, and
notes every attempt in a file (an attempt that something swallowed would
otherwise go unseen).
"""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from .conftest import REPO
from .runtime_fixtures import Scheduler, write_config

BLOCKED = ("psycopg", "psycopg_pool", "psycopg_binary")
INSTALL = "pip install 'tuisched[postgres]'"

SITECUSTOMIZE = f"""
import os
import sys

class _NotInstalled:
    \"\"\"Refuses {BLOCKED}, as if they were not installed; notes each attempt.\"\"\"

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] not in {BLOCKED!r}:
            return None
        with open(os.environ["TUISCHED_TEST_IMPORTS"], "a") as noted:
            noted.write(name + "\\n")
        raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)

sys.meta_path.insert(0, _NotInstalled())
"""

JOB = """
hello:
  command: "echo hello"
  schedule: {every: 1 second, start: 2026-01-01T00:00}
"""


class NoPsycopg:
    """Runs tuisched where psycopg cannot be imported, and knows whether it tried."""

    def __init__(self, folder: Path) -> None:
        site = folder / "site"
        site.mkdir()
        (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
        self.attempts = folder / "import-attempts.txt"
        self.env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])),
            "TUISCHED_TEST_IMPORTS": str(self.attempts),
        }

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "tuisched", *args]

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv(*args), capture_output=True, text=True, timeout=30, check=False,
            cwd=REPO, env=self.env, stdin=subprocess.DEVNULL,
        )  # fmt: skip

    def tried(self) -> list[str]:
        """The psycopg modules something tried to import (refused)."""
        return self.attempts.read_text().split() if self.attempts.exists() else []


@pytest.fixture
def nopg(tmp_path: Path) -> NoPsycopg:
    blocked = NoPsycopg(tmp_path)
    probe = blocked.run("--version")
    assert probe.returncode == 0, probe.stderr
    check = subprocess.run(
        [sys.executable, "-c", "import psycopg"], capture_output=True, text=True, timeout=30,
        check=False, env=blocked.env, cwd=REPO,
    )  # fmt: skip
    assert check.returncode != 0
    assert "No module named 'psycopg'" in check.stderr  # the finder works
    assert blocked.tried() == ["psycopg"]  # and notes the attempt
    blocked.attempts.unlink()
    return blocked


# --- a single node needs no psycopg -----------------------------------------------------


def test_a_single_node_validates_and_reads_its_files_without_psycopg(
    tmp_path: Path, nopg: NoPsycopg
) -> None:
    config = write_config(tmp_path, JOB)
    done = nopg.run("validate", "-c", str(config))
    assert (done.returncode, done.stdout) == (0, "OK: 1 job, 0 groups\n"), done.stderr
    readers = (["jobs"], ["history"], ["stats"], ["simulate", "--limit", "1"], ["next", "hello"])
    for verb in readers:
        done = nopg.run(*verb, "-c", str(config))
        assert done.returncode == 0, (verb, done.stderr)
        assert "Traceback" not in done.stderr
    assert nopg.tried() == []


def test_a_single_node_runs_headless_without_psycopg(
    tmp_path: Path, nopg: NoPsycopg, schedulers: list[Scheduler]
) -> None:
    config = write_config(tmp_path, JOB, settings="shutdown_grace: 1s")
    scheduler = Scheduler(config, argv=nopg.argv("--no-ui", "-c", str(config)), env=nopg.env)
    schedulers.append(scheduler)
    scheduler.wait_for_line("scheduler started")
    assert "hello#" in scheduler.wait_for_line(" SUCCESS")
    scheduler.process.send_signal(signal.SIGTERM)
    assert scheduler.process.wait(20) == 0
    scheduler.wait_for_line("scheduler stopped")
    assert "Traceback" not in "".join(scheduler.lines)
    assert nopg.tried() == []


# --- a configuration that needs PostgreSQL says what to install -------------------------


CLUSTER = """\
# one node of a cluster
settings:
  timezone: UTC
  state_dir: state
  cluster:
    database: postgresql://tuisched@127.0.0.1:1/tuisched
jobs:
  hello:
    command: "echo hello"
    schedule: {every: 1 second, start: 2026-01-01T00:00}
"""


def _cluster_config(folder: Path) -> Path:
    path = folder / "tuisched.yaml"
    path.write_text(CLUSTER)
    return path


def _the_line(config: Path, stream: str, setting: str = "cluster", line: int = 5) -> None:
    """`stream` is exactly one line: the file, the setting's line, what to install."""
    lines = [text for text in stream.splitlines() if text.strip()]
    assert len(lines) == 1, stream
    assert f"{config}:{line}: settings.{setting}: " in lines[0]
    assert "PostgreSQL's driver (psycopg), which is not installed" in lines[0]
    assert lines[0].endswith(INSTALL)


@pytest.mark.parametrize(
    "argv",
    [["--no-ui"], ["nodes"], ["history"], ["stats"], [], ["service", "install", "--dry-run"]],
    ids=["no-ui", "nodes", "history", "stats", "console", "service-install"],
)
def test_cluster_mode_without_psycopg_is_one_line_and_exit_78(
    tmp_path: Path, nopg: NoPsycopg, argv: list[str]
) -> None:
    config = _cluster_config(tmp_path)
    done = nopg.run(*argv, "-c", str(config))
    assert done.returncode == 78, done.stderr
    _the_line(config, done.stderr)
    assert done.stdout == ""
    assert not (tmp_path / "state" / "tuisched.lock").exists()  # stopped before it began


def test_validate_lists_the_missing_driver_as_its_problem(tmp_path: Path, nopg: NoPsycopg) -> None:
    config = _cluster_config(tmp_path)
    done = nopg.run("validate", "-c", str(config))
    assert done.returncode == 1
    _the_line(config, done.stdout)


def test_cluster_mode_commands_that_do_not_read_the_cluster_still_work(
    tmp_path: Path, nopg: NoPsycopg
) -> None:
    config = _cluster_config(tmp_path)
    for verb in (["jobs"], ["next", "hello", "-n", "1"], ["run", "hello"]):
        done = nopg.run(*verb, "-c", str(config))
        assert done.returncode == 0, (verb, done.stderr)


@pytest.mark.parametrize(
    "argv", [["--no-ui"], ["history"], ["logs", "hello"], ["stats"], ["jobs"]],
    ids=["no-ui", "history", "logs", "stats", "jobs"],
)  # fmt: skip
def test_a_postgresql_history_without_psycopg_says_what_to_install(
    tmp_path: Path, nopg: NoPsycopg, argv: list[str]
) -> None:
    """Every reader of the history (one `offline_control` builds them all) says it alike."""
    config = write_config(tmp_path, JOB, settings="history: postgresql://tuisched@127.0.0.1:1/h")
    done = nopg.run(*argv, "-c", str(config))
    assert done.returncode == 78, done.stderr
    _the_line(config, done.stderr, setting="history", line=5)
    assert done.stdout == ""


# --- what loads psycopg, and what declares it ----------------------------------------------


def test_the_command_line_and_the_runtime_do_not_import_psycopg() -> None:
    """With psycopg installed (the test extra brings it): nothing imports it on the way."""
    code = textwrap.dedent("""
        import sys
        import tuisched.frontends.cli, tuisched.frontends.headless, tuisched.runtime.runtime
        import tuisched.runtime.control, tuisched.runtime.engine.engine
        print(sorted(m for m in sys.modules if m.split(".")[0] in {blocked!r}))
    """).format(blocked=BLOCKED)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True,
        cwd=REPO,
    )  # fmt: skip
    assert done.stdout == "[]\n"


def test_the_cluster_modules_still_import_psycopg_when_loaded() -> None:
    """The other side: cluster mode's modules do load it (the check above means something)."""
    code = "import sys, tuisched.runtime.cluster.link; print('psycopg' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True,
        cwd=REPO,
    )  # fmt: skip
    assert done.stdout == "True\n"


PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def test_psycopg_is_the_postgres_extra_and_the_test_extra_brings_it() -> None:
    names = {Requirement(line).name for line in PYPROJECT["dependencies"]}
    assert not {"psycopg", "psycopg-pool", "psycopg_pool"} & names
    (driver,) = (Requirement(line) for line in PYPROJECT["optional-dependencies"]["postgres"])
    assert (driver.name, driver.extras) == ("psycopg", {"binary", "pool"})
    brought = [Requirement(line) for line in PYPROJECT["optional-dependencies"]["test"]]
    assert any(r.name == "tuisched" and r.extras == {"postgres"} for r in brought)


def test_only_the_cluster_modules_name_psycopg_in_an_import() -> None:
    """pgdriver imports it by name (`__import__`); import-linter says the same by module."""
    importing = set()
    for path in (REPO / "tuisched").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            if any(name.split(".")[0] in BLOCKED for name in names):
                importing.add(path.relative_to(REPO / "tuisched").as_posix())
    assert importing == {"runtime/cluster/database.py", "runtime/cluster/linkparts.py",
                         "runtime/cluster/slotrows.py", "runtime/cluster/store.py"}  # fmt: skip


def test_the_container_image_has_the_postgres_extra() -> None:
    """A container is a usual cluster node: its image installs the driver."""
    runs = [
        line for line in (REPO / "Dockerfile").read_text().splitlines() if line.startswith("RUN ")
    ]
    assert any("pip install '.[postgres]'" in line for line in runs), runs
