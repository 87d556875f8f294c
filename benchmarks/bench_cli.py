"""Commands that answer at once: the verbs against a running scheduler, and `--version`.

Starts a real headless scheduler (`tuisched --no-ui`) on a temporary
configuration, then runs each command `--repeat` times (default 20) in a
fresh process, as an operator's shell would, and prints the median and 95th
percentile of the wall time and the median CPU time (user + system) of each:

    tuisched --version | status | pause tick | resume tick | trigger hello

beside two references run in the same minutes by the same interpreter:
`python -c pass` (an interpreter's start) and `python -c "import json,
argparse, socket"` (what a thin client cannot do without). Goals: a verb
under 150 ms, `--version` under 100 ms, on an idle machine.

`--old DIR` also times the same commands from another checkout of tuisched
(DIR holds its `tuisched` package; `git archive COMMIT | tar -x -C DIR` makes
one), against the same scheduler, each repetition interleaved with the new
side's so that the machine's load falls on both alike. Every command runs as
`python -m tuisched` from the configuration's folder, with PYTHONPATH naming
its side's source. Each side's bytecode is written first (`compileall`), as
installing a package does: where PYTHONDONTWRITEBYTECODE is set, a source
tree without it is compiled again at every start, which is not what an
operator's installed `tuisched` does (`--source` measures that case).

    .venv/bin/python -m benchmarks.bench_cli [--repeat 20] [--old /tmp/tuisched-old]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._common import REPO, machine, percentile

CONFIG = """\
settings: {{timezone: UTC, state_dir: {state}}}
jobs:
  hello: {{command: [/bin/true], schedule: manual}}
  tick: {{command: [/bin/true], schedule: {{every: 1h, start: 2026-01-01T00:00}}}}
"""
COMMANDS = {
    "--version": ["--version"],
    "status": ["status"],
    "pause": ["pause", "tick"],
    "resume": ["resume", "tick"],
    "trigger": ["trigger", "hello"],
}
REFERENCES = {
    "python -c pass": ["-c", "pass"],
    'python -c "import json, argparse, socket"': ["-c", "import json, argparse, socket"],
}
Timings = dict[str, list[tuple[float, float]]]


def _timed(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one run of `argv`, which must succeed."""
    began = time.perf_counter()
    child = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)  # fmt: skip
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - began
    child.returncode = os.waitstatus_to_exitcode(status)
    err = child.stderr.read() if child.stderr else b""
    if child.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({child.returncode}): {err.decode()}")
    return wall, usage.ru_utime + usage.ru_stime


def _start(config: Path) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [sys.executable, "-m", "tuisched", "--no-ui", "-c", str(config)],
        cwd=config.parent, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    sock = config.parent / "state" / "control.sock"
    deadline = time.monotonic() + 60
    while not sock.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("the scheduler did not start")
        time.sleep(0.05)  # another process: nothing to await
    return process


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _bytecode(source: Path, *, compiled: bool) -> None:
    """Write (or, for `--source`, remove) the bytecode of `source`'s tuisched package."""
    package = source / "tuisched"
    if compiled:
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(package)], check=True,
                       stdout=subprocess.DEVNULL)  # fmt: skip
        return
    for cache in package.rglob("__pycache__"):
        shutil.rmtree(cache)


def measure(config: Path, sides: dict[str, Path], repeat: int) -> Timings:
    """Each reference and each side's commands, `repeat` times, interleaved."""
    runs: Timings = {}
    base = {**os.environ, "COLUMNS": "80"}
    for _ in range(repeat):
        for name, argv in REFERENCES.items():
            runs.setdefault(name, []).append(_timed([sys.executable, *argv], base, config.parent))
        for side, source in sides.items():
            env = {**base, "PYTHONPATH": str(source)}
            for name, argv in COMMANDS.items():
                tail = argv if name == "--version" else [*argv, "-c", str(config)]
                command = [sys.executable, "-m", "tuisched", *tail]
                timing = _timed(command, env, config.parent)
                runs.setdefault(f"{side}: tuisched {' '.join(argv)}", []).append(timing)
    return runs


def _row(name: str, timings: list[tuple[float, float]]) -> str:
    walls, cpus = [wall for wall, _ in timings], [cpu for _, cpu in timings]
    return (
        f"| {name} | {percentile(walls, 50) * 1000:.0f} ms | {percentile(walls, 95) * 1000:.0f} ms"
        f" | {percentile(cpus, 50) * 1000:.0f} ms |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=20, help="runs of each command")
    parser.add_argument("--old", type=Path, help="a checkout of tuisched to compare with")
    parser.add_argument("--source", action="store_true",
                        help="run without bytecode (as under PYTHONDONTWRITEBYTECODE)")  # fmt: skip
    args = parser.parse_args()
    sides = {"new": REPO}
    if args.old is not None:
        if not (args.old / "tuisched" / "__init__.py").exists():
            raise SystemExit(f"{args.old} holds no tuisched package")
        sides = {"old": args.old.resolve(), "new": REPO}
    for source in sides.values():
        _bytecode(source, compiled=not args.source)
    print(machine())
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="tuisched-bench-cli-") as tmp:
        config = Path(tmp) / "tuisched.yaml"
        config.write_text(CONFIG.format(state=Path(tmp) / "state"))
        scheduler = _start(config)
        try:
            runs = measure(config, sides, args.repeat)
        finally:
            _stop(scheduler)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    bytecode = "from source, no bytecode" if args.source else "bytecode compiled"
    print(f"\n{args.repeat} runs each, interleaved; {bytecode}\n")
    print("| command | wall p50 | wall p95 | CPU p50 |")
    print("|---|---|---|---|")
    for name, timings in runs.items():
        print(_row(name, timings))


if __name__ == "__main__":
    main()
