"""How late runs start while an operator works in the hosting console, beside the same
jobs headless (issue 24's first goal: console p95 <= headless p95 + 20 ms).

    .venv/bin/python -m benchmarks.bench_console_lateness [--jobs 20] [--seconds 30]
    .venv/bin/python -m benchmarks.bench_console_lateness --tree /path/to/other/checkout

Each side runs the same configuration (`--jobs` command jobs of `/bin/true`, each
every second) in a fresh state directory for `--seconds`, one side after the other:

- headless: `tuisched --no-ui`;
- console: `tuisched` hosting the scheduler in tmux at 80x24 while keys are sent as
  an operator works, one every 50 ms for the whole window (`tmux send-keys`): the
  jobs pane scrolled down and up, a job's detail opened and closed, a filter typed
  and cleared, the sort cycled, a pane zoomed and back.

Lateness is `started_at - slot` of every scheduled run whose slot falls in the
window after a 3 s warm-up, read from the side's history. Printed: p50, p95 and
max per side, and how often each side's event-loop watchdog complained (its log).
`--tree DIR` puts another checkout first on PYTHONPATH, so an older commit is
measured the same way in the same run (`--tree` alone measures only that tree).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from benchmarks._common import REPO, machine, percentile

WARM_UP = 3.0
KEY_SECONDS = 0.05
KEYS = [
    *["Down"] * 8, *["Up"] * 8, "Enter", "", "", "", "Escape", "/", "t", "i", "c", "k", "1",
    "", "", "Escape", "o", "", "o", "", "o", "", "o", "", "z", "", "z", "End", "Home",
]  # fmt: skip
"""One round of an operator's keys ("" is a pause of one key's time)."""


def _config(folder: Path, jobs: int) -> Path:
    lines = ["settings: {timezone: UTC, state_dir: state, max_workers: 8}", "jobs:"]
    lines += [
        f"  tick{i:02d}: {{command: [/bin/true], schedule: {{every: 1s, start: 2026-01-01T00:00}}}}"
        for i in range(jobs)
    ]
    path = folder / "tuisched.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _env(tree: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = f"{tree}{os.pathsep}{env.get('PYTHONPATH', '')}"
    return env


def _answers(config: Path, env: dict[str, str]) -> bool:
    done = subprocess.run(
        [sys.executable, "-m", "tuisched", "status", "-c", str(config)],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    return done.returncode == 0 and "running" in done.stdout


def _wait(condition: object, within: float = 120) -> None:
    deadline = time.monotonic() + within
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise TimeoutError("the scheduler never started")
        time.sleep(0.2)


def _stop(config: Path) -> None:
    lock = config.parent / "state" / "tuisched.lock"
    pid = int(lock.read_text().split()[0])
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 60
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.2)


def _headless(config: Path, env: dict[str, str], seconds: float) -> tuple[float, float]:
    process = subprocess.Popen(
        [sys.executable, "-m", "tuisched", "--no-ui", "-c", str(config)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
    )  # fmt: skip
    _wait(lambda: _answers(config, env))
    began = time.time()
    time.sleep(seconds)  # the measurement: the scheduler keeps time meanwhile
    ended = time.time()
    _stop(config)
    process.wait(timeout=60)
    return began, ended


def _console(config: Path, env: dict[str, str], seconds: float) -> tuple[float, float]:
    return _worked(config, env, seconds, "")


def _attached(config: Path, env: dict[str, str], seconds: float) -> tuple[float, float]:
    """A headless scheduler, and the console in a process of its own (`tuisched attach`)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tuisched", "--no-ui", "-c", str(config)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
    )  # fmt: skip
    try:
        _wait(lambda: _answers(config, env))
        return _worked(config, env, seconds, "attach")
    finally:
        process.wait(timeout=60)


def _worked(config: Path, env: dict[str, str], seconds: float, verb: str) -> tuple[float, float]:
    """The console (`tuisched [verb]`) in tmux at 80x24, worked with keys for `seconds`."""
    socket = f"bench-lateness-{os.getpid()}"
    tmux = ["tmux", "-L", socket]
    pythonpath = env.get("PYTHONPATH", "")
    command = f"PYTHONPATH={pythonpath} {sys.executable} -m tuisched {verb} -c {config}; sleep 30"
    subprocess.run([*tmux, "new-session", "-d", "-s", "t", "-x", "80", "-y", "24", command],
                   check=True, cwd=REPO)  # fmt: skip
    try:
        _wait(lambda: _answers(config, env))
        time.sleep(1.0)  # the panes' first read
        began = time.time()
        stop = threading.Event()
        keys = threading.Thread(target=_operate, args=(tmux, stop), daemon=True)
        keys.start()
        time.sleep(seconds)  # the measurement: keys go in meanwhile
        stop.set()
        keys.join()
        ended = time.time()
        _stop(config)
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True, check=False)
    return began, ended


def _operate(tmux: list[str], stop: threading.Event) -> None:
    """Keys as an operator works, one every KEY_SECONDS, until `stop`."""
    while not stop.is_set():
        for key in KEYS:
            if stop.is_set():
                return
            if key:
                subprocess.run([*tmux, "send-keys", "-t", "t", key], check=False)
            time.sleep(KEY_SECONDS)


def _lateness(config: Path, began: float, ended: float) -> list[float]:
    """started_at - slot of each scheduled run with a slot in the window (seconds)."""
    db = sqlite3.connect(config.parent / "state" / "history.db")
    try:
        rows = db.execute(
            "SELECT slot, started_at FROM runs WHERE slot IS NOT NULL AND started_at IS NOT NULL"
        ).fetchall()
    finally:
        db.close()
    late = []
    for slot_text, started_text in rows:
        slot, started = _instant(slot_text), _instant(started_text)
        if began + WARM_UP <= slot <= ended:
            late.append(started - slot)
    return late


def _instant(text: str) -> float:
    """A time as the history keeps it (UTC, without its offset), as a Unix time."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def _warnings(config: Path) -> int:
    log = config.parent / "state" / "tuisched.log"
    if not log.exists():
        return 0
    return sum("event loop was blocked" in line for line in log.read_text().splitlines())


def _side(name: str, tree: Path | None, jobs: int, seconds: float) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="tuisched-lateness-") as tmp:
        config = _config(Path(tmp), jobs)
        env = _env(tree)
        run = {"headless": _headless, "console": _console, "attached": _attached}[name]
        began, ended = run(config, env, seconds)
        late = _lateness(config, began, ended)
        return {
            "side": name + (f" ({tree})" if tree else ""),
            "runs": len(late),
            "p50": percentile(late, 50),
            "p95": percentile(late, 95),
            "max": max(late) if late else float("nan"),
            "lag_warnings": _warnings(config),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--tree", type=Path, action="append", default=[],
                        help="also measure this checkout (repeatable)")  # fmt: skip
    parser.add_argument("--sides", default="headless,console",
                        help="headless, console (hosting), attached (a console in a process "
                             "of its own beside a headless scheduler)")  # fmt: skip
    args = parser.parse_args()
    if shutil.which("tmux") is None:
        sys.exit("tmux is needed for the console side")
    print(machine())
    rows = []
    for tree in [None, *args.tree]:
        for side in args.sides.split(","):
            rows.append(_side(side, tree, args.jobs, args.seconds))
            print(rows[-1], flush=True)
    print(f"\n{args.jobs} jobs every second, {args.seconds:.0f} s per side, keys every "
          f"{KEY_SECONDS * 1000:.0f} ms on the console side")  # fmt: skip
    print("| side | runs | p50 | p95 | max | loop blocked (log) |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['side']} | {row['runs']} | {row['p50'] * 1000:.0f} ms | "
              f"{row['p95'] * 1000:.0f} ms | {row['max'] * 1000:.0f} ms | {row['lag_warnings']} |")  # fmt: skip


if __name__ == "__main__":
    main()
