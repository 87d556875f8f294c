"""Prometheus metrics and a health check (`settings.metrics`, SPEC R24).

`MetricsEndpoint` ties the parts: `RunMetrics` counts bus events on the
loop, `RuntimeCollector` reads the loop's lag and the cluster at scrape
time, and `MetricsServer` answers `/metrics` and `/healthz` from threads
of its own, so neither a scrape nor a stuck client ever holds the loop.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from prometheus_client import CollectorRegistry, disable_created_metrics

from tuisched.domain.bus import EventBus, Subscription
from tuisched.domain.model import Config, MetricsSettings
from tuisched.domain.schedule.duration import format_duration, format_elapsed
from tuisched.runtime.cluster.rules import DatabaseState
from tuisched.runtime.metrics.collector import ClusterHealth, RunMetrics, RuntimeCollector
from tuisched.runtime.metrics.server import MetricsServer
from tuisched.runtime.watchdog import LoopWatchdog

__all__ = ["MetricsEndpoint", "Probes", "health_reason"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Probes:
    """What the endpoint reads from the runtime; each is safe to call from any thread."""

    config: Callable[[], Config]
    state: Callable[[], str]
    """The scheduler's state: starting, running, stopping, stopped."""
    firing: Callable[[], bool]
    """Whether the engine starts new runs."""
    cluster: Callable[[], tuple[DatabaseState, tuple[str, ...]] | None]
    """This node's database state and the nodes' states (None outside cluster mode)."""


def health_reason(*, state: str, firing: bool, lateness: float, max_lag: float) -> str | None:
    """None while slots would fire on time, else why not, in one line."""
    if state != "running":
        return f"the scheduler is {state}"
    if not firing:
        return "the engine starts no new runs"
    if lateness >= max_lag:
        late, limit = timedelta(seconds=lateness), timedelta(seconds=max_lag)
        return f"the event loop is {format_elapsed(late)} late (max_lag {format_duration(limit)})"
    return None


class MetricsEndpoint:
    """`/metrics` and `/healthz` for one runtime: start after the bus is bound, stop last."""

    def __init__(
        self, settings: MetricsSettings, *, probes: Probes, watchdog: LoopWatchdog
    ) -> None:
        self.settings = settings
        self._probes = probes
        self._watchdog = watchdog
        # The `_created` series would double the series of every counter (one per job)
        # for a timestamp Prometheus does not use; tuisched owns its process, so the
        # library-wide switch touches nothing else.
        disable_created_metrics()  # type: ignore[no-untyped-call]  # unannotated upstream
        self.registry = CollectorRegistry(auto_describe=False)
        self.runs = RunMetrics(self.registry, probes.config)
        self.registry.register(
            RuntimeCollector(
                lag=watchdog.report, lateness=watchdog.lateness, state=probes.state,
                jobs=lambda: len(probes.config().jobs), cluster=self._cluster,
            )
        )  # fmt: skip
        self.server = MetricsServer(settings, self.registry, self.health)
        self._subscription: Subscription | None = None

    def start(self, bus: EventBus) -> None:
        """Count `bus`'s events and listen (MetricsListenError when the address is taken)."""
        self.server.start()
        self._subscription = self.runs.subscribe(bus)

    async def stop(self) -> None:
        """Stop counting and listening."""
        if self._subscription is not None:
            self._subscription.unsubscribe()
            self._subscription = None
        await self.server.stop()

    def health(self) -> str | None:
        """None while the scheduler fires on time, else why not (any thread)."""
        return health_reason(
            state=self._probes.state(), firing=self._probes.firing(),
            lateness=self._watchdog.lateness(),
            max_lag=self.settings.max_lag.total_seconds(),
        )  # fmt: skip

    def _cluster(self) -> ClusterHealth | None:
        seen = self._probes.cluster()
        if seen is None:
            return None
        state, nodes = seen
        return ClusterHealth(
            database_state=state.value, database_states=tuple(s.value for s in DatabaseState),
            nodes=nodes,
        )  # fmt: skip
