"""`tuisched validate` imports every python job's module in a child process, as a run
would (its path, its environment without the scheduler's secrets), with a time limit,
and reports what a run would fail on as `FILE:LINE: job 'NAME': ...`."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tuisched.domain.errors import Problem
from tuisched.runtime.configfiles import load_config
from tuisched.runtime.importcheck import python_job_problems

from .runtime_fixtures import REPO, write_config

MODULES = {
    "good.py": """
        import os, pathlib
        pathlib.Path(os.environ["IMPORTS_SEEN"]).open("a").write(f"{os.getpid()}\\n")
        print("a module may print when imported")
        VALUE = 3
        def main(): pass
        class Runs:
            def run(self): pass
        class NoRun: pass
    """,
    "peeks.py": """
        import os
        assert "MAIL_PASSWORD" not in os.environ, "a secret reached a job"
        def main(): pass
    """,
    "dies.py": "import os\nos._exit(3)\n",
    "hangs.py": "import time\ntime.sleep(3600)\ndef main(): pass\n",
}
JOBS = """
one: {python: "good:main", schedule: manual}
two: {python: "good:Runs", schedule: manual}
three:
  schedule: manual
  python: "good:main"
missing: {python: "nosuchmod:main", schedule: manual}
no-attr: {python: "good:nothing", schedule: manual}
not-callable: {python: "good:VALUE", schedule: manual}
no-run: {python: "good:NoRun", schedule: manual}
secret: {python: "peeks:main", schedule: manual}
command: {command: [/bin/true], schedule: manual}
"""
EMAIL = """email:
  smtp: {host: 127.0.0.1, port: 25, username_env: MAIL_USER, password_env: MAIL_PASSWORD}
  from: tuisched@example.org
  subject: alert
"""


def _config(tmp_path: Path, jobs: str = JOBS) -> Path:
    """A configuration beside the job modules (its folder is on a run's Python path)."""
    for name, text in MODULES.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    path = write_config(tmp_path, jobs)
    path.write_text(path.read_text().replace("\njobs:", "\n" + EMAIL + "jobs:"))
    return path


def test_validate_reports_what_a_run_would_fail_on_and_imports_each_module_once(
    tmp_path: Path,
) -> None:
    config = _config(tmp_path)
    seen = tmp_path / "imports-seen"
    elsewhere = tmp_path / "elsewhere"  # not the configuration's folder
    elsewhere.mkdir()
    env = {**os.environ, "IMPORTS_SEEN": str(seen), "MAIL_USER": "u", "MAIL_PASSWORD": "pw",
           "PYTHONPATH": str(REPO)}  # fmt: skip
    with subprocess.Popen(
        [sys.executable, "-m", "tuisched", "validate", "-c", str(config)], cwd=elsewhere,
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    ) as validate:  # fmt: skip
        out, err = validate.communicate(timeout=60)
    assert (validate.returncode, err) == (1, "")
    assert out.splitlines() == [
        f"{config}:{_line(config, 'missing:')}: job 'missing': cannot import 'nosuchmod:main': "
        "ModuleNotFoundError: No module named 'nosuchmod'",
        f"{config}:{_line(config, 'no-attr:')}: job 'no-attr': cannot import 'good:nothing': "
        "AttributeError: module 'good' has no attribute 'nothing'",
        f"{config}:{_line(config, 'not-callable:')}: job 'not-callable': cannot start "
        "'good:VALUE': TypeError: VALUE is not callable",
        f"{config}:{_line(config, 'no-run:')}: job 'no-run': cannot start 'good:NoRun': "
        "TypeError: NoRun has no run() method",
    ]  # nothing of `secret`: its import saw no secret
    importers = seen.read_text().split()
    assert len(importers) == 1  # three jobs, one module, one import
    assert importers != [str(validate.pid)]  # in a child, never in the validating process


def test_the_python_line_is_the_one_reported(tmp_path: Path) -> None:
    config = _config(tmp_path, "late:\n  schedule: manual\n  python: nosuchmod:main\n")
    status, out = _validate(config)
    assert status == 1
    line = _line(config, "python: nosuchmod")  # not the job's name's line
    assert line == _line(config, "late:") + 2
    assert out.startswith(f"{config}:{line}: job 'late': cannot import 'nosuchmod:main'")


def test_a_module_that_hangs_or_ends_its_process_is_reported_and_the_rest_checked(
    tmp_path: Path,
) -> None:
    jobs = """
    hangs: {python: "hangs:main", schedule: manual}
    dies: {python: "dies:main", schedule: manual}
    after: {python: "nosuchmod:main", schedule: manual}
    fine: {python: "peeks:main", schedule: manual}
    """
    path = _config(tmp_path, jobs)
    config = load_config(path)
    problems = python_job_problems(config, limit=1.0)  # a real child, a short limit
    assert problems == [
        Problem(file=path, line=_line(path, "hangs:"), job="hangs", message="importing 'hangs' "
                "did not finish within 1s (it hangs, or waits for something, when imported)"),
        Problem(file=path, line=_line(path, "dies:"), job="dies",
                message="importing 'dies' ended the process importing it (exit 3)"),
        Problem(file=path, line=_line(path, "after:"), job="after", message="cannot import "
                "'nosuchmod:main': ModuleNotFoundError: No module named 'nosuchmod'"),
    ]  # fmt: skip
    assert "hangs" not in sys.modules


def test_a_configuration_without_python_jobs_starts_no_child(tmp_path: Path) -> None:
    config = _config(tmp_path, "only: {command: [/bin/true], schedule: manual}")
    assert _validate(config) == (0, "OK: 1 job, 0 groups\n")


def _line(config: Path, text: str) -> int:
    """The number of the first line of `config` holding `text`."""
    lines = config.read_text().splitlines()
    return next(number for number, line in enumerate(lines, 1) if text in line)


def _validate(config: Path) -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, "-m", "tuisched", "validate", "-c", str(config)], cwd=REPO,
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    return done.returncode, done.stdout
