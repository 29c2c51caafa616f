"""Tasks (the ``io.modelcontextprotocol/tasks`` extension) the gateway makes of legacy calls.

* :mod:`~gateway.mcptasks.ids` — ``t1.`` sealed task ids (pure);
* :mod:`~gateway.mcptasks.table` — the owner's task records, bounded, swept;
* :mod:`~gateway.mcptasks.wire` — the extension's shapes (pure);
* :mod:`~gateway.mcptasks.runner` — one task's held legacy exchange, driven to its end;
* :mod:`~gateway.mcptasks.passthrough` — a backend's own (2025-11-25) task served as one of these, and
  :class:`~gateway.mcptasks.passthrough.AllTasks`, the call core's task maker (every task);
* :mod:`~gateway.mcptasks.watch` — the tasks one ``subscriptions/listen`` stream follows;
* :mod:`~gateway.mcptasks.service` — the tasks this replica makes and the front door's ``tasks/*`` entry.

It sits beside :mod:`gateway.calls` and may import it; ``calls`` never imports it (it is handed a
:class:`~gateway.calls.core.TaskMaker`), and nothing here imports the front door.
"""
