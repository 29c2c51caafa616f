"""What clients asked and how the front door answered: requests by outcome, their latency, and the
refusals (the ladder's, requestState's, a route's auth policy's)."""

from __future__ import annotations

from typing import Final

from prometheus_client import CollectorRegistry, Counter, Histogram

from gateway.observability.metrics.labels import OTHER, Bounded, Capped, OneOf, method_label, route_label

REQUEST_OUTCOMES: Final = frozenset(
    {
        "complete",
        "input_required",
        "task",
        "error",
        "rejected",
        "forwarded",
        "legacy_passthrough",
        "listen",
        "notification",
        "client_disconnected",
    }
)
"""The ``outcome`` of ``request_seconds``: how a request ended, coarse (the reason of an error is
in ``requests_total`` and the log line). Anything else is ``other``."""

LATENCY_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
"""Seconds, for a client's request and for a backend's answer alike."""


class RequestFamilies:
    """Client requests: counted and timed by route, method and outcome; refusals by reason."""

    def __init__(self, r: CollectorRegistry) -> None:
        self.requests = Bounded(
            Counter(
                "mrtr_gateway_requests",
                "Client requests by route, method and outcome",
                ["route", "method", "outcome"],
                registry=r,
            ),
            route_label(),
            method_label(),
            Capped(128),
        )
        self.request_seconds = Bounded(
            Histogram(
                "mrtr_gateway_request_seconds",
                "Time to answer one client HTTP request, by route, method and outcome",
                ["route", "method", "outcome"],
                registry=r,
                buckets=LATENCY_BUCKETS,
            ),
            route_label(),
            method_label(),
            OneOf(REQUEST_OUTCOMES),
            defaults=(OTHER,),
        )
        self.rejections = Bounded(
            Counter("mrtr_gateway_rejections", "Requests refused at the front door, by reason", ["reason"], registry=r),
            Capped(128),
        )
        self.state_rejections = Bounded(
            Counter("mrtr_gateway_request_state_rejections", "requestState refusals by reason", ["reason"], registry=r),
            Capped(64),
        )
        self.auth_refusals = Bounded(
            Counter(
                "mrtr_gateway_auth_refusals",
                "Requests refused by a route's auth policy, by route and reason (a fixed set)",
                ["route", "reason"],
                registry=r,
            ),
            route_label(),
            Capped(32),
        )
