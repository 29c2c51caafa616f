"""Tasks the gateway makes of legacy calls (the ``io.modelcontextprotocol/tasks`` extension): how
many there are by status, how they were made and ended, how old they were at the end, which were
evicted, which task ids were refused and why, and the bytes of results kept. Every label is
bounded: route, a status of :data:`TASK_STATUSES`, a reason from a fixed list."""

from __future__ import annotations

from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from gateway.observability.metrics.labels import Bounded, Capped, OneOf, route_label

TASK_STATUSES: Final = ("working", "input_required", "completed", "failed", "cancelled")
"""Every status of a task (the extension's ``TaskStatus``)."""
TASK_AGE_BUCKETS: Final = (0.1, 0.5, 1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 86400)


class TaskFamilies:
    """Tasks by route: the live count by status, and what happened to them."""

    def __init__(self, r: CollectorRegistry) -> None:
        self.tasks = Bounded(
            Gauge("mrtr_gateway_tasks", "Tasks kept by this replica, by status", ["route", "status"], registry=r),
            route_label(),
            OneOf(TASK_STATUSES),
        )
        self.tasks_created = Bounded(
            Counter("mrtr_gateway_tasks_created", "Tasks made of legacy calls", ["route"], registry=r),
            route_label(),
        )
        self.tasks_ended = _tasks_ended(r)
        self.task_age = _task_age(r)
        self.tasks_evicted = Bounded(
            Counter(
                "mrtr_gateway_tasks_evicted",
                "Finished tasks dropped before their time to make room (limits.max_tasks*, max_task_result_bytes)",
                ["route"],
                registry=r,
            ),
            route_label(),
        )
        self.tasks_refused = Bounded(
            Counter(
                "mrtr_gateway_tasks_refused",
                "Calls that would have become tasks, refused at a limit (HTTP 503), by cause",
                ["route", "cause"],
                registry=r,
            ),
            route_label(),
            Capped(16),
        )
        self.task_id_refused = Bounded(
            Counter(
                "mrtr_gateway_task_id_refused",
                "tasks/* requests answered 'Task not found', by the real reason",
                ["route", "reason"],
                registry=r,
            ),
            route_label(),
            Capped(16),
        )
        self.task_update_ignored_keys = Bounded(
            Counter(
                "mrtr_gateway_task_update_ignored_keys",
                "tasks/update inputResponses keys ignored (not outstanding)",
                ["route"],
                registry=r,
            ),
            route_label(),
        )
        self.task_retained_bytes = Gauge(
            "mrtr_gateway_task_retained_bytes", "Bytes of results kept by finished tasks", registry=r
        )


def _tasks_ended(r: CollectorRegistry) -> Bounded[Counter]:
    """Tasks that reached a terminal status, by route, status and reason."""
    return Bounded(
        Counter(
            "mrtr_gateway_tasks_ended",
            "Tasks that reached a terminal status, by status and reason (the backend's, a cancel, or why the "
            "gateway ended it)",
            ["route", "status", "reason"],
            registry=r,
        ),
        route_label(),
        OneOf(TASK_STATUSES),
        Capped(32),
    )


def _task_age(r: CollectorRegistry) -> Bounded[Histogram]:
    """The age of a task when it reached a terminal status, by route and status."""
    return Bounded(
        Histogram(
            "mrtr_gateway_task_age_seconds",
            "Age of a task when it reached a terminal status",
            ["route", "status"],
            registry=r,
            buckets=TASK_AGE_BUCKETS,
        ),
        route_label(),
        OneOf(TASK_STATUSES),
    )
