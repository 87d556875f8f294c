"""Benchmark 4: start-up time and peak RSS with N jobs in the configuration.

    .venv/bin/python -m benchmarks.bench_startup                  # 10,000 and 100,000 jobs
    .venv/bin/python -m benchmarks.bench_startup --sizes 100000 --repeat 2

The configuration is generated (not timed): half the jobs cron
(`"M H * * *"` and `"*/15 * * * *"`-style), half every (`every: "N minutes"`
anchored at 2026-01-01T00:00), all `command: [/bin/true]`.

tuisched, in a fresh subprocess per size: time from before `load_config` to the
SchedulerStarted event (split into config load and runtime start), and
ru_maxrss at that point; `imports` is the RSS after importing tuisched and
before loading anything.

Raw APScheduler 3.11, in a fresh subprocess per size: AsyncIOScheduler(timezone=UTC)
with the same count of CronTrigger jobs (the same expressions for the cron half,
`minute="*/N"` for the every half) added with `add_job(func, CronTrigger(...))`
before `start()`, timed until start() has returned and the loop has run once.
It reads no YAML, so its time is only adding and scheduling jobs.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from benchmarks._common import emit, machine, maxrss_mb, ratio, run_child, write_config


def _spec(i: int) -> tuple[str, str, str]:
    """(kind, expression, yaml schedule) of job i."""
    if i % 2 == 0:
        expr = f"{i % 60} {(i // 60) % 24} * * *" if i % 4 == 0 else f"*/{1 + i % 30} * * * *"
        return "cron", expr, f'{{cron: "{expr}"}}'
    step = 1 + i % 59
    return "every", f"*/{step}", f'{{every: "{step} minutes", start: "2026-01-01T00:00"}}'


def generate(folder: Path, n: int) -> Path:
    jobs = (f"j{i:06d}: {{command: [/bin/true], schedule: {_spec(i)[2]}}}" for i in range(n))
    return write_config(folder, jobs, settings={})


async def _tuisched_start(path: Path) -> dict[str, float]:
    from tuisched.domain.events import SchedulerStarted
    from tuisched.runtime.configfiles import load_config
    from tuisched.runtime.runtime import Runtime

    t0 = time.perf_counter()
    config = load_config(path)
    t_load = time.perf_counter()
    runtime = Runtime(config)
    started = asyncio.Event()
    runtime.bus.subscribe(SchedulerStarted, lambda _e: started.set())
    await runtime.start()
    await started.wait()
    t_ready = time.perf_counter()
    rss = maxrss_mb()
    await runtime.stop(grace=1)
    return {
        "load_s": t_load - t0,
        "start_s": t_ready - t_load,
        "total_s": t_ready - t0,
        "rss_mb": rss,
    }


async def _raw_start(n: int) -> dict[str, float]:
    from apscheduler.schedulers.asyncio import AsyncIOScheduler
    from apscheduler.triggers.cron import CronTrigger

    def trivial() -> None:
        pass

    t0 = time.perf_counter()
    scheduler = AsyncIOScheduler(
        timezone="UTC",
        job_defaults={"misfire_grace_time": 3600, "coalesce": False, "max_instances": 1},
    )
    for i in range(n):
        kind, expr, _ = _spec(i)
        if kind == "cron":
            trigger = CronTrigger.from_crontab(expr, timezone="UTC")
        else:
            trigger = CronTrigger(minute=expr, timezone="UTC")
        scheduler.add_job(trivial, trigger, id=f"j{i:06d}")
    t_added = time.perf_counter()
    scheduler.start()
    await asyncio.sleep(0)
    t_ready = time.perf_counter()
    rss = maxrss_mb()
    scheduler.shutdown(wait=False)
    return {
        "load_s": t_added - t0,
        "start_s": t_ready - t_added,
        "total_s": t_ready - t0,
        "rss_mb": rss,
    }


def child(args: argparse.Namespace) -> None:
    if args.child == "tuisched":
        import tuisched.runtime.configfiles
        import tuisched.runtime.runtime  # noqa: F401  (imports are not part of start-up time)

        base = maxrss_mb()
        result = asyncio.run(_tuisched_start(Path(args.config)))
    else:
        import apscheduler.schedulers.asyncio
        import apscheduler.triggers.cron  # noqa: F401

        base = maxrss_mb()
        result = asyncio.run(_raw_start(args.n))
    emit({**result, "imports_rss_mb": base})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--repeat", type=int, default=1, help="runs per side and size (best kept)")
    parser.add_argument("--tmpdir", default=None, help="parent of the temporary folder")
    parser.add_argument("--child", choices=["tuisched", "raw"], help=argparse.SUPPRESS)
    parser.add_argument("--config", help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    print(machine())
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory(prefix="tuisched-bench-", dir=args.tmpdir) as tmp:
            path = generate(Path(tmp), n)
            size = path.stat().st_size
            best: dict[str, dict[str, float]] = {}
            for _ in range(args.repeat):
                for side in ("raw", "tuisched"):
                    extra = ["--config", str(path)] if side == "tuisched" else []
                    r = run_child("bench_startup", ["--child", side, "--n", str(n), *extra])
                    print(
                        f"  n={n:>7} {side:>8}: load/add {r['load_s']:.2f}s start {r['start_s']:.2f}s"
                        f" total {r['total_s']:.2f}s | peak RSS {r['rss_mb']:.0f} MB"
                        f" (after imports {r['imports_rss_mb']:.0f} MB) | yaml {size / 1e6:.1f} MB",
                        flush=True,
                    )
                    if side not in best or r["total_s"] < best[side]["total_s"]:  # type: ignore[operator]
                        best[side] = r  # type: ignore[assignment]
        rows.append((n, best["tuisched"], best["raw"]))
    print()
    print("| jobs | metric | tuisched | raw APScheduler | ratio | goal | met |")
    print("|---|---|---|---|---|---|---|")
    for n, t, r in rows:
        goal_t = goal_m = met_t = met_m = ""
        if n >= 100000:
            goal_t, goal_m = "< 10 s", "< 500 MB"
            met_t = "met" if t["total_s"] < 10 else "not met"
            met_m = "met" if t["rss_mb"] < 500 else "not met"
        print(
            f"| {n:,} | ready (load+start) | {t['total_s']:.2f} s (load {t['load_s']:.2f} + start"
            f" {t['start_s']:.2f}) | {r['total_s']:.2f} s | {ratio(t['total_s'], r['total_s'])}"
            f" | {goal_t} | {met_t} |"
        )
        print(
            f"| {n:,} | peak RSS | {t['rss_mb']:.0f} MB | {r['rss_mb']:.0f} MB"
            f" | {ratio(t['rss_mb'], r['rss_mb'])} | {goal_m} | {met_m} |"
        )


if __name__ == "__main__":
    main()
