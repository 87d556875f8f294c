"""Console responsiveness with 1,000 and 10,000 jobs while a run finishes every 100 ms.

Measures, on the real app driven headless by Pilot (120x40):
- start: from runtime start to the jobs table filled;
- key press to repaint: the time `pilot.press("down")` takes, which returns once the
  key was handled and the screen refreshed (median and p95 of 100 presses);
- how often bus updates are applied (batches per second) while runs finish;
- CPU used by the idle console (no runs; no slot falls due while measuring) as a
  share of one core, over 5 s.

    .venv/bin/python -m benchmarks.bench_console [--sizes 1000,10000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks._common import machine


def _config(folder: Path, n: int) -> Path:
    lines = [
        "settings: {timezone: UTC, state_dir: state, max_workers: 8}",
        "jobs:",
        '  pulse: {python: "benchmarks.jobs:noop", schedule: manual, overlap: allow}',
    ]
    # Slots on 1 January: none falls due while measuring, so "idle" is the console's
    # own cost, not the scheduler running hundreds of jobs a minute.
    for i in range(n):
        schedule = f'{{cron: "{i % 60} {i % 24} 1 1 *"}}'
        lines.append(f"  j{i:06d}: {{command: [/bin/true], schedule: {schedule}}}")
    path = folder / "tuisched.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


async def _measure(n: int) -> dict[str, float]:
    from tuisched.frontends.tui.app import TuischedApp
    from tuisched.frontends.tui.widgets.jobs import JobsTable
    from tuisched.runtime.configfiles import load_config
    from tuisched.runtime.control import LocalScheduler
    from tuisched.runtime.runtime import Runtime

    with tempfile.TemporaryDirectory(prefix="tuisched-console-") as tmp:
        runtime = Runtime(load_config(_config(Path(tmp), n)))
        scheduler = LocalScheduler(runtime)
        app = TuischedApp(scheduler.control("bench (console)"), scheduler=scheduler)
        applied = 0
        t0 = time.perf_counter()
        async with app.run_test(size=(120, 40)) as pilot:
            while app.query_one(JobsTable).row_count < n + 1:
                await pilot.pause(0.05)
            ready = time.perf_counter() - t0  # runtime start and table fill, from launch
            panes = app.main.panes
            original = panes._show_changes

            def counting(changes: object) -> None:
                nonlocal applied
                applied += 1  # one batch of events applied to the panes
                original(changes)  # type: ignore[arg-type]

            panes._show_changes = counting  # type: ignore[method-assign]

            async def pulse() -> None:
                while True:
                    runtime.actions.run_now("pulse")
                    await asyncio.sleep(0.1)

            pulsing = asyncio.get_running_loop().create_task(pulse())
            await pilot.pause(1.0)
            latencies = []
            for _ in range(100):
                start = time.perf_counter()
                await pilot.press("down")
                latencies.append(time.perf_counter() - start)
            applied = 0
            window = time.perf_counter()
            await pilot.pause(5.0)
            batches = applied / (time.perf_counter() - window)
            pulsing.cancel()
            await pilot.pause(1.0)
            cpu0, wall0 = time.process_time(), time.perf_counter()
            await pilot.pause(5.0)
            idle = (time.process_time() - cpu0) / (time.perf_counter() - wall0)
        return {
            "ready_s": ready,
            "key_p50_ms": statistics.median(latencies) * 1000,
            "key_p95_ms": statistics.quantiles(latencies, n=20)[18] * 1000,
            "batches_per_s": batches,
            "idle_cpu_pct": idle * 100,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1000,10000")
    args = parser.parse_args()
    print(machine())
    print("| jobs | table filled | key to repaint p50 / p95 | batches/s while busy | idle CPU |")
    print("|---|---|---|---|---|")
    for n in (int(size) for size in args.sizes.split(",")):
        r = asyncio.run(_measure(n))
        print(
            f"| {n:,} | {r['ready_s']:.2f} s | {r['key_p50_ms']:.1f} / {r['key_p95_ms']:.1f} ms"
            f" | {r['batches_per_s']:.1f} | {r['idle_cpu_pct']:.1f}% |",
            flush=True,
        )


if __name__ == "__main__":
    main()
