"""What a listen stream is told, decided without I/O: the acknowledgement, the notifications it
asked for (stamped with its ``subscriptionId``) and its final result.

Only what the backend's capabilities support is acknowledged (``tools.listChanged``,
``prompts.listChanged``, ``resources.listChanged``, ``resources.subscribe``); the rest is omitted
from the acknowledgment (basic/patterns/subscriptions.mdx §Acknowledgment). ``taskIds`` (the tasks
extension) lists the tasks the gateway follows for the stream, decided by the task room.

A followed task's ``notifications/tasks`` does not wait in the queue: each task keeps only its latest
state until the stream writes it (:meth:`Listener.task_changed`), so a slow stream skips states in
between but always gets the last one, and never holds more than one message per task.
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
TASK_NOTIFICATION: Final = "notifications/tasks"
_WAKE: Final[dict[str, Any]] = {}
"""Queued for a task that became due: the writer's cue to look at :attr:`Listener.tasks_due`."""


def acknowledged(
    requested: Mapping[str, Any], capabilities: Mapping[str, Any], task_ids: list[str] | None = None
) -> dict[str, Any]:
    """The subset of ``requested`` a backend with ``capabilities`` can honour, and ``task_ids``: the
    tasks followed (None: the route has no tasks, and ``taskIds`` is omitted like any type it does not
    support; else listed, ``[]`` when none of the named ids is followed).

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
    if task_ids is not None:
        out["taskIds"] = list(task_ids)
    return out


@dataclass(eq=False)
class Listener:
    """One listen stream: what it asked for, and the messages waiting to be written to it."""

    subscription_id: str | int
    wants: dict[str, Any]
    queue: asyncio.Queue[dict[str, Any] | None] = field(default_factory=lambda: asyncio.Queue(maxsize=QUEUE_SIZE))
    tasks_due: dict[str, dict[str, Any]] = field(default_factory=dict)
    """taskId -> the latest ``notifications/tasks`` of that task not yet written (one per followed task)."""

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

    def task_changed(self, task: Mapping[str, Any]) -> None:
        """A followed task as it is now (a ``DetailedTask``): due to be written, replacing any state of
        it not written yet. Never blocks: it runs inside the task's change."""
        task_id = str(task.get("taskId"))
        fresh = task_id not in self.tasks_due
        params = {**task, "_meta": {SUBSCRIPTION_ID_KEY: self.subscription_id}}
        self.tasks_due[task_id] = envelopes.notification(TASK_NOTIFICATION, params)
        if fresh:
            with contextlib.suppress(asyncio.QueueFull):  # a full queue wakes the writer anyway
                self.queue.put_nowait(_WAKE)

    async def next(self) -> dict[str, Any] | None:
        """The next message to write: a due task's latest state first, else the queue's next (None:
        the backend session is gone)."""
        while True:
            if self.tasks_due:
                return self.tasks_due.pop(next(iter(self.tasks_due)))
            message = await self.queue.get()
            if message is not _WAKE:
                return message

    def acknowledgement(self) -> dict[str, Any]:
        return envelopes.notification(
            "notifications/subscriptions/acknowledged",
            {"_meta": {SUBSCRIPTION_ID_KEY: self.subscription_id}, "notifications": self.wants},
        )

    def final_result(self, server_info: Mapping[str, Any] | None) -> dict[str, Any]:
        """The ``complete`` result that ends the stream gracefully (gateway shutdown)."""
        result = {"resultType": "complete", "_meta": {SUBSCRIPTION_ID_KEY: self.subscription_id}}
        return envelopes.result(self.subscription_id, with_server_info(result, server_info))
