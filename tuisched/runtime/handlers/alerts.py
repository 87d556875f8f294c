"""Alert mail (SPEC R11): listens for final run outcomes and mails the matching rules.

For a run's conclusion (`RunConcluded`: its last attempt, or a dropped retry), the
rules of its job and of every group it belongs to whose event matches are
collected from the current configuration. Rules that use the same template are
merged into one mail to the union of their recipients (in order, without
duplicates), so an address named by the job and by its group gets one mail.

Each mail is delivered by its own task, never awaited on the bus callback:
the template is read (each time, so an edited file applies at once) and
rendered in a worker thread, then sent through the `Mailer`. A failed send is
retried after each of `retry_delays`, publishing `AlertFailed(final=False)`
per failed attempt, `AlertFailed(final=True)` after the last, and `AlertSent`
on success. A template that fails to render is not retried. Nothing here
raises into the bus or blocks the loop.

With an `Outbox`, a rendered mail is kept until it is sent or given up: one
that the stop cuts short is published as `AlertFailed(final=False)` and sent
again by the next start (`resend`), as it was rendered then.
"""

from __future__ import annotations

import asyncio
import email
import logging
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from email.message import EmailMessage
from email.policy import default as default_policy
from pathlib import Path

from tuisched.domain.bus import EventBus, Subscription
from tuisched.domain.errors import TuischedError
from tuisched.domain.events import AlertFailed, AlertSent, RunConcluded
from tuisched.domain.model import AlertEvent, AlertRule, Config, EmailSettings, Job
from tuisched.domain.runs import RunRecord, RunState
from tuisched.domain.templates import (
    TemplateError,
    alert_context,
    plain_data,
    render,
)
from tuisched.runtime.clock import Clock, Deadline
from tuisched.runtime.configfiles import read_template
from tuisched.runtime.handlers.outbox import MAIL, KeptAlert, Outbox
from tuisched.runtime.mail import Mailer, build_message
from tuisched.runtime.threads import Lane, in_thread

log = logging.getLogger(__name__)

_FINISHED_EVENTS: Mapping[RunState, AlertEvent] = {
    RunState.SUCCESS: AlertEvent.SUCCESS,
    RunState.FAILED: AlertEvent.FAILED,
}


def matching_rules(config: Config, job: Job, event: AlertEvent) -> list[AlertRule]:
    """The rules of `job` and of each group it belongs to that listen to `event`, in that order."""
    rules = [rule for rule in job.alerts if rule.event is event]
    for name in job.groups:
        group = config.groups.get(name)
        if group is not None:
            rules += [rule for rule in group.alerts if rule.event is event]
    return rules


def merge_rules(rules: Sequence[AlertRule], email: EmailSettings) -> dict[Path, tuple[str, ...]]:
    """Recipients by body template: rules sharing a template become one mail.

    A rule without a template uses `email.default_template` (rules left with
    no template at all are dropped: validation does not let them through).
    A rule that names only webhooks sends no mail.
    """
    merged: dict[Path, dict[str, None]] = {}
    for rule in rules:
        template = rule.template or email.default_template
        if template is not None and rule.to:
            merged.setdefault(template, {}).update(dict.fromkeys(rule.to))
    return {template: tuple(to) for template, to in merged.items()}


@dataclass(frozen=True, slots=True, kw_only=True)
class _Mail:
    """One alert mail to deliver: everything needed, copied at event time."""

    job: Job
    alert: AlertEvent
    run: RunRecord
    message_data: Mapping[str, object]
    email: EmailSettings
    template: Path
    to: tuple[str, ...]


@dataclass(slots=True, kw_only=True)
class _Delivery:
    """A mail in flight and how many sends it has had."""

    job: str
    run_id: str
    alert: str
    to: tuple[str, ...]
    attempts: int = 0
    kept: str | None = None
    """Its key in the outbox, once kept there."""

    @classmethod
    def of(cls, mail: _Mail) -> _Delivery:
        return cls(job=mail.job.name, run_id=mail.run.run_id, alert=mail.alert.value,
                   to=mail.to)  # fmt: skip


class AlertHandler:
    """Turns final run outcomes into alert mail, with retries, off the bus's path."""

    def __init__(
        self,
        config: Callable[[], Config],
        mailer: Mailer,
        *,
        bus: EventBus,
        hostname: str,
        clock: Clock,
        retry_delays: Sequence[float] = (5.0, 30.0, 120.0),
        outbox: Outbox | None = None,
    ) -> None:
        """Prepare; nothing happens before `subscribe`.

        Args:
            config: returns the current configuration (it changes on reload);
                called once per event.
            mailer: delivers the messages.
            bus: where `AlertSent` and `AlertFailed` are published.
            hostname: shown to templates and used in Message-IDs.
            clock: the time (for events and the Date header) and the retry delays.
            retry_delays: seconds to wait before each retry; a mail gets
                `len(retry_delays) + 1` sends at most.
            outbox: where rendered mails are kept until sent or given up (None:
                a mail the stop cuts short is lost).
        """
        self._config = config
        self._mailer = mailer
        self._bus = bus
        self._hostname = hostname
        self._clock = clock
        self._delays = tuple(retry_delays)
        self._deliveries: dict[asyncio.Task[None], _Delivery] = {}
        self._outbox = outbox

    @property
    def in_flight(self) -> int:
        """Mails being rendered, sent or waiting for a retry."""
        return len(self._deliveries)

    def subscribe(self, bus: EventBus) -> list[Subscription]:
        """Listen for runs' conclusions (`RunConcluded`): success, failed or not_started."""
        return [bus.subscribe(RunConcluded, self._on_concluded)]

    async def drain(self, grace: float) -> None:
        """Wait up to `grace` seconds for mail in flight; cancel the rest.

        Each cancelled mail is published as `AlertFailed`: `final=False` when the
        outbox keeps it for the next start, else `final=True`. Mail for
        events delivered after this call is still started (call it after the
        last run events were flushed, and unsubscribe first to stop for good).
        """
        if not self._deliveries:
            return
        _, pending = await self._clock.wait(set(self._deliveries), max(grace, 0))
        # Copied before cancelling: each task's done callback forgets its delivery.
        cut_short = {task: d for task, d in self._deliveries.items() if task in pending}
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        for task, delivery in cut_short.items():
            if task.cancelled() and self._outbox is not None and delivery.kept in self._outbox:
                self._failed(delivery, "the scheduler stopped: kept for the next start",
                             final=False)  # fmt: skip
            elif task.cancelled():
                self._failed(delivery, "cancelled: the scheduler stopped", final=True)

    def resend(self, kept: KeptAlert) -> None:
        """Send `kept`, a mail an earlier scheduler kept, as it was rendered then."""
        delivery = _Delivery(job=kept.job, run_id=kept.run_id, alert=kept.alert, to=kept.to,
                             kept=kept.key)  # fmt: skip
        self._launch(delivery, self._deliver_kept(delivery, kept.payload))

    # --- from the bus -------------------------------------------------------------

    def _on_concluded(self, event: RunConcluded) -> None:
        if event.run.state is RunState.NOT_STARTED:
            self._alert(event.run, AlertEvent.NOT_STARTED, {})
            return
        alert = _FINISHED_EVENTS.get(event.run.state)
        if alert is not None:
            self._alert(event.run, alert, event.message_data)

    def _alert(self, run: RunRecord, alert: AlertEvent, message_data: Mapping[str, object]) -> None:
        """Start a delivery for each mail `run` calls for. Never raises."""
        try:
            for mail in self._mails(run, alert, message_data):
                self._start(mail)
        except Exception:  # a bug here must not cost the bus its other subscribers
            log.exception("alerts for run %s of job %r failed", run.run_id, run.job)

    def _mails(
        self, run: RunRecord, alert: AlertEvent, message_data: Mapping[str, object]
    ) -> list[_Mail]:
        config = self._config()
        job = config.jobs.get(run.job)
        if config.email is None or job is None:
            return []
        merged = merge_rules(matching_rules(config, job, alert), config.email)
        # Copied now, as plain values: the job's own mapping may change after this event.
        data = plain_data(message_data) if merged else {}
        return [
            _Mail(job=job, alert=alert, run=run, message_data=data,
                  email=config.email, template=template, to=to)
            for template, to in merged.items()
        ]  # fmt: skip

    def _start(self, mail: _Mail) -> None:
        delivery = _Delivery.of(mail)
        self._launch(delivery, self._deliver(delivery, mail))

    def _launch(self, delivery: _Delivery, work: Coroutine[None, None, None]) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            work.close()
            self._failed(delivery, "no event loop to deliver on", final=True)
            return
        task = loop.create_task(work)
        self._deliveries[task] = delivery
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._deliveries.pop(task, None)
        if not task.cancelled() and task.exception() is not None:
            log.error("alert delivery failed unexpectedly", exc_info=task.exception())

    # --- one mail -----------------------------------------------------------------------

    async def _deliver(self, delivery: _Delivery, mail: _Mail) -> None:
        """Render, keep, then send with retries; publish the outcome."""
        deadline = Deadline()  # a render that runs away stops after RENDER_SECONDS
        try:
            message, text = await in_thread(
                Lane.MAIL, self._compose_text, mail, self._clock.now(), deadline
            )
        except asyncio.CancelledError:
            deadline.cancel("cancelled: the scheduler stopped")  # the thread stops rendering
            raise
        except Exception as error:  # a template (or a bug) that fails now would fail again
            self._failed(delivery, _error_text(error), final=True)
            return
        if self._outbox is not None:
            kept = KeptAlert.new(channel=MAIL, at=self._clock.now(), job=delivery.job,
                                 run_id=delivery.run_id, alert=delivery.alert, to=delivery.to,
                                 payload=text)  # fmt: skip
            if self._outbox.keep(kept):
                delivery.kept = kept.key
        await self._send(delivery, message)

    async def _deliver_kept(self, delivery: _Delivery, text: str) -> None:
        """Send a kept mail again (parsed in the mail lane: it may be long)."""
        try:
            message = await in_thread(Lane.MAIL, _parsed, text)
        except Exception as error:  # parsed once already: only a bug gets here
            self._failed(delivery, _error_text(error), final=True)
            return
        await self._send(delivery, message)

    async def _send(self, delivery: _Delivery, message: EmailMessage) -> None:
        """Send with retries; publish the outcome (and forget the kept copy)."""
        while True:
            delivery.attempts += 1
            try:
                await self._mailer.send(message)
            except Exception as error:  # any mailer failure is retried, then reported
                final = delivery.attempts > len(self._delays)
                self._failed(delivery, _error_text(error), final=final)
                if final:
                    return
                await self._clock.sleep(self._delays[delivery.attempts - 1])
            else:
                self._sent(delivery, str(message["Subject"]))
                return

    def _compose_text(
        self, mail: _Mail, now: datetime, deadline: Deadline
    ) -> tuple[EmailMessage, str]:
        """The message for `mail`, and its text when it is to be kept (else empty)."""
        message = self._compose(mail, now, deadline)
        return message, message.as_string() if self._outbox is not None else ""

    def _compose(self, mail: _Mail, now: datetime, deadline: Deadline) -> EmailMessage:
        """The message for `mail` (blocking: reads the template file).

        Raises:
            TemplateError: naming the template that could not be read or rendered.
        """
        context = alert_context(
            job=mail.job, event=mail.alert, run=mail.run, message_data=mail.message_data,
            hostname=self._hostname, tz=mail.job.timezone,
        )  # fmt: skip
        try:
            subject = render(mail.email.subject, context, interrupt=deadline)
        except TemplateError as error:
            raise TemplateError(f"email.subject: {error}") from None
        source = read_template(mail.template)
        try:
            body = render(source, context, interrupt=deadline)
        except TemplateError as error:
            where = mail.template if error.line is None else f"{mail.template}:{error.line}"
            raise TemplateError(f"template {where}: {error.reason}") from None
        return build_message(
            sender=mail.email.sender, to=mail.to, subject=subject, body=body,
            hostname=self._hostname, date=now,
        )  # fmt: skip

    def _sent(self, delivery: _Delivery, subject: str) -> None:
        self._forget(delivery)
        d = delivery
        log.info("alert %s for job %r sent to %s", d.alert, d.job, ", ".join(d.to))
        self._bus.publish(
            AlertSent(
                at=self._clock.now(), job=d.job, run_id=d.run_id, alert=d.alert, to=d.to,
                subject=subject,
            )
        )  # fmt: skip

    def _failed(self, delivery: _Delivery, error: str, *, final: bool) -> None:
        if final:
            self._forget(delivery)
        d = delivery
        then = "giving up" if final else "will retry"
        log.warning(
            "%s alert for job %r to %s not delivered (attempt %d, %s): %s",
            d.alert, d.job, ", ".join(d.to), d.attempts, then, error,
        )  # fmt: skip
        self._bus.publish(
            AlertFailed(
                at=self._clock.now(), job=d.job, run_id=d.run_id, alert=d.alert, to=d.to,
                error=error, attempts=d.attempts, final=final,
            )
        )  # fmt: skip

    def _forget(self, delivery: _Delivery) -> None:
        """The mail is sent or given up: the outbox no longer keeps it."""
        if self._outbox is not None and delivery.kept is not None:
            self._outbox.done(delivery.kept)


def _parsed(text: str) -> EmailMessage:
    """The mail `text` holds (as `EmailMessage.as_string` wrote it)."""
    message = email.message_from_string(text, policy=default_policy)
    assert isinstance(message, EmailMessage)  # noqa: S101  (the default policy makes these)
    return message


def _error_text(error: Exception) -> str:
    """What went wrong, for the event and the log: our errors say it in full already."""
    if isinstance(error, TuischedError):
        return str(error)
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
