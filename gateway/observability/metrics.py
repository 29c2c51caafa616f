"""Prometheus collectors, one registry per gateway app (tests build many apps in one process)."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


@dataclass(frozen=True)
class Metrics:
    registry: CollectorRegistry
    requests: Counter
    request_seconds: Histogram
    rejections: Counter
    state_rejections: Counter
    backend_errors: Counter
    holds: Gauge
    hold_expirations: Counter
    input_rounds: Counter
    backend_sessions: Gauge
    backend_initializations: Counter
    forwards: Counter

    @classmethod
    def create(cls) -> Metrics:
        r = CollectorRegistry()
        return cls(
            registry=r,
            requests=Counter(
                "mrtr_gateway_requests",
                "Client requests by route, method and outcome",
                ["route", "method", "outcome"],
                registry=r,
            ),
            request_seconds=Histogram(
                "mrtr_gateway_request_seconds",
                "Time to answer one client HTTP request",
                ["route", "method"],
                registry=r,
                buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
            ),
            rejections=Counter(
                "mrtr_gateway_rejections",
                "Requests refused at the front door, by reason",
                ["reason"],
                registry=r,
            ),
            state_rejections=Counter(
                "mrtr_gateway_request_state_rejections",
                "requestState refusals by reason",
                ["reason"],
                registry=r,
            ),
            backend_errors=Counter(
                "mrtr_gateway_backend_errors",
                "Backend failures by route and reason",
                ["route", "reason"],
                registry=r,
            ),
            holds=Gauge("mrtr_gateway_holds", "Legacy exchanges currently held for client input", registry=r),
            hold_expirations=Counter(
                "mrtr_gateway_hold_expirations", "Holds expired without a retry", ["route"], registry=r
            ),
            input_rounds=Counter(
                "mrtr_gateway_input_rounds",
                "InputRequiredResult rounds sent, by route",
                ["route"],
                registry=r,
            ),
            backend_sessions=Gauge(
                "mrtr_gateway_backend_sessions", "Open backend sessions by route", ["route"], registry=r
            ),
            forwards=Counter(
                "mrtr_gateway_forwards",
                "Retries forwarded to the replica owning their hold, or lost calls replayed here, by outcome",
                ["route", "outcome"],
                registry=r,
            ),
            backend_initializations=Counter(
                "mrtr_gateway_backend_initializations",
                "Backend initialize handshakes by route",
                ["route"],
                registry=r,
            ),
        )
