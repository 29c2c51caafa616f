"""What a listen stream is told, decided without I/O: the acknowledgement, the notifications it
asked for (stamped with its ``subscriptionId``) and its final result.

Only what the backend's capabilities support is acknowledged (``tools.listChanged``,
``prompts.listChanged``, ``resources.listChanged``, ``resources.subscribe``); the rest is omitted
from the acknowledgment (basic/patterns/subscriptions.mdx §Acknowledgment).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from gateway import envelopes
from gateway.legacy.session import ServerNotification
from gateway.translate.results import with_server_info

SUBSCRIPTION_ID_KEY: Final = "io.modelcontextprotocol/subscriptionId"
LIST_CHANGED: Final = {
    "toolsListChanged": ("tools", "notifications/tools/list_changed"),
    "promptsListChanged": ("prompts", "notifications/prompts/list_changed"),
    "resourcesListChanged": ("resources", "notifications/resources/list_changed"),
}
QUEUE_SIZE: Final = 1000


def acknowledged(requested: Mapping[str, Any], capabilities: Mapping[str, Any]) -> dict[str, Any]:
    """The subset of ``requested`` a backend with ``capabilities`` can honour.

    What the backend does not support is omitted, never listed as ``false`` or ``[]``
    (basic/patterns/subscriptions.mdx §Acknowledgment: "Notification types the server does not
    support are omitted").
    """
    out: dict[str, Any] = {}
    for flag, (cap, _) in LIST_CHANGED.items():
        section = capabilities.get(cap)
        if requested.get(flag) is True and isinstance(section, Mapping) and section.get("listChanged") is True:
            out[flag] = True
    uris = requested.get("resourceSubscriptions")
    resources = capabilities.get("resources")
    if isinstance(uris, list) and isinstance(resources, Mapping) and resources.get("subscribe") is True:
        out["resourceSubscriptions"] = [u for u in uris if isinstance(u, str)]
    return out


@dataclass(eq=False)
class Listener:
    """One listen stream: what it asked for, and the messages waiting to be written to it."""

    subscription_id: str | int
    wants: dict[str, Any]
    queue: asyncio.Queue[dict[str, Any] | None] = field(default_factory=lambda: asyncio.Queue(maxsize=QUEUE_SIZE))

    def accepts(self, notification: ServerNotification) -> bool:
        for flag, (_, method) in LIST_CHANGED.items():
            if notification.method == method:
                return bool(self.wants.get(flag))
        if notification.method == "notifications/resources/updated":
            return notification.params.get("uri") in self.wants.get("resourceSubscriptions", [])
        return False

    def offer(self, notification: ServerNotification) -> None:
        params = dict(notification.params)
        params["_meta"] = {**dict(params.get("_meta") or {}), SUBSCRIPTION_ID_KEY: self.subscription_id}
        with contextlib.suppress(asyncio.QueueFull):  # a stalled client loses updates, not memory
            self.queue.put_nowait(envelopes.notification(notification.method, params))

    def acknowledgement(self) -> dict[str, Any]:
        return envelopes.notification(
            "notifications/subscriptions/acknowledged",
            {"_meta": {SUBSCRIPTION_ID_KEY: self.subscription_id}, "notifications": self.wants},
        )

    def final_result(self, server_info: Mapping[str, Any] | None) -> dict[str, Any]:
        """The ``complete`` result that ends the stream gracefully (gateway shutdown)."""
        result = {"resultType": "complete", "_meta": {SUBSCRIPTION_ID_KEY: self.subscription_id}}
        return envelopes.result(self.subscription_id, with_server_info(result, server_info))
