"""Families read when Prometheus scrapes rather than kept up to date: held calls per route and
backend sessions per route and state. Reading them from the hold registry and the session pools
when Prometheus asks means they cannot drift from the truth, whatever path a hold or session took
out."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Final

from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from gateway.observability.metrics.labels import OneOf, route_label

SESSION_STATES: Final[tuple[str, ...]] = ("idle", "interactive", "shared", "listen", "opening")
"""States of a backend session (:meth:`gateway.legacy.pool.SessionPool.counts_by_state`):
``interactive`` leased to one interactive call (running or held), ``shared`` serving plain calls,
``idle`` pooled, ``listen`` serving a ``subscriptions/listen`` stream, ``opening`` in its handshake."""


class LiveState(Collector):
    """Families read when Prometheus scrapes: held calls per route, backend sessions per state.

    The sources are set once the app has built its hold registry and pools (:meth:`watch`); every
    configured route is reported, with 0 when it holds nothing, so a rate or a ratio never sees a
    series vanish. Labels pass through the same bounded policies as the other families."""

    def __init__(self) -> None:
        self._routes: list[str] = []
        self._holds: Callable[[], Mapping[str, int]] | None = None
        self._sessions: Callable[[], Mapping[str, Mapping[str, int]]] | None = None
        self._route_label = route_label()
        self._state_label = OneOf(SESSION_STATES)

    def watch(
        self,
        routes: Iterable[str],
        *,
        holds: Callable[[], Mapping[str, int]] | None = None,
        sessions: Callable[[], Mapping[str, Mapping[str, int]]] | None = None,
    ) -> None:
        self._routes = list(routes)
        if holds is not None:
            self._holds = holds
        if sessions is not None:
            self._sessions = sessions

    def describe(self) -> Iterable[Metric]:
        return []  # nothing to collect before the app starts; never read the sources at registration

    def collect(self) -> Iterable[Metric]:
        held = GaugeMetricFamily(
            "mrtr_gateway_holds_by_route", "Legacy calls currently held for client input, by route", labels=["route"]
        )
        counts = dict(self._holds()) if self._holds is not None else {}
        for route in sorted({*self._routes, *counts}):
            held.add_metric([self._route_label(route)], counts.get(route, 0))
        yield held
        sessions = GaugeMetricFamily(
            "mrtr_gateway_backend_sessions_by_state",
            "Backend sessions by route and state (idle, interactive, shared, listen, opening)",
            labels=["route", "state"],
        )
        by_route = dict(self._sessions()) if self._sessions is not None else {}
        for route in sorted({*self._routes, *by_route}):
            states = by_route.get(route, {})
            for state in SESSION_STATES:
                sessions.add_metric([self._route_label(route), self._state_label(state)], states.get(state, 0))
        yield sessions
