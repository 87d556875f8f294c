"""Around the scheduler at size: stats, retention, `/metrics` and a backfill plan.

The history is a real SQLite `history.db` in a temp state dir. Its schema is
made by the store itself (`HistoryStore.open_sqlite`); the rows then go in
with one `executemany` per 50,000 on that schema, in the store's own text
format for instants, rather than through the store's write API, so that a
million rows go in within seconds. `--jobs` jobs (default 10,000) share `--runs` finished runs
(default 1,000,000), queued evenly over the last 30 days, 95% SUCCESS and 5%
FAILED, durations from 0.1 s to 2 min; no output files. An every-minute job
`minutely` has a SUCCESS for every second slot of the last 10,000 minutes.

1. **stats**: `tuisched stats --since 7d --slowest 10` as a subprocess, wall
   time (it always reads the database itself, never through the scheduler);
2. **retention**: a real `tuisched --no-ui` with `history_retention: {days: 15}`
   (`--keep runs`: `{runs_per_job: 50}` at the default sizes; either way about
   half the runs go), `settings.metrics` on and `--tickers` no-op jobs
   every second: time from start until the pass is done (its log line), the
   loop's lag meanwhile as the scheduler itself reports it (`/metrics`, polled
   every 0.1 s: `tuisched_loop_lag_seconds`, the worst episode and the episodes
   over 250 ms), and how late the tickers' slots started while it pruned
   (from their rows);
3. **scrape**: a fresh `tuisched --no-ui` with `--jobs` no-op python jobs
   (`isolation: thread`) every minute, spread over the minute: once every job
   has a run, `--scrapes` scrapes of `/metrics` 0.2 s apart while runs finish,
   time per scrape (p50 / p95 / max) and the body's size;
4. **backfill**: `tuisched backfill minutely --from ... --to ... --dry-run` for
   a 10,000-slot window against that history, without a scheduler (it reads
   the files) and through the running scheduler of part 2.

    .venv/bin/python -m benchmarks.bench_history [--jobs 10000] [--runs 1000000] [--small]
        [--keep days|runs]
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import re
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

from benchmarks._common import REPO, machine, percentile

HISTORY_DAYS = 30
KEEP_DAYS = 15
"""Retention keeps the newest 15 of the 30 days: about half the runs go."""
BACKFILL_SLOTS = 10_000
AFTER_SECONDS = 20.0
"""How long the scheduler of part 2 keeps running after its pass (the tickers' baseline)."""
CHUNK = 50_000
TICK_START = "2026-01-01T00:00"
PRUNED_LINE = re.compile(r"history retention forgot (\d+) run")


def _text(moment: datetime) -> str:
    """An instant as the store keeps it in SQLite (naive UTC text, microseconds)."""
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat(" ", "microseconds")


def _job_rows(job: int, per_job: int, now: datetime, start_id: int) -> list[tuple[object, ...]]:
    """`per_job` finished runs of job `job`, evenly over the last HISTORY_DAYS days."""
    name = f"j{job:05d}"
    step = timedelta(days=HISTORY_DAYS) / per_job
    offset = step * ((job * 7919) % 1000) / 1000  # jobs do not all run at the same instant
    rows: list[tuple[object, ...]] = []
    for k in range(per_job):
        run_no = start_id + k
        queued = now - timedelta(days=HISTORY_DAYS) + offset + step * k
        failed = run_no % 20 == 0
        took = timedelta(seconds=0.1 + (run_no * 2654435761 % 120_000) / 1000)
        started = queued + timedelta(milliseconds=5)
        rows.append((
            f"r{run_no:010d}", name, _text(queued), "schedule",
            "FAILED" if failed else "SUCCESS", "completed",
            "exit code 1" if failed else "exit code 0", 1 if failed else 0,
            _text(queued), _text(started), _text(started + took), 40_000 + k % 20_000,
            "bench", "", "done\n", 1,
        ))  # fmt: skip
    return rows


def _minutely_rows(end: datetime, start_id: int) -> list[tuple[object, ...]]:
    """A SUCCESS of `minutely` for every second slot of the BACKFILL_SLOTS before `end`."""
    rows: list[tuple[object, ...]] = []
    for k in range(0, BACKFILL_SLOTS, 2):
        slot = end - timedelta(minutes=BACKFILL_SLOTS - k)
        started = slot + timedelta(milliseconds=5)
        rows.append((
            f"m{start_id + k:010d}", "minutely", _text(slot), "schedule", "SUCCESS",
            "completed", "exit code 0", 0, _text(slot), _text(started),
            _text(started + timedelta(seconds=1)), 1, "bench", "", "", 1,
        ))  # fmt: skip
    return rows


def fill(
    state: Path, jobs: int, runs: int, now: datetime, window_end: datetime,
) -> float:  # fmt: skip
    """Create `state/history.db` with the store's schema and fill it; seconds taken."""
    from tuisched.runtime.store.database import HistoryStore

    began = time.perf_counter()
    state.mkdir(parents=True, exist_ok=True)
    HistoryStore.open_sqlite(state / "history.db").close()
    per_job = runs // jobs
    insert = f"INSERT INTO runs VALUES ({', '.join('?' * 16)})"  # noqa: S608 (placeholders)
    with contextlib.closing(sqlite3.connect(state / "history.db")) as db:
        db.execute("PRAGMA synchronous=OFF")
        batch: list[tuple[object, ...]] = []
        for job in range(jobs):
            batch += _job_rows(job, per_job, now, job * per_job)
            if len(batch) >= CHUNK:
                db.executemany(insert, batch)
                batch = []
        batch += _minutely_rows(window_end, 0)
        db.executemany(insert, batch)
        db.commit()
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return time.perf_counter() - began


def write_config(folder: Path, jobs: list[str], settings: list[str]) -> Path:
    """`folder/tuisched.yaml` with state in `folder/state`, extra `settings` lines and `jobs`."""
    lines = ["settings:", "  timezone: UTC", f"  state_dir: {folder / 'state'}",
             "  max_workers: 32", "  shutdown_grace: 5s", *(f"  {s}" for s in settings),
             "jobs:", *(f"  {job}" for job in jobs)]  # fmt: skip
    path = folder / "tuisched.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _noop_every(name: str, every: str, start: str) -> str:
    return (f"{name}: {{python: 'benchmarks.jobs:noop', isolation: thread, "
            f"schedule: {{every: {every}, start: '{start}'}}}}")  # fmt: skip


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _cli(config: Path, *args: str) -> float:
    """Wall time of `tuisched ARGS -c config` in a fresh process (it must exit 0)."""
    began = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "tuisched", *args, "-c", str(config)],
        cwd=REPO, capture_output=True, text=True, check=False, timeout=600,
    )  # fmt: skip
    took = time.perf_counter() - began
    if proc.returncode != 0:
        raise SystemExit(f"tuisched {' '.join(args)} exited {proc.returncode}: {proc.stderr}")
    return took


def _times(config: Path, args: list[str], repeat: int) -> list[float]:
    return [_cli(config, *args) for _ in range(repeat)]


class Scheduler:
    """A `tuisched --no-ui` subprocess, its stderr in a file, its `/metrics` on `port`."""

    def __init__(self, config: Path, port: int) -> None:
        self.config, self.port = config, port
        self.err = config.parent / "scheduler.err"
        self.launched = time.perf_counter()
        with self.err.open("wb") as err:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tuisched", "--no-ui", "-c", str(config)],
                cwd=REPO, stdout=subprocess.DEVNULL, stderr=err,
            )  # fmt: skip
        self.ready = self._wait_ready()
        self.ready_at = datetime.now(UTC)

    def _wait_ready(self) -> float:
        sock = self.config.parent / "state" / "control.sock"
        deadline = time.monotonic() + 600
        while not sock.exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.process.kill()
                raise SystemExit(f"the scheduler did not start:\n{self.log()[-3000:]}")
            time.sleep(0.05)
        return time.perf_counter()

    def log(self) -> str:
        text = self.err.read_text(errors="replace")
        state_log = self.config.parent / "state" / "tuisched.log"
        if state_log.exists():
            text += state_log.read_text(errors="replace")
        return text

    def scrape(self) -> tuple[float, bytes]:
        """(seconds, body) of one GET /metrics."""
        began = time.perf_counter()
        url = f"http://127.0.0.1:{self.port}/metrics"
        with urllib.request.urlopen(url, timeout=30) as answer:
            body: bytes = answer.read()
        return time.perf_counter() - began, body

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()


def _gauge(body: bytes, name: str) -> float:
    """The value of the unlabelled sample `name` in a scrape (nan when absent)."""
    found = re.search(rb"^" + name.encode() + rb" (\S+)$", body, re.MULTILINE)
    return float(found.group(1)) if found else float("nan")


def _runs_total(body: bytes) -> float:
    return sum(float(v) for v in re.findall(rb"^tuisched_runs_total\{[^}]*\} (\S+)$", body, re.M))


def _count(db: Path, where: str = "1") -> int:
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)) as reader:
        return int(reader.execute(f"SELECT count(*) FROM runs WHERE {where}").fetchone()[0])  # noqa: S608


def retention(
    folder: Path, jobs: int, keep: str, tickers: int, timeout: float
) -> dict[str, object]:
    """Part 2: a scheduler prunes about half the history; its lag and its tickers meanwhile.

    `keep` is the `history_retention` mapping's YAML text.
    """
    db = folder / "state" / "history.db"
    before = _count(db)
    port = _free_port()
    config = write_config(
        folder,
        [f"j{i:05d}: {{command: [/bin/true], schedule: manual}}" for i in range(jobs)]
        + [_noop_every("minutely", "1m", TICK_START)]
        + [_noop_every(f"tick{i}", "1s", TICK_START) for i in range(tickers)],
        [f"history_retention: {keep}", f"metrics: {{listen: '127.0.0.1:{port}'}}"],
    )
    scheduler = Scheduler(config, port)
    lags: list[float] = []
    worst = episodes = float("nan")
    forgotten, done = -1, float("nan")
    try:
        while time.perf_counter() - scheduler.ready < timeout:
            try:
                _, body = scheduler.scrape()
            except OSError:
                body = b""
            lags.append(_gauge(body, "tuisched_loop_lag_seconds"))
            worst = _gauge(body, "tuisched_loop_lag_worst_seconds")
            episodes = _gauge(body, "tuisched_loop_blocked_episodes_total")
            found = PRUNED_LINE.search(scheduler.log())
            if found:
                forgotten, done = int(found.group(1)), time.perf_counter()
                break
            time.sleep(0.1)
        pruned_at = datetime.now(UTC)
        backfill = _backfill_times(config, 3) if forgotten >= 0 else []
        time.sleep(AFTER_SECONDS)  # the tickers' lateness once the pass is over, to compare
    finally:
        left_at = datetime.now(UTC)
        scheduler.stop()
    after = _count(db)
    done_slots = _count(db, "job = 'minutely' AND state = 'SUCCESS'")
    late = _lateness(db, scheduler.ready_at, pruned_at)
    seen = [lag for lag in lags if not math.isnan(lag)]
    return {
        "before": before, "after": after, "forgotten": forgotten,
        "start_s": scheduler.ready - scheduler.launched,
        "prune_s": done - scheduler.ready if forgotten >= 0 else float("nan"),
        "timed_out": forgotten < 0, "lag_samples": len(lags),
        "lag_p50": percentile(seen, 50), "lag_max": max(seen, default=float("nan")),
        "worst": worst, "episodes": episodes, "late": late,
        "after_late": _lateness(db, pruned_at, left_at), "backfill_live": backfill,
        "done_slots": done_slots,
    }  # fmt: skip


def _lateness(db: Path, since: datetime, until: datetime) -> dict[str, float]:
    """Start lateness (seconds) of the tickers' slots in [since, until), and slots not run."""
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)) as reader:
        rows = reader.execute(
            "SELECT state, (julianday(started_at) - julianday(slot)) * 86400.0 FROM runs"
            " WHERE job LIKE 'tick%' AND slot >= ? AND slot < ?",
            (_text(since), _text(until)),
        ).fetchall()
    late = [took for state, took in rows if took is not None]
    return {
        "slots": len(rows), "not_run": sum(1 for state, _ in rows if state != "SUCCESS"),
        "p50": percentile(late, 50), "p99": percentile(late, 99),
        "max": max(late, default=float("nan")),
    }  # fmt: skip


WINDOW: tuple[str, str] = ("", "")
"""The backfill window (ISO, UTC): set by `main` when the history is filled."""


def _backfill_times(config: Path, repeat: int) -> list[float]:
    start, end = WINDOW
    return _times(config, ["backfill", "minutely", "--from", start, "--to", end, "--dry-run"],
                  repeat)  # fmt: skip


def scrape(folder: Path, jobs: int, scrapes: int) -> dict[str, float]:
    """Part 3: `scrapes` scrapes of `/metrics` once each of `jobs` per-minute jobs has run."""
    port = _free_port()
    specs = [
        _noop_every(f"s{i:05d}", "1m", f"2026-01-01T00:00:{i * 60 // jobs:02d}")
        for i in range(jobs)
    ]
    config = write_config(folder, specs, [f"metrics: {{listen: '127.0.0.1:{port}'}}"])
    scheduler = Scheduler(config, port)
    try:
        _, body = scheduler.scrape()
        first_size = len(body)
        deadline = time.perf_counter() + 180
        while time.perf_counter() < deadline:  # every job has run once: a series each
            time.sleep(1.0)
            _, body = scheduler.scrape()
            if body.count(b'\ntuisched_runs_total{job_name="s') >= jobs:
                break
        took: list[float] = []
        sizes: list[int] = []
        runs_first = _runs_total(body)
        episodes = _gauge(body, "tuisched_loop_blocked_episodes_total")
        began = time.perf_counter()
        for _ in range(scrapes):
            seconds, body = scheduler.scrape()
            took.append(seconds)
            sizes.append(len(body))
            time.sleep(0.2)
        rate = (_runs_total(body) - runs_first) / (time.perf_counter() - began)
        series = body.count(b"\ntuisched_runs_total{")
        episodes = _gauge(body, "tuisched_loop_blocked_episodes_total") - episodes
        worst = _gauge(body, "tuisched_loop_lag_worst_seconds")
    finally:
        scheduler.stop()
    return {
        "p50": statistics.median(took), "p95": percentile(took, 95), "max": max(took),
        "size": statistics.median(sizes), "first_size": first_size, "series": series,
        "runs_per_s": rate, "start_s": scheduler.ready - scheduler.launched,
        "episodes": episodes, "worst": worst,
    }  # fmt: skip


def _s(values: list[float]) -> str:
    if not values:
        return "n/a"
    return f"{statistics.median(values):.2f} s (min {min(values):.2f}, {len(values)} runs)"


def main() -> None:
    global WINDOW  # noqa: PLW0603  (one window for the whole run, set once)
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--small", action="store_true", help="1,000 jobs, 100,000 runs")
    parser.add_argument(
        "--keep", choices=("days", "runs"), default="days",
        help=f"retention by age ({KEEP_DAYS} of {HISTORY_DAYS} days) or runs per job (half)",
    )  # fmt: skip
    parser.add_argument("--tickers", type=int, default=5, help="every-second jobs")
    parser.add_argument("--scrapes", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each CLI command")
    parser.add_argument("--prune-timeout", type=float, default=600.0)
    args = parser.parse_args()
    if args.small:
        args.jobs, args.runs = 1_000, 100_000
    print(machine())
    print(f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, load {os.getloadavg()[0]:.1f}")
    now = datetime.now(UTC)
    window_end = now.replace(second=0, microsecond=0)
    window_start = window_end - timedelta(minutes=BACKFILL_SLOTS)
    WINDOW = (f"{window_start:%Y-%m-%dT%H:%M}", f"{window_end:%Y-%m-%dT%H:%M}")
    with tempfile.TemporaryDirectory(prefix="tuisched-history-") as tmp:
        folder = Path(tmp)
        filled = fill(folder / "state", args.jobs, args.runs, now, window_end)
        size_mb = (folder / "state" / "history.db").stat().st_size / 2**20
        print(f"filled {args.runs:,} runs of {args.jobs:,} jobs in {filled:.1f} s "
              f"({size_mb:.0f} MB)")  # fmt: skip
        offline = write_config(
            folder,
            [f"j{i:05d}: {{command: [/bin/true], schedule: manual}}" for i in range(args.jobs)]
            + [_noop_every("minutely", "1m", TICK_START)],
            [],
        )
        stats = _times(offline, ["stats", "--since", "7d", "--slowest", "10"], args.repeat)
        backfill = _backfill_times(offline, args.repeat)
        keep = (f"{{days: {KEEP_DAYS}}}" if args.keep == "days"
                else f"{{runs_per_job: {args.runs // args.jobs // 2}}}")  # fmt: skip
        print(f"history_retention: {keep}")
        kept = retention(folder, args.jobs, keep, args.tickers, args.prune_timeout)
    with tempfile.TemporaryDirectory(prefix="tuisched-scrape-") as tmp:
        scraped = scrape(Path(tmp), args.jobs, args.scrapes)
    _report(args, stats, backfill, kept, scraped)


def _report(
    args: argparse.Namespace, stats: list[float], backfill: list[float],
    kept: dict[str, object], scraped: dict[str, float],
) -> None:  # fmt: skip
    print()
    print("| what | size | wall time |")
    print("|---|---|---|")
    print(f"| `stats --since 7d --slowest 10` (no scheduler) | {args.runs:,} runs, "
          f"{args.jobs:,} jobs | {_s(stats)} |")  # fmt: skip
    print(f"| `backfill minutely --dry-run`, from the files | {BACKFILL_SLOTS:,} slots, "
          f"{BACKFILL_SLOTS // 2:,} done | {_s(backfill)} |")  # fmt: skip
    live: list[float] = kept["backfill_live"]  # type: ignore[assignment]
    print(f"| `backfill minutely --dry-run`, through the scheduler (after its pass) | "
          f"{BACKFILL_SLOTS:,} slots, {kept['done_slots']:,} done | {_s(live)} |")  # fmt: skip
    print()
    late: dict[str, float] = kept["late"]  # type: ignore[assignment]
    after: dict[str, float] = kept["after_late"]  # type: ignore[assignment]
    print("| runs before / after / forgotten | start | prune pass | loop lag p50 / max "
          "(0.1 s polls) | worst episode | episodes > 250 ms | ticker slots: late p50 / p99 / "
          "max, not run |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    prune = "not done" if kept["timed_out"] else f"{kept['prune_s']:.1f} s"
    print(
        f"| {kept['before']:,} / {kept['after']:,} / {kept['forgotten']:,} | "
        f"{kept['start_s']:.1f} s | {prune} | {kept['lag_p50'] * 1000:.0f} / "  # type: ignore[operator]
        f"{kept['lag_max'] * 1000:.0f} ms | {kept['worst'] * 1000:.0f} ms | "  # type: ignore[operator]
        f"{kept['episodes']:.0f} | {late['p50'] * 1000:.0f} / {late['p99'] * 1000:.0f} / "
        f"{late['max'] * 1000:.0f} ms, {late['not_run']:.0f} of {late['slots']:.0f} |"
    )
    print(f"(after the pass: ticker slots late p50 / p99 / max {after['p50'] * 1000:.0f} / "
          f"{after['p99'] * 1000:.0f} / {after['max'] * 1000:.0f} ms, "
          f"{after['not_run']:.0f} of {after['slots']:.0f} not run)")  # fmt: skip
    print()
    print("| jobs | series `tuisched_runs_total` | body | scrape p50 / p95 / max | runs/s "
          "| episodes > 250 ms while scraping | worst episode since start |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    print(
        f"| {args.jobs:,} | {scraped['series']:,.0f} | {scraped['size'] / 1024:.0f} KiB "
        f"(at start {scraped['first_size'] / 1024:.1f} KiB) | {scraped['p50'] * 1000:.1f} / "
        f"{scraped['p95'] * 1000:.1f} / {scraped['max'] * 1000:.1f} ms | "
        f"{scraped['runs_per_s']:.0f} | {scraped['episodes']:.0f} | "
        f"{scraped['worst'] * 1000:.0f} ms |"
    )


if __name__ == "__main__":
    main()
