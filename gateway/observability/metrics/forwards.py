"""Retries whose hold lives in another replica: forwarded to its owner, or replayed here when the
owner is gone, and how a hop failed."""

from __future__ import annotations

from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge

from gateway.observability.metrics.labels import Bounded, Capped, route_label

FORWARDED: Final = "forwarded"
OWNER_UNREACHABLE: Final = "owner_unreachable"
OWNER_UNRESPONSIVE: Final = "owner_unresponsive"
OWNER_FAILED: Final = "owner_failed"
REPLAYED: Final = "replayed"
FORWARD_OUTCOMES: Final[tuple[str, ...]] = (FORWARDED, OWNER_UNREACHABLE, OWNER_UNRESPONSIVE, OWNER_FAILED, REPLAYED)
"""The ``outcome`` of ``forwards_total``, the one list (:mod:`gateway.replicas.forward` and
:mod:`gateway.calls.replayer` count with these names): forwarded to the owner, the owner not
reached, not acknowledging, or failing after it acknowledged, or the lost call replayed here."""


RESENT: Final = "answered"
RESEND_WAITED: Final = "waited"
RESEND_NOT_KEPT: Final = "not_kept"
RESEND_DIFFERS: Final = "differs"
RESEND_OUTCOMES: Final[tuple[str, ...]] = (RESENT, RESEND_WAITED, RESEND_NOT_KEPT, RESEND_DIFFERS)
"""The ``outcome`` of ``resends_total`` (:mod:`gateway.calls.resends`): a resend answered with the first
send's kept answer, one that waited for the first send still running and then was, one whose first
answer was not kept (``already_answered``), and one that differs from the first send (refused)."""


class ForwardFamilies:
    """Forwarded and replayed retries, by route and outcome; resends of retries answered again."""

    def __init__(self, r: CollectorRegistry) -> None:
        self.resends = Bounded(
            Counter(
                "mrtr_gateway_resends",
                "Retries sent again whose first send took their hold, by outcome",
                ["route", "outcome"],
                registry=r,
            ),
            route_label(),
            Capped(8),
        )
        self.resend_memory_bytes = Gauge(
            "mrtr_gateway_resend_memory_bytes", "Bytes of answers kept for resends of retries", registry=r
        )
        self.forwards = Bounded(
            Counter(
                "mrtr_gateway_forwards",
                "Retries forwarded to the replica owning their hold, or lost calls replayed here, by outcome",
                ["route", "outcome"],
                registry=r,
            ),
            route_label(),
            Capped(32),
        )
