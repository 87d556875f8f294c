"""The scheduler's Prometheus metrics, kept up to date from bus events.

Bus subscribers run on the loop thread and only count: each event costs a
dictionary look-up and a counter increment under prometheus_client's lock.
The metrics server's thread renders the registry at each scrape, so a scrape
never runs on the loop. What is read rather than counted (the loop's lag, the
cluster's nodes) is read at scrape time by `RuntimeCollector`, from values
the loop keeps in plain attributes.

Cardinality: `tuisched_runs_total` is labelled by job (`job_name`, since
Prometheus keeps `job` for the scrape job) because operators ask "which job
fails"; a series exists only for a (job, state, result) that happened, a few
per job. The duration and lateness histograms are labelled by job kind only:
by job they would be ~15 series per bucket set times 10,000 jobs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from tuisched.domain.bus import EventBus, Subscription
from tuisched.domain.events import (
    AlertFailed,
    AlertSent,
    ConfigLoaded,
    ConfigRejected,
    Event,
    RunAbandoned,
    RunEvent,
    RunFinished,
    RunNotStarted,
    RunStarted,
    SlotMissed,
)
from tuisched.domain.model import Config
from tuisched.domain.runs import RunRecord, RunState, Trigger
from tuisched.runtime.watchdog import LagReport

log = logging.getLogger(__name__)

DURATION_BUCKETS = (0.1, 0.5, 1, 5, 15, 60, 300, 900, 1800, 3600, 4 * 3600, 12 * 3600)
"""Seconds: from a quick check to a nightly batch."""
LATENESS_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 15, 60, 300)
"""Seconds a run started after its slot: under 1 s is on time; over `grace` is missed."""

_IN_PROGRESS = (RunState.QUEUED, RunState.RUNNING, RunState.WAITING)
_ENDED = (RunFinished, RunNotStarted, SlotMissed, RunAbandoned)
"""Events that close one run attempt (RunConcluded repeats the last one: not counted)."""


class RunMetrics:
    """Counters, histograms and gauges fed by the bus (subscribe on the loop thread)."""

    def __init__(self, registry: CollectorRegistry, config: Callable[[], Config]) -> None:
        self._config = config
        self._states: dict[str, RunState] = {}
        """Runs in progress by run id: what the gauges count."""
        self.runs = Counter(
            "tuisched_runs", "Run attempts that ended, by job, final state and scheduler result.",
            ["job_name", "state", "result"], registry=registry,
        )  # fmt: skip
        self.duration = Histogram(
            "tuisched_run_duration_seconds", "How long runs ran, by job kind.",
            ["kind"], buckets=DURATION_BUCKETS, registry=registry,
        )  # fmt: skip
        self.lateness = Histogram(
            "tuisched_run_start_lateness_seconds",
            "How long after its slot a scheduled run started (queueing included), by job kind.",
            ["kind"], buckets=LATENESS_BUCKETS, registry=registry,
        )  # fmt: skip
        self.in_progress = {state: _gauge(registry, state) for state in _IN_PROGRESS}
        self.alerts_sent = Counter(
            "tuisched_alerts_sent", "Alerts delivered, by event.", ["event"], registry=registry
        )
        self.alerts_failed = Counter(
            "tuisched_alerts_failed", "Alerts given up on after their last attempt, by event.",
            ["event"], registry=registry,
        )  # fmt: skip
        self.alert_attempts_failed = Counter(
            "tuisched_alert_attempts_failed",
            "Alert delivery attempts that failed (retried or not), by event.",
            ["event"], registry=registry,
        )  # fmt: skip
        self.reloads = Counter(
            "tuisched_config_reloads",
            "Configurations applied after start (outcome applied) or refused (rejected).",
            ["outcome"], registry=registry,
        )  # fmt: skip
        for outcome in ("applied", "rejected"):
            self.reloads.labels(outcome)  # both series exist from the start, at 0

    def subscribe(self, bus: EventBus) -> Subscription:
        """Follow every event on `bus` (a turn's at once)."""
        return bus.subscribe_batch(Event, self.on_events)

    def on_events(self, events: list[Event]) -> None:
        """Count `events`, in order (see `on_event`)."""
        for event in events:
            try:
                self.on_event(event)
            except Exception:  # one odd event must not lose the count of the others
                log.exception("metrics: could not count %s", type(event).__name__)

    def on_event(self, event: Event) -> None:
        """Count `event` (loop thread; never raises into the bus for an odd record)."""
        if isinstance(event, RunEvent):
            self._on_run(event)
        elif isinstance(event, AlertSent):
            self.alerts_sent.labels(event.alert).inc()
        elif isinstance(event, AlertFailed):
            self.alert_attempts_failed.labels(event.alert).inc()
            if event.final:
                self.alerts_failed.labels(event.alert).inc()
        elif isinstance(event, ConfigLoaded) and event.origin != "start":
            self.reloads.labels("applied").inc()
        elif isinstance(event, ConfigRejected):
            self.reloads.labels("rejected").inc()

    def _on_run(self, event: RunEvent) -> None:
        run = event.run
        self._track(run)
        if isinstance(event, RunStarted):
            self._observe_lateness(run)
        elif isinstance(event, _ENDED):
            result = run.result.value if run.result is not None else ""
            self.runs.labels(run.job, run.state.value.lower(), result).inc()
            if run.duration is not None and isinstance(event, RunFinished):
                self.duration.labels(self._kind(run.job)).observe(run.duration.total_seconds())

    def _track(self, run: RunRecord) -> None:
        """Move `run` between the in-progress gauges."""
        before = self._states.pop(run.run_id, None)
        if before is not None:
            self.in_progress[before].dec()
        if run.state in _IN_PROGRESS:
            self._states[run.run_id] = run.state
            self.in_progress[run.state].inc()

    def _observe_lateness(self, run: RunRecord) -> None:
        if run.slot is None or run.started_at is None or run.trigger is not Trigger.SCHEDULE:
            return
        late = max((run.started_at - run.slot).total_seconds(), 0.0)
        self.lateness.labels(self._kind(run.job)).observe(late)

    def _kind(self, job: str) -> str:
        found = self._config().jobs.get(job)
        return found.kind_name if found is not None else "unknown"


def _gauge(registry: CollectorRegistry, state: RunState) -> Gauge:
    """`tuisched_runs_running` and its siblings: runs in `state` now."""
    name = state.value.lower()
    return Gauge(f"tuisched_runs_{name}", f"Runs {name} now.", registry=registry)


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterHealth:
    """This node's view of the cluster at one moment (read at scrape time)."""

    database_state: str
    """connecting, connected, reconnecting or read-only."""
    database_states: tuple[str, ...]
    """Every state the database can be in (each gets a series, 1 for the current one)."""
    nodes: tuple[str, ...]
    """The state of each node the database knows: alive, dead or left."""


class RuntimeCollector(Collector):
    """What is read at each scrape, not counted: the loop's lag, the scheduler's state,
    the number of jobs and, in cluster mode, the nodes and this node's database."""

    def __init__(
        self,
        *,
        lag: Callable[[], LagReport],
        lateness: Callable[[], float],
        state: Callable[[], str],
        jobs: Callable[[], int],
        cluster: Callable[[], ClusterHealth | None],
    ) -> None:
        self._lag, self._lateness, self._state = lag, lateness, state
        self._jobs, self._cluster = jobs, cluster

    def collect(self) -> Iterable[Metric]:
        """The values now (called on the metrics server's thread)."""
        report = self._lag()
        yield GaugeMetricFamily(
            "tuisched_loop_lag_seconds", "How late the event loop's beat is now.",
            value=self._lateness(),
        )  # fmt: skip
        yield GaugeMetricFamily(
            "tuisched_loop_lag_worst_seconds", "The longest the event loop was blocked.",
            value=report.worst,
        )  # fmt: skip
        yield CounterMetricFamily(
            "tuisched_loop_blocked_episodes", "Times the event loop was blocked over 0.25 s.",
            value=report.episodes,
        )  # fmt: skip
        yield GaugeMetricFamily("tuisched_jobs", "Jobs in the configuration.", value=self._jobs())
        state = GaugeMetricFamily(
            "tuisched_scheduler_state", "1 for the scheduler's state.", labels=["state"]
        )
        state.add_metric([self._state()], 1)
        yield state
        cluster = self._cluster()
        if cluster is not None:
            yield from _cluster_metrics(cluster)


def _cluster_metrics(cluster: ClusterHealth) -> Iterable[Metric]:
    nodes = GaugeMetricFamily(
        "tuisched_cluster_nodes", "Nodes the cluster's database knows, by state.",
        labels=["state"],
    )  # fmt: skip
    for name in ("alive", "dead", "left"):
        nodes.add_metric([name], cluster.nodes.count(name))
    yield nodes
    database = GaugeMetricFamily(
        "tuisched_cluster_database_state", "1 for this node's database connection state.",
        labels=["state"],
    )  # fmt: skip
    for name in cluster.database_states:
        database.add_metric([name], 1 if name == cluster.database_state else 0)
    yield database
