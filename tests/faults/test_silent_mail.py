"""A mail server that accepts and then says nothing holds only the mail lane.

The server here is a listening socket that is never accepted from: the
kernel completes each connection, and no greeting ever comes, which is what a
wedged mail relay looks like to a client.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from email.message import EmailMessage
from pathlib import Path

import pytest

from tuisched.domain.errors import MailError
from tuisched.domain.events import AlertFailed, ConfigLoaded, RunFinished
from tuisched.domain.model import SmtpSettings
from tuisched.runtime.mail import SEND_STEPS, SmtpMailer
from tuisched.runtime.threads import LANE_THREADS, Lane, lane_loads

from ..runtime_fixtures import running, write_config


@contextmanager
def silent_server() -> Iterator[int]:
    """The port of a server that accepts connections and never says a word."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        yield listener.getsockname()[1]


def _mail_busy() -> int:
    (load,) = [load for load in lane_loads() if load.lane is Lane.MAIL]
    return load.busy


async def _until(condition: Callable[[], bool], within: float = 5) -> None:
    async with asyncio.timeout(within):
        while not condition():  # noqa: ASYNC110  (a lane thread changes it, not a task)
            await asyncio.sleep(0.01)


async def _mail_lane_idle() -> None:
    await _until(lambda: _mail_busy() == 0)


def _message() -> EmailMessage:
    message = EmailMessage()
    message["Subject"] = "test"
    message.set_content("body")
    return message


async def test_a_silent_server_times_out_and_frees_its_thread() -> None:
    with silent_server() as port:
        smtp = SmtpSettings(host="127.0.0.1", port=port, timeout=timedelta(seconds=0.2))
        with pytest.raises(MailError, match=rf"SMTP 127.0.0.1:{port}: timed out"):
            await SmtpMailer(smtp).send(_message())
    await asyncio.wait_for(_mail_lane_idle(), 5)


async def test_cancelling_a_send_cuts_the_connection_at_once() -> None:
    with silent_server() as port:
        smtp = SmtpSettings(host="127.0.0.1", port=port, timeout=timedelta(seconds=60))
        sending = asyncio.get_running_loop().create_task(SmtpMailer(smtp).send(_message()))
        await _until(lambda: _mail_busy() > 0)
        sending.cancel()
        with pytest.raises(asyncio.CancelledError):
            await sending
        # The thread was blocked for up to 60 s; the cut socket frees it now.
        await asyncio.wait_for(_mail_lane_idle(), 5)


async def test_a_server_that_drips_its_greeting_is_cut_at_the_budget() -> None:
    async def drip(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:  # each line comes well within the step timeout; the greeting never ends
                writer.write(b"220-still here\r\n")
                await writer.drain()
                await asyncio.sleep(0.05)
        except ConnectionError:
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(drip, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        smtp = SmtpSettings(host="127.0.0.1", port=port, timeout=timedelta(seconds=0.2))
        budget = 0.2 * SEND_STEPS
        with pytest.raises(MailError, match=rf"no answer within {budget:g} s in all"):
            await SmtpMailer(smtp).send(_message())
        await _mail_lane_idle()
    finally:
        server.close()
        await server.wait_closed()


def _config_mailing(tmp_path: Path, port: int, *, grace: str = "1s") -> Path:
    jobs = "\n".join(
        f"fail{i}: {{command: 'exit 1', schedule: manual,"
        f" alerts: {{failed: {{to: [ops@example.org]}}}}}}"
        for i in range(LANE_THREADS[Lane.MAIL] + 2)
    )
    (tmp_path / "alert.txt").write_text("{{ job.name }} failed\n")
    path = write_config(tmp_path, jobs, settings=f"shutdown_grace: {grace}")
    text = path.read_text().replace(
        "jobs:",
        f"email:\n  smtp: {{host: 127.0.0.1, port: {port}, timeout: 60s}}\n"
        "  from: tuisched@example.org\n  subject: alert\n  default_template: alert.txt\n"
        "jobs:",
    )
    path.write_text(text)
    return path


async def test_with_every_mail_thread_stuck_a_reload_applies_and_stop_is_bounded(
    tmp_path: Path,
) -> None:
    with silent_server() as port:
        path = _config_mailing(tmp_path, port)
        async with running(path) as (runtime, events):
            jobs = list(runtime.config.jobs)
            for name in jobs:
                runtime.actions.run_now(name)
            await events.wait_for(RunFinished, count=len(jobs))
            await _until(lambda: _mail_busy() == LANE_THREADS[Lane.MAIL])
            # Every mail thread waits on the silent server: the configuration lane does not.
            path.write_text(path.read_text().replace("fail0:", "renamed:"))
            assert await asyncio.wait_for(runtime.actions.reload(), 10)
            await events.wait_for(ConfigLoaded, lambda e: e.origin == "reload")
            assert "renamed" in runtime.config.jobs
            # Stop within the grace (1 s) and a margin, whatever the mail server does.
            await asyncio.wait_for(runtime.stop(), 1 + 2)
        stopped = [e for e in events.of(AlertFailed) if "scheduler stopped" in e.error]
    assert sorted(e.job for e in stopped) == sorted(jobs)  # each alert is accounted for
    # The mails on their way are kept for the next start; those not yet written, dropped.
    kept = [e for e in stopped if not e.final]
    assert {e.error for e in kept} == {"the scheduler stopped: kept for the next start"}
    assert len(kept) >= LANE_THREADS[Lane.MAIL], stopped
    await asyncio.wait_for(_mail_lane_idle(), 5)


def test_the_headless_scheduler_exits_within_its_grace_with_mail_stuck(tmp_path: Path) -> None:
    with silent_server() as port:
        path = _config_mailing(tmp_path, port, grace="1s")
        every_second = "schedule: {every: 1s, start: '2026-01-01T00:00:00'}"
        path.write_text(path.read_text().replace("schedule: manual", every_second, 1))
        process = subprocess.Popen(
            [sys.executable, "-m", "tuisched", "--no-ui", "-c", str(path)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=tmp_path,
        )  # fmt: skip
        try:
            # A run failed: its alert is on its way to the silent server.
            output = _read_until(process, b"FAILED", budget=20)
            assert b"FAILED" in output, output.decode()
        finally:
            process.send_signal(signal.SIGTERM)
        try:
            rest, _ = process.communicate(timeout=1 + 2)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            pytest.fail("the scheduler did not exit within its grace and 2 s")
    log = (output + rest).decode()
    assert process.returncode == 0, log
    assert "not delivered before the stop kept in" in log, log  # for the next start
    stopping = log.index("scheduler stopping")
    assert " started (slot" not in log[stopping:]  # no slot fires once stopping began


def _read_until(process: subprocess.Popen[bytes], marker: bytes, *, budget: float) -> bytes:
    """What `process` printed until it printed `marker` (or `budget` seconds passed)."""
    assert process.stdout is not None
    os.set_blocking(process.stdout.fileno(), False)
    seen = b""
    ends = time.monotonic() + budget
    while marker not in seen and time.monotonic() < ends and process.poll() is None:
        seen += process.stdout.read(4096) or b""
        time.sleep(0.02)
    return seen
