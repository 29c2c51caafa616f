"""The tasks extension's shapes, from a :class:`~gateway.mcptasks.table.TaskRecord` (pure).

* :func:`create_result` — the flat ``CreateTaskResult`` (``resultType: "task"``) a ``tools/call`` is
  answered with: the task's fields only, never ``inputRequests``, ``result`` or ``error``;
* :func:`detailed` — ``tasks/get``'s ``DetailedTask`` (``resultType: "complete"``): one shape per
  status (``input_required`` with every outstanding question, ``completed`` with ``result``,
  ``failed`` with ``error``);
* :func:`detailed_task` — the same ``DetailedTask`` as the ``params`` of a ``notifications/tasks``;
* :data:`ACK` — what ``tasks/update`` and ``tasks/cancel`` answer.

Timestamps are ISO 8601 UTC with milliseconds and ``Z``. Never ``requestState``, ``ttl`` or
``pollInterval`` (the legacy names) on any of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final

from gateway.mcptasks.table import TaskRecord
from gateway.translate import results

JsonObj = dict[str, Any]

ACK: Final[Mapping[str, str]] = {"resultType": "complete"}


def iso(unix: float) -> str:
    """``2026-11-25T18:30:00.000Z``."""
    return datetime.fromtimestamp(unix, UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{int(unix * 1000) % 1000:03d}Z"


def task_fields(record: TaskRecord) -> JsonObj:
    fields: JsonObj = {"taskId": record.task_id, "status": record.status}
    if record.status_message is not None:
        fields["statusMessage"] = record.status_message
    fields["createdAt"] = iso(record.created)
    fields["lastUpdatedAt"] = iso(record.updated)
    fields["ttlMs"] = int(record.ttl * 1000)
    fields["pollIntervalMs"] = record.poll_interval_ms
    return fields


def create_result(record: TaskRecord, server_info: Mapping[str, Any] | None) -> JsonObj:
    """The ``CreateTaskResult`` of a task just made (``working``)."""
    return results.with_server_info({"resultType": "task", **task_fields(record)}, server_info)


def detailed(record: TaskRecord, server_info: Mapping[str, Any] | None) -> JsonObj:
    """``tasks/get``'s answer: the task as it is now."""
    return results.with_server_info({"resultType": "complete", **detailed_task(record)}, server_info)


def detailed_task(record: TaskRecord) -> JsonObj:
    """The task as it is now, as a ``DetailedTask``: :func:`detailed` without the result's own fields
    (``resultType``, ``_meta``). It is the ``params`` of a ``notifications/tasks`` (docs/conformance.md),
    which the listen stream stamps with its ``subscriptionId``."""
    out = task_fields(record)
    if record.status == "input_required":
        out["inputRequests"] = dict(record.input_requests)
    elif record.status == "completed" and record.result is not None:
        out["result"] = record.result
    elif record.status == "failed" and record.error is not None:
        out["error"] = record.error
    return out


def progress_message(params: Mapping[str, Any]) -> str | None:
    """A legacy ``notifications/progress`` as a ``statusMessage``: its message, else ``progress/total``."""
    message = params.get("message")
    if isinstance(message, str) and message:
        return message[:1000]
    progress, total = params.get("progress"), params.get("total")
    if not isinstance(progress, int | float) or isinstance(progress, bool):
        return None
    if isinstance(total, int | float) and not isinstance(total, bool):
        return f"{progress:g}/{total:g}"
    return f"{progress:g}"
