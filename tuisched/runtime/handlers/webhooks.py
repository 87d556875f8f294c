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
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tuisched.domain.bus import EventBus, Subscription
from tuisched.domain.errors import TuischedError
from tuisched.domain.events import AlertFailed, AlertSent, RunConcluded
from tuisched.domain.model import AlertEvent, Config, Job, WebhookSettings
from tuisched.domain.runs import RunRecord, RunState
from tuisched.domain.templates import TemplateError, alert_context, plain_data, render
from tuisched.runtime.clock import Clock, Deadline
from tuisched.runtime.configfiles import read_template
from tuisched.runtime.handlers.alerts import matching_rules
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
        """
        self._config = config
        self._poster = poster
        self._bus = bus
        self._hostname = hostname
        self._clock = clock
        self._secrets = secrets
        self._backoff = backoff
        self._tasks: dict[asyncio.Task[None], _Alert] = {}

    @property
    def in_flight(self) -> int:
        """Posts being prepared, sent or waiting for a retry."""
        return len(self._tasks)

    def subscribe(self, bus: EventBus) -> list[Subscription]:
        """Listen for runs' conclusions (`RunConcluded`)."""
        return [bus.subscribe(RunConcluded, self._on_concluded)]

    async def drain(self, grace: float) -> None:
        """Wait up to `grace` seconds for posts in flight; cancel the rest (each one then
        published as `AlertFailed(final=True)`), and close the connections."""
        if self._tasks:
            _, pending = await self._clock.wait(set(self._tasks), max(grace, 0))
            cut_short = {task: a for task, a in self._tasks.items() if task in pending}
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            for task, alert in cut_short.items():
                if task.cancelled():
                    self._failed(alert, "cancelled: the scheduler stopped", 0, final=True)
        await self._poster.close()

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
        task = asyncio.get_running_loop().create_task(self._deliver(alert))
        self._tasks[task] = alert
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.pop(task, None)
        if not task.cancelled() and task.exception() is not None:
            log.error("webhook delivery failed unexpectedly", exc_info=task.exception())

    # --- one post -----------------------------------------------------------------

    async def _deliver(self, alert: _Alert) -> None:
        """Prepare, then post with retries; publish the outcome."""
        deadline = Deadline()  # a render that runs away stops after its budget
        try:
            request = await in_thread(Lane.WEBHOOK, self._prepare, alert, deadline)
        except asyncio.CancelledError:
            deadline.cancel("cancelled: the scheduler stopped")
            raise
        except Exception as error:  # a template or secret that fails now would fail again
            self._failed(alert, _error_text(error), 0, final=True)
            return
        attempts = 0
        while True:
            attempts += 1
            try:
                await self._poster.post(request)
            except Exception as error:  # any failure is retried, then reported
                final = attempts > alert.hook.retries
                self._failed(alert, _error_text(error), attempts, final=final)
                if final:
                    return
                await self._clock.sleep(backoff_delay(self._backoff, attempts))
            else:
                self._sent(alert)
                return

    def _prepare(self, alert: _Alert, deadline: Deadline) -> WebhookPost:
        """The request for `alert` (blocking: reads the template and the secret).

        Raises:
            TemplateError: naming the template that could not be read or rendered.
            WebhookError: the secret cannot be read.
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
        return WebhookPost(hook=hook, body=body, secret=read_secret(hook, self._secrets))

    def _sent(self, alert: _Alert) -> None:
        log.info("%s alert for job %r posted to webhook %s", alert.alert, alert.job.name,
                 alert.hook.name)  # fmt: skip
        self._bus.publish(
            AlertSent(
                at=self._clock.now(), job=alert.job.name, run_id=alert.run.run_id,
                alert=alert.alert.value, to=(alert.hook.name,), subject="", channel=CHANNEL,
            )
        )  # fmt: skip

    def _failed(self, alert: _Alert, error: str, attempts: int, *, final: bool) -> None:
        if final:  # logged once per alert, when given up; each attempt is an event
            log.warning(
                "%s alert for job %r not posted (after %d attempt(s)): %s",
                alert.alert, alert.job.name, attempts, error,
            )  # fmt: skip
        self._bus.publish(
            AlertFailed(
                at=self._clock.now(), job=alert.job.name, run_id=alert.run.run_id,
                alert=alert.alert.value, to=(alert.hook.name,), error=error,
                attempts=attempts, final=final, channel=CHANNEL,
            )
        )  # fmt: skip


def _error_text(error: Exception) -> str:
    """What went wrong: our errors say it in full (naming the webhook) already."""
    if isinstance(error, TuischedError):
        return str(error)
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
