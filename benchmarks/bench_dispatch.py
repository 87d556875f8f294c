"""Benchmarks 1 and 2: dispatch lateness and the longest event-loop stall when
N no-op python jobs fall due in the same second, tuisched vs raw APScheduler.

    .venv/bin/python -m benchmarks.bench_dispatch                # 1,000 and 10,000 jobs
    .venv/bin/python -m benchmarks.bench_dispatch --sizes 10000 --repeat 3
    .venv/bin/python -m benchmarks.bench_dispatch --child tuisched --n 10000 --profile /tmp/p.out

Each side runs in a fresh subprocess (same interpreter, same machine, one after
the other) so neither inherits the other's threads, heap or child watcher.

tuisched: N jobs `{python: "benchmarks.jobs:noop", isolation: thread, schedule: {at: T}}`
with T a whole UTC second a few seconds after the runtime is ready; max_workers 8
(the default); lateness = RunStarted.run.started_at - run.slot. `isolation: thread`
compares like with like (raw APScheduler runs the function on threads too);
`--isolation process` measures python jobs in child processes (the default for
python jobs), which is bound by starting one process per run.

Raw APScheduler 3.11: AsyncIOScheduler(timezone=UTC), N DateTrigger jobs at T
calling a trivial sync function on the default AsyncIOExecutor, whose thread
pool is the loop's default executor, set to ThreadPoolExecutor(8) to match
max_workers; misfire_grace_time=3600, coalesce=False, max_instances=1.
Lateness = the moment the function starts in its worker thread - T.

The stall monitor (5 ms sleeps, excess over 5 ms) runs on each side's loop from
the moment its scheduler is ready until the last run has finished.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

from benchmarks._common import (
    StallMonitor,
    emit,
    machine,
    ms,
    ratio,
    run_child,
    summary,
    write_config,
)

LEAD_BASE = 2.0
"""Seconds between the scheduler being ready and the slot, at least."""


def _slot_after(seconds: float) -> datetime:
    """A whole UTC second at least `seconds` from now."""
    now = datetime.now(UTC)
    return (now + timedelta(seconds=seconds)).replace(microsecond=0) + timedelta(seconds=1)


async def _measure_burst(slot: datetime, done: asyncio.Event, ready: float) -> dict[str, float]:
    """Watch the loop from now until `done`: the margin before `slot`, the burst, the stall."""
    margin = (slot - datetime.now(UTC)).total_seconds()
    if margin < 0.2:
        raise SystemExit(f"slot passed before the scheduler was ready (margin {margin:.2f}s)")
    slot_perf = time.perf_counter() + margin
    monitor = StallMonitor()
    monitor.start()
    await done.wait()
    burst = (datetime.now(UTC) - slot).total_seconds()
    stall = await monitor.stop()
    return {
        "ready_s": ready, "margin_s": margin, "stall_s": stall,
        "stall_after_slot_s": monitor.stall_at - slot_perf, "burst_s": burst,
    }  # fmt: skip


# --- tuisched ------------------------------------------------------------------


async def _tuisched(
    n: int, workers: int, lead: float, tmpdir: str | None = None, isolation: str = "thread"
) -> dict[str, object]:
    from tuisched.domain.events import RunFinished, RunNotStarted, RunStarted, SlotMissed
    from tuisched.domain.runs import RunState
    from tuisched.runtime.configfiles import load_config
    from tuisched.runtime.runtime import Runtime

    with tempfile.TemporaryDirectory(prefix="tuisched-bench-", dir=tmpdir) as tmp:
        folder = Path(tmp)
        slot = _slot_after(lead)
        at = slot.strftime("%Y-%m-%dT%H:%M:%S")
        jobs = (
            f'j{i:06d}: {{python: "benchmarks.jobs:noop", isolation: {isolation},'
            f' schedule: {{at: "{at}"}}}}'
            for i in range(n)
        )
        path = write_config(folder, jobs, settings={"max_workers": str(workers)})
        t0 = time.perf_counter()
        runtime = Runtime(load_config(path), kill_grace=0.5)
        lateness: list[float] = []
        done = asyncio.Event()
        counts = {"finished": 0, "not_started": 0, "missed": 0, "failed": 0}

        def started(event: RunStarted) -> None:
            lateness.append((event.run.started_at - event.run.slot).total_seconds())

        def ended(event: RunFinished | RunNotStarted | SlotMissed) -> None:
            if isinstance(event, SlotMissed):
                counts["missed"] += 1
            elif isinstance(event, RunNotStarted):
                counts["not_started"] += 1
            else:
                counts["finished"] += 1
                if event.run.state is not RunState.SUCCESS:
                    counts["failed"] += 1
            if sum(counts[k] for k in ("finished", "not_started", "missed")) >= n:
                done.set()

        runtime.bus.subscribe(RunStarted, started)
        runtime.bus.subscribe(RunFinished, ended)
        runtime.bus.subscribe(RunNotStarted, ended)
        runtime.bus.subscribe(SlotMissed, ended)
        await runtime.start()
        measured = await _measure_burst(slot, done, ready=time.perf_counter() - t0)
        await runtime.stop(grace=5)
        return {
            "side": "tuisched", "n": n, "workers": workers, **measured,
            "lateness": summary(lateness), "rate": n / measured["burst_s"], **counts,
        }  # fmt: skip


# --- raw APScheduler --------------------------------------------------------------


async def _raw(
    n: int, workers: int, lead: float, tmpdir: str | None = None, isolation: str = "thread"
) -> dict[str, object]:
    from apscheduler.schedulers.asyncio import AsyncIOScheduler

    loop = asyncio.get_running_loop()
    loop.set_default_executor(ThreadPoolExecutor(max_workers=workers))
    lateness: list[float] = []
    lock = threading.Lock()
    done = asyncio.Event()

    def trivial(slot: datetime) -> None:
        late = (datetime.now(UTC) - slot).total_seconds()
        with lock:
            lateness.append(late)
            if len(lateness) == n:
                loop.call_soon_threadsafe(done.set)

    t0 = time.perf_counter()
    scheduler = AsyncIOScheduler(
        timezone=UTC,
        job_defaults={"misfire_grace_time": 3600, "coalesce": False, "max_instances": 1},
    )
    # The slot is fixed before the jobs are added, like tuisched's configuration.
    slot = _slot_after(lead)
    for i in range(n):
        scheduler.add_job(trivial, "date", run_date=slot, args=(slot,), id=f"j{i:06d}")
    scheduler.start()
    await asyncio.sleep(0)  # start() schedules its first wake-up; let it run
    measured = await _measure_burst(slot, done, ready=time.perf_counter() - t0)
    scheduler.shutdown(wait=False)
    return {
        "side": "raw", "n": n, "workers": workers, **measured,
        "lateness": summary(lateness), "rate": n / measured["burst_s"],
        "finished": len(lateness), "not_started": 0, "missed": n - len(lateness), "failed": 0,
    }  # fmt: skip


def child(args: argparse.Namespace) -> None:
    lead = args.lead if args.lead is not None else LEAD_BASE + args.n * 0.0002
    func = _tuisched if args.child == "tuisched" else _raw
    if args.profile:
        profiler = cProfile.Profile()
        result = profiler.runcall(
            asyncio.run, func(args.n, args.workers, lead, args.tmpdir, args.isolation)
        )
        profiler.dump_stats(args.profile)
        stats = pstats.Stats(profiler, stream=sys.stderr)
        stats.sort_stats("cumulative").print_stats(40)
    else:
        result = asyncio.run(func(args.n, args.workers, lead, args.tmpdir, args.isolation))
    emit(result)


# --- the comparison ------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000", help="comma-separated job counts")
    parser.add_argument("--workers", type=int, default=8, help="max_workers / thread pool size")
    parser.add_argument("--repeat", type=int, default=1, help="runs per side and size")
    parser.add_argument("--lead", type=float, default=None, help="seconds from ready to slot")
    parser.add_argument(
        "--tmpdir", default=None, help="parent of the temporary state_dir (default: system temp)"
    )
    parser.add_argument(
        "--isolation", choices=["thread", "process"], default="thread",
        help="how tuisched runs the python jobs (raw APScheduler always uses threads)",
    )  # fmt: skip
    parser.add_argument("--child", choices=["tuisched", "raw"], help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, default=1000, help=argparse.SUPPRESS)
    parser.add_argument("--profile", default="", help="(child only) cProfile output path")
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    print(machine())
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        best: dict[str, dict[str, object]] = {}
        for _ in range(args.repeat):
            for side in ("raw", "tuisched"):
                extra = ["--isolation", args.isolation]
                extra += ["--lead", str(args.lead)] if args.lead is not None else []
                extra += ["--tmpdir", args.tmpdir] if args.tmpdir else []
                r = run_child(
                    "bench_dispatch",
                    ["--child", side, "--n", str(n), "--workers", str(args.workers), *extra],
                )
                print(
                    f"  n={n:>6} {side:>8}: lateness p50 {ms(r['lateness']['p50'])}"  # type: ignore[index]
                    f" p99 {ms(r['lateness']['p99'])} max {ms(r['lateness']['max'])}"  # type: ignore[index]
                    f" | stall {ms(r['stall_s'])} | {r['rate']:.0f} runs/s"  # type: ignore[arg-type]
                    f" | finished {r['finished']} missed {r['missed']}"
                    f" not_started {r['not_started']} failed {r['failed']} | ready {r['ready_s']:.2f}s",
                    flush=True,
                )
                # keep the median-ish run: the one with the lower p99 is reported last
                best.setdefault(side, r)
                if r["lateness"]["p99"] < best[side]["lateness"]["p99"]:  # type: ignore[index]
                    best[side] = r
        rows.append((n, best["tuisched"], best["raw"]))
    print()
    print("| jobs | metric | tuisched | raw APScheduler | ratio | goal | met |")
    print("|---|---|---|---|---|---|---|")
    for n, t, r in rows:
        tl, rl = t["lateness"], r["lateness"]
        for key in ("p50", "p99", "max"):
            goal, met = "", ""
            if key == "p99":
                goal = "<= 1.5x raw"
                met = "met" if tl[key] <= 1.5 * rl[key] else "not met"  # type: ignore[index]
            print(
                f"| {n:,} | lateness {key} | {ms(tl[key])} | {ms(rl[key])} "  # type: ignore[index]
                f"| {ratio(tl[key], rl[key])} | {goal} | {met} |"  # type: ignore[index]
            )
        goal = "< 50 ms" if n >= 10000 else ""
        met = ("met" if t["stall_s"] < 0.05 else "not met") if goal else ""  # type: ignore[operator]
        print(
            f"| {n:,} | longest loop stall | {ms(t['stall_s'])} | {ms(r['stall_s'])} "  # type: ignore[arg-type]
            f"| {ratio(t['stall_s'], r['stall_s'])} | {goal} | {met} |"  # type: ignore[arg-type]
        )
        print(
            f"| {n:,} | runs/s (slot to last finish) | {t['rate']:.0f} | {r['rate']:.0f} "
            f"| {ratio(t['rate'], r['rate'])} | | |"  # type: ignore[arg-type]
        )
    if any(t["missed"] or t["not_started"] or t["failed"] for _, t, _ in rows):
        print("\nWARNING: tuisched missed, skipped or failed runs (see lines above)")


if __name__ == "__main__":
    main()
