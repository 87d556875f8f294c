"""Every CLI verb against a real headless scheduler, through its control socket; and the
plain line and exit 69 when none runs."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from .conftest import REPO
from .runtime_fixtures import listening, write_config
from .test_cli import LOADED, heavy, loaded_by, run

JOBS = """
hello: {command: "echo hello; echo world", schedule: manual}
sad: {command: "echo trying; exit 3", schedule: manual}
slow: {command: "echo started; sleep 30", schedule: manual}
tick: {command: [/bin/true], schedule: {every: 1h, start: 2026-01-01T00:00}}
"""


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = write_config(tmp_path, JOBS)
    path.write_text(path.read_text() + "groups:\n  nightly: {jobs: [hello, sad]}\n")
    return path


@pytest.fixture
def scheduler(config: Path) -> Iterator[subprocess.Popen[str]]:
    with listening(config) as process:
        yield process


def test_status_says_what_runs(config: Path, scheduler: subprocess.Popen[str]) -> None:
    status, out, _ = run("status", "-c", str(config))
    assert status == 0
    assert out.startswith("scheduler running on ")
    assert f"pid {scheduler.pid}, up " in out
    assert "jobs 4  groups 1  running 0" in out
    status, out, _ = run("status", "--json", "-c", str(config))
    data = json.loads(out)
    assert (data["state"], data["pid"], data["jobs"]) == ("running", scheduler.pid, 4)


def test_status_lists_each_run_in_progress_and_jobs_says_why(tmp_path: Path) -> None:
    config = write_config(tmp_path, JOBS, settings="timezone: Asia/Kolkata")  # +05:30
    with listening(config) as scheduler:
        run_id = run("trigger", "slow", "-c", str(config))[1].strip()
        said = _status_when(config, lambda data: bool(data["runs"] and data["runs"][0]["pid"]))
        (listed,) = said["runs"]
        assert (listed["run_id"], listed["job"], listed["state"]) == (run_id, "slow", "RUNNING")
        assert _parent_of(listed["pid"]) == scheduler.pid  # the run's own process
        assert listed["started_at"].endswith("+05:30")
        assert listed["elapsed"] >= 0
        assert said["started_at"].endswith("+05:30")  # the scheduler's too, as its runs'
        # The same instant, written as `history --json` writes it.
        assert listed["started_at"] == _history_started(config, run_id)

        status, out, _ = run("status", "-c", str(config))
        assert status == 0
        heading, row = out.split("\n\n", 1)[1].splitlines()
        cells = _cells(heading, row)
        assert list(cells) == ["RUN ID", "JOB", "STATE", "PID", "STARTED", "ELAPSED"]
        started = datetime.fromisoformat(listed["started_at"]).isoformat(" ", "seconds")
        assert cells == {
            "RUN ID": run_id, "JOB": "slow", "STATE": "RUNNING", "PID": str(listed["pid"]),
            "STARTED": started, "ELAPSED": cells["ELAPSED"],
        }  # fmt: skip
        assert re.fullmatch(r"\d+s|\d+m\d\ds", cells["ELAPSED"]), cells

        lines = run("jobs", "-c", str(config))[1].splitlines()
        slow = next(i for i, line in enumerate(lines) if line.startswith("slow "))
        assert lines[slow + 1].startswith(f"  why: running run {run_id} since ")


def _status_when(config: Path, ready: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """`status --json` once `ready` holds of it (10 s at most)."""
    deadline = time.monotonic() + 10
    while not ready(said := json.loads(run("status", "--json", "-c", str(config))[1])):
        assert time.monotonic() < deadline, said
        time.sleep(0.1)  # the scheduler is another process: ask again
    return said


def _history_started(config: Path, run_id: str) -> str:
    """When `history --json` says run `run_id` started (once its row has it)."""
    deadline = time.monotonic() + 10
    while True:
        runs = json.loads(run("history", "--json", "-c", str(config))[1])
        started = next((r["started_at"] for r in runs if r["run_id"] == run_id), None)
        if started is not None:
            return str(started)
        assert time.monotonic() < deadline, runs
        time.sleep(0.1)  # the row is written by the scheduler's process


def _parent_of(pid: int) -> int:
    """The parent of process `pid`, from /proc."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])


def _cells(heading: str, row: str) -> dict[str, str]:
    """`row` cut where the columns of `heading` begin: lined up, each cell is whole."""
    names = re.findall(r"\S+(?: \S+)*", heading)  # names of one or two words ("RUN ID")
    starts = [heading.index(name) for name in names]
    ends = [*starts[1:], None]
    for start in starts[1:]:
        assert row[start - 2 : start] == "  ", (heading, row)  # a column's cells begin here
    return {name: row[a:b].strip() for name, a, b in zip(names, starts, ends, strict=True)}


def test_pause_and_resume_every_form(config: Path, scheduler: subprocess.Popen[str]) -> None:
    assert run("pause", "tick", "-c", str(config))[1] == "paused job tick\n"
    assert run("pause", "--group", "nightly", "-c", str(config))[1] == "paused group nightly\n"
    assert run("pause", "--all", "-c", str(config))[1] == "paused every job\n"
    data = json.loads(run("status", "--json", "-c", str(config))[1])
    assert {(p["kind"], p["name"]) for p in data["paused"]} == {
        ("job", "tick"), ("group", "nightly"), ("all", ""),
    }  # fmt: skip
    for form in (["--all"], ["--group", "nightly"], ["tick"]):  # everything first, then parts
        assert run("resume", *form, "-c", str(config))[0] == 0
    assert json.loads(run("status", "--json", "-c", str(config))[1])["paused"] == []
    status, _, err = run("pause", "--group", "nosuch", "-c", str(config))
    assert (status, err) == (1, "tuisched: no group named 'nosuch'\n")
    del scheduler


def test_trigger_prints_the_run_id_and_wait_follows_to_the_exit_code(
    config: Path, scheduler: subprocess.Popen[str]
) -> None:
    status, out, _ = run("trigger", "hello", "-c", str(config))
    assert status == 0
    assert len(out.strip()) == 12  # a run id
    status, out, err = run("trigger", "sad", "--wait", "-c", str(config))
    assert status == 3  # the job's own exit code, as `tuisched run` gives
    assert out == "trying\n"
    assert "sad#" in err
    assert "FAILED (completed) exit 3: trying" in err
    status, out, _ = run("trigger", "hello", "--json", "-c", str(config))
    assert (status, json.loads(out)["job"]) == (0, "hello")
    status, out, _ = run("trigger", "hello", "--wait", "--json", "-c", str(config))
    assert status == 0
    printed, final = out.rsplit("\n", 2)[:2]
    assert printed == "hello\nworld"
    assert (json.loads(final)["state"], json.loads(final)["exit_code"]) == ("SUCCESS", 0)
    del scheduler


def test_trigger_wait_prints_every_line_and_ends_when_its_reader_goes(tmp_path: Path) -> None:
    """Output events carry the newest lines of a burst only; `--wait` printed about the
    last 2,000 of 200,000. A reader that goes away ends it at once, quietly (141)."""
    config = write_config(
        tmp_path,
        """
        many: {command: "seq 1 200000", schedule: manual, overlap: allow}
        long: {command: "seq 1 1000; while :; do echo more; sleep 0.1; done", schedule: manual}
        """,
    )
    with listening(config):
        status, out, err = run("trigger", "many", "--wait", "-c", str(config))
        assert status == 0, err
        assert out == "".join(f"{i}\n" for i in range(1, 200001))
        follow = subprocess.Popen(
            [sys.executable, "-m", "tuisched", "trigger", "long", "--wait", "-c", str(config)],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert follow.stdout is not None
        assert follow.stdout.readline() == "1\n"
        follow.stdout.close()  # as `| head -1` does: long goes on printing
        assert follow.wait(timeout=30) == 141
        assert follow.stderr is not None
        assert "Traceback" not in follow.stderr.read()
        follow.stderr.close()


def _history(config: Path, job: str) -> list[dict[str, object]]:
    status, out, err = run("history", job, "--json", "-c", str(config))
    assert status == 0, err
    runs: list[dict[str, object]] = json.loads(out)
    return runs


def _until_running(config: Path, job: str) -> dict[str, object]:
    """The run of `job` in progress once it has started (the scheduler is another process)."""
    deadline = time.monotonic() + 10
    while True:
        started = [r for r in _history(config, job) if r["state"] == "RUNNING"]
        if started:
            return started[0]
        assert time.monotonic() < deadline, "the run never started"
        time.sleep(0.1)  # a process we do not own: nothing to await


@pytest.fixture
def gated(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A scheduler in Asia/Kolkata (+05:30) whose job `gate` runs until the file `go` exists
    (`overlap: skip`, the default), and `hello`; the configuration and that file."""
    go = tmp_path / "go"
    path = write_config(
        tmp_path,
        f"""
        gate: {{command: "while [ ! -e {go} ]; do sleep 0.05; done; echo through",
                schedule: manual}}
        hello: {{command: "echo hello", schedule: manual}}
        """,
        settings="timezone: Asia/Kolkata",
    )
    with listening(path):
        yield path, go


def test_trigger_refuses_a_skip_job_s_second_run_with_the_reason(
    gated: tuple[Path, Path],
) -> None:
    """`overlap: skip` and a run in progress: exit 1 and why, in one line (or as JSON), and
    no run is made; `--queue` would take it, and says so."""
    config, go = gated
    first = run("trigger", "gate", "-c", str(config))[1].strip()
    running = _until_running(config, "gate")
    assert running["run_id"] == first
    since = str(running["started_at"])  # as history gives it: in the zone, with its offset
    assert since.endswith("+05:30")
    clock = since[11:19]  # HH:MM:SS of the job's zone
    status, out, err = run("trigger", "gate", "-c", str(config))
    assert (status, out) == (1, "")
    assert err == (
        f"tuisched: trigger 'gate': still running: run {first} since {clock}; "
        "--queue starts it once that run ends\n"
    )
    status, out, err = run("trigger", "gate", "--json", "-c", str(config))
    assert (status, err) == (1, "")
    assert json.loads(out) == {
        "job": "gate", "refused": f"still running: run {first} since {clock}",
        "blocking_run": {"run_id": first, "since": since}, "queueable": True,
    }  # fmt: skip
    status, out, err = run("trigger", "gate", "--wait", "-c", str(config))
    assert (status, out) == (1, "")
    assert err.startswith(f"tuisched: trigger 'gate': still running: run {first} since")
    assert [r["run_id"] for r in _history(config, "gate")] == [first]  # nothing was made
    go.touch()


def test_trigger_queue_waits_behind_the_running_run_and_wait_follows_it(
    gated: tuple[Path, Path],
) -> None:
    config, go = gated
    first = run("trigger", "gate", "-c", str(config))[1].strip()
    _until_running(config, "gate")
    follower = subprocess.Popen(
        [sys.executable, "-m", "tuisched", "trigger", "gate", "--queue", "--wait", "--json",
         "-c", str(config)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 10
    while len(_history(config, "gate")) < 2:  # queued behind the first
        assert follower.poll() is None, follower.communicate()
        assert time.monotonic() < deadline, "the run was never queued"
        time.sleep(0.1)  # a process we do not own: nothing to await
    assert [r["state"] for r in _history(config, "gate")] == ["QUEUED", "RUNNING"]
    go.touch()
    out, err = follower.communicate(timeout=20)
    assert follower.returncode == 0, err
    printed, final = out.rsplit("\n", 2)[:2]
    assert printed == "through"
    second, earlier = _history(config, "gate")
    assert earlier["run_id"] == first
    assert json.loads(final) == second  # history's own object, times in the zone
    assert str(second["started_at"]) >= str(earlier["ended_at"])


def test_trigger_json_gives_the_run_as_history_does(gated: tuple[Path, Path]) -> None:
    """Times in the scheduler's zone with its offset, as `history --json`, not UTC."""
    config, _ = gated
    status, out, err = run("trigger", "hello", "--json", "-c", str(config))
    assert status == 0, err
    answer = json.loads(out)
    assert str(answer["queued_at"]).endswith("+05:30")
    (kept,) = [r for r in _history(config, "hello") if r["run_id"] == answer["run_id"]]
    assert answer.keys() == kept.keys()
    assert answer["queued_at"] == kept["queued_at"]
    status, out, err = run("trigger", "hello", "--wait", "--json", "-c", str(config))
    assert status == 0, err
    final = json.loads(out.splitlines()[-1])
    assert final == _history(config, "hello")[0]


def test_stop_a_job_s_run_and_logs_follow_it(
    config: Path, scheduler: subprocess.Popen[str]
) -> None:
    run_id = run("trigger", "slow", "-c", str(config))[1].strip()
    deadline = time.monotonic() + 10
    while "started" not in run("logs", "slow", "-c", str(config))[1]:
        assert time.monotonic() < deadline
        time.sleep(0.1)  # the run's output comes from another process
    follower = subprocess.Popen(
        [sys.executable, "-m", "tuisched", "logs", "slow", "-f", "-c", str(config)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    status, out, _ = run("stop", "slow", "-c", str(config))
    assert (status, out) == (0, f"stopping slow#{run_id}\n")
    followed, _ = follower.communicate(timeout=20)  # -f ends with the run
    assert followed.startswith("started\n")
    status, _, err = run("stop", "nothing-like-it", "-c", str(config))
    assert status == 1
    assert "no run in progress is 'nothing-like-it'" in err
    del scheduler


def test_reload_reports_what_it_applied(config: Path, scheduler: subprocess.Popen[str]) -> None:
    assert run("reload", "-c", str(config))[1].startswith("the file on disk is the configuration")
    config.write_text(
        config.read_text().replace("jobs:\n", "jobs:\n  added: {command: [/bin/true], "
                                   "schedule: manual}\n", 1)
    )  # fmt: skip
    # At once, as a script does: before the watcher has looked at the save.
    status, out, _ = run("reload", "-c", str(config))
    assert (status, out) == (0, "reloaded: +1 -0 ~0 jobs\n  + added\n")  # one answer, once
    assert json.loads(run("status", "--json", "-c", str(config))[1])["jobs"] == 5
    nothing = "the file on disk is the configuration in force: nothing to reload\n"
    assert run("reload", "-c", str(config))[:2] == (0, nothing)  # true: it was just applied
    config.write_text(config.read_text().replace("[/bin/true]", "[/bin/echo]", 1))
    status, out, _ = run("reload", "--json", "-c", str(config))
    assert (status, json.loads(out)) == (0, {
        "outcome": "reloaded", "summary": "reloaded: +0 -0 ~1 jobs",
        "lines": ["~ added", "    command: /bin/true -> /bin/echo"],
    })  # fmt: skip
    config.write_text(config.read_text() + "# a comment changes no job\n")
    status, out, _ = run("reload", "-c", str(config))
    assert (status, out) == (0, "reloaded: no job, group or setting changed\n")
    config.write_text(config.read_text().replace("added:", "added: [", 1))
    status, out, _ = run("reload", "--json", "-c", str(config))
    report = json.loads(out)
    assert (status, report["outcome"]) == (1, "refused")
    assert report["lines"]
    assert all(line.startswith(f"{config}:") for line in report["lines"])
    status, out, err = run("reload", "-c", str(config))
    assert (status, out) == (1, "")
    assert err.startswith("refused: the file on disk is not valid; nothing changed\n  ")
    assert "reloading would" not in err
    assert json.loads(run("status", "--json", "-c", str(config))[1])["jobs"] == 5
    del scheduler


def test_without_a_scheduler_verbs_exit_69_and_logs_reads_the_files(config: Path) -> None:
    for verb in (["status"], ["pause", "--all"], ["trigger", "hello"], ["reload"]):
        status, _, err = run(*verb, "-c", str(config))
        assert status == 69, verb
        assert err == (
            f"tuisched: no scheduler is running on {config.parent}/state "
            f"(nothing answers on {config.parent}/state/control.sock)\n"
        )
    status, _, err = run("missed", "-c", str(config))
    assert status == 69
    assert err.endswith("; missed slots are listed by a running scheduler (it records "
                        "those of its downtime when it starts)\n")  # fmt: skip
    assert run("run", "hello", "-c", str(config))[0] == 0  # leaves a run in the files
    status, out, _ = run("logs", "hello", "-c", str(config))
    assert (status, out) == (0, "hello\nworld\n")


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_curl_reads_the_socket_and_a_shutdown_through_it_ends_the_headless_scheduler(
    config: Path, scheduler: subprocess.Popen[str]
) -> None:
    sock = str(config.parent / "state" / "control.sock")
    curl = ["curl", "-s", "--max-time", "10", "--unix-socket", sock]
    hello = json.loads(subprocess.check_output([*curl, "http://tuisched/v1"], timeout=15))
    assert (hello["protocol"], hello["pid"]) == (1, scheduler.pid)
    answer = subprocess.check_output(
        [*curl, "-X", "POST", "-d", '{"grace": 5}', "http://tuisched/v1/shutdown"], timeout=15
    )
    assert json.loads(answer) == {"result": None}  # answered when the drain starts
    assert scheduler.wait(timeout=20) == 0
    assert not Path(sock).exists()


# --- a thin client (issue 24, item 4) -------------------------------------------------------


def test_verbs_load_only_the_socket_client(config: Path, scheduler: subprocess.Popen[str]) -> None:
    run_id = run("trigger", "slow", "-c", str(config))[1].strip()
    for verb in (["status", "--json"], ["pause", "tick"], ["resume", "tick"],
                 ["trigger", "hello"], ["reload"], ["missed"], ["logs", "slow", "--run", run_id],
                 ["stop", run_id]):  # fmt: skip
        modules = loaded_by(*verb, "-c", str(config))
        assert "tuisched.runtime.control.blocking" in modules, verb  # it did ask the socket
        assert heavy(modules) == [], verb
    del scheduler


def test_a_headless_start_loads_no_metrics_mail_or_screen(config: Path) -> None:
    """`--no-ui` serves its socket (aiohttp.web, whose package holds aiohttp's client too)
    but, with no metrics or mail configured, loads no prometheus_client, smtplib or
    Textual, nor, with its history in SQLite, SQLAlchemy's PostgreSQL dialect, from
    its start to its stop."""
    scheduler = subprocess.Popen(
        [sys.executable, "-c", LOADED, "--no-ui", "-c", str(config)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while run("status", "-c", str(config))[0] != 0:
            assert scheduler.poll() is None, scheduler.communicate()[1]
            assert time.monotonic() < deadline, "the scheduler never answered"
    finally:
        scheduler.terminate()
        out, err = scheduler.communicate(timeout=20)
    status, loaded = json.loads(out.splitlines()[-1])
    assert status == 0, err
    modules = set(loaded)
    assert "aiohttp.web" in modules  # it did serve the control socket
    unused = [
        "prometheus_client",
        "smtplib",
        "textual",
        "tuisched.runtime.metrics",
        "sqlalchemy.dialects.postgresql",
    ]  # (its history is SQLite: no PostgreSQL dialect)
    assert heavy(modules, unused) == []


def test_jobs_with_a_scheduler_reads_the_file_and_asks_the_socket(
    config: Path, scheduler: subprocess.Popen[str]
) -> None:
    modules = loaded_by("jobs", "-c", str(config))
    assert "tuisched.runtime.control.blocking" in modules
    assert "tuisched.domain.config.config" in modules  # the file is checked first, as before
    scheduler_parts = ["sqlalchemy", "aiohttp", "apscheduler", "textual", "ruamel",
                       "tuisched.runtime.runtime", "tuisched.runtime.engine"]  # fmt: skip
    assert heavy(modules, scheduler_parts) == []
    del scheduler
