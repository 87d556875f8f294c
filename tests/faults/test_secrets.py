"""No secret the configuration names is visible to a job: not in its environment, not in
the scheduler's `os.environ`, not through `/proc/<scheduler pid>/environ`, and not in
what /proc shows of a python run's own process (a fork of a fork server)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tuisched.runtime.secrets import Secrets

from ..runtime_fixtures import write_config

REPO = Path(__file__).resolve().parents[2]
PASSWORD = "hunter2-correct-horse"  # noqa: S105  (a test value)


def test_jobs_see_no_secret_of_the_scheduler(tmp_path: Path) -> None:
    peek = tmp_path / "peek.txt"
    seen_by_python = tmp_path / "python.txt"
    proc_of_python = tmp_path / "python-proc.txt"
    path = write_config(
        tmp_path,
        f"""
        peek:
          command: "cat /proc/$PPID/environ > {peek} 2>&1; echo; env >> {peek}"
          schedule: manual
        py:
          python: "tests.engine_jobs:environment_to_file"
          schedule: manual
        py_proc:
          python: "tests.jobs_for_tests:proc_environment_to_file"
          schedule: manual
        """,
    )
    smtp = "{host: 127.0.0.1, port: 25, username_env: TS_USER, password_env: TS_PASS}"
    email = f"email:\n  smtp: {smtp}\n  from: tuisched@example.org\n  subject: alert\n"
    path.write_text(path.read_text().replace("\njobs:", "\n" + email + "jobs:"))
    env = {
        **os.environ, "PYTHONPATH": str(REPO), "TS_USER": "mailer", "TS_PASS": PASSWORD,
        "TUISCHED_TEST_OUT": str(seen_by_python),
    }  # fmt: skip
    for job in ("peek", "py", "py_proc"):
        if job == "py_proc":
            env["TUISCHED_TEST_OUT"] = str(proc_of_python)
        done = subprocess.run(
            [sys.executable, "-m", "tuisched", "run", job, "-c", str(path)],
            capture_output=True, text=True, timeout=30, check=False, cwd=REPO, env=env,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    proc_environ, _, job_env = peek.read_text().partition("\n")
    assert "TUISCHED_RUN_ID=" in job_env  # the job did see its own environment...
    assert PASSWORD not in job_env  # ...without the secrets
    assert "TS_PASS" not in job_env
    if os.geteuid() != 0:  # root reads any process's /proc files, dumpable or not
        assert PASSWORD not in proc_environ
        assert "Permission denied" in proc_environ  # the scheduler is not dumpable
    python_env = seen_by_python.read_text()
    assert PASSWORD not in python_env
    assert "TS_PASS=" not in python_env
    assert "TS_USER=" not in python_env
    proc_env = proc_of_python.read_text()
    assert "TUISCHED_RUN_ID=" in proc_env  # its own run id, where /proc shows it
    assert PASSWORD not in proc_env
    assert "TS_PASS=" not in proc_env


def test_the_secrets_move_out_of_the_environment_and_never_show_in_a_repr() -> None:
    os.environ["TS_TEST_SECRET"] = PASSWORD
    try:
        secrets = Secrets()
        secrets.take(["TS_TEST_SECRET", "TS_NOT_SET"])
        assert "TS_TEST_SECRET" not in os.environ
        assert secrets["TS_TEST_SECRET"] == PASSWORD
        assert "TS_NOT_SET" not in secrets
        assert PASSWORD not in repr(secrets)
    finally:
        os.environ.pop("TS_TEST_SECRET", None)


def test_the_scheduler_makes_itself_non_dumpable(tmp_path: Path) -> None:
    program = (
        "import asyncio, ctypes, ctypes.util, sys\n"
        "from pathlib import Path\n"
        "from tuisched.runtime.configfiles import load_config\n"
        "from tuisched.runtime.runtime import Runtime\n"
        "async def main():\n"
        "    runtime = Runtime(load_config(Path(sys.argv[1])))\n"
        "    await runtime.start()\n"
        "    libc = ctypes.CDLL(ctypes.util.find_library('c'))\n"
        "    print('dumpable', libc.prctl(3, 0, 0, 0, 0))\n"  # PR_GET_DUMPABLE
        "    await runtime.stop()\n"
        "asyncio.run(main())\n"
    )
    path = write_config(tmp_path, "a: {command: [/bin/true], schedule: manual}")
    done = subprocess.run(
        [sys.executable, "-c", program, str(path)], capture_output=True, text=True,
        timeout=30, check=False, env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert done.stdout == "dumpable 0\n", done.stderr
