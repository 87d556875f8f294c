"""A runtime's alerts: mail, webhooks, and the alerts kept for the next start.

Mail follows `email:` (a reload that changes it retires the old mailer, whose
mails in flight go on and are drained at stop); webhooks read the live
configuration at each event. The scheduler that owns its state directory
keeps the alerts not delivered yet in an outbox there, and sends those the
previous scheduler kept through today's mailer and webhooks.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path

from tuisched.domain.bus import EventBus, Subscription
from tuisched.domain.model import Config
from tuisched.domain.text import counted
from tuisched.runtime.clock import Clock
from tuisched.runtime.handlers.alerts import AlertHandler
from tuisched.runtime.handlers.outbox import MAIL, KeptAlert, Outbox
from tuisched.runtime.handlers.webhooks import WebhookHandler
from tuisched.runtime.mail import SmtpMailer
from tuisched.runtime.secrets import Secrets, secret_names
from tuisched.runtime.webhook import HttpPoster

log = logging.getLogger(__name__)


class Alerting:
    """The mailer and webhooks of one runtime, and its outbox of alerts kept."""

    def __init__(
        self,
        config: Callable[[], Config],
        *,
        bus: EventBus,
        clock: Clock,
        node: str,
        secrets: Secrets,
    ) -> None:
        self._config = config
        self._bus = bus
        self._clock = clock
        self._node = node
        self._secrets = secrets
        self._alerts: AlertHandler | None = None
        self._alert_subscriptions: list[Subscription] = []
        self._retired_alerts: list[AlertHandler] = []
        """Handlers replaced by a reload that changed `email:`; drained at stop."""
        self._webhooks: WebhookHandler | None = None
        """Posts alerts to `webhooks:` (reads the live configuration at each event)."""
        self._outbox: Outbox | None = None
        """Alerts not delivered yet, kept in the state directory for the next start (the
        scheduler that owns the state directory only)."""

    async def open_outbox(self, path: Path) -> list[KeptAlert]:
        """Keep undelivered alerts in `path`; the alerts the previous scheduler kept."""
        self._outbox = Outbox(path, self._clock)
        return await self._outbox.load()

    async def close_outbox(self) -> None:
        """Close the outbox (after the drain: it keeps what is left)."""
        if self._outbox is not None:
            await self._outbox.close()
            self._outbox = None

    def start(self, kept: list[KeptAlert]) -> None:
        """Send alerts from now on, and the `kept` ones of the previous scheduler."""
        self._start_mail()
        self._start_webhooks()
        self._resend(kept)

    def email_changed(self) -> None:
        """A reload changed `email:`: a new mailer from now on (the old one's mails in
        flight go on, drained at stop)."""
        for subscription in self._alert_subscriptions:
            subscription.unsubscribe()
        if self._alerts is not None:
            self._retired_alerts.append(self._alerts)
        self._alerts = None
        self._start_mail()

    async def drain(self, grace: float) -> None:
        """Let the last runs' mails go out (bounded by `grace`), then report what is left."""
        handlers: list[AlertHandler | WebhookHandler] = [
            *self._retired_alerts, *([self._alerts] if self._alerts else []),
            *([self._webhooks] if self._webhooks else []),
        ]  # fmt: skip
        if not handlers:
            return
        self._bus.flush()  # the last conclusions start their mails and posts
        await asyncio.gather(*(handler.drain(grace) for handler in handlers))
        self._bus.flush()  # AlertSent / AlertFailed reach the log and the console

    def _start_mail(self) -> None:
        config = self._config()
        if config.email is None:
            return
        self._secrets.take(secret_names(config))
        mailer = SmtpMailer(config.email.smtp, env=self._secrets, local_hostname=self._node)
        self._alerts = AlertHandler(
            self._config,
            mailer,
            bus=self._bus,
            hostname=self._node,
            clock=self._clock,
            outbox=self._outbox,
        )
        self._alert_subscriptions = self._alerts.subscribe(self._bus)

    def _start_webhooks(self) -> None:
        """Post alerts to the configuration's webhooks (now and after any reload)."""
        self._webhooks = WebhookHandler(
            self._config, HttpPoster(), bus=self._bus, hostname=self._node,
            clock=self._clock, secrets=self._secrets, outbox=self._outbox,
        )  # fmt: skip
        self._webhooks.subscribe(self._bus)

    def _resend(self, kept: list[KeptAlert]) -> None:
        """Send the alerts the previous scheduler kept, through today's mailer and webhooks."""
        if kept:
            log.info("sending %s kept since before the last stop", counted(len(kept), "alert"))
        for alert in kept:
            if alert.channel != MAIL:
                assert self._webhooks is not None  # noqa: S101  (started with the mailer)
                self._webhooks.resend(alert)
            elif self._alerts is not None:
                self._alerts.resend(alert)
            else:
                log.warning("%s alert mail for job %r kept since before the last stop "
                            "dropped: email is not configured now",
                            alert.alert, alert.job)  # fmt: skip
                if self._outbox is not None:
                    self._outbox.done(alert.key)
