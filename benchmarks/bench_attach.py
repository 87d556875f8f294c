"""Attaching to a running scheduler: first frame, event latency, and a storm of runs.

Each part runs a real `tuisched --no-ui` in a subprocess and talks to it
through its control socket, as `tuisched attach` does:

1. **first frame**: the console (the real app, driven headless by Pilot at
   120x40) over `RemoteControl`, with `--jobs` jobs (default 10,000): time
   from the connection's start until the jobs pane holds every job;
2. **event latency**: a job triggered `--triggers` times (default 200),
   20 ms apart; for each event of its runs, the time from the event (the
   scheduler's clock) to its arrival in the client (the same machine's clock);
3. **storm**: `--storm` no-op python jobs (default 1,000, `isolation:
   thread`) every second, so about that many runs a second, with a console
   attached, for `--seconds` (default 20): how far behind the scheduler the
   events arrive (p50 / p99 / max), whether any sequence number is missing
   or repeated, and the console's own loop lag.

    .venv/bin/python -m benchmarks.bench_attach [--jobs 10000] [--storm 1000] [--seconds 20]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from benchmarks._common import REPO, machine, summary

START = "2026-01-01T00:00"


def _write(folder: Path, jobs: list[str], workers: int = 32) -> Path:
    lines = [f"settings: {{timezone: UTC, state_dir: state, max_workers: {workers}}}", "jobs:"]
    path = folder / "tuisched.yaml"
    path.write_text("\n".join(lines + [f"  {job}" for job in jobs]) + "\n")
    return path


def _start(config: Path) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [sys.executable, "-m", "tuisched", "--no-ui", "-c", str(config)],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    sock = config.parent / "state" / "control.sock"
    deadline = time.monotonic() + 300
    while not sock.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("the scheduler did not start")
        time.sleep(0.05)
    return process


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()


async def _first_frame(config: Path, jobs: int) -> float:
    from tuisched.frontends.tui.app import TuischedApp
    from tuisched.frontends.tui.widgets.jobs import JobsTable
    from tuisched.runtime.control import RemoteControl

    began = time.perf_counter()
    control = RemoteControl(config.parent / "state" / "control.sock", client="bench")
    await control.connect()
    app = TuischedApp(control)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            while app.query_one(JobsTable).row_count < jobs:
                await pilot.pause(0.01)
            return time.perf_counter() - began
    finally:
        await control.close()


async def _latency(config: Path, triggers: int) -> list[float]:
    from tuisched.domain.events import Event, RunEvent
    from tuisched.runtime.control import RemoteControl

    control = RemoteControl(config.parent / "state" / "control.sock", client="bench")
    await control.connect()
    delays: list[float] = []

    def heard(event: Event) -> None:
        if isinstance(event, RunEvent):
            delays.append((datetime.now(UTC) - event.at).total_seconds())

    subscription = control.subscribe(heard)
    try:
        await asyncio.sleep(0.5)  # the stream is open
        for _ in range(triggers):
            await control.run_now("fire")
            await asyncio.sleep(0.02)
        await asyncio.sleep(1.0)  # the last events arrive
    finally:
        subscription.unsubscribe()
        await control.close()
    return delays


async def _storm(config: Path, seconds: float) -> dict[str, float]:
    from tuisched.domain.events import Event, RunFinished
    from tuisched.frontends.tui.app import TuischedApp
    from tuisched.runtime.control import RemoteControl

    sock = config.parent / "state" / "control.sock"
    watcher = RemoteControl(sock, client="bench")
    await watcher.connect()
    console = RemoteControl(sock, client="bench console")
    await console.connect()
    delays: list[float] = []
    seqs: list[int] = []
    finished = 0

    def heard(event: Event) -> None:
        nonlocal finished
        delays.append((datetime.now(UTC) - event.at).total_seconds())
        seqs.append(event.seq)
        finished += isinstance(event, RunFinished)

    app = TuischedApp(console)
    lags: list[float] = []
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause(3.0)  # the console is up; the storm is on
            subscription = watcher.subscribe(heard)
            ends = time.perf_counter() + seconds
            while time.perf_counter() < ends:
                before = time.perf_counter()
                await asyncio.sleep(0.01)
                lags.append(time.perf_counter() - before - 0.01)
            subscription.unsubscribe()
    finally:
        await watcher.close()
        await console.close()
    gaps = sum(1 for a, b in itertools.pairwise(seqs) if b != a + 1)
    lag, loop = summary(delays), summary(lags)
    return {
        "events": len(delays), "runs_per_s": finished / seconds, "gaps": gaps,
        "p50": lag["p50"], "p99": lag["p99"], "max": lag["max"],
        "loop_p99": loop["p99"], "loop_max": loop["max"],
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--triggers", type=int, default=200)
    parser.add_argument("--storm", type=int, default=1_000)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    print(machine())
    with tempfile.TemporaryDirectory(prefix="tuisched-attach-") as tmp:
        jobs = [f"j{i:05d}: {{command: [/bin/true], schedule: manual}}" for i in range(args.jobs)]
        config = _write(Path(tmp), ["fire: {command: [/bin/true], schedule: manual}", *jobs])
        process = _start(config)
        try:
            frame = asyncio.run(_first_frame(config, args.jobs + 1))
            delays = summary(asyncio.run(_latency(config, args.triggers)))
        finally:
            _stop(process)
    with tempfile.TemporaryDirectory(prefix="tuisched-storm-") as tmp:
        jobs = [
            f"s{i:04d}: {{python: 'benchmarks.jobs:noop', isolation: thread, "
            f"schedule: {{every: 1s, start: '{START}'}}}}"
            for i in range(args.storm)
        ]
        config = _write(Path(tmp), jobs, workers=64)
        process = _start(config)
        try:
            storm = asyncio.run(_storm(config, args.seconds))
        finally:
            _stop(process)
    print("| jobs | first frame | event to client p50 / p99 / max |")
    print("|---|---|---|")
    print(
        f"| {args.jobs:,} | {frame:.2f} s | {delays['p50'] * 1000:.1f} / "
        f"{delays['p99'] * 1000:.1f} / {delays['max'] * 1000:.1f} ms ({delays['n']} events) |"
    )
    print()
    print(
        "| storm jobs | runs/s | events | behind p50 / p99 / max | gaps | console loop p99 / max |"
    )
    print("|---|---|---|---|---|---|")
    print(
        f"| {args.storm:,} | {storm['runs_per_s']:.0f} | {storm['events']:.0f} | "
        f"{storm['p50'] * 1000:.0f} / {storm['p99'] * 1000:.0f} / {storm['max'] * 1000:.0f} ms | "
        f"{storm['gaps']:.0f} | {storm['loop_p99'] * 1000:.0f} / {storm['loop_max'] * 1000:.0f} ms |"
    )


if __name__ == "__main__":
    main()
