"""Alerts kept at stop (issue 26): a real runtime, a real SMTP server and a real HTTP
receiver on loopback; the next start sends what the stop cut short, once."""

from __future__ import annotations

import asyncio
import email
import json
import logging
import os
import stat
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from email.policy import default as default_policy
from pathlib import Path

import pytest
from aiosmtpd.smtp import SMTP as SMTPServer
from aiosmtpd.smtp import Envelope, Session

from tuisched.domain.events import AlertFailed, AlertSent
from tuisched.runtime.clock import ManualClock
from tuisched.runtime.configfiles import load_config
from tuisched.runtime.handlers.outbox import (
    MAIL,
    MAX_ALERT_BYTES,
    MAX_FILE_BYTES,
    MAX_KEPT,
    OUTBOX_FILE,
    WEBHOOK,
    KeptAlert,
    Outbox,
    read_kept,
    write_kept,
)
from tuisched.runtime.runtime import Runtime

from .recorder import Recorder
from .runtime_fixtures import REPO, Scheduler, write_config
from .smtp_fixtures import Recording, smtp_server
from .test_webhook import Server, http_server

NOW = datetime(2026, 5, 7, 10, 30, tzinfo=UTC)
WITHIN = 15.0
"""Seconds any one wait of these tests may take (a busy machine)."""


@asynccontextmanager
async def started(path: Path) -> AsyncIterator[tuple[Runtime, Recorder]]:
    """A runtime on `path`; stopped with no grace, so what is in flight is cut short."""
    runtime = Runtime(load_config(path), kill_grace=0.5)
    recorder = Recorder(runtime.bus)
    await runtime.start()
    try:
        yield runtime, recorder
    finally:
        await runtime.stop(grace=0)


def _alerting_config(tmp_path: Path, *, section: str, rule: str) -> Path:
    """Job `extract` fails and alerts by `rule`; `section` goes before `jobs:`."""
    path = write_config(
        tmp_path,
        f"""
        extract:
          command: "exit 3"
          schedule: manual
          alerts:
            failed: {rule}
        """,
    )
    path.write_text(path.read_text().replace("jobs:", section + "jobs:"))
    return path


def _state(tmp_path: Path) -> Path:
    return tmp_path / "state"


# --- webhooks -------------------------------------------------------------------------------


async def test_a_post_a_silent_receiver_holds_at_stop_is_posted_once_at_the_next_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("not the scheduler's")
    _state(tmp_path).mkdir(mode=0o700)
    (_state(tmp_path) / OUTBOX_FILE).symlink_to(outside)  # planted: refused, then replaced
    async with http_server("hang", "ok") as server:
        section = f"webhooks:\n  ops: {{url: '{server.url}', timeout: 30s, retries: 0}}\n"
        path = _alerting_config(tmp_path, section=section, rule="{webhook: [ops]}")
        async with started(path) as (runtime, events):
            runtime.actions.run_now("extract")
            async with asyncio.timeout(WITHIN):
                await server.arrived.wait()
        (cut,) = events.of(AlertFailed)
        kept = _state(tmp_path) / OUTBOX_FILE
        assert (cut.final, cut.error) == (False, "the scheduler stopped: kept for the next start")
        assert stat.S_ISREG(kept.lstat().st_mode)
        assert stat.S_IMODE(kept.stat().st_mode) == 0o600
        assert outside.read_text() == "not the scheduler's"
        async with started(path) as (runtime, events):
            (sent,) = await events.wait_for(AlertSent, within=WITHIN)
        assert not kept.exists()  # delivered: no longer kept
        async with started(path) as (runtime, events):
            pass  # a third start has nothing left to send
    assert (sent.job, sent.alert, sent.to, sent.channel) == ("extract", "failed", ("ops",), WEBHOOK)
    assert len(server.received) == 2  # the one held at the stop, and the one after
    first, second = server.received
    assert first.body == second.body
    assert json.loads(second.body)["run"]["exit_code"] == 3
    links = [r for r in caplog.records if "symbolic link" in r.getMessage()]
    assert len(links) == 1
    assert not [r for r in caplog.records if r.exc_info]


async def test_a_kept_post_to_a_webhook_that_is_gone_is_dropped_with_one_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = _alerting_config(tmp_path, section="", rule="{to: []}")
    path.write_text(path.read_text().replace("    alerts:\n      failed: {to: []}\n", ""))
    _state(tmp_path).mkdir(mode=0o700)
    gone = KeptAlert.new(channel=WEBHOOK, at=datetime.now(UTC), job="extract", run_id="r-1",
                         alert="failed", to=("ops",), payload="{}")  # fmt: skip
    mail = KeptAlert.new(channel=MAIL, at=datetime.now(UTC), job="extract", run_id="r-1",
                         alert="failed", to=("ops@example.org",),
                         payload="Subject: x\n\nx\n")  # fmt: skip
    write_kept(_state(tmp_path) / OUTBOX_FILE, [gone, mail])
    async with started(path):
        pass
    assert not (_state(tmp_path) / OUTBOX_FILE).exists()
    said = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
    assert len(said) == 2
    assert "no such webhook now" in said[0]
    assert "email is not configured now" in said[1]


async def _trigger(config: Path, job: str) -> None:
    """`tuisched trigger JOB` against the running scheduler (a real process, not awaited
    on the loop's thread: the receiver answers on this loop)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tuisched", "trigger", job, "-c", str(config), cwd=REPO,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    async with asyncio.timeout(WITHIN):
        _, err = await process.communicate()
    assert process.returncode == 0, err


def _appears(path: Path, within: float) -> bool:
    """Whether `path` exists within `within` seconds."""
    deadline = time.monotonic() + within
    while not path.exists():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)  # written by a process we do not own: nothing to await
    return True


async def _posts(server: Server, count: int) -> None:
    async with asyncio.timeout(WITHIN):
        while len(server.received) < count:
            server.arrived.clear()
            await server.arrived.wait()


async def test_a_post_kept_before_a_kill_9_is_posted_at_the_next_start(
    tmp_path: Path, schedulers: list[Scheduler]
) -> None:
    async with http_server("hang", "ok") as server:
        section = f"webhooks:\n  ops: {{url: '{server.url}', timeout: 30s, retries: 0}}\n"
        path = _alerting_config(tmp_path, section=section, rule="{webhook: [ops]}")
        kept = _state(tmp_path) / OUTBOX_FILE
        first = Scheduler(path)
        schedulers.append(first)
        await asyncio.to_thread(first.wait_for_line, "scheduler started")
        await _trigger(path, "extract")
        await _posts(server, 1)
        assert await asyncio.to_thread(_appears, kept, WITHIN)
        first.process.kill()
        await asyncio.to_thread(first.process.wait, WITHIN)
        second = Scheduler(path)
        schedulers.append(second)
        await _posts(server, 2)
        await asyncio.to_thread(second.wait_for_line, "posted to webhook ops")
        second.process.terminate()
        assert await asyncio.to_thread(second.finish) == 0
    assert not kept.exists()
    held, posted = server.received
    assert held.body == posted.body
    assert len(server.received) == 2


# --- mail -----------------------------------------------------------------------------------


class Holding(Recording):
    """Holds every DATA without an answer while `holding`; records the rest."""

    def __init__(self) -> None:
        super().__init__()
        self.holding = True
        self.held: list[bytes] = []
        self.arrived = threading.Event()

    async def handle_DATA(self, server: SMTPServer, session: Session, envelope: Envelope) -> str:
        if self.holding:
            self.held.append(envelope.original_content or b"")
            self.arrived.set()
            await asyncio.Event().wait()  # cancelled when the server stops
        return await super().handle_DATA(server, session, envelope)


async def test_a_mail_a_silent_server_holds_at_stop_is_sent_once_at_the_next_start(
    tmp_path: Path,
) -> None:
    (tmp_path / "failed.txt").write_text("{{ job.name }} a échoué : exit {{ run.exit_code }}\n")
    handler = Holding()
    with smtp_server(handler) as server:
        section = (
            f"email:\n  smtp: {{host: 127.0.0.1, port: {server.port}, timeout: 30s}}\n"
            '  from: tuisched@example.org\n  subject: "{{ job.name }} {{ event }}"\n'
            "  default_template: failed.txt\n"
        )
        path = _alerting_config(tmp_path, section=section, rule="{to: [ops@example.org]}")
        async with started(path) as (runtime, events):
            runtime.actions.run_now("extract")
            assert await asyncio.to_thread(handler.arrived.wait, WITHIN)
        (cut,) = events.of(AlertFailed)
        assert not cut.final
        assert (_state(tmp_path) / OUTBOX_FILE).exists()
        handler.holding = False
        async with started(path) as (runtime, events):
            (sent,) = await events.wait_for(AlertSent, within=WITHIN)
    assert not (_state(tmp_path) / OUTBOX_FILE).exists()
    assert (sent.job, sent.to, sent.subject) == ("extract", ("ops@example.org",), "extract failed")
    (delivered,) = handler.messages  # once
    (held,) = handler.held
    before = email.message_from_bytes(held, policy=default_policy)
    assert delivered["Message-ID"] == before["Message-ID"]  # the same mail, not a new one
    assert delivered.get_content().strip() == "extract a échoué : exit 3"  # as rendered


# --- the file -------------------------------------------------------------------------------


def _kept(at: datetime, job: str = "extract") -> KeptAlert:
    return KeptAlert.new(channel=WEBHOOK, at=at, job=job, run_id="r-1", alert="failed",
                         to=("ops",), payload='{"a": 1}')  # fmt: skip


def _garbage(path: Path) -> None:
    path.write_bytes(b"\x00\xffnot json{")


def _deep(path: Path) -> None:
    path.write_text("[" * 100_000)


def _not_a_list(path: Path) -> None:
    path.write_text('{"version": 1, "alerts": {"a": 1}}')


def _huge(path: Path) -> None:
    with path.open("wb") as file:
        file.truncate(MAX_FILE_BYTES + 1)  # sparse: nothing is written


def _link(path: Path) -> None:
    target = path.with_name("elsewhere.json")
    write_kept(target, [_kept(NOW)])
    path.symlink_to(target)


def _fifo(path: Path) -> None:
    os.mkfifo(path)


@pytest.mark.parametrize(
    ("plant", "said"),
    [
        (_garbage, "not JSON"),
        (_deep, "not JSON"),
        (_not_a_list, "not a list of alerts"),
        (_huge, "larger than"),
        (_link, "symbolic link"),
        (_fifo, "not a regular file"),
    ],
)
async def test_a_damaged_or_hostile_file_is_one_line_and_no_alerts(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, plant: Callable[[Path], None], said: str
) -> None:
    path = tmp_path / OUTBOX_FILE
    plant(path)
    caplog.set_level(logging.INFO)
    outbox = Outbox(path, ManualClock(NOW))
    async with asyncio.timeout(WITHIN):
        assert await outbox.load() == []
        await outbox.close()
    (line,) = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert said in line.getMessage()
    assert str(path) in line.getMessage()
    assert line.exc_info is None


async def test_damaged_entries_are_skipped_and_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / OUTBOX_FILE
    write_kept(path, [_kept(NOW)])
    document = json.loads(path.read_text())
    document["alerts"] += [{"key": 1}, "x", {**document["alerts"][0], "kept_at": "yesterday"}]
    path.write_text(json.dumps(document))
    (alert,) = await Outbox(path, ManualClock(NOW)).load()
    assert alert.job == "extract"
    (line,) = caplog.records
    assert "3 of 4 entries damaged" in line.getMessage()


async def test_old_alerts_and_those_beyond_the_cap_are_dropped_with_one_line_each(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / OUTBOX_FILE
    stale = [_kept(NOW - timedelta(hours=25), job="stale")]
    fresh = [_kept(NOW - timedelta(minutes=n), job=f"job-{n}") for n in range(MAX_KEPT + 2)]
    write_kept(path, stale + fresh)
    outbox = Outbox(path, ManualClock(NOW))
    loaded = await outbox.load()
    await outbox.close()
    assert len(loaded) == MAX_KEPT
    assert {a.job for a in loaded} == {f"job-{n}" for n in range(MAX_KEPT)}  # the newest
    assert [a.kept_at for a in loaded] == sorted(a.kept_at for a in loaded)  # oldest first
    dropped = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
    assert dropped == [
        "1 kept alert older than 1d dropped, not sent",
        f"2 kept alerts beyond the newest {MAX_KEPT} dropped, not sent",
    ]
    again, problem = read_kept(path)  # the file was rewritten without them
    assert (len(again), problem) == (MAX_KEPT, None)


async def test_kept_until_done_and_the_file_goes_with_the_last(tmp_path: Path) -> None:
    path = tmp_path / OUTBOX_FILE
    outbox = Outbox(path, ManualClock(NOW))
    first, second = _kept(NOW, "one"), _kept(NOW, "two")
    outbox.keep(first)
    outbox.keep(second)
    outbox.done(first.key)
    await outbox.close()
    (left,), problem = read_kept(path)
    assert (left, problem) == (second, None)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    outbox.done(second.key)
    await outbox.close()
    assert not path.exists()
    assert not list(tmp_path.iterdir())  # no temporary file left


async def test_keeping_more_than_the_cap_drops_the_oldest_and_a_huge_one_is_not_kept(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    outbox = Outbox(tmp_path / OUTBOX_FILE, ManualClock(NOW))
    alerts = [_kept(NOW, f"job-{n}") for n in range(MAX_KEPT + 1)]
    for alert in alerts:
        assert outbox.keep(alert)
    huge = KeptAlert.new(channel=WEBHOOK, at=NOW, job="huge", run_id="r-2", alert="failed",
                         to=("ops",), payload="x" * (MAX_ALERT_BYTES + 1))  # fmt: skip
    assert not outbox.keep(huge)
    await outbox.close()
    assert alerts[0].key not in outbox
    assert len(outbox) == MAX_KEPT
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert said[:2] == [
        f"more than {MAX_KEPT} alerts kept: the oldest (failed for job 'job-0') is dropped",
        "failed alert for job 'huge' is too large to keep for the next start",
    ]


async def test_a_write_that_fails_is_tried_again_at_close_and_a_loss_is_said(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocked = tmp_path / "state"
    blocked.write_text("a file where the folder should be")
    outbox = Outbox(blocked / OUTBOX_FILE, ManualClock(NOW))
    outbox.keep(_kept(NOW))
    await outbox.close()
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2  # the failure once (not once per try), then the loss
    assert said[0].startswith(f"cannot write {blocked / OUTBOX_FILE}: ")
    path = blocked / OUTBOX_FILE
    assert said[1] == f"1 alert not delivered before the stop could not be kept in {path}: lost"
