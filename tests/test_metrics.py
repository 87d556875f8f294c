"""`settings.metrics`: /metrics scraped and parsed while runs finish, /healthz, and the errors."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tuisched.domain.config.listen import parse_listen
from tuisched.domain.errors import ConfigError
from tuisched.domain.events import (
    AlertFailed,
    AlertSent,
    ConfigLoaded,
    ConfigRejected,
    RunConcluded,
    RunFinished,
    RunQueued,
    RunStarted,
    SchedulerStopping,
)
from tuisched.domain.runs import Result
from tuisched.runtime.configfiles import load_config
from tuisched.runtime.metrics import health_reason
from tuisched.runtime.metrics.collector import ClusterHealth, RunMetrics, RuntimeCollector
from tuisched.runtime.runtime import Runtime
from tuisched.runtime.watchdog import LagReport

from .conftest import REPO
from .recorder import Recorder
from .runtime_fixtures import running, write_config

JOBS = """
ok:
  command: "echo fine"
  schedule: manual
bad:
  command: "echo broken; exit 3"
  schedule: manual
tick:
  command: "true"
  schedule: {every: 1 second, start: 2026-01-01T00:00}
"""
AT = datetime(2026, 5, 7, 9, 10, tzinfo=UTC)

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def _metrics_settings(max_lag: str = "2s") -> str:
    return f'metrics: {{listen: "127.0.0.1:0", max_lag: {max_lag}}}'


def _get(port: int, path: str) -> tuple[int, str]:
    """GET `path` (blocking: call it from a thread); the status and the body."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def _parse(text: str) -> Samples:
    """Every sample of an exposition, by name and labels (the Prometheus text parser)."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


async def _scrape(port: int) -> Samples:
    status, text = await asyncio.to_thread(_get, port, "/metrics")
    assert status == 200
    return _parse(text)


def _port(runtime: Runtime) -> int:
    assert runtime.metrics is not None
    return runtime.metrics.server.port


# --- /metrics while runs finish ------------------------------------------------------


async def test_metrics_scraped_while_runs_finish(tmp_path: Path) -> None:
    path = write_config(tmp_path, JOBS, settings=_metrics_settings())
    async with running(path) as (runtime, recorder):
        port = _port(runtime)
        scrapes: list[Samples] = []
        stop = asyncio.Event()

        async def keep_scraping() -> None:
            while not stop.is_set():
                scrapes.append(await _scrape(port))

        scraper = asyncio.create_task(keep_scraping())
        for done in (2, 4, 6):  # one at a time: `overlap: skip` would skip a second one
            runtime.engine.run_now("ok")
            runtime.engine.run_now("bad")
            await recorder.wait_for(RunConcluded, lambda e: e.run.job in ("ok", "bad"), count=done)
        await recorder.wait_for(RunFinished, lambda e: e.run.job == "tick")
        stop.set()
        await scraper
        final = await _scrape(port)

    ok = ("tuisched_runs_total", frozenset({("job_name", "ok"), ("state", "success"),
                                            ("result", "completed")}))  # fmt: skip
    bad = ("tuisched_runs_total", frozenset({("job_name", "bad"), ("state", "failed"),
                                             ("result", "completed")}))  # fmt: skip
    assert final[ok] == 3
    assert final[bad] == 3
    assert scrapes, "no scrape finished while the runs did"
    seen = [scrape.get(ok, 0) for scrape in scrapes] + [final[ok]]
    assert seen == sorted(seen), "a counter went backwards between scrapes"
    command = frozenset({("kind", "command")})
    assert final[("tuisched_run_duration_seconds_count", command)] >= 7
    assert final[("tuisched_run_start_lateness_seconds_count", command)] >= 1
    for gauge in ("tuisched_runs_running", "tuisched_runs_queued", "tuisched_runs_waiting"):
        assert final[(gauge, frozenset())] == 0
    assert final[("tuisched_scheduler_state", frozenset({("state", "running")}))] == 1
    assert final[("tuisched_jobs", frozenset())] == 3
    assert ("tuisched_loop_lag_seconds", frozenset()) in final


async def test_running_and_queued_gauges_follow_the_runs(tmp_path: Path) -> None:
    jobs = """
    slow:
      command: "sleep 30"
      schedule: manual
    later:
      command: "true"
      schedule: manual
    """
    path = write_config(tmp_path, jobs, settings=f"max_workers: 1\n{_metrics_settings()}")
    async with running(path) as (runtime, recorder):
        port = _port(runtime)
        slow = runtime.engine.run_now("slow")
        await recorder.wait_for(RunStarted, lambda e: e.run.run_id == slow.run_id)
        later = runtime.engine.run_now("later")
        await recorder.wait_for(RunQueued, lambda e: e.run.run_id == later.run_id)
        samples = await _scrape(port)
        assert samples[("tuisched_runs_running", frozenset())] == 1
        assert samples[("tuisched_runs_queued", frozenset())] == 1
        runtime.engine.stop_all(Result.STOPPED)
        await recorder.wait_for(RunFinished, lambda e: e.run.run_id == later.run_id)
        samples = await _scrape(port)
    assert samples[("tuisched_runs_running", frozenset())] == 0
    assert samples[("tuisched_runs_queued", frozenset())] == 0
    stopped = frozenset({("job_name", "slow"), ("state", "failed"), ("result", "stopped")})
    assert samples[("tuisched_runs_total", stopped)] == 1


async def test_config_reloads_counted_by_outcome(tmp_path: Path) -> None:
    path = write_config(tmp_path, JOBS, settings=_metrics_settings())
    async with running(path) as (runtime, recorder):
        assert runtime.source is not None
        good = path.read_text()
        path.write_text(good.replace("schedule: manual", "schedule: sometimes", 1))
        await runtime.source.reload()
        await recorder.wait_for(ConfigRejected)
        path.write_text(good.replace("echo fine", "echo finer"))
        await runtime.source.reload()
        await recorder.wait_for(ConfigLoaded, lambda e: e.origin != "start")
        samples = await _scrape(_port(runtime))
    assert samples[("tuisched_config_reloads_total", frozenset({("outcome", "rejected")}))] == 1
    assert samples[("tuisched_config_reloads_total", frozenset({("outcome", "applied")}))] == 1


def test_alerts_counted_sent_and_failed() -> None:
    registry = CollectorRegistry()
    metrics = RunMetrics(registry, lambda: load_config(REPO / "sample_config" / "tuisched.yaml"))
    common = {"at": AT, "job": "backup", "run_id": "r1", "alert": "failed", "to": ("a@b.c",)}
    metrics.on_event(AlertSent(**common, subject="backup failed"))  # type: ignore[arg-type]
    for final in (False, True):
        metrics.on_event(
            AlertFailed(**common, error="refused", attempts=1, final=final)  # type: ignore[arg-type]
        )
    samples = _parse(generate_latest(registry).decode())
    failed = frozenset({("event", "failed")})
    assert samples[("tuisched_alerts_sent_total", failed)] == 1
    assert samples[("tuisched_alerts_failed_total", failed)] == 1
    assert samples[("tuisched_alert_attempts_failed_total", failed)] == 2


def test_cluster_health_in_the_metrics() -> None:
    registry = CollectorRegistry()
    health = ClusterHealth(
        database_state="reconnecting",
        database_states=("connecting", "connected", "reconnecting", "read-only"),
        nodes=("alive", "alive", "dead"),
    )
    registry.register(
        RuntimeCollector(
            lag=lambda: LagReport(episodes=2, recent=0.0, worst=1.5), lateness=lambda: 0.3,
            state=lambda: "running", jobs=lambda: 4, cluster=lambda: health,
        )
    )  # fmt: skip
    samples = _parse(generate_latest(registry).decode())
    assert samples[("tuisched_cluster_nodes", frozenset({("state", "alive")}))] == 2
    assert samples[("tuisched_cluster_nodes", frozenset({("state", "dead")}))] == 1
    assert samples[("tuisched_cluster_nodes", frozenset({("state", "left")}))] == 0
    database = "tuisched_cluster_database_state"
    assert samples[(database, frozenset({("state", "reconnecting")}))] == 1
    assert samples[(database, frozenset({("state", "connected")}))] == 0
    assert samples[("tuisched_loop_lag_seconds", frozenset())] == pytest.approx(0.3)
    assert samples[("tuisched_loop_lag_worst_seconds", frozenset())] == 1.5
    assert samples[("tuisched_loop_blocked_episodes_total", frozenset())] == 2


# --- /healthz ----------------------------------------------------------------------------


async def test_healthz_503_while_the_loop_is_stalled(tmp_path: Path) -> None:
    path = write_config(tmp_path, JOBS, settings=_metrics_settings("1s"))
    async with running(path) as (runtime, _):
        port = _port(runtime)
        assert await asyncio.to_thread(_get, port, "/healthz") == (200, "ok\n")
        seen: list[tuple[int, str]] = []
        released = threading.Event()

        def probe_until_unhealthy() -> None:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and not seen:
                answer = _get(port, "/healthz")
                if answer[0] != 200:
                    seen.append(answer)
            released.set()

        threading.Thread(target=probe_until_unhealthy, daemon=True).start()
        released.wait(10)  # the stall itself: the loop is blocked until the probe saw it
        assert seen, "/healthz kept answering 200 while the loop was blocked"
        status, text = seen[0]
        assert status == 503
        assert "the event loop is" in text
        assert "late" in text
        assert text.count("\n") == 1
        await _until_healthy(port)


async def _until_healthy(port: int) -> None:
    """Wait until /healthz answers 200 again (asked from a thread, for up to 10 s)."""

    def poll() -> bool:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if _get(port, "/healthz")[0] == 200:
                return True
        return False

    assert await asyncio.to_thread(poll), "/healthz did not recover after the stall"


async def test_healthz_503_when_the_engine_stops_firing(tmp_path: Path) -> None:
    path = write_config(tmp_path, JOBS, settings=_metrics_settings())
    async with running(path) as (runtime, _):
        port = _port(runtime)
        assert (await asyncio.to_thread(_get, port, "/healthz"))[0] == 200
        runtime.engine.stop_firing()
        status, text = await asyncio.to_thread(_get, port, "/healthz")
    assert (status, text) == (503, "the engine starts no new runs\n")


async def test_healthz_503_while_draining_and_closed_after_stop(tmp_path: Path) -> None:
    jobs = """
    slow:
      command: "sleep 30"
      schedule: manual
    """
    path = write_config(tmp_path, jobs, settings=_metrics_settings())
    runtime = Runtime(load_config(path), kill_grace=0.5)
    recorder = Recorder(runtime.bus)
    await runtime.start()
    port = _port(runtime)
    slow = runtime.engine.run_now("slow")
    await recorder.wait_for(RunStarted, lambda e: e.run.run_id == slow.run_id)
    stopping = asyncio.create_task(runtime.stop(grace=5))
    await recorder.wait_for(SchedulerStopping)
    assert await asyncio.to_thread(_get, port, "/healthz") == (503, "the scheduler is stopping\n")
    runtime.hurry()
    await stopping
    with pytest.raises(urllib.error.URLError):
        await asyncio.to_thread(_get, port, "/healthz")


def test_health_reasons() -> None:
    assert health_reason(state="running", firing=True, lateness=0.1, max_lag=2) is None
    assert health_reason(state="starting", firing=False, lateness=0, max_lag=2) == (
        "the scheduler is starting"
    )
    late = health_reason(state="running", firing=True, lateness=2.5, max_lag=2)
    assert late == "the event loop is 2.5s late (max_lag 2s)"


async def test_unknown_path_is_404(tmp_path: Path) -> None:
    path = write_config(tmp_path, JOBS, settings=_metrics_settings())
    async with running(path) as (runtime, _):
        status, text = await asyncio.to_thread(_get, _port(runtime), "/nothing")
    assert status == 404
    assert "/metrics" in text


# --- errors: the configuration and the port ----------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.0.0.1:9464", ("127.0.0.1", 9464)),
        ("localhost:9464", ("127.0.0.1", 9464)),
        ("0.0.0.0:0", ("0.0.0.0", 0)),  # noqa: S104  (every interface is the operator's choice)
        ("[::1]:9464", ("::1", 9464)),
    ],
)
def test_listen_accepted(text: str, expected: tuple[str, int]) -> None:
    assert parse_listen(text) == expected


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("9464", "is not HOST:PORT"),
        ("example.com:9464", "is not an IP address"),
        ("127.0.0.1:65536", "from 0 to 65535"),
        ("127.0.0.1:٣", "from 0 to 65535"),
        ("::1:9464", "in brackets"),
    ],
)
def test_listen_refused(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_listen(text)


def test_bad_listen_names_file_and_line(tmp_path: Path) -> None:
    path = write_config(tmp_path, JOBS, settings='metrics: {listen: "example.com:80"}')
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    (problem,) = caught.value.problems
    assert problem.line == 5
    assert "settings.metrics.listen" in problem.message


def test_validate_reports_a_bad_listen_as_file_line(tmp_path: Path) -> None:
    path = write_config(tmp_path, JOBS, settings='metrics: {listen: "127.0.0.1:99999"}')
    done = subprocess.run(
        [sys.executable, "-m", "tuisched", "validate", "-c", str(path)],
        capture_output=True, text=True, cwd=REPO, timeout=30, check=False,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stdout.strip() == (
        f"{path}:5: settings.metrics.listen: '127.0.0.1:99999': "
        "the port must be a number from 0 to 65535"
    )


def test_port_in_use_is_one_line_and_exit_78(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        path = write_config(tmp_path, JOBS, settings=f'metrics: {{listen: "127.0.0.1:{port}"}}')
        done = subprocess.run(
            [sys.executable, "-m", "tuisched", "--no-ui", "-c", str(path)],
            capture_output=True, text=True, cwd=REPO, timeout=30, check=False,
        )  # fmt: skip
    assert done.returncode == 78
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].endswith(
        f"not started: settings.metrics.listen 127.0.0.1:{port}: "
        "the port is in use (another tuisched, or another program)"
    )
    assert "Traceback" not in done.stderr


async def test_foreground_run_does_not_take_the_port(tmp_path: Path) -> None:
    from tuisched.runtime.runtime import foreground

    path = write_config(tmp_path, JOBS, settings=_metrics_settings())
    async with running(path, role=foreground(fire_events=False)) as (runtime, _):
        assert runtime.metrics is None


async def test_reload_that_moves_metrics_says_it_waits_for_a_restart(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = write_config(tmp_path, JOBS, settings=_metrics_settings())
    async with running(path) as (runtime, recorder):
        assert runtime.source is not None
        port = _port(runtime)
        path.write_text(path.read_text().replace("max_lag: 2s", "max_lag: 5s"))
        await runtime.source.reload()
        await recorder.wait_for(ConfigLoaded, lambda e: e.origin != "start")
        assert _port(runtime) == port
    assert "settings.metrics changed: it takes effect at the next start" in caplog.text


async def test_console_with_the_port_in_use_exits_78_with_the_reason(tmp_path: Path) -> None:
    from .console_fixtures import make_app

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        path = write_config(tmp_path, JOBS, settings=f'metrics: {{listen: "127.0.0.1:{port}"}}')
        app, _ = make_app(path)
        async with app.run_test() as pilot:
            await pilot.pause()
    assert app.return_code == 78


def _hang_up(port: int, rounds: int) -> None:
    """Ask for /metrics and reset the connection at once, `rounds` times (blocking)."""
    for _ in range(rounds):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as connection:
            connection.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            linger = (1).to_bytes(4, sys.byteorder) + (0).to_bytes(4, sys.byteorder)
            connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)  # RST on close
    with socket.create_connection(("127.0.0.1", port), timeout=5) as connection:
        connection.sendall(b"GET /metr")  # half a request, then silence: the server times out


async def test_clients_that_hang_up_or_fall_silent_leave_no_traceback(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    jobs = "".join(f"j{i:03d}: {{command: [true], schedule: manual}}\n" for i in range(300))
    path = write_config(tmp_path, jobs, settings=_metrics_settings())
    async with running(path) as (runtime, _):
        port = _port(runtime)
        await asyncio.to_thread(_hang_up, port, 200)
        assert (await asyncio.to_thread(_get, port, "/healthz"))[0] == 200  # still serving
    out, err = capfd.readouterr()
    assert "Traceback" not in out + err + caplog.text
