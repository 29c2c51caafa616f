"""The legacy backends as the gateway sees them: open sessions, handshakes, failures by cause, how
long a backend takes to answer, and the stdio servers the memory guard killed."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from gateway.observability.metrics.labels import Bounded, Capped, method_label, route_label
from gateway.observability.metrics.requests import LATENCY_BUCKETS


class BackendFamilies:
    """Backend sessions, handshakes, failures and answer times, by route."""

    def __init__(self, r: CollectorRegistry) -> None:
        self.backend_errors = Bounded(
            Counter(
                "mrtr_gateway_backend_errors",
                "Backend failures by route and reason",
                ["route", "reason"],
                registry=r,
            ),
            route_label(),
            Capped(64),
        )
        self.backend_sessions = Bounded(
            Gauge("mrtr_gateway_backend_sessions", "Open backend sessions by route", ["route"], registry=r),
            route_label(),
        )
        self.backend_token_passthrough = Bounded(
            Gauge(
                "mrtr_gateway_backend_token_passthrough",
                "1 on a route whose backend.auth.mode is passthrough (the client's token is sent upstream)",
                ["route"],
                registry=r,
            ),
            route_label(),
        )
        self.backend_initializations = Bounded(
            Counter(
                "mrtr_gateway_backend_initializations",
                "Backend initialize handshakes by route",
                ["route"],
                registry=r,
            ),
            route_label(),
        )
        self.stdio_memory_kills = Bounded(
            Counter(
                "mrtr_gateway_stdio_memory_kills",
                "stdio servers the memory guard killed, by route and reason (container_memory, route_max_memory)",
                ["route", "reason"],
                registry=r,
            ),
            route_label(),
            Capped(8),
        )
        self.backend_request_seconds = Bounded(
            Histogram(
                "mrtr_gateway_backend_request_seconds",
                "Time the backend took to answer, from sending it a request (or a client's answers) to its "
                "response or its next request for input; the client's time is never in it",
                ["route", "method"],
                registry=r,
                buckets=LATENCY_BUCKETS,
            ),
            route_label(),
            method_label(),
        )
