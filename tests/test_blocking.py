"""The control seam without an event loop (`BlockingControl`), as the command line's verbs
use it: over a real scheduler's socket, with the same answers and the same errors as the
console's client; over the files a stopped scheduler left; and the lazy package it lives in."""

from __future__ import annotations

import asyncio
import http.server
import importlib
import inspect
import json
import os
import socket
import socketserver
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest
from aiohttp import web

import tuisched.runtime.control
import tuisched.runtime.control.blocking
from tuisched.domain.errors import (
    ControlError,
    SchedulerNotRunningError,
    UnknownJobError,
    UnknownRunError,
)
from tuisched.domain.events import Event, RunConcluded
from tuisched.domain.runs import RunState, Trigger
from tuisched.domain.views import HistoryQuery, Pause, PauseKind, SchedulerState
from tuisched.runtime.configfiles import load_config
from tuisched.runtime.control import (
    BlockingControl,
    LocalScheduler,
    OfflineControl,
    read_config,
    socket_path,
)
from tuisched.runtime.control.exchange import AnswerError, exchange, parse, request
from tuisched.runtime.control.seam import SchedulerControl
from tuisched.runtime.control.server import METHODS
from tuisched.runtime.runtime import Runtime

from .conftest import REPO
from .runtime_fixtures import write_config

JOBS = """
hello: {command: "echo hello; echo world", schedule: manual}
tick: {command: [/bin/true], schedule: {every: 1h, start: 2026-01-01T00:00}}
"""


@asynccontextmanager
async def serving(path: Path) -> AsyncIterator[LocalScheduler]:
    """A scheduler in this process, serving its socket (blocking calls go to a thread)."""
    scheduler = LocalScheduler(Runtime(load_config(path), kill_grace=0.5))
    await scheduler.start()
    try:
        yield scheduler
    finally:
        await scheduler.stop(grace=1)


def _connect(path: Path) -> BlockingControl:
    return BlockingControl.connect(path, client="test")


async def test_the_blocking_client_answers_and_acts_as_the_scheduler_does(tmp_path: Path) -> None:
    async with serving(write_config(tmp_path, JOBS)) as scheduler:
        local = scheduler.control("test")
        sock = socket_path(tmp_path / "state")

        def ask() -> tuple[object, ...]:
            with _connect(sock) as control:
                status = control.status()
                run = control.run_now("hello", key="once")
                again = control.run_now("hello", key="once")  # keyword arguments cross too
                control.set_paused(Pause(kind=PauseKind.JOB, name="tick"), paused=True)
                return control.jobs(("tick", "nope")), status, run, again

        def listed() -> tuple[object, ...]:
            with _connect(sock) as control:
                return control.jobs()

        concluded: set[str] = set()
        heard = asyncio.Event()

        def hear(event: Event) -> None:
            if isinstance(event, RunConcluded):
                concluded.add(event.run.run_id)
                heard.set()

        subscription = local.subscribe(hear)  # heard on this loop
        try:
            named, status, run, again = await asyncio.to_thread(ask)
            async with asyncio.timeout(10):  # ended: the listings below cannot change between
                while run.run_id not in concluded:
                    heard.clear()
                    await heard.wait()
        finally:
            subscription.unsubscribe()
        assert await asyncio.to_thread(listed) == await local.jobs()  # decoded from JSON
        assert named == await local.jobs(("tick",))
        assert isinstance(status, type(await local.status()))
        assert (status.state, status.pid, status.jobs) == (SchedulerState.RUNNING, os.getpid(), 2)
        assert (run.job, run.trigger, run.run_id) == ("hello", Trigger.MANUAL, again.run_id)
        assert (await local.status()).pauses == (Pause(kind=PauseKind.JOB, name="tick"),)
    actions = (tmp_path / "state" / "actions.log").read_text()
    assert "(test) | pause | job tick" in actions  # the client named in the actions log


async def test_the_scheduler_s_errors_come_back_as_the_same_classes(tmp_path: Path) -> None:
    async with serving(write_config(tmp_path, JOBS)):
        sock = socket_path(tmp_path / "state")

        def fail(call: str) -> Exception:
            with _connect(sock) as control:
                try:
                    if call == "job":
                        control.run_now("nope")
                    else:
                        control.output("0a1b2c3d4e5f")
                except Exception as error:
                    return error
            raise AssertionError("no error")

        unknown_job = await asyncio.to_thread(fail, "job")
        unknown_run = await asyncio.to_thread(fail, "run")
    assert isinstance(unknown_job, UnknownJobError)
    assert str(unknown_job) == "no job named 'nope'"
    assert isinstance(unknown_run, UnknownRunError)
    assert "0a1b2c3d4e5f" in str(unknown_run)


def test_no_scheduler_is_said_plainly(tmp_path: Path) -> None:
    sock = tmp_path / "state" / "control.sock"
    said = f"no scheduler is running on {sock.parent} (nothing answers on {sock})"
    with pytest.raises(SchedulerNotRunningError) as raised:
        _connect(sock)  # no socket at all
    assert str(raised.value) == said
    sock.parent.mkdir()
    with socket.socket(socket.AF_UNIX) as stale:  # a socket a killed scheduler left
        stale.bind(str(sock))
    with pytest.raises(SchedulerNotRunningError) as raised:
        _connect(sock)
    assert str(raised.value) == said


async def test_another_protocol_version_is_refused_naming_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with serving(write_config(tmp_path, JOBS)):
        monkeypatch.setattr(tuisched.runtime.control.blocking, "PROTOCOL", 2)
        with pytest.raises(ControlError, match="speaks protocol version 1; this tuisched "
                           "speaks version 2"):  # fmt: skip
            await asyncio.to_thread(_connect, socket_path(tmp_path / "state"))


async def test_a_state_directory_too_deep_for_a_socket_path_still_works(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    sock = socket_path(deep / "state")
    assert len(str(sock)) > 108  # beyond what a Unix socket takes
    async with serving(write_config(deep, JOBS)):
        status = await asyncio.to_thread(lambda: _connect(sock).status())
    assert status.jobs == 2


@contextmanager
def answering(path: Path, status: int, body: bytes) -> Iterator[None]:
    """Something on the socket at `path` that answers every request with `status` and
    `body`, as a server that is not a scheduler would."""

    class Answer(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            """Quiet."""

    class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
        daemon_threads = True

        def get_request(self) -> tuple[socket.socket, tuple[str, int]]:
            request, _ = super().get_request()
            return request, ("local", 0)  # BaseHTTPRequestHandler wants a host and a port

    with Server(str(path), Answer) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield
        finally:
            server.shutdown()
            thread.join(timeout=5)


def test_an_answer_that_is_not_the_scheduler_s_is_a_control_error(tmp_path: Path) -> None:
    sock = tmp_path / "control.sock"
    with answering(sock, 500, b"Internal Server Error"), pytest.raises(ControlError) as raised:
        _connect(sock)
    assert str(raised.value) == "the scheduler answered 500 with something not JSON"


def test_a_silent_scheduler_is_a_control_error_in_the_call_s_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tuisched.runtime.control.blocking, "CALL_TIMEOUT", 0.2)
    sock = tmp_path / "control.sock"
    with socket.socket(socket.AF_UNIX) as silent:  # takes connections, never answers
        silent.bind(str(sock))
        silent.listen(4)
        with pytest.raises(ControlError, match=f"the scheduler at {sock} did not answer"):
            _connect(sock)


def test_over_the_files_a_stopped_scheduler_left(tmp_path: Path) -> None:
    text, config = read_config(write_config(tmp_path, JOBS))
    offline = OfflineControl(config, text, clock=lambda: datetime.now(UTC))
    with BlockingControl.over(offline) as control:
        assert control.status().state is SchedulerState.STOPPED
        assert [job.name for job in control.jobs()] == ["hello", "tick"]  # one loop, two calls
        assert control.history(HistoryQuery(job="hello", states=(RunState.SUCCESS,))) == ()
        with pytest.raises(SchedulerNotRunningError):
            control.run_now("hello")


def test_every_call_of_the_seam_is_a_blocking_call() -> None:
    made = {
        name for name, value in vars(BlockingControl).items()
        if inspect.isfunction(value) and hasattr(value, "__wrapped__")
    }  # fmt: skip
    assert made == set(METHODS)
    for name in METHODS:
        call = getattr(BlockingControl, name)
        assert call.__wrapped__ is getattr(SchedulerControl, name)
        assert call.__doc__ == getattr(SchedulerControl, name).__doc__


def test_the_package_loads_each_part_when_it_is_first_used() -> None:
    script = """
import sys
import tuisched.runtime.control as control
parts = lambda: sorted(m for m in sys.modules if m.startswith("tuisched.runtime.control."))
print(parts())
from tuisched.runtime.control import BlockingControl
print(parts())
"""
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=30,
        check=True,
    )  # fmt: skip
    alone, blocking = done.stdout.splitlines()
    assert alone == "[]"
    assert "'tuisched.runtime.control.blocking'" in blocking
    for heavy in ("host", "local", "remote", "server", "offline"):
        assert f"tuisched.runtime.control.{heavy}'" not in blocking
    package = tuisched.runtime.control
    assert sorted(package.__all__) == sorted(package._HOMES)
    for name in package.__all__:
        home = importlib.import_module(package._HOMES[name])
        assert getattr(package, name) is getattr(home, name), name


# --- the HTTP exchange ------------------------------------------------------------------------


def _ask(path: Path, target: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(10)
        sock.connect(str(path))
        return exchange(sock, request("POST", target, headers or {}, b"{}"))


async def test_the_exchange_reads_what_aiohttp_writes(tmp_path: Path) -> None:
    seen: list[str] = []

    async def sized(request: web.Request) -> web.Response:
        seen.append(request.headers.get("X-Tuisched-Client", ""))
        return web.json_response({"sized": "é" * 100_000}, status=409)

    async def chunked(_request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        response.enable_chunked_encoding()
        await response.prepare(_request)
        for part in (b'{"parts": ', b"[1, 2, ", b"3]}"):
            await response.write(part)
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_post("/sized", sized)
    app.router.add_post("/chunked", chunked)
    runner = web.AppRunner(app)
    await runner.setup()
    sock = tmp_path / "http.sock"
    await web.UnixSite(runner, str(sock)).start()
    try:
        status, body = await asyncio.to_thread(
            _ask, sock, "/sized", {"X-Tuisched-Client": "a\r\nb"}
        )
        assert (status, json.loads(body)) == (409, {"sized": "é" * 100_000})  # several reads
        assert seen == ["a??b"]  # no header smuggled in
        status, body = await asyncio.to_thread(_ask, sock, "/chunked")
        assert (status, json.loads(body)) == (200, {"parts": [1, 2, 3]})
        status, _ = await asyncio.to_thread(_ask, sock, "/nowhere")
        assert status == 404
    finally:
        await runner.cleanup()


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}extra", (200, b"{}")),
        (b"HTTP/1.0 500 Oops\r\n\r\nall that came", (500, b"all that came")),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n2;x=y\r\n{}\r\n0\r\n\r\n",
            (200, b"{}"),
        ),
    ],
)
def test_an_answer_s_body(answer: bytes, expected: tuple[int, bytes]) -> None:
    assert parse(answer) == expected


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}", "cut short"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 2", "ended before its headers"),
        (b"SSH-2.0-OpenSSH_9.6\r\n\r\n", "not an HTTP answer"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{}", "cut short or garbled"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "cut short or garbled"),
    ],
)
def test_an_answer_that_cannot_be_read_says_why(answer: bytes, said: str) -> None:
    with pytest.raises(AnswerError, match=said):
        parse(answer)
