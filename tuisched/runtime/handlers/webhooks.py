"""Webhook alerts (issue 16): the same events and rules as alert mail, posted over HTTP.

For a run's conclusion, the rules of its job and of its groups that match the
event (`matching_rules`, as for mail) are collected, and each webhook they
name gets one post, however many rules name it. Each post is its own task,
never awaited on the bus callback: the body (the run's fields as JSON, or
the webhook's template rendered in the sandbox) and the secret are prepared
in the webhook lane's threads, then posted by the `WebhookPoster` on the loop.

A failed post is retried up to the webhook's `retries`, waiting `backoff`,
then twice that, and so on (at most `MAX_BACKOFF`). Each failed attempt
publishes `AlertFailed(channel="webhook", final=False)`, the last one
`final=True`, a delivery `AlertSent(channel="webhook")`: the same events as
mail, so the console and a metrics counter hear of both. A failure is logged
once, when it is given up. A body that cannot be built is not retried.

With an `Outbox`, a built body is kept until it is delivered or given up: a
post that the stop cuts short is published as `AlertFailed(final=False)` and
posted again by the next start (`resend`) to the webhook of that name then
(its URL, headers and secret as configured then; the body as built before).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field

from tuisched.domain.bus import EventBus, Subscription
from tuisched.domain.errors import TuischedError
from tuisched.domain.events import AlertFailed, AlertSent, RunConcluded
from tuisched.domain.model import AlertEvent, Config, Job, WebhookSettings
from tuisched.domain.runs import RunRecord, RunState
from tuisched.domain.templates import TemplateError, alert_context, plain_data, render
from tuisched.domain.text import counted
from tuisched.runtime.clock import Clock, Deadline
from tuisched.runtime.configfiles import read_template
from tuisched.runtime.handlers.alerts import matching_rules
from tuisched.runtime.handlers.outbox import WEBHOOK, KeptAlert, Outbox
from tuisched.runtime.threads import Lane, in_thread
from tuisched.runtime.webhook import WebhookPost, WebhookPoster, read_secret

log = logging.getLogger(__name__)

CHANNEL = "webhook"
MAX_BACKOFF = 300.0
"""Seconds a retry waits at most, however many came before."""

_FINISHED_EVENTS: Mapping[RunState, AlertEvent] = {
    RunState.SUCCESS: AlertEvent.SUCCESS,
    RunState.FAILED: AlertEvent.FAILED,
}


def webhooks_for(config: Config, job: Job, event: AlertEvent) -> list[WebhookSettings]:
    """The webhooks the job's and its groups' rules for `event` name, each once, in order."""
    names = dict.fromkeys(n for rule in matching_rules(config, job, event) for n in rule.webhooks)
    return [config.webhooks[name] for name in names if name in config.webhooks]


def json_body(context: Mapping[str, object]) -> bytes:
    """The default body: the template context (job, event, run, message_data, hostname)."""
    return json.dumps(context, ensure_ascii=False, default=str).encode("utf-8")


def backoff_delay(backoff: float, failed_attempts: int) -> float:
    """Seconds to wait after the `failed_attempts`-th failure: doubling, capped."""
    return float(min(backoff * 2 ** (failed_attempts - 1), MAX_BACKOFF))


@dataclass(frozen=True, slots=True, kw_only=True)
class _Alert:
    """One post to deliver: everything needed, copied at event time."""

    job: Job
    alert: AlertEvent
    run: RunRecord
    message_data: Mapping[str, object]
    hook: WebhookSettings


@dataclass(slots=True, kw_only=True)
class _Post:
    """A post in flight: what its events name, and its key in the outbox once kept."""

    job: str
    run_id: str
    alert: str
    hook: WebhookSettings
    kept: str | None = field(default=None)

    @classmethod
    def of(cls, alert: _Alert) -> _Post:
        return cls(job=alert.job.name, run_id=alert.run.run_id, alert=alert.alert.value,
                   hook=alert.hook)  # fmt: skip


class WebhookHandler:
    """Turns final run outcomes into webhook posts, with retries, off the bus's path."""

    def __init__(
        self,
        config: Callable[[], Config],
        poster: WebhookPoster,
        *,
        bus: EventBus,
        hostname: str,
        clock: Clock,
        secrets: Mapping[str, str],
        backoff: float = 2.0,
        outbox: Outbox | None = None,
    ) -> None:
        """Prepare; nothing happens before `subscribe`.

        Args:
            config: returns the current configuration (read at each event, so a
                reload's webhooks apply at once).
            poster: sends the requests.
            bus: where `AlertSent` and `AlertFailed` are published.
            hostname: shown to templates and in the JSON body.
            clock: the time of events, and the waits between attempts.
            secrets: where `secret_env` variables are looked up (the runtime's
                `Secrets`, taken out of the environment).
            backoff: seconds before the first retry; each next one waits twice as long.
            outbox: where built bodies are kept until delivered or given up (None: a
                post the stop cuts short is lost).
        """
        self._config = config
        self._poster = poster
        self._bus = bus
        self._hostname = hostname
        self._clock = clock
        self._secrets = secrets
        self._backoff = backoff
        self._tasks: dict[asyncio.Task[None], _Post] = {}
        self._outbox = outbox

    @property
    def in_flight(self) -> int:
        """Posts being prepared, sent or waiting for a retry."""
        return len(self._tasks)

    def subscribe(self, bus: EventBus) -> list[Subscription]:
        """Listen for runs' conclusions (`RunConcluded`)."""
        return [bus.subscribe(RunConcluded, self._on_concluded)]

    async def drain(self, grace: float) -> None:
        """Wait up to `grace` seconds for posts in flight; cancel the rest (each one then
        published as `AlertFailed`: `final=False` when the outbox keeps it for the next
        start, else `final=True`), and close the connections."""
        if self._tasks:
            _, pending = await self._clock.wait(set(self._tasks), max(grace, 0))
            cut_short = {task: a for task, a in self._tasks.items() if task in pending}
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            for task, post in cut_short.items():
                if task.cancelled() and self._outbox is not None and post.kept in self._outbox:
                    self._failed(post, "the scheduler stopped: kept for the next start", 0,
                                 final=False)  # fmt: skip
                elif task.cancelled():
                    self._failed(post, "cancelled: the scheduler stopped", 0, final=True)
        await self._poster.close()

    def resend(self, kept: KeptAlert) -> None:
        """Post `kept`, a body an earlier scheduler kept, to the webhook of its name now;
        dropped with a log line when the configuration names no such webhook any more."""
        hook = self._config().webhooks.get(kept.to[0])
        if hook is None:
            log.warning("%s alert for job %r kept for webhook %s dropped: no such webhook now",
                        kept.alert, kept.job, kept.to[0])  # fmt: skip
            if self._outbox is not None:
                self._outbox.done(kept.key)
            return
        post = _Post(job=kept.job, run_id=kept.run_id, alert=kept.alert, hook=hook,
                     kept=kept.key)  # fmt: skip
        self._launch(post, self._deliver_kept(post, kept.payload.encode("utf-8")))

    # --- from the bus -------------------------------------------------------------

    def _on_concluded(self, event: RunConcluded) -> None:
        run = event.run
        alert = (
            AlertEvent.NOT_STARTED
            if run.state is RunState.NOT_STARTED
            else _FINISHED_EVENTS.get(run.state)
        )
        if alert is None:
            return
        try:
            for post in self._alerts(run, alert, event.message_data):
                self._start(post)
        except Exception:  # a bug here must not cost the bus its other subscribers
            log.exception("webhooks for run %s of job %r failed", run.run_id, run.job)

    def _alerts(
        self, run: RunRecord, alert: AlertEvent, message_data: Mapping[str, object]
    ) -> list[_Alert]:
        config = self._config()
        if not config.webhooks:
            return []
        job = config.jobs.get(run.job)
        hooks = webhooks_for(config, job, alert) if job is not None else []
        if job is None or not hooks:
            return []
        data = plain_data(message_data)  # copied now: the job's mapping may change later
        return [
            _Alert(job=job, alert=alert, run=run, message_data=data, hook=hook) for hook in hooks
        ]

    def _start(self, alert: _Alert) -> None:
        post = _Post.of(alert)
        self._launch(post, self._deliver(alert, post))

    def _launch(self, post: _Post, work: Coroutine[None, None, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks[task] = post
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.pop(task, None)
        if not task.cancelled() and task.exception() is not None:
            log.error("webhook delivery failed unexpectedly", exc_info=task.exception())

    # --- one post -----------------------------------------------------------------

    async def _deliver(self, alert: _Alert, post: _Post) -> None:
        """Build the body, keep it, then post with retries; publish the outcome."""
        deadline = Deadline()  # a render that runs away stops after its budget
        try:
            body = await in_thread(Lane.WEBHOOK, self._body, alert, deadline)
        except asyncio.CancelledError:
            deadline.cancel("cancelled: the scheduler stopped")
            raise
        except Exception as error:  # a template that fails now would fail again
            self._failed(post, _error_text(error), 0, final=True)
            return
        if self._outbox is not None:
            kept = KeptAlert.new(channel=WEBHOOK, at=self._clock.now(), job=post.job,
                                 run_id=post.run_id, alert=post.alert, to=(post.hook.name,),
                                 payload=body.decode("utf-8", "replace"))  # fmt: skip
            if self._outbox.keep(kept):
                post.kept = kept.key
        await self._deliver_kept(post, body)

    async def _deliver_kept(self, post: _Post, body: bytes) -> None:
        """Read the secret, then post `body` with retries; publish the outcome."""
        try:
            secret = await in_thread(Lane.WEBHOOK, read_secret, post.hook, self._secrets)
        except Exception as error:  # a secret that fails now would fail again
            self._failed(post, _error_text(error), 0, final=True)
            return
        attempts = 0
        while True:
            attempts += 1
            request = WebhookPost(hook=post.hook, body=body, secret=secret,
                                  sent_at=self._clock.now())  # fmt: skip
            try:
                await self._poster.post(request)
            except Exception as error:  # any failure is retried, then reported
                final = attempts > post.hook.retries
                self._failed(post, _error_text(error), attempts, final=final)
                if final:
                    return
                await self._clock.sleep(backoff_delay(self._backoff, attempts))
            else:
                self._sent(post)
                return

    def _body(self, alert: _Alert, deadline: Deadline) -> bytes:
        """The body for `alert` (blocking: may read and render a template).

        Raises:
            TemplateError: naming the template that could not be read or rendered.
        """
        hook = alert.hook
        context = alert_context(
            job=alert.job, event=alert.alert, run=alert.run, message_data=alert.message_data,
            hostname=self._hostname, tz=alert.job.timezone,
        )  # fmt: skip
        if hook.template is None:
            body = json_body(context)
        else:
            try:
                body = render(read_template(hook.template), context, interrupt=deadline).encode()
            except TemplateError as error:
                where = hook.template if error.line is None else f"{hook.template}:{error.line}"
                raise TemplateError(
                    f"webhook {hook.name}: template {where}: {error.reason}"
                ) from None
        return body

    def _sent(self, post: _Post) -> None:
        self._forget(post)
        log.info("%s alert for job %r posted to webhook %s", post.alert, post.job,
                 post.hook.name)  # fmt: skip
        self._bus.publish(
            AlertSent(
                at=self._clock.now(), job=post.job, run_id=post.run_id, alert=post.alert,
                to=(post.hook.name,), subject="", channel=CHANNEL,
            )
        )  # fmt: skip

    def _failed(self, post: _Post, error: str, attempts: int, *, final: bool) -> None:
        if final:  # logged once per alert, when given up; each attempt is an event
            self._forget(post)
            log.warning(
                "%s alert for job %r not posted (after %s): %s",
                post.alert, post.job, counted(attempts, "attempt"), error,
            )  # fmt: skip
        self._bus.publish(
            AlertFailed(
                at=self._clock.now(), job=post.job, run_id=post.run_id, alert=post.alert,
                to=(post.hook.name,), error=error, attempts=attempts, final=final,
                channel=CHANNEL,
            )
        )  # fmt: skip

    def _forget(self, post: _Post) -> None:
        """The post is delivered or given up: the outbox no longer keeps it."""
        if self._outbox is not None and post.kept is not None:
            self._outbox.done(post.kept)


def _error_text(error: Exception) -> str:
    """What went wrong: our errors say it in full (naming the webhook) already."""
    if isinstance(error, TuischedError):
        return str(error)
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
