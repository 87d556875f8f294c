"""Alert mail: the SMTP mailer against real servers, and the handler on a live bus."""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from pathlib import Path

import pytest

from tuisched.domain.bus import EventBus
from tuisched.domain.events import AlertFailed, AlertSent, RunConcluded, RunFinished, RunNotStarted
from tuisched.domain.model import Config, Security, SmtpSettings
from tuisched.domain.runs import Result, RunRecord, RunState, Trigger
from tuisched.runtime.clock import ManualClock
from tuisched.runtime.configfiles import load_config
from tuisched.runtime.handlers.alerts import AlertHandler
from tuisched.runtime.mail import Mailer, MailError, RecordingMailer, SmtpMailer, build_message

from .recorder import Recorder
from .smtp_fixtures import (
    HOST,
    Certificates,
    Credentials,
    Echoing,
    HangingUp,
    Refusing,
    certificates,
    free_port,
    smtp_server,
)

NOW = datetime(2026, 5, 7, 10, 30, tzinfo=UTC)
PASSWORD = "s3cret-Pa55"  # noqa: S105  (the test servers' password, which must never leak)
WriteConfig = Callable[..., Path]


@pytest.fixture(scope="module")
def certs() -> Certificates:
    return certificates()


def message(to: tuple[str, ...] = ("ops@example.org",)) -> EmailMessage:
    return build_message(
        sender="tuisched <tuisched@example.org>",
        to=to,
        subject="backup\nfailed",
        body="Grüße: the backup failed\n",
        hostname="node-1",
        date=NOW,
    )


def smtp(
    port: int,
    security: Security = Security.NONE,
    *,
    login: bool = False,
    password_file: Path | None = None,
) -> SmtpSettings:
    """Settings for a test server; `login` names SMTP_USER and SMTP_PASSWORD."""
    return SmtpSettings(
        host=HOST,
        port=port,
        security=security,
        timeout=timedelta(seconds=5),
        username_env="SMTP_USER" if login or password_file else None,
        password_env="SMTP_PASSWORD" if login else None,
        password_file=password_file,
    )


ENV = {"SMTP_USER": "alice", "SMTP_PASSWORD": PASSWORD}


# --- the mailer against real servers ------------------------------------------------------


async def test_plain_smtp_delivers() -> None:
    with smtp_server() as server:
        await SmtpMailer(smtp(server.port)).send(message())
        (envelope,) = server.handler.envelopes
        (received,) = server.handler.messages
    assert envelope.mail_from == "tuisched@example.org"
    assert envelope.rcpt_tos == ["ops@example.org"]
    assert received["Subject"] == "backup failed"
    assert received["Message-ID"].endswith("@node-1>")
    assert received["Date"] == "Thu, 07 May 2026 10:30:00 +0000"
    assert received.get_content().splitlines() == ["Grüße: the backup failed"]


async def test_starttls_logs_in_with_credentials_from_the_environment(certs: Certificates) -> None:
    credentials = Credentials("alice", PASSWORD)
    with smtp_server(starttls=certs.server, auth=credentials) as server:
        mailer = SmtpMailer(
            smtp(server.port, Security.STARTTLS, login=True), env=ENV, ssl_context=certs.client()
        )
        await mailer.send(message())
        assert len(server.handler.envelopes) == 1
    assert credentials.accepted == [b"alice"]


async def test_password_file_is_read_and_stripped(certs: Certificates, tmp_path: Path) -> None:
    secret = tmp_path / "smtp-password"
    secret.write_text(PASSWORD + "\n")
    credentials = Credentials("alice", PASSWORD)
    with smtp_server(starttls=certs.server, auth=credentials) as server:
        settings = smtp(server.port, Security.STARTTLS, password_file=secret)
        mailer = SmtpMailer(settings, env={"SMTP_USER": "alice"}, ssl_context=certs.client())
        await mailer.send(message())
    assert credentials.accepted == [b"alice"]


async def test_implicit_tls_delivers(certs: Certificates) -> None:
    with smtp_server(tls=certs.server) as server:
        mailer = SmtpMailer(smtp(server.port, Security.TLS), ssl_context=certs.client())
        await mailer.send(message())
        assert len(server.handler.envelopes) == 1


async def test_untrusted_certificate_is_refused(certs: Certificates) -> None:
    with smtp_server(starttls=certs.server) as server:
        mailer = SmtpMailer(smtp(server.port, Security.STARTTLS))  # the system's trust store
        with pytest.raises(MailError, match="TLS failed"):
            await mailer.send(message())
        assert server.handler.envelopes == []


async def test_wrong_password_is_never_exposed(
    certs: Certificates, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with smtp_server(starttls=certs.server, auth=Credentials("alice", "other")) as server:
        mailer = SmtpMailer(
            smtp(server.port, Security.STARTTLS, login=True), env=ENV, ssl_context=certs.client()
        )
        with pytest.raises(MailError, match="535") as info:
            await mailer.send(message())
    assert PASSWORD not in str(info.value)
    assert PASSWORD not in repr(info.value)
    assert info.value.__cause__ is None
    assert PASSWORD not in repr(mailer)
    assert PASSWORD not in caplog.text


async def test_a_server_echoing_the_login_back_never_puts_the_password_in_the_log(
    certs: Certificates, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with smtp_server(starttls=certs.server, auth=Echoing("alice", PASSWORD)) as server:
        mailer = SmtpMailer(
            smtp(server.port, Security.STARTTLS, login=True), env=ENV, ssl_context=certs.client()
        )
        with pytest.raises(MailError, match="535") as info:
            await mailer.send(message())
    ours = [r.getMessage() for r in caplog.records if r.name.startswith("tuisched")]
    said = str(info.value) + "\n".join(ours)  # (the test server logs its own session)
    plain = base64.b64encode(b"\0alice\0" + PASSWORD.encode()).decode()
    assert plain not in said
    assert base64.b64encode(PASSWORD.encode()).decode() not in said
    assert "no such pair" in said  # the server's words are kept, the secret is not


async def test_unset_variable_is_named_not_guessed() -> None:
    mailer = SmtpMailer(smtp(free_port(), login=True), env={"SMTP_USER": "alice"})
    with pytest.raises(MailError, match="environment variable SMTP_PASSWORD is not set"):
        await mailer.send(message())


async def test_refused_recipients_and_no_server_are_mail_errors() -> None:
    refused = r"recipients refused: x@refused.example \(550\)"
    with smtp_server(Refusing()) as server, pytest.raises(MailError, match=refused):
        await SmtpMailer(smtp(server.port)).send(message(("x@refused.example",)))
    with pytest.raises(MailError, match="ConnectionRefusedError"):
        await SmtpMailer(smtp(free_port())).send(message())


# --- the handler on a live bus -----------------------------------------------------------


RETRY_DELAYS = (5.0, 30.0)
"""The handler's retry delays in these tests: on a ManualClock, advanced by the tests."""


@dataclass
class Alerting:
    """A handler subscribed to a bus bound to the running loop, and what it published."""

    handler: AlertHandler
    bus: EventBus
    recorder: Recorder
    clock: ManualClock
    configs: list[Config] = field(default_factory=list)

    async def failed_and_retried(self, job: str, attempts: int) -> None:
        """Wait for `attempts` failed sends of `job`'s alert, each retry's delay advanced."""
        for attempt in range(1, attempts + 1):
            await self.recorder.wait_for(
                AlertFailed, lambda e, n=attempt: e.job == job and e.attempts == n
            )
            await self.clock.advance(RETRY_DELAYS[attempt - 1])

    def finished(
        self, job: str, state: RunState = RunState.FAILED, *, final: bool = True, **changes: object
    ) -> None:
        """Publish what the engine publishes: RunFinished, then RunConcluded if it is final."""
        run = make_run(job, state)
        self.bus.publish(RunFinished(at=NOW, run=run, final=final, **changes))  # type: ignore[arg-type]
        if final:
            self.bus.publish(RunConcluded(at=NOW, run=run, **changes))  # type: ignore[arg-type]

    def not_started(self, job: str, *, final: bool = True) -> None:
        run = make_run(job, RunState.NOT_STARTED)
        self.bus.publish(RunNotStarted(at=NOW, run=run, final=final))
        if final:
            self.bus.publish(RunConcluded(at=NOW, run=run))


@asynccontextmanager
async def alerting(config: Config, mailer: Mailer) -> AsyncIterator[Alerting]:
    bus = EventBus()
    bus.bind(asyncio.get_running_loop())
    configs = [config]
    clock = ManualClock(NOW)
    handler = AlertHandler(
        lambda: configs[-1],
        mailer,
        bus=bus,
        hostname="node-1",
        clock=clock,
        retry_delays=RETRY_DELAYS,
    )
    subscriptions = handler.subscribe(bus)
    try:
        yield Alerting(handler, bus, Recorder(bus), clock, configs)
    finally:
        for subscription in subscriptions:
            subscription.unsubscribe()
        await handler.drain(5)


def make_run(job: str, state: RunState) -> RunRecord:
    return RunRecord(
        run_id=f"{job}-1",
        job=job,
        slot=NOW,
        trigger=Trigger.SCHEDULE,
        state=state,
        queued_at=NOW,
        result=Result.DEPENDENCY if state is RunState.NOT_STARTED else Result.COMPLETED,
        exit_code=None if state is RunState.NOT_STARTED else int(state is RunState.FAILED),
        started_at=NOW,
        ended_at=NOW + timedelta(seconds=65),
        reason="upstream failed" if state is RunState.NOT_STARTED else "",
        output_tail="last line\n",
    )


BODY = "{{ job.name }} {{ event }} exit={{ run.exit_code }} {{ run.reason }}{{ message_data.rows }}"


def email_config(
    write_config: WriteConfig,
    port: int,
    jobs: str,
    groups: str = "",
    *,
    body: str = BODY,
) -> Config:
    """A configuration with `email:` on `port`, the default template `body`, and `jobs`."""
    template = write_config(body, name="body.txt")
    header = f"""\
settings:
  timezone: UTC
  state_dir: state
email:
  smtp: {{host: {HOST}, port: {port}, timeout: 5s}}
  from: tuisched@example.org
  subject: "[tuisched] {{{{ job.name }}}} {{{{ event }}}}"
  default_template: {template}
"""
    return load_config(write_config(header + groups + "jobs:\n" + jobs))


NIGHTLY = """\
groups:
  nightly:
    jobs: [export, upload]
    alerts:
      failed:
        to: [ops@example.org]
"""
JOBS = """\
  export: {command: [/bin/true], schedule: manual}
  upload: {command: [/bin/true], schedule: manual}
  other: {command: [/bin/true], schedule: manual}
"""


async def test_group_alert_reaches_every_member(write_config: WriteConfig) -> None:
    with smtp_server() as server:
        config = email_config(write_config, server.port, JOBS, NIGHTLY)
        async with alerting(config, SmtpMailer(config.email.smtp)) as live:  # type: ignore[union-attr]
            live.finished("export", final=False)  # a retry follows: no alert yet
            live.finished("other")  # not a member
            live.finished("upload", RunState.SUCCESS)  # no success rule
            live.finished("export")
            live.finished("upload")
            await live.recorder.wait_for(AlertSent, count=2)
            await live.handler.drain(5)
            sent = live.recorder.of(AlertSent)
        subjects = sorted(str(m["Subject"]) for m in server.handler.messages)
    assert subjects == ["[tuisched] export failed", "[tuisched] upload failed"]
    assert all(e.rcpt_tos == ["ops@example.org"] for e in server.handler.envelopes)
    assert {(a.job, a.alert, a.to) for a in sent} == {
        ("export", "failed", ("ops@example.org",)),
        ("upload", "failed", ("ops@example.org",)),
    }


async def test_each_event_finds_its_rule(write_config: WriteConfig) -> None:
    jobs = """\
  export:
    command: [/bin/true]
    schedule: manual
    alerts:
      success: {to: ok@example.org}
      not_started: {to: ops@example.org}
"""
    mailer = RecordingMailer()
    async with alerting(email_config(write_config, 25, jobs), mailer) as live:
        live.finished("export", RunState.SUCCESS)
        live.not_started("export", final=False)
        live.not_started("export")
        live.finished("export", RunState.FAILED)  # no failed rule
        await live.recorder.wait_for(AlertSent, count=2)
        await live.handler.drain(5)
    bodies = [m.get_content().strip() for m in mailer.messages]
    assert sorted(bodies) == [
        "export not_started exit=None upstream failed",
        "export success exit=0",
    ]
    assert mailer.attempts == 2


async def test_rules_sharing_a_template_merge_into_one_mail(write_config: WriteConfig) -> None:
    other = write_config("other template", name="other.txt")
    jobs = f"""\
  export:
    command: [/bin/true]
    schedule: manual
    alerts:
      failed: {{to: [dev@example.org, ops@example.org]}}
  upload:
    command: [/bin/true]
    schedule: manual
    alerts:
      failed: {{to: [dev@example.org], template: {other}}}
"""
    mailer = RecordingMailer()
    config = email_config(write_config, 25, jobs, NIGHTLY)
    async with alerting(config, mailer) as live:
        live.finished("export")
        live.finished("upload")
        await live.recorder.wait_for(AlertSent, count=3)
    recipients = sorted((str(m["Subject"]), str(m["To"])) for m in mailer.messages)
    assert recipients == [
        ("[tuisched] export failed", "dev@example.org, ops@example.org"),
        ("[tuisched] upload failed", "dev@example.org"),
        ("[tuisched] upload failed", "ops@example.org"),
    ]


async def test_message_data_reaches_the_body(write_config: WriteConfig) -> None:
    mailer = RecordingMailer()
    async with alerting(email_config(write_config, 25, JOBS, NIGHTLY), mailer) as live:
        live.finished("export", message_data={"rows": 42})
        await live.recorder.wait_for(AlertSent)
    assert mailer.messages[0].get_content().strip() == "export failed exit=1 42"


async def test_refusing_server_is_retried_then_a_later_alert_goes_through(
    write_config: WriteConfig,
) -> None:
    jobs = """\
  export:
    command: [/bin/true]
    schedule: manual
    alerts: {failed: {to: nobody@refused.example}}
  upload:
    command: [/bin/true]
    schedule: manual
    alerts: {failed: {to: ops@example.org}}
"""
    with smtp_server(Refusing()) as server:
        config = email_config(write_config, server.port, jobs)
        async with alerting(config, SmtpMailer(config.email.smtp)) as live:  # type: ignore[union-attr]
            live.finished("export")
            await live.failed_and_retried("export", 2)
            await live.recorder.wait_for(AlertFailed, lambda e: e.final)
            live.finished("upload")
            (sent,) = await live.recorder.wait_for(AlertSent)
        failures = live.recorder.of(AlertFailed)
        assert len(server.handler.envelopes) == 1
    assert [(f.attempts, f.final) for f in failures] == [(1, False), (2, False), (3, True)]
    assert all("nobody@refused.example (550)" in f.error for f in failures)
    assert sent.job == "upload"


async def test_server_hanging_up_is_retried(write_config: WriteConfig) -> None:
    with smtp_server(HangingUp(times=1)) as server:
        config = email_config(write_config, server.port, JOBS, NIGHTLY)
        async with alerting(config, SmtpMailer(config.email.smtp)) as live:  # type: ignore[union-attr]
            live.finished("export")
            await live.failed_and_retried("export", 1)
            await live.recorder.wait_for(AlertSent)
        (failure,) = live.recorder.of(AlertFailed)
        assert len(server.handler.envelopes) == 1
    assert (failure.attempts, failure.final) == (1, False)
    assert "SMTPServerDisconnected" in failure.error


async def test_nothing_listening_gives_up_after_the_retries(write_config: WriteConfig) -> None:
    config = email_config(write_config, free_port(), JOBS, NIGHTLY)
    async with alerting(config, SmtpMailer(config.email.smtp)) as live:  # type: ignore[union-attr]
        live.finished("export")
        await live.failed_and_retried("export", 2)
        (last,) = await live.recorder.wait_for(AlertFailed, lambda e: e.final)
    assert last.attempts == 3
    assert "Connection refused" in last.error


async def test_wrong_password_stays_out_of_events_and_logs(
    write_config: WriteConfig,
    certs: Certificates,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("SMTP_USER", "alice")
    monkeypatch.setenv("SMTP_PASSWORD", PASSWORD)
    with smtp_server(starttls=certs.server, auth=Credentials("alice", "other")) as server:
        config = email_config(write_config, server.port, JOBS, NIGHTLY)
        settings = smtp(server.port, Security.STARTTLS, login=True)
        mailer = SmtpMailer(settings, ssl_context=certs.client())
        async with alerting(config, mailer) as live:
            live.finished("export")
            await live.failed_and_retried("export", 2)
            (last,) = await live.recorder.wait_for(AlertFailed, lambda e: e.final)
    assert "535" in last.error
    assert "alert for job 'export' to ops@example.org not delivered (attempt 3" in caplog.text
    assert PASSWORD not in caplog.text
    assert all(PASSWORD not in str(event) for event in live.recorder.events)


async def test_template_failure_is_reported_once_without_sending(
    write_config: WriteConfig,
) -> None:
    mailer = RecordingMailer()
    config = email_config(write_config, 25, JOBS, NIGHTLY)
    # Loading would refuse this template; an edit after loading is what reaches a render.
    assert config.email is not None
    assert config.email.default_template is not None
    config.email.default_template.write_text("{{ run.exit_cod }}")
    async with alerting(config, mailer) as live:
        live.finished("export")
        (failure,) = await live.recorder.wait_for(AlertFailed)
        await live.handler.drain(5)
    assert (failure.attempts, failure.final) == (0, True)
    assert failure.error.endswith("body.txt:1: 'run' has no attribute 'exit_cod'")
    assert failure.error.startswith("template ")
    assert mailer.attempts == 0
    assert len(live.recorder.of(AlertFailed)) == 1


async def test_recording_mailer_failures_are_retried(write_config: WriteConfig) -> None:
    mailer = RecordingMailer()
    mailer.fail_next(2)
    async with alerting(email_config(write_config, 25, JOBS, NIGHTLY), mailer) as live:
        live.finished("upload")
        await live.failed_and_retried("upload", 2)
        await live.recorder.wait_for(AlertSent)
    assert [(f.attempts, f.final) for f in live.recorder.of(AlertFailed)] == [
        (1, False),
        (2, False),
    ]
    assert mailer.attempts == 3


async def test_without_email_nothing_happens(write_config: WriteConfig) -> None:
    path = write_config(
        "settings: {timezone: UTC, state_dir: state}\njobs:\n"
        "  export: {command: [/bin/true], schedule: manual}\n"
    )
    mailer = RecordingMailer()
    async with alerting(load_config(path), mailer) as live:
        live.finished("export")
        live.bus.flush()
        assert live.handler.in_flight == 0
    assert mailer.attempts == 0
    assert live.recorder.of(AlertFailed) == []
    assert live.recorder.of(AlertSent) == []


async def test_the_current_configuration_is_used(write_config: WriteConfig) -> None:
    mailer = RecordingMailer()
    async with alerting(email_config(write_config, 25, JOBS, NIGHTLY), mailer) as live:
        live.configs.append(email_config(write_config, 25, JOBS))  # a reload drops the group alert
        live.finished("export")
        live.bus.flush()
        assert live.handler.in_flight == 0
    assert mailer.attempts == 0


async def test_drain_cancels_mail_in_flight(write_config: WriteConfig) -> None:
    mailer = RecordingMailer()
    mailer.block()
    async with alerting(email_config(write_config, 25, JOBS, NIGHTLY), mailer) as live:
        live.finished("export")
        live.bus.flush()
        assert live.handler.in_flight == 1
        draining = asyncio.get_running_loop().create_task(live.handler.drain(10))
        await live.clock.advance(9)
        assert not draining.done()  # the grace is not over: the mail may still go out
        await live.clock.advance(1)
        await draining
        assert live.handler.in_flight == 0
        (failure,) = await live.recorder.wait_for(AlertFailed)
    assert failure.final
    assert "cancelled" in failure.error
    assert mailer.messages == []


async def test_a_failing_configuration_never_raises_into_the_bus(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken() -> Config:
        raise RuntimeError("boom")

    bus = EventBus()
    handler = AlertHandler(broken, RecordingMailer(), bus=bus, hostname="h", clock=ManualClock(NOW))
    handler.subscribe(bus)
    recorder = Recorder(bus)
    bus.publish(RunConcluded(at=NOW, run=make_run("export", RunState.FAILED)))
    assert len(recorder.events) == 1
    assert "alerts for run export-1 of job 'export' failed" in caplog.text


def test_build_message_is_one_line_plain_utf8() -> None:
    built = message()
    assert built["Subject"] == "backup failed"
    assert built.get_content_type() == "text/plain"
    assert built.get_content_charset() == "utf-8"
