"""One app's Prometheus registry and every family in it: :class:`Metrics`, each subject's families
from its own module of :mod:`gateway.observability.metrics`."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry

from gateway.observability.metrics.backends import BackendFamilies
from gateway.observability.metrics.forwards import FORWARD_OUTCOMES, RESEND_OUTCOMES, ForwardFamilies
from gateway.observability.metrics.holds import HoldFamilies
from gateway.observability.metrics.live import LiveState
from gateway.observability.metrics.process import ProcessFamilies
from gateway.observability.metrics.requests import RequestFamilies
from gateway.observability.metrics.tasks import TaskFamilies


class Metrics(RequestFamilies, HoldFamilies, BackendFamilies, ForwardFamilies, TaskFamilies, ProcessFamilies):
    """One app's registry and every family in it, each subject's from its own module; see
    :mod:`.labels` for why every label is bounded."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        RequestFamilies.__init__(self, r)
        HoldFamilies.__init__(self, r)
        BackendFamilies.__init__(self, r)
        ForwardFamilies.__init__(self, r)
        TaskFamilies.__init__(self, r)
        self.live = LiveState()
        r.register(self.live)
        ProcessFamilies.__init__(self, r)

    def route_built(
        self,
        route: str,
        *,
        backend_causes: Iterable[str],
        forward_outcomes: Iterable[str] = FORWARD_OUTCOMES,
        auth_reasons: Iterable[str] = (),
        memory_kill_reasons: Iterable[str] = (),
    ) -> None:
        """Create every series of ``route`` with a known label set, at 0, before anything happens.

        A series that appears at its first increment has no earlier sample for ``rate()`` to
        compare with: the first burst after a pod starts is invisible (4 holds expired, ``increase``
        0, an expiration ratio of NaN). So the route label times each fixed set, from its one source
        (``gateway.errors.BACKEND_CAUSES``, :data:`FORWARD_OUTCOMES`, the route's auth reasons, a stdio
        route's ``gateway.legacy.memory.KILL_REASONS``), is created here, through
        :meth:`.labels.Bounded.labels`: counted against the label caps like any value, each set well
        inside its cap (``tests/unit/test_metric_label_sets.py``)."""
        for family in (self.hold_expirations, self.input_rounds, self.backend_initializations):
            family.labels(route)
        self.call_rounds.labels(route)
        self.hold_age.labels(route)
        for cause in backend_causes:
            self.backend_errors.labels(route, cause)
        for outcome in forward_outcomes:
            self.forwards.labels(route, outcome)
        for outcome in RESEND_OUTCOMES:
            self.resends.labels(route, outcome)
        for reason in auth_reasons:
            self.auth_refusals.labels(route, reason)
        for reason in memory_kill_reasons:
            self.stdio_memory_kills.labels(route, reason)
        self.tasks_created.labels(route)
        self.tasks_evicted.labels(route)

    @classmethod
    def create(cls) -> Metrics:
        return cls()
