"""Held calls: how many are held, how many rounds a call takes, how long a hold waits for its
client, and the holds that expired."""

from __future__ import annotations

from typing import Final, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from gateway.observability.metrics.labels import Bounded, route_label

ROUNDS_BUCKETS: Final = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 15, 20, 50)
"""Rounds are whole numbers, so the bucket ``(k-1, k]`` holds exactly the calls that took ``k``.
``histogram_quantile`` interpolates inside a bucket (from 0 in the first): calls that all took 1
round read 0.5. ``ceil()`` of it is exact where buckets are consecutive integers: every count up to
10, the default ``holds.max_rounds`` (the dashboard takes the ``ceil``)."""
HOLD_AGE_BUCKETS: Final = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800)


class HoldFamilies:
    """Holds and rounds, by route (the held count of each route is :class:`~.live.LiveState`'s)."""

    def __init__(self, r: CollectorRegistry) -> None:
        self.holds = Gauge("mrtr_gateway_holds", "Legacy exchanges currently held for client input", registry=r)
        self.hold_expirations = Bounded(
            Counter("mrtr_gateway_hold_expirations", "Holds expired without a retry", ["route"], registry=r),
            route_label(),
        )
        self.input_rounds = Bounded(
            Counter("mrtr_gateway_input_rounds", "InputRequiredResult rounds sent, by route", ["route"], registry=r),
            route_label(),
        )
        self.call_rounds = Bounded(
            Histogram(
                "mrtr_gateway_call_rounds",
                "Input rounds a held call took, observed when its hold ends (answered, expired or failed)",
                ["route"],
                registry=r,
                buckets=ROUNDS_BUCKETS,
            ),
            route_label(),
        )
        self.hold_age = Bounded(
            Histogram(
                "mrtr_gateway_hold_age_seconds",
                "Time a held call waited for its client, from sending the round to the retry that resumed it",
                ["route"],
                registry=r,
                buckets=HOLD_AGE_BUCKETS,
            ),
            route_label(),
        )

    def hold_observer(self) -> HoldMetrics:
        return HoldMetrics(self)


class HeldCall(Protocol):
    """What :class:`HoldMetrics` reads of a hold (:class:`gateway.holds.registry.Hold`)."""

    @property
    def route(self) -> str: ...

    @property
    def round(self) -> int: ...


class HoldMetrics:
    """The hold registry's observer: hold age at each retry, and rounds per call when it ends."""

    def __init__(self, families: HoldFamilies) -> None:
        self._families = families

    def resumed(self, hold: HeldCall, waited: float) -> None:
        """A retry claimed ``hold`` ``waited`` seconds after its round went to the client."""
        self._families.hold_age.labels(hold.route).observe(max(waited, 0.0))

    def ended(self, hold: HeldCall) -> None:
        """``hold`` left the registry (answered, expired, failed): its call took ``hold.round`` rounds."""
        if hold.round > 0:
            self._families.call_rounds.labels(hold.route).observe(hold.round)
