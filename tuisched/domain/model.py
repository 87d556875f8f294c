"""The typed, frozen configuration model: what a job, a group and the settings are.

Everything here is built by `tuisched.domain.config.config` from the YAML file and is
immutable afterwards. Date-times are always time-zone aware: a schedule's
`start`/`stop` carry the job's zone (`tz`) with the right `fold`.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from tuisched.domain.errors import UnknownJobError

if TYPE_CHECKING:
    from tuisched.domain.schedule.cron import CronExpr


def _frozen_map() -> Mapping[str, str]:
    return MappingProxyType({})


class Unit(enum.StrEnum):
    """Step unit of an `every` schedule."""

    SECOND = "second"
    MINUTE = "minute"
    HOUR = "hour"
    DAY = "day"
    WEEK = "week"
    MONTH = "month"
    YEAR = "year"


class Overlap(enum.StrEnum):
    """What happens when a slot comes while the previous run still runs."""

    ALLOW = "allow"
    SKIP = "skip"
    QUEUE = "queue"


class Misfire(enum.StrEnum):
    """What happens to slots missed while the scheduler was not running."""

    SKIP = "skip"
    """Record them as MISSED; never make them up (the default)."""
    ONCE = "once"
    """Record them as MISSED, and run once at start to catch up."""


class Outcome(enum.StrEnum):
    """Which outcome of an upstream job starts an `after` dependant."""

    SUCCESS = "success"
    FAILURE = "failure"
    BOTH = "both"


class AlertEvent(enum.StrEnum):
    """Run events an alert rule can listen to."""

    SUCCESS = "success"
    FAILED = "failed"
    NOT_STARTED = "not_started"


class Security(enum.StrEnum):
    """How the SMTP connection is protected."""

    NONE = "none"
    STARTTLS = "starttls"
    TLS = "tls"


# --- schedules -------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class EverySchedule:
    """`every: "<n> <unit>"` from `start`, optionally until `stop`.

    Second, minute and hour steps are exact elapsed time; day, week, month and
    year steps are calendar steps that keep the wall-clock time of `start`.
    """

    step: int
    unit: Unit
    start: datetime
    stop: datetime | None
    tz: ZoneInfo


@dataclass(frozen=True, slots=True, kw_only=True)
class CronSchedule:
    """`cron: "<expr>"` with crontab(5) semantics, optionally within start/stop."""

    expr: CronExpr
    start: datetime | None
    stop: datetime | None
    tz: ZoneInfo


@dataclass(frozen=True, slots=True, kw_only=True)
class AtSchedule:
    """`at: <date-time>`: one run."""

    at: datetime
    tz: ZoneInfo


@dataclass(frozen=True, slots=True, kw_only=True)
class ManualSchedule:
    """`schedule: manual`: the job only ever runs by hand (or as a dependant's target)."""

    tz: ZoneInfo


Schedule = EverySchedule | CronSchedule | AtSchedule | ManualSchedule


# --- job kinds -------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandSpec:
    """An external program: `argv` without a shell, or `shell` via `/bin/sh -c`."""

    argv: tuple[str, ...] | None = None
    shell: str | None = None
    cwd: Path | None = None
    env: Mapping[str, str] = field(default_factory=_frozen_map)
    """Merged over the scheduler's own environment."""
    success_codes: frozenset[int] = frozenset({0})

    def describe(self) -> str:
        """The command as an operator would type it."""
        if self.shell is not None:
            return self.shell
        return " ".join(self.argv or ())


@dataclass(frozen=True, slots=True, kw_only=True)
class PythonSpec:
    """An internal job: `package.module:attr`, a callable or a run/stop class."""

    target: str
    in_thread: bool = False
    """`isolation: thread`: run in a thread of the scheduler (fast, not contained) instead of
    a child process of its own (the default)."""
    line: int = field(default=0, compare=False)
    """Line of the `python:` value in the configuration file (0: not from a file)."""

    def describe(self) -> str:
        """The import target."""
        return self.target


@dataclass(frozen=True, slots=True, kw_only=True)
class WaitForSpec:
    """A sensor that succeeds when a file matching `path` (a path or glob) exists."""

    path: str

    def describe(self) -> str:
        """The watched path or glob."""
        return self.path


JobKind = CommandSpec | PythonSpec | WaitForSpec


# --- dependencies and alerts -------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class After:
    """Trigger dependency: start once `job` finishes with a matching outcome."""

    job: str
    on: Outcome = Outcome.SUCCESS
    delay: timedelta = timedelta(0)


@dataclass(frozen=True, slots=True, kw_only=True)
class AlertRule:
    """Send mail to `to` when `event` happens, rendered from `template`."""

    event: AlertEvent
    to: tuple[str, ...]
    template: Path | None = None
    """None means `email.default_template`."""
    webhooks: tuple[str, ...] = ()
    """Names of `webhooks:` entries to post to as well (`to` may then be empty)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Job:
    """A job definition as the configuration states it."""

    name: str
    kind: JobKind
    schedule: Schedule | None
    """None exactly when the job is triggered by `after`."""
    after: After | None = None
    timezone: ZoneInfo
    description: str = ""
    priority: int = 0
    timeout: timedelta | None = None
    overlap: Overlap = Overlap.SKIP
    retries: int = 0
    retry_delay: timedelta = timedelta(0)
    enabled: bool = True
    grace: timedelta = timedelta(seconds=60)
    misfire: Misfire = Misfire.SKIP
    requires: tuple[str, ...] = ()
    """Upstream jobs whose cross-cycle slot must have succeeded (R9); `self` for the job itself."""
    wait_timeout: timedelta | None = None
    recover: bool = False
    alerts: tuple[AlertRule, ...] = ()
    groups: tuple[str, ...] = ()
    """Groups the job belongs to, from the `groups:` section."""
    line: int = 0
    """Line of the job's name in the configuration file."""
    jitter: timedelta = timedelta(0)
    """Most a run may start after its slot, spread per slot (`tuisched.domain.schedule.jitter`)."""

    @property
    def kind_name(self) -> str:
        """`command`, `python` or `wait_for`."""
        match self.kind:
            case CommandSpec():
                return "command"
            case PythonSpec():
                return "python"
            case WaitForSpec():
                return "wait_for"


@dataclass(frozen=True, slots=True, kw_only=True)
class Group:
    """A named set of jobs sharing alerts, paused and resumed together."""

    name: str
    jobs: tuple[str, ...]
    alerts: tuple[AlertRule, ...] = ()
    line: int = 0


# --- top-level sections ------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class SmtpSettings:
    """How to reach the SMTP server; credentials come from the environment or files."""

    host: str
    port: int
    security: Security = Security.NONE
    username_env: str | None = None
    password_env: str | None = None
    password_file: Path | None = None
    timeout: timedelta = timedelta(seconds=30)


@dataclass(frozen=True, slots=True, kw_only=True)
class EmailSettings:
    """The `email:` section."""

    smtp: SmtpSettings
    sender: str
    """The `from` address."""
    subject: str = "[tuisched] {{ job.name }} {{ event }}"
    """A Jinja2 template."""
    default_template: Path | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class MetricsSettings:
    """`settings.metrics`: where `/metrics` and `/healthz` are served (SPEC R24)."""

    host: str
    """An IP address (IPv4, or IPv6 without brackets) to listen on."""
    port: int
    """0 lets the system pick a free port (the log says which)."""
    max_lag: timedelta = timedelta(seconds=2)
    """`/healthz` answers 503 while the event loop is this late (slots would fire late)."""

    @property
    def listen(self) -> str:
        """`host:port` as the operator writes it (IPv6 in brackets)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterSettings:
    """`settings.cluster`: nodes sharing one PostgreSQL database."""

    database: str
    """A `postgresql://` URL without a password."""
    password_env: str | None = None
    password_file: Path | None = None
    name: str | None = None
    """This node's name; defaults to the host name."""
    heartbeat: timedelta = timedelta(seconds=5)
    """How often a node renews its row and its runs' leases."""
    lease: timedelta = timedelta(seconds=30)
    """How long a claimed run is the node's without a heartbeat."""
    poll: timedelta = timedelta(seconds=1)
    """How often a node looks for due runs (besides the wake-ups)."""
    dead_after: timedelta = timedelta(seconds=20)
    """A node without a heartbeat for this long is dead to the others."""
    steal_after: timedelta = timedelta(seconds=2)
    """How long a run waits for the node it prefers before any node may take it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """The `settings:` section, with defaults filled in."""

    timezone: ZoneInfo
    max_workers: int = 8
    shutdown_grace: timedelta = timedelta(seconds=10)
    state_dir: Path
    history: str | None = None
    """A database URL overriding `state_dir/history.db`."""
    cluster: ClusterSettings | None = None
    auto_reload: bool = False
    output_max: int = 64 * 1024**2
    """Bytes of a run's output kept in its file at most (`state_dir/output/JOB/RUN.log`);
    beyond it one line says the output was cut, and the rest is dropped."""
    metrics: MetricsSettings | None = None
    """`settings.metrics`: Prometheus metrics and a health check over HTTP (None: off)."""
    history_retention: Retention | None = None
    """How long finished runs stay in the history (None: for ever)."""
    lines: Mapping[str, int] = field(default_factory=dict, compare=False)
    """The line of each key given under `settings:` (for a problem found later, such as
    a driver that is not installed)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Config:
    """A whole, valid configuration."""

    path: Path
    settings: Settings
    jobs: Mapping[str, Job]
    """Jobs by name, in file order."""
    groups: Mapping[str, Group]
    email: EmailSettings | None = None
    webhooks: Mapping[str, WebhookSettings] = field(default_factory=lambda: MappingProxyType({}))
    """The `webhooks:` section: endpoints by name, in file order."""

    def job(self, name: str) -> Job:
        """The job called `name`; raises `UnknownJobError` (a LookupError)."""
        try:
            return self.jobs[name]
        except KeyError:
            raise UnknownJobError(name) from None


# --- webhooks (issue 16, item 4) ------------------------------------------------------


class WebhookAuth(enum.StrEnum):
    """How a webhook's secret is presented to the receiving server."""

    BEARER = "bearer"
    """`Authorization: Bearer SECRET`."""
    HMAC = "hmac"
    """`X-Tuisched-Timestamp: SECONDS` and `X-Tuisched-Signature: v1=HEX`, the HMAC-SHA256
    keyed by the secret of `SECONDS.BODY` (the timestamp, a dot, the body)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WebhookSettings:
    """One entry of `webhooks:`: where and how alerts are posted; the secret comes from
    the environment variable or file named here, never from the configuration."""

    name: str
    url: str
    """An http:// or https:// URL, without a user or password in it."""
    headers: Mapping[str, str] = field(default_factory=_frozen_map)
    """Extra request headers, sent as written (not for secrets: they are not hidden)."""
    secret_env: str | None = None
    secret_file: Path | None = None
    auth: WebhookAuth = WebhookAuth.BEARER
    template: Path | None = None
    """A Jinja2 template for the body; None posts the run's fields as JSON."""
    content_type: str = "application/json"
    timeout: timedelta = timedelta(seconds=10)
    """For one whole attempt: connecting, sending and reading the answer."""
    retries: int = 3
    """Attempts after the first; each waits twice as long as the one before."""
    line: int = 0
    """Line of the webhook's name in the configuration file."""


# --- history retention (issue 16) ---------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Retention:
    """`settings.history_retention`: which finished runs the history forgets.

    A run is forgotten when it is older than `days` or beyond the newest
    `runs_per_job` runs of its job, whichever comes first; unset limits keep
    everything. Runs not finished, and missed slots still waiting for an
    operator's decision, are always kept.
    """

    days: int | None = None
    """Runs queued more than this many days ago are forgotten."""
    runs_per_job: int | None = None
    """Each job keeps at most this many of its newest runs."""
