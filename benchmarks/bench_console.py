"""Console responsiveness with 1,000 and 10,000 jobs while a run finishes every 100 ms,
and the jobs pane at scale (1,000 to 100,000 jobs).

Measures, on the real app driven headless by Pilot (120x40):
- start: from runtime start to the jobs table filled;
- key press to repaint: the time `pilot.press("down")` takes, which returns once the
  key was handled and the screen refreshed (median and p95 of 100 presses);
- how often bus updates are applied (batches per second) while runs finish;
- CPU used by the idle console (no runs; no slot falls due while measuring) as a
  share of one core, over 5 s.

At scale (`--scale`, each size in a fresh process so that peak RSS is its own):
- first frame: from runtime start (the app launched) to the screen update after the jobs
  pane holds rows (the jobs of the file, shown while the scheduler starts). Not
  `pilot.pause()`, which waits for the app to go idle: while the scheduler starts beside
  it, that is once the start and the panes' full load are over ("complete");
- complete: from runtime start to the jobs pane holding every job as the running
  scheduler sees it (`app.ready`);
- peak RSS of the process once the table is complete;
- sort: `o` (file order to name) until the first row is the first name, repainted;
- filter: a job's name typed into the open filter box, a key at a time, each key
  until the rows for what is typed so far are shown: the slowest key, and all keys;
- palette: the same in the open palette (ctrl+p), each key until its search is over
  and the best hit holds what is typed.
Keys are posted to the app, not pressed with `pilot.press` (which waits for the app to
go idle after each key, at least 40 ms: that would time Pilot).
Wall-clock times, and in brackets the CPU time the process used meanwhile (the part a
machine shared with other work does not inflate).

    .venv/bin/python -m benchmarks.bench_console [--sizes 1000,10000]
    .venv/bin/python -m benchmarks.bench_console --scale [--sizes 1000,10000,100000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks._common import emit, machine, maxrss_mb, run_child


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


async def _until(pilot: object, condition: object, within: float = 120) -> None:
    """Poll `condition` every 5 ms of the app's loop; fail after `within` seconds."""
    deadline = time.perf_counter() + within
    while not condition():  # type: ignore[operator]
        if time.perf_counter() > deadline:
            raise TimeoutError("condition not met")
        await pilot.pause(0.005)  # type: ignore[attr-defined]


def _type(app: object, *keys: str) -> None:
    """Post key strokes to the app at once, as a fast typist or a paste would.

    Not `pilot.press`: it waits for the app to go idle after each key (at least
    40 ms), which would measure Pilot, not the console.
    """
    from textual import events

    for key in keys:
        app.post_message(events.Key(key, key if len(key) == 1 else None))  # type: ignore[attr-defined]


def _first_key(table: object) -> str | None:
    """The job of the jobs pane's first row (for the table before and after the index)."""
    for key in table.rows:  # type: ignore[attr-defined]
        return key.value  # type: ignore[no-any-return]
    return None


def _palette_shows(app: object, typed: str) -> bool:
    """Whether the palette's search for `typed` is over and its best hit holds it."""
    from textual.command import CommandInput, CommandList, CommandPalette

    screen = app.screen  # type: ignore[attr-defined]
    if not isinstance(screen, CommandPalette) or screen.query_one(CommandInput).value != typed:
        return False
    if any(w.node is screen and not w.is_finished for w in app.workers):  # type: ignore[attr-defined]
        return False
    hits = screen.query_one(CommandList)
    return hits.option_count > 0 and typed in str(hits.get_option_at_index(0).prompt)


async def _key_by_key(pilot: object, word: str, shown: object) -> tuple[float, float, float]:
    """Type `word` a key at a time, each awaited until `shown(typed so far)` holds.

    (slowest key, all keys) in wall-clock seconds, and the CPU seconds of all keys:
    an operator typing sees each key's result before the next key.
    """
    app = pilot.app  # type: ignore[attr-defined]
    slowest, c, start = 0.0, time.process_time(), time.perf_counter()
    for end in range(1, len(word) + 1):
        t = time.perf_counter()
        _type(app, word[end - 1])
        await _until(pilot, lambda end=end: shown(word[:end]))  # type: ignore[misc,operator]
        await pilot.pause()  # type: ignore[attr-defined]
        slowest = max(slowest, time.perf_counter() - t)
    return slowest, time.perf_counter() - start, time.process_time() - c


async def _scale(n: int) -> dict[str, float]:
    """The jobs pane's figures with `n` jobs (see the module docstring)."""
    from tuisched.frontends.tui.app import TuischedApp
    from tuisched.frontends.tui.widgets.jobs import JobsTable
    from tuisched.runtime.configfiles import load_config
    from tuisched.runtime.control import LocalScheduler
    from tuisched.runtime.runtime import Runtime

    target = f"j{n // 2 + 123:06d}"  # a name that no other name contains
    with tempfile.TemporaryDirectory(prefix="tuisched-console-") as tmp:
        runtime = Runtime(load_config(_config(Path(tmp), n)))
        scheduler = LocalScheduler(runtime)
        app = TuischedApp(scheduler.control("bench (console)"), scheduler=scheduler)
        t0 = time.perf_counter()
        async with app.run_test(size=(120, 40)) as pilot:
            await _until(pilot, lambda: app.query_one(JobsTable).row_count > 0)
            painted = asyncio.Event()  # the next screen update: the frame with rows
            app.call_after_refresh(painted.set)
            await painted.wait()
            first = time.perf_counter() - t0
            table = app.query_one(JobsTable)
            await _until(pilot, lambda: app.ready and table.row_count == n + 1)
            complete = time.perf_counter() - t0
            rss = maxrss_mb()
            await pilot.pause(1.0)
            t, c = time.perf_counter(), time.process_time()
            _type(app, "o")
            await _until(pilot, lambda: _first_key(table) == "j000000")
            await pilot.pause()
            sort, sort_cpu = time.perf_counter() - t, time.process_time() - c
            await pilot.press("slash")  # the box opens and takes the focus
            names = [f"j{i:06d}" for i in range(n)]
            filtered = await _key_by_key(
                pilot, target, lambda typed: table.row_count == sum(typed in m for m in names)
            )
            await pilot.press("enter", "escape")
            await _until(pilot, lambda: table.row_count == n + 1)
            await pilot.pause(0.5)
            await pilot.press("ctrl+p")  # the palette opens and takes the focus
            palette = await _key_by_key(pilot, target, lambda typed: _palette_shows(app, typed))
            await pilot.press("escape")
            await pilot.pause()
    return {
        "first_s": first,
        "complete_s": complete,
        "rss_mb": rss,
        "sort_ms": sort * 1000,
        "sort_cpu_ms": sort_cpu * 1000,
        **{
            f"filter_{k}_ms": v * 1000 for k, v in zip(("key", "all", "cpu"), filtered, strict=True)
        },
        **{
            f"palette_{k}_ms": v * 1000 for k, v in zip(("key", "all", "cpu"), palette, strict=True)
        },
    }


def _print_scale(sizes: list[int]) -> None:
    print(
        "| jobs | first frame | table complete | peak RSS | sort `o` (cpu)"
        " | filter: slowest key / all keys (cpu) | palette: slowest key / all keys (cpu) |\n"
        "|---|---|---|---|---|---|---|\n"
        "| goal | < 2 s (100k: < 5 s) | | (100k: < 500 MB) | < 200 ms | | < 200 ms |",
        flush=True,
    )
    for n in sizes:
        r = run_child("bench_console", ["--child", str(n)])
        print(
            f"| {n:,} | {r['first_s']:.2f} s | {r['complete_s']:.2f} s | {r['rss_mb']:.0f} MB"
            f" | {r['sort_ms']:.0f} ms ({r['sort_cpu_ms']:.0f})"
            f" | {r['filter_key_ms']:.0f} / {r['filter_all_ms']:.0f} ms ({r['filter_cpu_ms']:.0f})"
            f" | {r['palette_key_ms']:.0f} / {r['palette_all_ms']:.0f} ms"
            f" ({r['palette_cpu_ms']:.0f}) |",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default=None)
    parser.add_argument("--scale", action="store_true", help="the jobs pane at scale")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        emit(asyncio.run(_scale(args.child)))
        return
    print(machine())
    if args.scale:
        _print_scale([int(size) for size in (args.sizes or "1000,10000,100000").split(",")])
        return
    args.sizes = args.sizes or "1000,10000"
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
