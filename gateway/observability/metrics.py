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

Besides the gateway's own families the registry carries the process (CPU, memory, file
descriptors), platform (Python version) and garbage-collector collectors, a build-info gauge, and
two families read at scrape time rather than kept up to date (:class:`LiveState`): held calls per
route and backend sessions per route and state. Reading them from the hold registry and the
session pools when Prometheus asks means they cannot drift from the truth, whatever path a hold or
session took out.
"""

from __future__ import annotations

import platform
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from importlib import metadata
from typing import Final, Generic, Protocol, TypeVar

from mcp_types.methods import CLIENT_NOTIFICATIONS, CLIENT_REQUESTS
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

OTHER: Final = "other"
MAX_CACHED_CHILDREN: Final = 4096
"""Label sets a :class:`Bounded` family remembers the child of (a bound on top of the policies')."""
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
    """A labelled collector whose label values pass through one policy per label.

    ``defaults`` fill trailing labels a caller leaves out, so a label added to a family does not
    break callers written before it (they report the default until they pass the value)."""

    def __init__(self, metric: M, *policies: LabelPolicy, defaults: tuple[str, ...] = ()) -> None:
        self._metric: M = metric
        self._policies = policies
        self._defaults = defaults
        self._children: dict[tuple[str, ...], M] = {}
        """Label values a policy kept as they are → their child: most requests repeat a handful of
        label sets, and prometheus-client's own lookup costs several times this one."""

    def collect(self) -> list[Metric]:
        return list(self._metric.collect())

    def labels(self, *values: str) -> M:
        child = self._children.get(values)
        if child is not None:
            return child
        absent: int = len(self._policies) - len(values)
        full: tuple[str, ...] = values
        if 0 < absent <= len(self._defaults):
            full = (*values, *self._defaults[len(self._defaults) - absent :])
        if len(full) != len(self._policies):
            raise ValueError(f"expected {len(self._policies)} label values, got {len(values)}")
        kept = tuple(policy(value) for policy, value in zip(self._policies, full, strict=True))
        child = self._metric.labels(*kept)
        if kept == full and len(self._children) < MAX_CACHED_CHILDREN:
            # Only values every policy kept are remembered: those are bounded sets, never a
            # client's arbitrary string (which a policy turns into ``other``).
            self._children[values] = child
        return child


def _route() -> Capped:
    return Capped(256)


def _method() -> OneOf:
    return OneOf(KNOWN_METHODS)


REQUEST_OUTCOMES: Final = frozenset(
    {
        "complete",
        "input_required",
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

SESSION_STATES: Final[tuple[str, ...]] = ("idle", "interactive", "shared", "listen", "opening")
"""States of a backend session (:meth:`gateway.legacy.pool.SessionPool.counts_by_state`):
``interactive`` leased to one interactive call (running or held), ``shared`` serving plain calls,
``idle`` pooled, ``listen`` serving a ``subscriptions/listen`` stream, ``opening`` in its handshake."""

FORWARDED: Final = "forwarded"
OWNER_UNREACHABLE: Final = "owner_unreachable"
OWNER_UNRESPONSIVE: Final = "owner_unresponsive"
OWNER_FAILED: Final = "owner_failed"
REPLAYED: Final = "replayed"
FORWARD_OUTCOMES: Final[tuple[str, ...]] = (FORWARDED, OWNER_UNREACHABLE, OWNER_UNRESPONSIVE, OWNER_FAILED, REPLAYED)
"""The ``outcome`` of ``forwards_total``, the one list (:mod:`gateway.replicas.forward` and
:mod:`gateway.calls.replayer` count with these names): forwarded to the owner, the owner not
reached, not acknowledging, or failing after it acknowledged, or the lost call replayed here."""

ROUNDS_BUCKETS: Final = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 15, 20, 50)
"""Rounds are whole numbers, so the bucket ``(k-1, k]`` holds exactly the calls that took ``k``.
``histogram_quantile`` interpolates inside a bucket (from 0 in the first): calls that all took 1
round read 0.5. ``ceil()`` of it is exact where buckets are consecutive integers: every count up to
10, the default ``holds.max_rounds`` (the dashboard takes the ``ceil``)."""
HOLD_AGE_BUCKETS: Final = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800)
LATENCY_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
LOOP_LAG_BUCKETS: Final = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)


def gateway_version() -> str:
    try:
        return metadata.version("mrtr-gateway")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


class HeldCall(Protocol):
    """What :class:`HoldMetrics` reads of a hold (:class:`gateway.holds.registry.Hold`)."""

    @property
    def route(self) -> str: ...

    @property
    def round(self) -> int: ...


class HoldMetrics:
    """The hold registry's observer: hold age at each retry, and rounds per call when it ends."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    def resumed(self, hold: HeldCall, waited: float) -> None:
        """A retry claimed ``hold`` ``waited`` seconds after its round went to the client."""
        self._metrics.hold_age.labels(hold.route).observe(max(waited, 0.0))

    def ended(self, hold: HeldCall) -> None:
        """``hold`` left the registry (answered, expired, failed): its call took ``hold.round`` rounds."""
        if hold.round > 0:
            self._metrics.call_rounds.labels(hold.route).observe(hold.round)


class LiveState(Collector):
    """Families read when Prometheus scrapes: held calls per route, backend sessions per state.

    The sources are set once the app has built its hold registry and pools (:meth:`watch`); every
    configured route is reported, with 0 when it holds nothing, so a rate or a ratio never sees a
    series vanish. Labels pass through the same bounded policies as the other families."""

    def __init__(self) -> None:
        self._routes: list[str] = []
        self._holds: Callable[[], Mapping[str, int]] | None = None
        self._sessions: Callable[[], Mapping[str, Mapping[str, int]]] | None = None
        self._route_label = _route()
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
                "Time to answer one client HTTP request, by route, method and outcome",
                ["route", "method", "outcome"],
                registry=r,
                buckets=LATENCY_BUCKETS,
            ),
            _route(),
            _method(),
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
        self._add_hold_and_backend_families(r)
        self._add_process_families(r)

    def _add_hold_and_backend_families(self, r: CollectorRegistry) -> None:
        """Holds, rounds, sessions, forwards and backend timings (split from ``__init__`` for length only)."""
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
        self.backend_token_passthrough = Bounded(
            Gauge(
                "mrtr_gateway_backend_token_passthrough",
                "1 on a route whose backend.auth.mode is passthrough (the client's token is sent upstream)",
                ["route"],
                registry=r,
            ),
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
        self.call_rounds = Bounded(
            Histogram(
                "mrtr_gateway_call_rounds",
                "Input rounds a held call took, observed when its hold ends (answered, expired or failed)",
                ["route"],
                registry=r,
                buckets=ROUNDS_BUCKETS,
            ),
            _route(),
        )
        self.hold_age = Bounded(
            Histogram(
                "mrtr_gateway_hold_age_seconds",
                "Time a held call waited for its client, from sending the round to the retry that resumed it",
                ["route"],
                registry=r,
                buckets=HOLD_AGE_BUCKETS,
            ),
            _route(),
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
            _route(),
            _method(),
        )

    def _add_process_families(self, r: CollectorRegistry) -> None:
        """The event loop, the build, live state and the process collectors."""
        self.loop_lag = Histogram(
            "mrtr_gateway_event_loop_lag_seconds",
            "How late the event loop ran a timer: time every request waits behind work that does not yield",
            registry=r,
            buckets=LOOP_LAG_BUCKETS,
        )
        self.build_info = Gauge(
            "mrtr_gateway_build_info",
            "Always 1; the labels say which gateway and Python version run",
            ["version", "python"],
            registry=r,
        )
        self.build_info.labels(gateway_version()[:32], platform.python_version()[:32]).set(1)
        self.live = LiveState()
        r.register(self.live)
        # The process's CPU, memory, file descriptors and start time; the Python version; GC counts.
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        GCCollector(registry=r)

    def hold_observer(self) -> HoldMetrics:
        return HoldMetrics(self)

    def route_built(
        self,
        route: str,
        *,
        backend_causes: Iterable[str],
        forward_outcomes: Iterable[str] = FORWARD_OUTCOMES,
        auth_reasons: Iterable[str] = (),
    ) -> None:
        """Create every series of ``route`` with a known label set, at 0, before anything happens.

        A series that appears at its first increment has no earlier sample for ``rate()`` to
        compare with: the first burst after a pod starts is invisible (4 holds expired, ``increase``
        0, an expiration ratio of NaN). So the route label times each fixed set, from its one source
        (``gateway.errors.BACKEND_CAUSES``, :data:`FORWARD_OUTCOMES`, the route's auth reasons), is
        created here, through :meth:`Bounded.labels`: counted against the label caps like any value,
        each set well inside its cap (``tests/unit/test_metric_label_sets.py``)."""
        for family in (self.hold_expirations, self.input_rounds, self.backend_initializations):
            family.labels(route)
        self.call_rounds.labels(route)
        self.hold_age.labels(route)
        for cause in backend_causes:
            self.backend_errors.labels(route, cause)
        for outcome in forward_outcomes:
            self.forwards.labels(route, outcome)
        for reason in auth_reasons:
            self.auth_refusals.labels(route, reason)

    @classmethod
    def create(cls) -> Metrics:
        return cls()
