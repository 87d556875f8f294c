"""Readers for the configuration's `settings:` and `email:` sections and for alert rules."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING
from urllib.parse import SplitResult, urlsplit

from tuisched.domain.config.keys import NODE_NAME
from tuisched.domain.config.listen import parse_listen
from tuisched.domain.config.values import Values
from tuisched.domain.config.yamlsource import Entry, Map, Scalar, Value
from tuisched.domain.errors import TemplateError
from tuisched.domain.model import (
    AlertEvent,
    AlertRule,
    ClusterSettings,
    EmailSettings,
    MetricsSettings,
    Retention,
    Security,
    Settings,
    SmtpSettings,
    WebhookAuth,
    WebhookSettings,
)
from tuisched.domain.schedule.duration import format_duration
from tuisched.domain.templates import syntax_problem

if TYPE_CHECKING:
    from tuisched.domain.config.host import ConfigHost

SETTINGS_KEYS = frozenset(
    {"timezone", "max_workers", "shutdown_grace", "state_dir", "history", "cluster", "auto_reload",
     "output_max", "metrics", "history_retention"}
)  # fmt: skip
OUTPUT_MAX_RANGE = (1024**2, 1024**4)
"""`settings.output_max` from 1 MiB to 1 TiB."""
CLUSTER_KEYS = frozenset(
    {"database", "password_env", "password_file", "name", "heartbeat", "lease", "poll",
     "dead_after", "steal_after"}
)  # fmt: skip
EMAIL_KEYS = frozenset({"smtp", "from", "subject", "default_template"})
SMTP_KEYS = frozenset(
    {"host", "port", "security", "username_env", "password_env", "password_file", "timeout"}
)
ALERT_KEYS = frozenset({"to", "template", "webhook"})
METRICS_KEYS = frozenset({"listen", "max_lag"})
_DEFAULT_PORTS = {Security.NONE: 25, Security.STARTTLS: 587, Security.TLS: 465}


class Sections:
    """Reads the sections that are not jobs or groups, recording problems in `values`."""

    def __init__(self, values: Values, host: ConfigHost) -> None:
        self.values = values
        self.host = host

    # --- settings -------------------------------------------------------------

    def settings(self, entry: Entry | None) -> Settings | None:
        fields: dict[str, Entry] = {}
        if entry is not None:
            read = self.values.mapping(entry.value, "settings", SETTINGS_KEYS)
            if read is None:
                return None
            fields = read
        before = len(self.values.problems)
        v = self.values
        kwargs: dict[str, object] = {
            "timezone": v.opt(fields, "timezone", v.zone, "settings.timezone")
            or self.host.system_timezone(),
            "state_dir": v.opt(fields, "state_dir", v.path, "settings.state_dir")
            or self.host.default_state_dir(),
        }
        v.put(
            kwargs, fields, "max_workers", lambda x, w: v.integer(x, w, minimum=1, maximum=10_000)
        )
        v.put(kwargs, fields, "shutdown_grace", v.duration)
        v.put(kwargs, fields, "history", self._database_url)
        v.put(kwargs, fields, "auto_reload", v.boolean)
        low, high = OUTPUT_MAX_RANGE
        v.put(kwargs, fields, "output_max", lambda x, w: v.size(x, w, minimum=low, maximum=high))
        v.put(kwargs, fields, "cluster", self._cluster)
        v.put(kwargs, fields, "metrics", self._metrics)
        v.put(kwargs, fields, "history_retention", lambda x, w: read_retention(v, x, w))
        if len(self.values.problems) > before:
            return None
        cluster, name = kwargs.get("cluster"), self.host.node_name()
        if isinstance(cluster, ClusterSettings) and name:
            if not NODE_NAME.fullmatch(name):
                line = entry.value.line if entry is not None else 0
                self.values.problem(line, f"TUISCHED_NODE_NAME '{name}' is not a node name: "
                                    "letters, digits, '.', '_' and '-', at most 63")  # fmt: skip
                return None
            kwargs["cluster"] = replace(cluster, name=name)
            kwargs["state_dir"] = Path(str(kwargs["state_dir"])) / "nodes" / name
        kwargs["lines"] = {key: given.key_line for key, given in fields.items()}
        return Settings(**kwargs)  # type: ignore[arg-type]

    def _cluster(self, value: Value, what: str) -> ClusterSettings | None:
        what = f"settings.{what}"
        v = self.values
        fields = self.values.mapping(value, what, CLUSTER_KEYS)
        if fields is None:
            return None
        if "database" not in fields:
            self.values.problem(value.line, f"{what} needs 'database' (a postgresql:// URL)")
            return None
        kwargs: dict[str, object] = {}
        before = len(self.values.problems)
        v.put(kwargs, fields, "database", self._database_url, prefix=what)
        v.put(kwargs, fields, "password_env", self.values.env_name, prefix=what)
        v.put(kwargs, fields, "password_file", v.path, prefix=what)
        v.put(kwargs, fields, "name", self.values.text, prefix=what)
        for key in ("heartbeat", "lease", "poll", "dead_after", "steal_after"):
            v.put(kwargs, fields, key, self.values.duration, prefix=what)
        database = kwargs.get("database")
        if isinstance(database, str) and not database.startswith("postgresql"):
            self.values.problem(
                fields["database"].value.line, f"{what}.database must be postgresql://"
            )
        if "password_env" in fields and "password_file" in fields:
            self.values.problem(
                fields["password_file"].value.line,
                f"{what}: give password_env or password_file, not both",
            )
        self._cluster_timing(kwargs, fields, what)
        if len(self.values.problems) > before:
            return None
        return ClusterSettings(**kwargs)  # type: ignore[arg-type]

    def _cluster_timing(self, kwargs: dict[str, object], fields: dict[str, Entry],
                        what: str) -> None:  # fmt: skip
        """A lease must outlast three heartbeats (a node fences itself after lease - 2 x
        heartbeat without one: that must be longer than one heartbeat), and every
        interval must be positive."""
        defaults = ClusterSettings(database="")
        timing = {
            key: kwargs.get(key, getattr(defaults, key))
            for key in ("heartbeat", "lease", "poll", "dead_after", "steal_after")
        }
        for key, value in timing.items():
            if key in fields and isinstance(value, timedelta) and value <= timedelta(0):
                self.values.problem(fields[key].value.line, f"{what}.{key} must be positive")
        heartbeat, lease = timing["heartbeat"], timing["lease"]
        if (
            isinstance(heartbeat, timedelta) and isinstance(lease, timedelta)
            and heartbeat > timedelta(0) and lease <= 3 * heartbeat
        ):  # fmt: skip
            where = fields.get("lease") or fields.get("heartbeat")
            line = where.value.line if where is not None else 0
            self.values.problem(
                line, f"{what}.lease ({format_duration(lease)}) must be more than three heartbeats "
                f"({format_duration(3 * heartbeat)}): a node stops claiming after lease - 2 x "
                "heartbeat without one"
            )  # fmt: skip

    def _database_url(self, value: Value, what: str) -> str | None:
        url = self.values.text(value, what)
        if url is None:
            return None
        parts = _split_url(self.values, url, value, what)
        if parts is None:
            return None
        if parts.scheme.split("+")[0] not in ("sqlite", "postgresql", "postgres"):
            self.values.problem(value.line, f"{what} must be a sqlite:// or postgresql:// URL")
            return None
        if parts.password:
            self.values.problem(
                value.line,
                f"{what} holds a password; name it with password_env or password_file instead",
            )
            return None
        return url

    # --- email -------------------------------------------------------------

    def email(self, entry: Entry) -> EmailSettings | None:
        v = self.values
        fields = self.values.mapping(entry.value, "email", EMAIL_KEYS)
        if fields is None:
            return None
        for key in ("smtp", "from"):
            if key not in fields:
                self.values.problem(entry.value.line, f"email needs '{key}'")
        if "smtp" not in fields or "from" not in fields:
            return None
        before = len(self.values.problems)
        smtp = self._smtp(fields["smtp"].value)
        sender = self.values.text(fields["from"].value, "email.from")
        if sender is not None:
            sender = self.values.address(sender, fields["from"].value.line, "email.from")
        kwargs: dict[str, object] = {"smtp": smtp, "sender": sender}
        v.put(kwargs, fields, "subject", self._template_text, prefix="email")
        v.put(kwargs, fields, "default_template", self._template_file, prefix="email")
        if len(self.values.problems) > before:
            return None
        return EmailSettings(**kwargs)  # type: ignore[arg-type]

    def _smtp(self, value: Value) -> SmtpSettings | None:
        if isinstance(value, Map) and {"password", "username"} & set(value.entries):
            key = "password" if "password" in value.entries else "username"
            self.values.problem(
                value.entries[key].key_line,
                f"email.smtp.{key}: secrets never live in the configuration; "
                f"name an environment variable with {key}_env instead",
            )
        fields = self.values.mapping(value, "email.smtp", SMTP_KEYS - {"password", "username"})
        if fields is None:
            return None
        if "host" not in fields:
            self.values.problem(value.line, "email.smtp needs 'host'")
            return None
        kwargs: dict[str, object] = {}
        v = self.values
        v.put(kwargs, fields, "host", v.text, prefix="email.smtp")
        v.put(kwargs, fields, "security", self.values.enum(Security), prefix="email.smtp")
        port = lambda x, w: v.integer(x, w, minimum=1, maximum=65535)  # noqa: E731
        v.put(kwargs, fields, "port", port, prefix="email.smtp")
        v.put(kwargs, fields, "username_env", v.env_name, prefix="email.smtp")
        v.put(kwargs, fields, "password_env", v.env_name, prefix="email.smtp")
        v.put(kwargs, fields, "password_file", v.path, prefix="email.smtp")
        v.put(kwargs, fields, "timeout", v.duration, prefix="email.smtp")
        if None in kwargs.values():
            return None
        security = kwargs.get("security", Security.NONE)
        kwargs.setdefault("port", _DEFAULT_PORTS[Security(str(security))])
        return SmtpSettings(**kwargs)  # type: ignore[arg-type]

    # --- alerts --------------------------------------------------------------

    def alerts(self, value: Value) -> tuple[AlertRule, ...] | None:
        events = frozenset(event.value for event in AlertEvent)
        fields = self.values.mapping(value, "alerts", events)
        if fields is None:
            return None
        rules = []
        for event, entry in fields.items():
            rule = self._alert(AlertEvent(event), entry.value)
            if rule is not None:
                rules.append(rule)
        return tuple(rules) if len(rules) == len(fields) else None

    def _alert(self, event: AlertEvent, value: Value) -> AlertRule | None:
        what = f"alerts.{event}"
        fields = self.values.mapping(value, what, ALERT_KEYS)
        if fields is None:
            return None
        if "to" not in fields and "webhook" not in fields:
            self.values.problem(
                value.line, f"{what} needs 'to' (one address or a list) or 'webhook' (a name)"
            )
            return None
        addresses = self.values.opt(fields, "to", self.values.string_list, f"{what}.to")
        checked = [self.values.address(text, line, f"{what}.to") for text, line in addresses or []]
        template = self.values.opt(fields, "template", self._template_file, f"{what}.template")
        hooks = self.values.opt(fields, "webhook", self.values.string_list, f"{what}.webhook")
        for key, found in (("to", addresses), ("webhook", hooks)):
            if key in fields and found == []:  # an empty list names nobody: say so
                self.values.problem(fields[key].value.line, f"{what}.{key} is an empty list")
        if (
            ("to" in fields and not addresses) or None in checked
            or ("template" in fields and template is None)
            or ("webhook" in fields and not hooks)
        ):  # fmt: skip
            return None
        return AlertRule(
            event=event, to=tuple(a for a, _ in addresses or []), template=template,
            webhooks=tuple(dict.fromkeys(name for name, _ in hooks or [])),
        )  # fmt: skip

    def _template_file(self, value: Value, what: str) -> Path | None:
        v = self.values
        path = v.path(value, what)
        if path is None:
            return None
        try:
            source = self.host.read_template(path)
        except TemplateError as error:
            self.values.problem(value.line, f"{what}: {error}")
            return None
        problem = syntax_problem(source)
        if problem is not None:
            line, message = problem
            self.values.problem(value.line, f"{what}: {path}:{line}: {message}")
            return None
        return path

    def _template_text(self, value: Value, what: str) -> str | None:
        text = self.values.text(value, what)
        problem = syntax_problem(text) if text is not None else None
        if problem is not None:
            self.values.problem(value.line, f"{what}: {problem[1]}")
            return None
        return text

    # --- settings.metrics (SPEC R24) -----------------------------------------------

    def _metrics(self, value: Value, what: str) -> MetricsSettings | None:
        """`settings.metrics: {listen: HOST:PORT, max_lag: 2s}`; listen is required."""
        what = f"settings.{what}"
        fields = self.values.mapping(value, what, METRICS_KEYS)
        if fields is None:
            return None
        if "listen" not in fields:
            self.values.problem(value.line, f"{what} needs 'listen' (for example 127.0.0.1:9464)")
            return None
        before = len(self.values.problems)
        listen = self.values.text(fields["listen"].value, f"{what}.listen")
        max_lag = self.values.opt(fields, "max_lag", self.values.duration, f"{what}.max_lag")
        if listen is None or len(self.values.problems) > before:
            return None
        try:
            host, port = parse_listen(listen)
        except ValueError as error:
            self.values.problem(fields["listen"].value.line, f"{what}.listen: {error}")
            return None
        if max_lag is not None and max_lag <= timedelta(0):
            self.values.problem(fields["max_lag"].value.line, f"{what}.max_lag must be positive")
            return None
        if max_lag is None:
            return MetricsSettings(host=host, port=port)
        return MetricsSettings(host=host, port=port, max_lag=max_lag)


# --- webhooks (issue 16, item 4) ------------------------------------------------------

WEBHOOK_KEYS = frozenset(
    {"url", "headers", "secret_env", "secret_file", "auth", "template", "content_type",
     "timeout", "retries"}
)  # fmt: skip
WEBHOOK_RETRIES_MAX = 10
WEBHOOK_TIMEOUT_MAX = timedelta(minutes=5)
_SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "x-api-key"})
"""Headers that carry credentials: refused in `headers`, which is not kept secret."""
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


class WebhookSections:
    """Reads the top-level `webhooks:` section, recording problems in `values`."""

    def __init__(self, sections: Sections) -> None:
        self.values = sections.values
        self.sections = sections

    def webhooks(self, entry: Entry) -> dict[str, WebhookSettings]:
        """Each well-formed webhook by name; the others leave problems behind."""
        value = entry.value
        if isinstance(value, Scalar) and value.is_null:
            return {}
        if not isinstance(value, Map):
            self.values.problem(value.line, "webhooks must map each webhook's name to its url")
            return {}
        found = {}
        for name, item in value.entries.items():
            hook = self._webhook(name, item)
            if hook is not None:
                found[name] = hook
        return found

    def _webhook(self, name: str, entry: Entry) -> WebhookSettings | None:
        what = f"webhooks.{name}"
        v = self.values
        fields = v.mapping(entry.value, what, WEBHOOK_KEYS)
        if fields is None:
            return None
        if "url" not in fields:
            v.problem(entry.key_line, f"{what} needs 'url' (http:// or https://)")
            return None
        before = len(v.problems)
        kwargs: dict[str, object] = {"name": name, "line": entry.key_line}
        v.put(kwargs, fields, "url", self._url, prefix=what)
        v.put(kwargs, fields, "headers", self._headers, prefix=what)
        v.put(kwargs, fields, "secret_env", v.env_name, prefix=what)
        v.put(kwargs, fields, "secret_file", v.path, prefix=what)
        v.put(kwargs, fields, "auth", v.enum(WebhookAuth), prefix=what)
        v.put(kwargs, fields, "template", self.sections._template_file, prefix=what)
        v.put(kwargs, fields, "content_type", self._content_type, prefix=what)
        v.put(kwargs, fields, "timeout", self._timeout, prefix=what)
        retries = lambda x, w: v.integer(x, w, minimum=0, maximum=WEBHOOK_RETRIES_MAX)  # noqa: E731
        v.put(kwargs, fields, "retries", retries, prefix=what)
        if "secret_env" in fields and "secret_file" in fields:
            v.problem(fields["secret_file"].key_line,
                      f"{what}: give secret_env or secret_file, not both")  # fmt: skip
        if "auth" in fields and "secret_env" not in fields and "secret_file" not in fields:
            v.problem(fields["auth"].key_line, f"{what}.auth needs secret_env or secret_file")
        if len(v.problems) > before:
            return None
        return WebhookSettings(**kwargs)  # type: ignore[arg-type]

    def _url(self, value: Value, what: str) -> str | None:
        url = self.values.text(value, what)
        if url is None:
            return None
        parts = _split_url(self.values, url, value, what)
        if parts is None:
            return None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            self.values.problem(value.line, f"{what} must be an http:// or https:// URL")
            return None
        if parts.username or parts.password:
            self.values.problem(
                value.line, f"{what} holds a user or password; name the secret with "
                "secret_env or secret_file instead"
            )  # fmt: skip
            return None
        return url

    def _headers(self, value: Value, what: str) -> Mapping[str, str] | None:
        fields = value.entries if isinstance(value, Map) else None
        if fields is None:
            self.values.problem(value.line, f"{what} must map header names to values")
            return None
        headers: dict[str, str] = {}
        for key, entry in fields.items():
            text = self.values.text(entry.value, f"{what}.{key}")
            if not _HEADER_NAME.fullmatch(key):
                self.values.problem(entry.key_line, f"{what}: '{key}' is not a header name")
            elif key.lower() in _SECRET_HEADERS:
                self.values.problem(
                    entry.key_line, f"{what}.{key}: secrets never live in the configuration; "
                    "name them with secret_env or secret_file"
                )  # fmt: skip
            elif text is not None and ("\n" in text or "\r" in text):
                self.values.problem(entry.value.line, f"{what}.{key} must be one line")
            elif text is not None:
                headers[key] = text
        return MappingProxyType(headers) if len(headers) == len(fields) else None

    def _content_type(self, value: Value, what: str) -> str | None:
        text = self.values.text(value, what)
        if text is not None and ("\n" in text or "\r" in text or "/" not in text):
            self.values.problem(value.line, f"{what} must be a media type such as text/plain")
            return None
        return text

    def _timeout(self, value: Value, what: str) -> timedelta | None:
        timeout = self.values.duration(value, what)
        if timeout is not None and not timedelta(0) < timeout <= WEBHOOK_TIMEOUT_MAX:
            self.values.problem(value.line, f"{what} must be more than 0s and at most 5m")
            return None
        return timeout


# --- history retention (issue 16) ---------------------------------------------------------

RETENTION_KEYS = frozenset({"days", "runs_per_job"})
RETENTION_MAX_DAYS = 100 * 366
"""`settings.history_retention.days` at most (a century)."""


def read_retention(v: Values, value: Value, what: str) -> Retention | None:
    """`settings.history_retention`: `days` and `runs_per_job`, each optional, each >= 1."""
    what = f"settings.{what}"
    fields = v.mapping(value, what, RETENTION_KEYS)
    if fields is None:
        return None
    kwargs: dict[str, object] = {}
    before = len(v.problems)
    v.put(kwargs, fields, "days", lambda x, w: v.integer(x, w, minimum=1,
          maximum=RETENTION_MAX_DAYS), prefix=what)  # fmt: skip
    v.put(kwargs, fields, "runs_per_job", lambda x, w: v.integer(x, w, minimum=1), prefix=what)
    if len(v.problems) > before:
        return None
    return Retention(**kwargs)  # type: ignore[arg-type]


def _split_url(values: Values, url: str, value: Value, what: str) -> SplitResult | None:
    """`url`'s parts, or None (the problem said) when it cannot be read as a URL."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (a port that is not a number is found only when read)
    except ValueError as error:  # `http://[::1`, a port of letters
        values.problem(value.line, f"{what} is not a URL: {error}")
        return None
    return parts
