"""Retries whose hold lives in another replica: forwarded to its owner, or replayed here when the
owner is gone, and how a hop failed."""

from __future__ import annotations

from typing import Final

from prometheus_client import CollectorRegistry, Counter

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


class ForwardFamilies:
    """Forwarded and replayed retries, by route and outcome."""

    def __init__(self, r: CollectorRegistry) -> None:
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
