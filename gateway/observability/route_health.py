"""Per-route backend start health as Prometheus families, read at scrape time.

``mrtr_gateway_route_ready{route}`` is 1 while a route can serve a call now (``ok``), 0 while its
first stdio process is starting or its processes fail to start (``backend_failing``);
``mrtr_gateway_backend_start_failures_total{route}`` counts stdio processes that could not be
started or exited before answering (spares and calls' own). Both are read from each pool's
:class:`~gateway.legacy.starts.RouteHealth` when Prometheus asks, like :class:`LiveState`, so they
cannot drift; routes come from the configuration, at most :data:`MAX_ROUTES` of them (a bound on
the label set like the other route labels' cap).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

MAX_ROUTES = 256


class RouteHealth(Protocol):
    """What is read of :class:`gateway.legacy.starts.RouteHealth` (observability imports no legacy room)."""

    @property
    def state(self) -> str: ...

    @property
    def failures(self) -> int: ...


class RouteHealthCollector(Collector):
    def __init__(self, healths: Callable[[], Mapping[str, RouteHealth]]) -> None:
        self._healths = healths

    def collect(self) -> Iterable[Metric]:
        ready = GaugeMetricFamily(
            "mrtr_gateway_route_ready",
            "1 when the route can serve a call now; 0 while its first stdio process starts or its backend "
            "cannot start (see /readyz for the state and the last error's reason)",
            labels=["route"],
        )
        failures = CounterMetricFamily(
            "mrtr_gateway_backend_start_failures",
            "stdio backend processes that could not be started or exited before answering, by route",
            labels=["route"],
        )
        for route, health in list(self._healths().items())[:MAX_ROUTES]:
            ready.add_metric([route], 1.0 if health.state == "ok" else 0.0)
            failures.add_metric([route], float(health.failures))
        yield ready
        yield failures
