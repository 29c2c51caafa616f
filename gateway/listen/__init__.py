"""``subscriptions/listen``: list-change and resource-update notifications for modern clients.

A 2026-07-28 client opens a long-lived SSE response with ``subscriptions/listen`` instead of the
legacy GET stream and ``resources/subscribe``. Per route and presented credential the gateway
keeps one *listener* backend session (a :class:`~gateway.listen.hub.ListenHub`): its standalone GET
stream carries the legacy ``notifications/*/list_changed`` and ``notifications/resources/updated``,
which the hub fans out to every listen stream that asked for them, stamped with that stream's
``subscriptionId``. Resource subscriptions are reference-counted: ``resources/subscribe`` once per
URI when the first listener wants it, ``resources/unsubscribe`` when the last one leaves.
On a route with tasks, a listener also carries the ``notifications/tasks`` of the tasks its
``notifications.taskIds`` named and the task room let it follow (:mod:`gateway.mcptasks.watch`),
handed to :meth:`~gateway.listen.translate.Listener.task_changed` after every change of a task.

Three rooms: :mod:`~gateway.listen.translate` (pure: what is acknowledged, which notification goes
to which stream, the messages written), :mod:`~gateway.listen.hub` (the backend session and its
listeners, bounded) and :mod:`~gateway.listen.serve` (one SSE response).
"""
