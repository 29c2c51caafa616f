"""The owner's tasks: one :class:`TaskRecord` per task this replica runs or keeps, bounded.

A task's record is what ``tasks/get`` reads: its status, ``statusMessage``, the questions still
outstanding (``inputRequests``, under keys the gateway minted), and at the end its ``result`` or
``error``. The record is inserted before the ``CreateTaskResult`` is answered, so a ``tasks/get``
sent the instant after it resolves. ``lastUpdatedAt`` moves only when the status, the status
message or the questions change (docs/conformance.md A9).

Bounds (``limits``): ``max_tasks`` records in all, ``max_tasks_per_principal`` per principal (the
anonymous callers together count as one) and ``max_task_result_bytes`` of results kept. At a cap the
finished record that ended first is evicted (its id then reads "not found"); with none to evict, a
new task is refused (:class:`~gateway.errors.TaskLimitReached`: HTTP 503 + Retry-After) and a result
that cannot fit ends its task ``failed`` (``result_too_large``). :meth:`TaskTable.sweep`, run every
second by the app, drops finished records past their time: ``ttl`` after creation and at least
``retention`` after the end.

Change hooks (:meth:`TaskTable.watch`): a ``subscriptions/listen`` stream that follows a task is
called after each change of its record, inside the change; a hook only queues a bounded message, so
no follower can hold a task up. A record that goes drops its hooks.
"""

from __future__ import annotations

import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

import structlog

from gateway.errors import TaskLimitReached, task_lost
from gateway.observability.metrics.registry import Metrics

log = structlog.get_logger("gateway.mcptasks")

JsonObj = dict[str, Any]

TERMINAL: Final = frozenset({"completed", "failed", "cancelled"})


class TaskControl(Protocol):
    """What drives a running task (:class:`gateway.mcptasks.runner.TaskRunner`)."""

    async def update(self, responses: Mapping[str, Any]) -> int:
        """Post the answers to outstanding keys upstream; returns how many keys were ignored."""
        ...

    def cancel(self) -> None:
        """Mark the task cancelled at once and stop its backend work in the background."""
        ...


@dataclass(eq=False)
class TaskRecord:
    """One task as its owner keeps it; changed only through :class:`TaskTable`."""

    key: str
    task_id: str
    route: str
    principal: str | None
    created: float
    """Unix seconds."""
    ttl: float
    retention: float
    poll_interval_ms: int
    status: str = "working"
    updated: float = 0.0
    status_message: str | None = None
    input_requests: dict[str, JsonObj] = field(default_factory=dict)
    result: JsonObj | None = None
    error: JsonObj | None = None
    result_bytes: int = 0
    ended: float | None = None
    reason: str | None = None
    """Why it ended, for logs and metrics (the backend's answer, cancelled, or a lost reason)."""
    control: TaskControl | None = None
    """The runner while the task runs; None once it has ended."""
    server_info: Mapping[str, Any] | None = None
    """The backend's ``serverInfo``, for every answer's ``_meta``."""
    watchers: list[Callable[[TaskRecord], None]] | None = None
    """Hooks called after every change (:meth:`TaskTable.watch`: listen streams following the task); None: none."""

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    @property
    def keep_until(self) -> float:
        """Unix seconds from which a finished record may go: ``ttl`` after creation, ``retention`` after the end."""
        if self.ended is None:
            return self.created + self.ttl + self.retention
        return max(self.created + self.ttl, self.ended + self.retention)


@dataclass(kw_only=True, eq=False, repr=False)
class TaskTable:
    """This replica's task records, bounded; see the module docstring."""

    max_tasks: int
    max_per_principal: int
    max_result_bytes: int
    retry_after: int
    metrics: Metrics | None = None
    clock: Callable[[], float] = time.time
    _records: dict[str, TaskRecord] = field(default_factory=dict, init=False)
    _ended: OrderedDict[str, None] = field(default_factory=OrderedDict, init=False)
    """Keys of finished records, the one that ended first first (eviction order)."""
    _per_principal: Counter[str | None] = field(default_factory=Counter, init=False)
    _by_status: Counter[tuple[str, str]] = field(default_factory=Counter, init=False)
    retained_bytes: int = field(default=0, init=False)
    watching: int = field(default=0, init=False)
    """Change hooks registered on records (:meth:`watch`), across all records."""

    def __len__(self) -> int:
        return len(self._records)

    @property
    def running(self) -> int:
        """Tasks not yet finished."""
        return len(self._records) - len(self._ended)

    def get(self, key: str) -> TaskRecord | None:
        return self._records.get(key)

    def now(self) -> float:
        return self.clock()

    # -- admission ---------------------------------------------------------------------------

    def add(self, record: TaskRecord) -> None:
        """Insert a new (working) task, evicting finished ones at a cap; :class:`TaskLimitReached`
        when nothing can be evicted."""
        principal = record.principal
        if self._per_principal[principal] >= self.max_per_principal and not self._evict(principal, mine=True):
            self._refused(record.route, "max_tasks_per_principal")
        if len(self._records) >= self.max_tasks and not self._evict(principal, mine=False):
            self._refused(record.route, "max_tasks")
        record.updated = record.created
        self._records[record.key] = record
        self._per_principal[record.principal] += 1
        self._count(record, +1)
        if self.metrics is not None:
            self.metrics.tasks_created.labels(record.route).inc()

    def _refused(self, route: str, cause: str) -> None:
        if self.metrics is not None:
            self.metrics.tasks_refused.labels(route, cause).inc()
        raise TaskLimitReached(cause, self.retry_after)

    def _evict(self, principal: str | None, *, mine: bool) -> bool:
        """Drop the finished record that ended first (of ``principal`` if ``mine``); False if none."""
        for key in self._ended:
            record = self._records[key]
            if not mine or record.principal == principal:
                self._remove(record)
                if self.metrics is not None:
                    self.metrics.tasks_evicted.labels(record.route).inc()
                return True
        return False

    # -- changes -----------------------------------------------------------------------------

    def progress(self, record: TaskRecord, message: str) -> None:
        """A new ``statusMessage`` for a running task."""
        if not record.terminal and message != record.status_message:
            record.status_message = message
            record.updated = self.clock()
            self._changed(record)

    def ask(self, record: TaskRecord, key: str, request: JsonObj) -> None:
        """A question outstanding under ``key``: the task is ``input_required``."""
        if record.terminal:
            return
        record.input_requests[key] = request
        self._move(record, "input_required")

    def answered(self, record: TaskRecord, keys: list[str]) -> None:
        """``keys`` were answered; the task works again once none is outstanding."""
        if record.terminal:
            return
        for key in keys:
            record.input_requests.pop(key, None)
        self._move(record, "input_required" if record.input_requests else "working", changed=bool(keys))

    def finish(
        self,
        record: TaskRecord,
        status: str,
        *,
        reason: str,
        result: JsonObj | None = None,
        error: JsonObj | None = None,
        size: int = 0,
    ) -> bool:
        """End the task (``completed`` with ``result`` of ``size`` bytes, ``failed`` with ``error``,
        or ``cancelled``); False, and nothing changed, if it had already ended. A result that
        cannot be kept ends it ``failed`` (``result_too_large``)."""
        if record.terminal:
            return False
        if result is not None and not self._room_for(size):
            status, result, error, reason, size = "failed", None, task_lost("result_too_large"), "result_too_large", 0
        record.input_requests = {}
        record.result, record.error, record.reason = result, error, reason
        record.result_bytes = size
        self.retained_bytes += size
        if error is not None:
            record.status_message = str(error.get("message", ""))[:1000] or None
        now = self.clock()
        record.ended = now
        self._ended[record.key] = None
        self._move(record, status)
        if self.metrics is not None:
            self.metrics.tasks_ended.labels(record.route, status, reason).inc()
            self.metrics.task_age.labels(record.route, status).observe(max(now - record.created, 0.0))
            self.metrics.task_retained_bytes.set(self.retained_bytes)
        record.control = None
        return True

    def _room_for(self, size: int) -> bool:
        if size > self.max_result_bytes:
            return False
        while self.retained_bytes + size > self.max_result_bytes:
            if not self._evict_bytes():
                return False
        return True

    def _evict_bytes(self) -> bool:
        for key in self._ended:
            record = self._records[key]
            if record.result_bytes:
                self._remove(record)
                if self.metrics is not None:
                    self.metrics.tasks_evicted.labels(record.route).inc()
                return True
        return False

    def _move(self, record: TaskRecord, status: str, *, changed: bool = True) -> None:
        if status != record.status:
            self._count(record, -1)
            record.status = status
            self._count(record, +1)
        elif not changed:
            return
        record.updated = self.clock()
        self._changed(record)

    def _count(self, record: TaskRecord, delta: int) -> None:
        label = (record.route, record.status)
        self._by_status[label] += delta
        if self.metrics is not None:
            self.metrics.tasks.labels(*label).set(self._by_status[label])

    # -- change hooks ------------------------------------------------------------------------

    def watch(self, record: TaskRecord, hook: Callable[[TaskRecord], None]) -> None:
        """Call ``hook(record)`` after every change of ``record`` (status, ``statusMessage``,
        ``inputRequests``, its end) until :meth:`unwatch` or the record goes. A hook runs inside the
        change, so it must not block or raise: a listen stream only queues a bounded message."""
        if self._records.get(record.key) is not record or (record.watchers is not None and hook in record.watchers):
            return
        if record.watchers is None:
            record.watchers = []
        record.watchers.append(hook)
        self.watching += 1

    def unwatch(self, record: TaskRecord, hook: Callable[[TaskRecord], None]) -> None:
        """Stop calling ``hook``; nothing if it is not registered (any more)."""
        if record.watchers is None or hook not in record.watchers:
            return
        record.watchers.remove(hook)
        self.watching -= 1
        if not record.watchers:
            record.watchers = None

    def _changed(self, record: TaskRecord) -> None:
        for hook in list(record.watchers or ()):
            try:
                hook(record)
            except Exception:  # deny-on-error: a broken follower must not break the task it follows
                log.exception("task_watcher_failed")
                self.unwatch(record, hook)

    # -- expiry ------------------------------------------------------------------------------

    def sweep(self) -> None:
        """Drop every finished record past :attr:`TaskRecord.keep_until`."""
        now = self.clock()
        gone = [self._records[key] for key in self._ended if self._records[key].keep_until <= now]
        for record in gone:
            self._remove(record)

    def _remove(self, record: TaskRecord) -> None:
        del self._records[record.key]
        if record.watchers is not None:  # a record that goes ends its followers' interest: nothing more will change
            self.watching -= len(record.watchers)
            record.watchers = None
        self._ended.pop(record.key, None)
        self._per_principal[record.principal] -= 1
        if self._per_principal[record.principal] <= 0:
            del self._per_principal[record.principal]
        self.retained_bytes -= record.result_bytes
        self._count(record, -1)
        if self.metrics is not None:
            self.metrics.task_retained_bytes.set(self.retained_bytes)
