"""Helpers shared by the benchmark scripts: statistics, the loop-stall monitor,
configuration writing, fresh-subprocess runs and the machine description."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import platform
import resource
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # `benchmarks.jobs:noop` must import from the jobs' threads
    sys.path.insert(0, str(REPO))


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100), nearest-rank on the sorted values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]


def summary(values: Sequence[float]) -> dict[str, float]:
    """p50, p99 and max of `values` (seconds), plus the count."""
    return {
        "n": len(values),
        "p50": percentile(values, 50),
        "p99": percentile(values, 99),
        "max": max(values) if values else float("nan"),
    }


class StallMonitor:
    """Measures the longest event-loop stall: the excess over a 5 ms sleep."""

    def __init__(self, step: float = 0.005) -> None:
        self.step = step
        self.stall = 0.0
        self.stall_at = 0.0
        """perf_counter() at the end of the longest stall."""
        self._task: asyncio.Task[None] | None = None

    async def _watch(self) -> None:
        while True:
            t = time.perf_counter()
            await asyncio.sleep(self.step)
            now = time.perf_counter()
            if now - t - self.step > self.stall:
                self.stall, self.stall_at = now - t - self.step, now

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._watch())

    def reset(self) -> None:
        self.stall = 0.0

    async def stop(self) -> float:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        return self.stall


def write_config(folder: Path, jobs: Iterable[str], *, settings: dict[str, str]) -> Path:
    """A tuisched.yaml in `folder` with `settings` (state_dir in `folder`) and job lines.

    Each item of `jobs` is one YAML line `name: {...}` under `jobs:`.
    """
    path = folder / "tuisched.yaml"
    base = {"timezone": "UTC", "state_dir": str(folder / "state"), "shutdown_grace": "5s"}
    base.update(settings)
    with path.open("w") as out:
        out.write("settings:\n")
        for key, value in base.items():
            out.write(f"  {key}: {value}\n")
        out.write("jobs:\n")
        for line in jobs:
            out.write(f"  {line}\n")
    return path


def maxrss_mb() -> float:
    """Peak resident set size of this process, in MB (ru_maxrss is KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_child(script: str, args: list[str], timeout: float = 900) -> dict[str, object]:
    """Run `python -m benchmarks.<script> --child ...` in a fresh process; its JSON result.

    The child prints exactly one line starting with `RESULT ` on stdout.
    """
    cmd = [sys.executable, "-m", f"benchmarks.{script}", *args]
    return run_result(cmd, what=f"child {' '.join(args)}", timeout=timeout)


def run_result(cmd: list[str], *, what: str, timeout: float = 900) -> dict[str, object]:
    """Run `cmd` (from the repository root) and parse the one `RESULT {json}` line it prints."""
    proc = subprocess.run(
        cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout, check=False
    )
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])  # type: ignore[no-any-return]
    raise RuntimeError(
        f"{what} failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )


def emit(result: dict[str, object]) -> None:
    """Print a child's result for `run_child`."""
    print("RESULT " + json.dumps(result), flush=True)


def machine() -> str:
    """One line about the machine and interpreter."""
    import apscheduler

    return (
        f"{platform.node()} | {os.cpu_count()} CPUs | Python {platform.python_version()} | "
        f"kernel {platform.release()} | APScheduler {apscheduler.__version__}"
    )


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def ratio(ours: float, theirs: float) -> str:
    if not theirs:
        return "n/a"
    return f"{ours / theirs:.2f}x"
