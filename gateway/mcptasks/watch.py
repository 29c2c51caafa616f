"""The tasks one ``subscriptions/listen`` stream follows (``notifications.taskIds``).

:meth:`~gateway.mcptasks.service.TaskService.follow` decides which of the named ids a stream may
follow and returns a :class:`TaskWatch` of their records. Started with the stream's ``send``, the
watch hands it each task's current ``DetailedTask`` at once (a change between the
``CreateTaskResult`` and the listen is not lost), then the whole ``DetailedTask`` again after every
change of the task (:meth:`~gateway.mcptasks.table.TaskTable.watch`), until it is stopped.
``send`` runs inside the change, so it must only queue (the listen room's bounded, coalescing
queue does).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from gateway.mcptasks import wire
from gateway.mcptasks.table import TaskRecord, TaskTable

JsonObj = dict[str, Any]

MAX_TASK_IDS: Final = 100
"""Most task ids one listen stream follows (``limits.max_tasks_per_principal``'s default): the ids
past the 100th of a ``notifications.taskIds`` are left out of the acknowledgment unread."""


class TaskWatch:
    """Some tasks of this replica, followed by one listen stream; see the module docstring."""

    def __init__(self, table: TaskTable, records: list[TaskRecord]) -> None:
        self._table = table
        self._records = records
        self._send: Callable[[JsonObj], None] | None = None

    @property
    def task_ids(self) -> list[str]:
        """The ids the stream's acknowledgment lists (in the order they were asked for)."""
        return [record.task_id for record in self._records]

    def start(self, send: Callable[[JsonObj], None]) -> None:
        """Give ``send`` each task as it is now, then after each change, until :meth:`stop`."""
        self._send = send
        for record in self._records:
            send(wire.detailed_task(record))
            self._table.watch(record, self._changed)

    def stop(self) -> None:
        """Stop following (the stream ended); safe to call more than once."""
        self._send = None
        for record in self._records:
            self._table.unwatch(record, self._changed)

    def _changed(self, record: TaskRecord) -> None:
        if self._send is not None:
            self._send(wire.detailed_task(record))
