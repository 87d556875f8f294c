"""Event-loop lag with the console open, 1,000 jobs firing and alert mail to a silent server.

The scenario of "never block" (issue: the schedule keeps time whatever the
console, disk, network or input do): the real app, driven headless by Pilot
at 120x40, hosts the scheduler; 1,000 command jobs fail once a minute each
(spread over the minute, about 17 runs a second), and every failure sends an
alert to a mail server that accepts connections and never answers (a
listening socket nobody accepts from). The mail lane's threads all hang on it
and the alerts queue up behind them; the loop must not notice.

Lag is sampled by a task that sleeps 10 ms and records how late it wakes, for
`--seconds` (default 30); the loop watchdog's episodes (over 250 ms) are
counted too.

    .venv/bin/python -m benchmarks.bench_looplag [--jobs 1000] [--seconds 30]
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks._common import machine

TICK = 0.01


def _config(folder: Path, jobs: int, port: int) -> Path:
    (folder / "alert.txt").write_text("{{ job.name }} failed: {{ run.status }}\n")
    lines = [
        "settings: {timezone: UTC, state_dir: state, max_workers: 32}",
        "email:",
        f"  smtp: {{host: 127.0.0.1, port: {port}, timeout: 30s}}",
        "  from: tuisched@example.org",
        "  subject: '{{ job.name }} {{ event }}'",
        "  default_template: alert.txt",
        "jobs:",
    ]
    for i in range(jobs):
        second = i * 60 // jobs
        start = f"2026-01-01T00:00:{second:02d}"
        lines.append(
            f"  j{i:05d}: {{command: [/bin/false], schedule: {{every: 1m, start: '{start}'}},"
            " alerts: {failed: {to: [ops@example.org]}}}"
        )
    path = folder / "tuisched.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


async def _measure(jobs: int, seconds: float) -> dict[str, float]:
    from tuisched.domain.events import AlertFailed, RunFinished
    from tuisched.frontends.tui.app import TuischedApp
    from tuisched.runtime.configfiles import load_config
    from tuisched.runtime.control import LocalScheduler
    from tuisched.runtime.runtime import Runtime
    from tuisched.runtime.threads import Lane, lane_loads

    with tempfile.TemporaryDirectory(prefix="tuisched-looplag-") as tmp, socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(1024)
        runtime = Runtime(load_config(_config(Path(tmp), jobs, silent.getsockname()[1])))
        finished = 0
        alerts_failed = 0

        def on_finished(_event: object) -> None:
            nonlocal finished
            finished += 1

        def on_alert_failed(_event: object) -> None:
            nonlocal alerts_failed
            alerts_failed += 1

        runtime.bus.subscribe(RunFinished, on_finished)
        runtime.bus.subscribe(AlertFailed, on_alert_failed)
        scheduler = LocalScheduler(runtime)
        app = TuischedApp(scheduler.control("bench (console)"), scheduler=scheduler)
        lags: list[float] = []
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause(2.0)  # started, table filled
            episodes = runtime.watchdog.report().episodes
            ends = time.perf_counter() + seconds
            while time.perf_counter() < ends:
                before = time.perf_counter()
                await asyncio.sleep(TICK)
                lags.append(time.perf_counter() - before - TICK)
            report = runtime.watchdog.report()
            (mail,) = [load for load in lane_loads() if load.lane is Lane.MAIL]
            stop_started = time.perf_counter()
            await pilot.press("q")
            await pilot.press("y")
            while app.is_running and time.perf_counter() - stop_started < 30:
                await pilot.pause(0.1)
            stopped_in = time.perf_counter() - stop_started
        lags.sort()
        return {
            "p50_ms": statistics.median(lags) * 1000,
            "p99_ms": lags[int(len(lags) * 0.99)] * 1000,
            "max_ms": lags[-1] * 1000,
            "episodes": report.episodes - episodes,
            "runs": finished,
            "mail_busy": mail.busy,
            "mail_queued": mail.queued,
            "stop_s": stopped_in,
            "alerts_failed": alerts_failed,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=30.0)
    args = parser.parse_args()
    print(machine())
    r = asyncio.run(_measure(args.jobs, args.seconds))
    print("| jobs | runs | loop lag p50 / p99 / max | episodes > 250 ms "
          "| mail lane busy / queued | quit to exit |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    print(
        f"| {args.jobs:,} | {r['runs']:.0f} | {r['p50_ms']:.1f} / {r['p99_ms']:.1f} / "
        f"{r['max_ms']:.0f} ms | {r['episodes']:.0f} | {r['mail_busy']:.0f} / "
        f"{r['mail_queued']:.0f} | {r['stop_s']:.1f} s |"
    )


if __name__ == "__main__":
    main()
