"""`tuisched --no-ui` as a real subprocess: drain, kill -9 recovery, one instance, exit codes."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .conftest import REPO
from .runtime_fixtures import Scheduler, write_config

LONG_JOB = """
long:
  command: "echo begun; sleep 60"
  schedule: {every: 1 second, start: 2026-01-01T00:00}
"""


def history(config: Path) -> list[dict[str, object]]:
    done = subprocess.run(
        [sys.executable, "-m", "tuisched", "history", "--json", "-c", str(config)],
        capture_output=True, text=True, timeout=30, check=True, cwd=REPO,
    )  # fmt: skip
    return list(json.loads(done.stdout))


def test_sigterm_drains_and_records_the_run_as_shutdown(
    tmp_path: Path, schedulers: list[Scheduler]
) -> None:
    config = write_config(tmp_path, LONG_JOB, settings="shutdown_grace: 1s")
    scheduler = Scheduler(config)
    schedulers.append(scheduler)
    line = scheduler.wait_for_line("long#")
    pid = int(line.split("pid ")[1].rstrip(")\n"))
    scheduler.process.send_signal(signal.SIGTERM)
    assert scheduler.finish() == 0
    assert not _alive(pid)
    runs = history(config)
    ended = [r for r in runs if r["state"] == "FAILED"]
    assert ended
    assert ended[0]["result"] == "shutdown"
    assert all(r["state"] not in ("RUNNING", "QUEUED") for r in runs)
    audit = (tmp_path / "state" / "audit.log").read_text()
    assert " | shutdown | " in audit
    assert "scheduler stopped" in "".join(scheduler.lines)


SILENT_LONG_JOB = """
long:
  command: [sleep, "60"]
  schedule: {every: 1 second, start: 2026-01-01T00:00}
"""


def test_kill_9_then_restart_closes_the_orphan_as_abandoned(
    tmp_path: Path, schedulers: list[Scheduler]
) -> None:
    # A silent job: one that writes after its scheduler died would die of SIGPIPE by itself.
    config = write_config(tmp_path, SILENT_LONG_JOB)
    first = Scheduler(config)
    schedulers.append(first)
    line = first.wait_for_line("long#")
    orphan = int(line.split("pid ")[1].rstrip(")\n"))
    run_id = line.split("long#")[1].split()[0]
    first.process.kill()
    first.process.wait(10)
    # Its own session, but held by the scheduler's keeper, which outlives the scheduler.
    _gone_within(orphan, 10)
    second = Scheduler(config)
    schedulers.append(second)
    second.wait_for_line(f"long#{run_id} ABANDONED")
    second.process.send_signal(signal.SIGTERM)
    assert second.finish() == 0
    (abandoned,) = [r for r in history(config) if r["run_id"] == run_id]
    assert (abandoned["state"], abandoned["result"]) == ("ABANDONED", "abandoned")
    assert "long | " in (tmp_path / "state" / "audit.log").read_text()
    assert " | abandoned | " in (tmp_path / "state" / "audit.log").read_text()


def test_a_second_instance_exits_75_naming_the_first(
    tmp_path: Path, schedulers: list[Scheduler]
) -> None:
    config = write_config(tmp_path, "idle: {command: [/bin/true], schedule: manual}")
    first = Scheduler(config)
    schedulers.append(first)
    first.wait_for_line("scheduler started")
    second = Scheduler(config)
    schedulers.append(second)
    assert second.finish() == 75
    assert f"pid {first.process.pid}" in "".join(second.lines)
    first.process.send_signal(signal.SIGINT)
    assert first.finish() == 0


def test_a_bad_config_exits_78(tmp_path: Path) -> None:
    config = write_config(tmp_path, "bad: {command: [/bin/true]}")
    done = subprocess.run(
        [sys.executable, "-m", "tuisched", "--no-ui", "-c", str(config)],
        capture_output=True, text=True, timeout=30, check=False, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 78
    assert "job 'bad': a job needs a trigger source" in done.stderr


def test_sighup_reloads_and_a_bad_edit_changes_nothing(
    tmp_path: Path, schedulers: list[Scheduler]
) -> None:
    config = write_config(tmp_path, "idle: {command: [/bin/true], schedule: manual}")
    scheduler = Scheduler(config)
    schedulers.append(scheduler)
    scheduler.wait_for_line("scheduler started")
    good = config.read_text().replace("idle:", "renamed:")
    config.write_text(good)
    scheduler.process.send_signal(signal.SIGHUP)
    scheduler.wait_for_line("configuration loaded")
    config.write_text(good + "  broken: {command: [/bin/true]}\n")
    scheduler.process.send_signal(signal.SIGHUP)
    scheduler.wait_for_line("configuration rejected")
    scheduler.wait_for_line("job 'broken': a job needs a trigger source")
    scheduler.process.send_signal(signal.SIGTERM)
    assert scheduler.finish() == 0


def test_json_log_lines(tmp_path: Path, schedulers: list[Scheduler]) -> None:
    config = write_config(tmp_path, "idle: {command: [/bin/true], schedule: manual}")
    process = subprocess.Popen(
        [sys.executable, "-m", "tuisched", "--no-ui", "--log-format", "json", "-c", str(config)],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, cwd=REPO,
    )  # fmt: skip
    assert process.stderr is not None
    # Every line is one JSON object; on a busy machine a warning (the loop held at its
    # start, say) can come before the start's own line.
    lines: list[dict[str, Any]] = []
    while not any(line.get("event") == "SchedulerStarted" for line in lines):
        text = process.stderr.readline()
        assert text, lines  # it ended before it said it started
        lines.append(json.loads(text))
    process.send_signal(signal.SIGTERM)
    assert process.wait(20) == 0
    process.stderr.close()
    started = [line for line in lines if line.get("event") == "SchedulerStarted"]
    assert started, lines
    assert started[0]["level"] == "info"


def _gone_within(pid: int, seconds: float) -> None:
    """Fail unless `pid` is dead (or a zombie) within `seconds`: a SIGKILL lands, not at once."""
    deadline = time.monotonic() + seconds
    while _alive(pid):
        assert time.monotonic() < deadline, f"process {pid} still alive after {seconds}s"
        time.sleep(0.02)  # a process's death has no event to await here


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return False
    return state != "Z"
