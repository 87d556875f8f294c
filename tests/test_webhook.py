"""Webhook alerts: configuration, and delivery to a real HTTP server on loopback."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from aiohttp import web

from tuisched.domain.bus import EventBus
from tuisched.domain.errors import ConfigError
from tuisched.domain.events import AlertFailed, AlertSent, RunConcluded, RunFinished
from tuisched.domain.model import Config, WebhookAuth
from tuisched.domain.runs import Result, RunRecord, RunState, Trigger
from tuisched.runtime.clock import ManualClock
from tuisched.runtime.configfiles import load_config
from tuisched.runtime.handlers.webhooks import WebhookHandler, backoff_delay
from tuisched.runtime.webhook import HttpPoster

from .recorder import Recorder
from .runtime_fixtures import REPO, running, write_config

NOW = datetime(2026, 5, 7, 10, 30, tzinfo=UTC)
TOKEN = "s3cret-t0ken-9f2a"  # noqa: S105  (a test secret, checked to stay out of logs)
BACKOFF = 2.0


# --- a real HTTP server on loopback -------------------------------------------------------

Reply = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class Received:
    """One request the server took: its headers and body."""

    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Server:
    """A loopback HTTP server answering each request with the next of `replies`
    (the last one repeats), recording what it received."""

    replies: list[str]
    """`ok` (200), `500`, `hang` (never answers) or `hold` (answers 200 once released)."""
    received: list[Received] = field(default_factory=list)
    port: int = 0
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    """Set to let `hold` replies answer (200)."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.received.append(Received(request.path, dict(request.headers), body))
        self.arrived.set()
        reply = self.replies[min(len(self.received), len(self.replies)) - 1]
        if reply == "hang":
            await asyncio.Event().wait()  # cancelled when the client goes or the server stops
        if reply == "hold":
            await self.release.wait()
        if reply == "500":
            return web.Response(status=500, text="boom")
        return web.Response(status=200, text="thanks")


@asynccontextmanager
async def http_server(*replies: str) -> AsyncIterator[Server]:
    server = Server(list(replies) or ["ok"])
    app = web.Application()
    app.router.add_post("/hook", server.handle)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server.port = runner.addresses[0][1]
    try:
        yield server
    finally:
        await runner.cleanup()


# --- a handler on a live bus --------------------------------------------------------------


def config_with(tmp_path: Path, webhooks: str, alerts: str, *, extra: str = "") -> Config:
    """A configuration with `webhooks` (the section's body) and job `export` alerting with
    `alerts` (the body of its `alerts:`)."""
    path = tmp_path / "tuisched.yaml"
    path.write_text(
        "settings: {timezone: UTC, state_dir: state}\n"
        f"{extra}webhooks:\n{webhooks}"
        "groups:\n  nightly: {jobs: [export]}\n"
        "jobs:\n  export:\n    command: [/bin/false]\n    schedule: manual\n"
        f"    alerts:\n{alerts}"
        "  other: {command: [/bin/true], schedule: manual}\n"
    )
    return load_config(path)


@dataclass
class Live:
    handler: WebhookHandler
    bus: EventBus
    recorder: Recorder
    clock: ManualClock

    def failed(self, job: str = "export") -> None:
        """Publish a failed run's conclusion, as the engine does."""
        self.bus.publish(RunConcluded(at=NOW, run=failed_run(job)))


@asynccontextmanager
async def live(config: Config, secrets: dict[str, str] | None = None) -> AsyncIterator[Live]:
    bus = EventBus()
    bus.bind(asyncio.get_running_loop())
    clock = ManualClock(NOW)
    handler = WebhookHandler(
        lambda: config, HttpPoster(), bus=bus, hostname="node-1", clock=clock,
        secrets=secrets or {}, backoff=BACKOFF,
    )  # fmt: skip
    subscriptions = handler.subscribe(bus)
    try:
        yield Live(handler, bus, Recorder(bus), clock)
    finally:
        for subscription in subscriptions:
            subscription.unsubscribe()
        await handler.drain(0)


def failed_run(job: str) -> RunRecord:
    return RunRecord(
        run_id=f"{job}-1", job=job, slot=NOW, trigger=Trigger.SCHEDULE, state=RunState.FAILED,
        queued_at=NOW, result=Result.COMPLETED, exit_code=3, started_at=NOW,
        ended_at=NOW + timedelta(seconds=65), output_tail="disk full\n",
    )  # fmt: skip


def hook(url: str, *lines: str) -> str:
    """The `ops` webhook posting to `url`, with more `key: value` lines."""
    return f"  ops:\n    url: {url}\n" + "".join(f"    {line}\n" for line in lines)


# --- delivery -------------------------------------------------------------------------------


async def test_json_body_and_headers_are_delivered(tmp_path: Path) -> None:
    async with http_server("ok") as server:
        webhooks = hook(
            server.url, "headers: {X-Team: data, X-Env: prod}", "secret_env: HOOK_TOKEN"
        )
        config = config_with(tmp_path, webhooks, "      failed: {webhook: ops}\n")
        async with live(config, {"HOOK_TOKEN": TOKEN}) as it:
            it.failed()
            it.failed("other")  # no rule for it: nothing is posted
            (sent,) = await it.recorder.wait_for(AlertSent)
        (request,) = server.received
    assert (sent.job, sent.alert, sent.to, sent.channel) == (
        "export",
        "failed",
        ("ops",),
        "webhook",
    )
    assert request.headers["Content-Type"] == "application/json"
    assert request.headers["X-Team"] == "data"
    assert request.headers["X-Env"] == "prod"
    assert request.headers["Authorization"] == f"Bearer {TOKEN}"
    body = json.loads(request.body)
    assert body["job"] == {"name": "export", "description": "", "groups": ["nightly"]}
    assert body["event"] == "failed"
    assert body["hostname"] == "node-1"
    assert body["run"]["exit_code"] == 3
    assert body["run"]["output_tail"] == "disk full\n"
    assert body["run"]["started_at"] == "2026-05-07T10:30:00+00:00"
    assert body["run"]["duration"] == "1m05s"


async def test_a_job_and_its_group_naming_one_webhook_post_once(tmp_path: Path) -> None:
    async with http_server("ok") as server:
        path = tmp_path / "tuisched.yaml"
        path.write_text(
            "settings: {timezone: UTC, state_dir: state}\n"
            f"webhooks:\n{hook(server.url)}"
            "groups:\n  nightly:\n    jobs: [export]\n    alerts: {failed: {webhook: ops}}\n"
            "jobs:\n  export:\n    command: [/bin/false]\n    schedule: manual\n"
            "    alerts: {failed: {webhook: [ops]}}\n"
        )
        async with live(load_config(path)) as it:
            it.failed()
            await it.recorder.wait_for(AlertSent)
            it.failed()  # a second conclusion: a second post (the server saw one per run)
            await it.recorder.wait_for(AlertSent, count=2)
    assert len(server.received) == 2


async def test_500_then_200_is_delivered_on_retry_after_the_backoff(tmp_path: Path) -> None:
    async with http_server("500", "500", "ok") as server:
        config = config_with(
            tmp_path, hook(server.url, "retries: 3"), "      failed: {webhook: ops}\n"
        )
        async with live(config) as it:
            it.failed()
            (first,) = await it.recorder.wait_for(AlertFailed)
            assert (first.attempts, first.final, first.error) == (
                1,
                False,
                "webhook ops: HTTP 500 Internal Server Error",
            )
            await it.clock.advance(BACKOFF - 0.5)
            assert len(server.received) == 1  # the first retry waits the whole backoff
            await it.clock.advance(0.5)
            await it.recorder.wait_for(AlertFailed, lambda e: e.attempts == 2)
            await it.clock.advance(2 * BACKOFF)  # then twice as long
            (sent,) = await it.recorder.wait_for(AlertSent)
    assert sent.channel == "webhook"
    assert len(server.received) == 3
    assert [f.final for f in it.recorder.of(AlertFailed)] == [False, False]


async def test_a_silent_server_is_given_up_after_the_retries(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    async with http_server("hang") as server:
        webhooks = hook(server.url, "timeout: 1s", "retries: 1", "secret_env: HOOK_TOKEN")
        config = config_with(tmp_path, webhooks, "      failed: {webhook: ops}\n")
        async with live(config, {"HOOK_TOKEN": TOKEN}) as it:
            it.failed()
            await it.recorder.wait_for(AlertFailed, lambda e: e.attempts == 1)
            await it.clock.advance(BACKOFF)
            (last,) = await it.recorder.wait_for(AlertFailed, lambda e: e.final)
    assert (last.attempts, last.error) == (2, "webhook ops: no answer within 1s")
    assert len(server.received) == 2
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1  # logged once, when given up
    assert "not posted (after 2 attempts): webhook ops: no answer" in warnings[0].getMessage()
    assert TOKEN not in caplog.text
    assert server.url not in caplog.text  # many services put a token in the URL


def test_backoff_doubles_and_is_capped() -> None:
    assert [backoff_delay(2, n) for n in (1, 2, 3)] == [2, 4, 8]
    assert backoff_delay(2, 30) == 300


async def test_template_body_is_rendered_in_the_sandbox(tmp_path: Path) -> None:
    (tmp_path / "chat.j2").write_text(
        '{"text": "{{ job.name }} {{ event }} on {{ hostname }}: exit {{ run.exit_code }}"}\n'
    )
    async with http_server("ok") as server:
        webhooks = hook(server.url, "template: chat.j2", "content_type: text/plain")
        config = config_with(tmp_path, webhooks, "      failed: {webhook: ops}\n")
        async with live(config) as it:
            it.failed()
            await it.recorder.wait_for(AlertSent)
    (request,) = server.received
    assert request.headers["Content-Type"] == "text/plain"
    assert json.loads(request.body) == {"text": "export failed on node-1: exit 3"}


async def test_a_template_that_fails_at_run_time_is_not_retried(tmp_path: Path) -> None:
    template = tmp_path / "chat.j2"
    template.write_text("{{ job.name }}\n")
    async with http_server("ok") as server:
        config = config_with(
            tmp_path, hook(server.url, "template: chat.j2"), "      failed: {webhook: ops}\n"
        )
        template.write_text("{{ ''.__class__ }}\n")  # edited after the check: the sandbox says no
        async with live(config) as it:
            it.failed()
            (failure,) = await it.recorder.wait_for(AlertFailed)
    assert failure.final
    assert failure.error.startswith("webhook ops: template ")
    assert server.received == []


def documented_verifier() -> Callable[..., bool]:
    """The `verified` function docs/webhooks.md gives receivers, run as written there."""
    text = (REPO / "docs" / "webhooks.md").read_text()
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict[str, object] = {}
    exec(compile(code, "docs/webhooks.md", "exec"), namespace)  # noqa: S102  (our own docs)
    return namespace["verified"]  # type: ignore[return-value]


async def test_secret_from_a_file_signs_the_timestamp_and_the_body(tmp_path: Path) -> None:
    """A captured post sent again with another timestamp fails the check (issue 27)."""
    (tmp_path / "hook.secret").write_text(TOKEN + "\n")
    async with http_server("500", "ok") as server:
        webhooks = hook(server.url, "secret_file: hook.secret", "auth: hmac", "retries: 1")
        config = config_with(tmp_path, webhooks, "      failed: {webhook: ops}\n")
        assert config.webhooks["ops"].auth is WebhookAuth.HMAC
        async with live(config) as it:
            it.failed()
            await it.recorder.wait_for(AlertFailed)
            await it.clock.advance(BACKOFF)
            await it.recorder.wait_for(AlertSent)
    first, retry = server.received
    verified = documented_verifier()
    secret = TOKEN.encode()
    sent = int(NOW.timestamp())
    assert first.headers["X-Tuisched-Timestamp"] == str(sent)
    assert verified(secret, first.headers, first.body, now=sent)
    assert retry.headers["X-Tuisched-Timestamp"] == str(sent + int(BACKOFF))  # signed anew
    assert verified(secret, retry.headers, retry.body, now=sent + BACKOFF)
    replayed = {**first.headers, "X-Tuisched-Timestamp": str(sent + 60)}
    assert not verified(secret, replayed, first.body, now=sent + 60)  # another timestamp
    assert not verified(secret, first.headers, first.body, now=sent + 3600)  # too old
    assert not verified(secret, first.headers, first.body + b" ", now=sent)  # another body
    assert not verified(b"another secret", first.headers, first.body, now=sent)
    body_only = hmac.new(secret, first.body, hashlib.sha256).hexdigest()
    assert body_only not in first.headers["X-Tuisched-Signature"]  # no longer the body alone
    assert "Authorization" not in first.headers


async def test_a_missing_secret_is_named_and_never_sent(tmp_path: Path) -> None:
    async with http_server("ok") as server:
        config = config_with(
            tmp_path, hook(server.url, "secret_env: HOOK_TOKEN"), "      failed: {webhook: ops}\n"
        )
        async with live(config, {}) as it:
            it.failed()
            (failure,) = await it.recorder.wait_for(AlertFailed)
    assert (failure.final, failure.error) == (True, "webhook ops: secret_env HOOK_TOKEN is not set")
    assert server.received == []


# --- through the scheduler ------------------------------------------------------------------


async def test_a_failed_job_posts_while_a_silent_webhook_leaves_the_scheduler_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOOK_TOKEN", TOKEN)
    async with http_server("ok") as good, http_server("hang") as silent:
        path = write_config(
            tmp_path,
            """
            extract:
              command: "echo 'disk full' >&2; exit 3"
              schedule: manual
              alerts:
                failed: {webhook: [ops, slow]}
            report: {command: "echo $HOOK_TOKEN", schedule: manual}
            """,
        )
        text = path.read_text().replace(
            "jobs:",
            f"webhooks:\n{hook(good.url, 'secret_env: HOOK_TOKEN')}"
            f"  slow: {{url: '{silent.url}', timeout: 5s, retries: 0}}\njobs:",
        )
        path.write_text(text)
        async with running(path) as (runtime, events):
            runtime.actions.run_now("extract")
            (sent,) = await events.wait_for(AlertSent)
            await silent.arrived.wait()
            runtime.actions.run_now("report")  # while the silent webhook holds its post
            (report,) = await events.wait_for(RunFinished, lambda e: e.run.job == "report")
            assert not events.of(AlertFailed)  # the run went on before the post gave up
            (given_up,) = await events.wait_for(AlertFailed, lambda e: e.final)
    assert (sent.to, given_up.to) == (("ops",), ("slow",))
    assert report.run.state is RunState.SUCCESS
    assert TOKEN not in report.run.output_tail  # the secret left the jobs' environment
    (request,) = good.received
    assert request.headers["Authorization"] == f"Bearer {TOKEN}"
    assert json.loads(request.body)["run"]["output_tail"].strip() == "disk full"


# --- configuration ------------------------------------------------------------------------


def problems_of(tmp_path: Path, webhooks: str, alerts: str) -> list[str]:
    """Each problem as `LINE: [job 'NAME': ]message` (checked to be in the file)."""
    with pytest.raises(ConfigError) as info:
        config_with(tmp_path, webhooks, alerts)
    prefix = f"{tmp_path / 'tuisched.yaml'}:"
    assert all(str(p).startswith(prefix) for p in info.value.problems)
    return [str(p).removeprefix(prefix) for p in info.value.problems]


def test_config_reads_every_key(tmp_path: Path) -> None:
    (tmp_path / "t.j2").write_text("{{ job.name }}")
    webhooks = hook(
        "https://hooks.example.org/x", "headers: {X-A: b}", "secret_file: s", "auth: hmac",
        "template: t.j2", "content_type: text/plain", "timeout: 30s", "retries: 0",
    )  # fmt: skip
    config = config_with(tmp_path, webhooks, "      failed: {webhook: ops}\n")
    ops = config.webhooks["ops"]
    assert (ops.url, dict(ops.headers), ops.secret_file, ops.template) == (
        "https://hooks.example.org/x",
        {"X-A": "b"},
        tmp_path / "s",
        tmp_path / "t.j2",
    )
    assert (ops.timeout, ops.retries, ops.content_type, ops.line) == (
        timedelta(seconds=30),
        0,
        "text/plain",
        3,
    )
    (rule,) = config.jobs["export"].alerts
    assert (rule.to, rule.webhooks) == ((), ("ops",))


RULE = "      failed: {webhook: ops}\n"
URL = "https://hooks.example.org/x"
CONFIG_ERRORS = [
    (hook("ftp://x"), RULE, "4: webhooks.ops.url must be an http:// or https:// URL"),
    (hook("https://u:p@x"), RULE, "4: webhooks.ops.url holds a user or password"),
    (hook(URL, "secret: abc"), RULE, "5: unknown key 'secret' in webhooks.ops"),
    (
        hook(URL, "headers: {Authorization: Bearer abc}"),
        RULE,
        "5: webhooks.ops.headers.Authorization: secrets never live in the configuration",
    ),
    (
        hook(URL, "secret_env: A", "secret_file: f"),
        RULE,
        "6: webhooks.ops: give secret_env or secret_file, not both",
    ),
    (hook(URL, "retries: 11"), RULE, "5: webhooks.ops.retries"),
    (
        hook(URL, "timeout: 10m"),
        RULE,
        "5: webhooks.ops.timeout must be more than 0s and at most 5m",
    ),
    (hook(URL, "auth: hmac"), RULE, "5: webhooks.ops.auth needs secret_env or secret_file"),
    (
        hook(URL),
        "      failed: {webhook: opz}\n",
        "8: job 'export': alerts name unknown webhook 'opz'; did you mean 'ops'?",
    ),
    (
        hook(URL),
        "      failed: {template: t.j2}\n",
        "12: job 'export': alerts.failed needs 'to' (one address or a list) or 'webhook'",
    ),
    (hook(URL), "      failed: {webhook: []}\n", "12: job 'export': alerts.failed.webhook is an"),
    (
        hook(URL),
        "      failed: {to: [], webhook: ops}\n",
        "12: job 'export': alerts.failed.to is an",
    ),
    (
        hook(URL),
        "      failed: {to: [ops@example.org]}\n",
        "8: job 'export': alerts need the top-level 'email:' section",
    ),
]
"""(webhooks, the job's alerts, the problem expected: `LINE: [job 'NAME': ]message`)."""


@pytest.mark.parametrize(("webhooks", "alerts", "expected"), CONFIG_ERRORS)
def test_config_errors_name_the_line(
    tmp_path: Path, webhooks: str, alerts: str, expected: str
) -> None:
    found = problems_of(tmp_path, webhooks, alerts)
    assert any(problem.startswith(expected) for problem in found), found


def test_a_webhook_template_is_checked_against_a_sample_run(tmp_path: Path) -> None:
    (tmp_path / "t.j2").write_text("line one\n{{ run.exit_cod }}\n")
    found = problems_of(
        tmp_path, hook("https://x", "template: t.j2"), "      failed: {webhook: ops}\n"
    )
    (problem,) = found
    assert problem.startswith(f"3: webhooks.ops.template: {tmp_path / 't.j2'}:2: "), found
    assert problem.endswith("'run' has no attribute 'exit_cod'")


def test_validate_reports_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "tuisched.yaml").write_text(
        "settings: {timezone: UTC, state_dir: state}\n"
        "webhooks:\n  ops:\n    url: https://x\n    timeout: 0s\n"
        "jobs:\n  export:\n    command: [/bin/false]\n    schedule: manual\n"
        "    alerts: {failed: {webhook: ops}}\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "tuisched", "-c", str(tmp_path / "tuisched.yaml"), "validate"],
        capture_output=True, text=True, check=False, timeout=30,
    )  # fmt: skip
    assert done.returncode == 1
    assert (
        f"{tmp_path / 'tuisched.yaml'}:5: webhooks.ops.timeout must be more than 0s"
        in done.stdout + done.stderr
    )


def test_the_sample_configuration_shows_a_webhook() -> None:
    from .conftest import SAMPLE

    config = load_config(SAMPLE)
    assert "chat" in config.webhooks
    assert any(rule.webhooks == ("chat",) for rule in config.groups["nightly"].alerts)


def test_a_reload_that_changes_only_a_webhook_is_a_change(tmp_path: Path) -> None:
    from tuisched.domain.config.diff import config_diff

    before = config_with(tmp_path, hook(URL), RULE)
    moved = config_with(tmp_path, hook(URL), RULE, extra="# the webhooks moved a line down\n")
    after = config_with(tmp_path, hook(URL, "retries: 1"), RULE)
    assert config_diff(before, after, NOW).sections == ("webhooks",)
    assert config_diff(before, moved, NOW).empty
    assert config_diff(before, config_with(tmp_path, hook(URL), RULE), NOW).empty


def test_a_one_job_edit_checks_the_webhooks_it_names(tmp_path: Path) -> None:
    from tuisched.runtime import configedits

    config = config_with(tmp_path, hook(URL), RULE)
    text = config.path.read_text()
    blocks = configedits.blocks_of(text, config)
    definition = configedits.job_definition(blocks, config, "other")
    assert definition is not None
    unknown = {**definition, "alerts": {"failed": {"webhook": "opz"}}}
    with pytest.raises(ConfigError, match="alerts name unknown webhook 'opz'"):
        configedits.replace_job(blocks, config, "other", unknown, NOW)
    known = {**definition, "alerts": {"failed": {"webhook": "ops"}}}
    done = configedits.replace_job(blocks, config, "other", known, NOW)
    assert done.config.jobs["other"].alerts[0].webhooks == ("ops",)
    assert done.config.webhooks == config.webhooks


async def test_no_server_is_one_clear_line(tmp_path: Path) -> None:
    async with http_server("ok") as server:
        port = server.port  # closed again below: nothing listens there any more
    url = f"http://127.0.0.1:{port}/hook"
    config = config_with(tmp_path, hook(url, "retries: 0"), RULE)
    async with live(config) as it:
        it.failed()
        (failure,) = await it.recorder.wait_for(AlertFailed)
    assert failure.error == f"webhook ops: cannot connect to 127.0.0.1:{port} (Connection refused)"


def test_a_rule_naming_only_webhooks_sends_no_mail(tmp_path: Path) -> None:
    from tuisched.runtime.handlers.alerts import matching_rules, merge_rules

    (tmp_path / "body.txt").write_text("{{ job.name }}")
    email = (
        "email:\n  smtp: {host: localhost}\n  from: tuisched@example.org\n"
        "  default_template: body.txt\n"
    )
    config = config_with(tmp_path, hook(URL), RULE, extra=email)
    job = config.jobs["export"]
    (rule,) = matching_rules(config, job, job.alerts[0].event)
    assert config.email is not None
    assert merge_rules([rule], config.email) == {}


async def test_never_more_posts_in_flight_than_the_bound(tmp_path: Path) -> None:
    from tuisched.runtime.webhook import WebhookPost

    order: list[str] = []
    async with http_server("hold", "hold", "ok") as server:
        config = config_with(tmp_path, hook(server.url), RULE)
        request = WebhookPost(hook=config.webhooks["ops"], body=b"{}", sent_at=NOW)
        poster = HttpPoster(max_in_flight=2)

        async def post() -> None:
            await poster.post(request)
            order.append(f"delivered, the server saw {len(server.received)}")

        posts = [asyncio.create_task(post()) for _ in range(3)]
        async with asyncio.timeout(10):
            while len(server.received) < 2:
                server.arrived.clear()
                await server.arrived.wait()
        server.release.set()
        await asyncio.gather(*posts)
        await poster.close()
    # The third post waited for a slot: when the first was delivered, the server had seen
    # only the two it held, though all three had been posting since before the release.
    assert order[0] == "delivered, the server saw 2"
    assert len(order) == len(server.received) == 3


async def test_a_silent_webhook_holds_back_only_its_own_posts(tmp_path: Path) -> None:
    from tuisched.runtime.webhook import WebhookPost

    async with http_server("hang") as silent, http_server("ok") as healthy:
        webhooks = hook(healthy.url) + f"  quiet:\n    url: {silent.url}\n"
        config = config_with(tmp_path, webhooks, RULE)
        poster = HttpPoster(max_in_flight=2)
        held = [  # every post the silent webhook may have in flight, hanging
            asyncio.create_task(
                poster.post(WebhookPost(hook=config.webhooks["quiet"], body=b"{}", sent_at=NOW))
            )
            for _ in range(2)
        ]
        async with asyncio.timeout(10):
            while len(silent.received) < 2:
                silent.arrived.clear()
                await silent.arrived.wait()
            ops = WebhookPost(hook=config.webhooks["ops"], body=b"{}", sent_at=NOW)
            await asyncio.gather(*(poster.post(ops) for _ in range(3)))
        assert len(healthy.received) == 3
        for task in held:
            task.cancel()
        await asyncio.gather(*held, return_exceptions=True)
        await poster.close()
