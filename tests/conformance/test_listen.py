"""``subscriptions/listen`` acknowledgment (basic/patterns/subscriptions.mdx §Acknowledgment): the first
message, tagged with the subscription id, reflecting the subset the server honours, unsupported types
omitted."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from conformance.differential import Pair
from conformance.wire import SUBSCRIPTION_ID, Observed, request

pytestmark = pytest.mark.interop

EVERYTHING: dict[str, Any] = {
    "toolsListChanged": True,
    "promptsListChanged": True,
    "resourcesListChanged": True,
    "resourceSubscriptions": ["demo://readme"],
}


def _within(key: str, value: Any) -> bool:
    if key not in EVERYTHING:
        return False
    return isinstance(value, bool) or (isinstance(value, list) and set(value) <= set(EVERYTHING[key]))


def acknowledgment(observed: Observed) -> dict[str, Any]:
    """Whether the first message is an acknowledgment the spec allows for the filter sent."""
    first = observed.messages[0] if observed.messages else {}
    params = first.get("params", {}) if isinstance(first, dict) else {}
    honoured = params.get("notifications", {})
    return {
        "ack": first.get("method") if isinstance(first, dict) else None,
        "ack.subscriptionId": params.get("_meta", {}).get(SUBSCRIPTION_ID),
        "ack.omitsUnsupported": all(value not in (False, [], None) for value in honoured.values()),
        "ack.withinRequest": all(_within(key, value) for key, value in honoured.items()),
    }


LISTEN_ACK = {
    "status": 200,
    "ack": "notifications/subscriptions/acknowledged",
    "ack.subscriptionId": 1,
    "ack.omitsUnsupported": True,
    "ack.withinRequest": True,
}


@pytest.mark.parametrize(
    ("case", "notifications"),
    [
        ("listen for everything", EVERYTHING),
        ("listen for tool list changes", {"toolsListChanged": True}),
        ("listen for prompt list changes", {"promptsListChanged": True}),
        ("listen with an empty filter", {}),
    ],
)
async def test_listen_acknowledgment(pair: Pair, case: str, notifications: dict[str, Any]) -> None:
    exchange = dataclasses.replace(request("subscriptions/listen", {"notifications": notifications}), listen=True)
    await pair.check(case, exchange, LISTEN_ACK, extra=acknowledgment)
