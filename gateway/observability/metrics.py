"""Prometheus collectors, one registry per gateway app (tests build many apps in one process).

Every label value is bounded. A label is a time series, and a client that could choose one could
grow ``/metrics`` without limit (2,000 notifications with random 16 KiB method names once grew it
from 1.4 KB to 625 MB). So no collector is reachable except through :class:`Bounded`, whose
``labels()`` passes each value through that label's policy:

* :class:`OneOf` — a known set (JSON-RPC methods of every era, HTTP verbs); anything else is
  ``other``;
* :class:`Capped` — labels the code chooses (routes, outcomes, reasons): a value must look like a
  label (``[a-z0-9_.:-]``, at most 64 characters) and at most ``limit`` distinct values are kept
  per label; later ones become ``other``. A code path that ever put a client string in such a
  label would cost at most ``limit`` series, not one per request.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from typing import Final, Generic, Protocol, TypeVar

from mcp_types.methods import CLIENT_NOTIFICATIONS, CLIENT_REQUESTS
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.metrics_core import Metric

OTHER: Final = "other"
_LABEL_SHAPE: Final = re.compile(r"[A-Za-z0-9_.:/-]{1,64}")

KNOWN_METHODS: Final[frozenset[str]] = frozenset(
    {m for m, _ in (*CLIENT_REQUESTS, *CLIENT_NOTIFICATIONS)}
    | {"-", "batch", "response", "GET", "POST", "DELETE", "PUT", "PATCH"}
)
"""Every value the ``method`` label may take: client methods of every revision, and the
placeholders the front door uses (``-`` rejected, ``batch``, ``response``, HTTP verbs)."""


class LabelPolicy(Protocol):
    def __call__(self, value: str) -> str: ...


class OneOf:
    def __init__(self, values: Iterable[str]) -> None:
        self._values = frozenset(values)

    def __call__(self, value: str) -> str:
        return value if value in self._values else OTHER


class Capped:
    def __init__(self, limit: int = 64) -> None:
        self._limit = limit
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, value: str) -> str:
        if value in self._seen:
            return value
        if not isinstance(value, str) or not _LABEL_SHAPE.fullmatch(value):
            return OTHER
        with self._lock:
            if len(self._seen) >= self._limit:
                return OTHER
            self._seen.add(value)
        return value


M = TypeVar("M", Counter, Gauge, Histogram)


class Bounded(Generic[M]):
    """A labelled collector whose label values pass through one policy per label."""

    def __init__(self, metric: M, *policies: LabelPolicy) -> None:
        self._metric: M = metric
        self._policies = policies

    def collect(self) -> list[Metric]:
        return list(self._metric.collect())

    def labels(self, *values: str) -> M:
        if len(values) != len(self._policies):
            raise ValueError(f"expected {len(self._policies)} label values, got {len(values)}")
        child: M = self._metric.labels(*(policy(value) for policy, value in zip(self._policies, values, strict=True)))
        return child


def _route() -> Capped:
    return Capped(256)


def _method() -> OneOf:
    return OneOf(KNOWN_METHODS)


class Metrics:
    """The gateway's collectors; see the module docstring for why every label is bounded."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.requests = Bounded(
            Counter(
                "mrtr_gateway_requests",
                "Client requests by route, method and outcome",
                ["route", "method", "outcome"],
                registry=r,
            ),
            _route(),
            _method(),
            Capped(128),
        )
        self.request_seconds = Bounded(
            Histogram(
                "mrtr_gateway_request_seconds",
                "Time to answer one client HTTP request",
                ["route", "method"],
                registry=r,
                buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
            ),
            _route(),
            _method(),
        )
        self.rejections = Bounded(
            Counter("mrtr_gateway_rejections", "Requests refused at the front door, by reason", ["reason"], registry=r),
            Capped(128),
        )
        self.state_rejections = Bounded(
            Counter("mrtr_gateway_request_state_rejections", "requestState refusals by reason", ["reason"], registry=r),
            Capped(64),
        )
        self.backend_errors = Bounded(
            Counter(
                "mrtr_gateway_backend_errors",
                "Backend failures by route and reason",
                ["route", "reason"],
                registry=r,
            ),
            _route(),
            Capped(64),
        )
        self.holds = Gauge("mrtr_gateway_holds", "Legacy exchanges currently held for client input", registry=r)
        self.hold_expirations = Bounded(
            Counter("mrtr_gateway_hold_expirations", "Holds expired without a retry", ["route"], registry=r),
            _route(),
        )
        self.input_rounds = Bounded(
            Counter("mrtr_gateway_input_rounds", "InputRequiredResult rounds sent, by route", ["route"], registry=r),
            _route(),
        )
        self.backend_sessions = Bounded(
            Gauge("mrtr_gateway_backend_sessions", "Open backend sessions by route", ["route"], registry=r),
            _route(),
        )
        self.forwards = Bounded(
            Counter(
                "mrtr_gateway_forwards",
                "Retries forwarded to the replica owning their hold, or lost calls replayed here, by outcome",
                ["route", "outcome"],
                registry=r,
            ),
            _route(),
            Capped(32),
        )
        self.auth_refusals = Bounded(
            Counter(
                "mrtr_gateway_auth_refusals",
                "Requests refused by a route's auth policy, by route and reason (a fixed set)",
                ["route", "reason"],
                registry=r,
            ),
            _route(),
            Capped(32),
        )
        self.backend_initializations = Bounded(
            Counter(
                "mrtr_gateway_backend_initializations",
                "Backend initialize handshakes by route",
                ["route"],
                registry=r,
            ),
            _route(),
        )

    @classmethod
    def create(cls) -> Metrics:
        return cls()
