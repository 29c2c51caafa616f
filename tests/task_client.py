"""One client of the tasks extension (``io.modelcontextprotocol/tasks``) for the tests, over the bare
2026-07-28 client of :mod:`harness`: a route with tasks on, ``tasks/get`` / ``tasks/update`` /
``tasks/cancel``, a ``tools/call`` that must create a task, and a poll of ``tasks/get`` until the
task is where the test wants it.

Each helper checks what it is answered as strictly as the strictest of the copies the test modules
used to keep: a ``tasks/get`` answer is HTTP 200, ``resultType: complete``, for the task asked
about; a ``CreateTaskResult`` is HTTP 200, ``resultType: task``, ``status: working``, a non-empty
``taskId`` and flat (the fields of :data:`CREATED_FIELDS`, at most :data:`CREATED_OPTIONAL` more:
no ``result``, no nested ``task``).

Every request declares the extension: with ``capabilities`` None (the default) it sends the client's
own capabilities with the extension added; a dict given is sent as it is (a test that must not
declare the extension says so). ``authorization`` None keeps the client's own. A task request sends
``Mcp-Name: <taskId>`` as the spec asks a client to, unless ``name_header`` says otherwise.

A module that always sends other capabilities, or waits longer, binds its own once
(``functools.partial(task_client.reaches, timeout=30)``) rather than copying a helper.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from enum import Enum
from typing import Any

from harness import ALL_CAPS, BareClient, Reply, route
from waiting import eventually

TASKS = "io.modelcontextprotocol/tasks"
TERMINAL = ("completed", "failed", "cancelled")
WAIT = 10.0
"""Default bound, in seconds, on a poll of a task (a module whose tools work longer passes its own)."""
INTERVAL = 0.05
"""Seconds between two ``tasks/get`` of a poll."""
CREATED_FIELDS = frozenset({"resultType", "taskId", "status", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"})
"""The fields every ``CreateTaskResult`` has."""
CREATED_OPTIONAL = frozenset({"statusMessage", "_meta"})
"""The only other fields a ``CreateTaskResult`` may have."""
TASK_FIELDS = frozenset({"taskId", "status", "result", "error", "inputRequests", "requestState", "task"})
"""Fields of a task (or of an answer that is not an acknowledgement): none is in an acknowledgement."""

Task = dict[str, Any]


def declaring(capabilities: Mapping[str, Any] = ALL_CAPS) -> dict[str, Any]:
    """``capabilities`` with the tasks extension declared too."""
    return {**capabilities, "extensions": {**capabilities.get("extensions", {}), TASKS: {}}}


DECLARING = declaring()
"""Every client capability of :data:`harness.ALL_CAPS`, and the extension."""


class NameHeader(Enum):
    """The ``Mcp-Name`` a task request sends by default."""

    TASK_ID = "the task's id"


def tasks_route(
    backend_url: str,
    *,
    name: str = "tasks",
    path: str = "/mcp",
    backend: dict[str, Any] | None = None,
    mode: str | None = None,
    **tasks: Any,
) -> dict[str, Any]:
    """A route (:func:`harness.route`) with tasks on. ``mode``: its ``tasks.default.mode`` (None: the
    gateway's default); ``tasks``: its other ``tasks`` settings (``tools``, ``ttl``,
    ``poll_interval_ms``, ``retention`` ...); ``backend``: its backend's settings besides the URL."""
    settings: dict[str, Any] = {"enabled": True}
    if mode is not None:
        settings["default"] = {"mode": mode}
    return route(name, path, backend_url, backend=backend or {}, tasks={**settings, **tasks})


def _capabilities(client: BareClient, capabilities: dict[str, Any] | None) -> dict[str, Any]:
    return declaring(client.capabilities) if capabilities is None else capabilities


async def task_request(
    client: BareClient,
    method: str,
    task_id: str,
    *,
    name_header: str | NameHeader | None = NameHeader.TASK_ID,
    capabilities: dict[str, Any] | None = None,
    authorization: str | None = None,
    **params: Any,
) -> Reply:
    """``method`` (``tasks/get``, ``tasks/update``, ``tasks/cancel``, or a removed ``tasks/*``) for
    ``task_id``, with ``params`` besides the id; its answer, unchecked. ``name_header``: the
    ``Mcp-Name`` sent (default the id; None: no header)."""
    name = task_id if name_header is NameHeader.TASK_ID else name_header
    return await client.request(
        method,
        {"taskId": task_id, **params},
        headers={} if name is None else {"Mcp-Name": name},
        capabilities=_capabilities(client, capabilities),
        authorization=authorization,
    )


async def get(
    client: BareClient,
    task_id: str,
    *,
    name_header: str | NameHeader | None = NameHeader.TASK_ID,
    capabilities: dict[str, Any] | None = None,
    authorization: str | None = None,
) -> Task:
    """``tasks/get``: the task (a ``DetailedTask``), once its answer is checked to be one, of this task."""
    reply = await task_request(
        client, "tasks/get", task_id, name_header=name_header, capabilities=capabilities, authorization=authorization
    )
    assert reply.status == 200, reply.body
    task: Task = reply.result
    assert task["resultType"] == "complete", task
    assert task["taskId"] == task_id, task
    return task


async def until(
    fetch: Callable[[], Awaitable[Task]],
    check: Callable[[Task], bool],
    *,
    what: str,
    seen: list[Task] | None = None,
    timeout: float = WAIT,
    interval: float = INTERVAL,
) -> Task:
    """Call ``fetch`` (a ``tasks/get``, e.g. :func:`get`) until ``check`` holds for the task it
    returns; return that task. Every task fetched is appended to ``seen`` when one is given; a poll
    that runs out fails naming ``what`` and the last task fetched."""
    fetched: list[Task] = [] if seen is None else seen

    async def probe() -> Task | None:
        task = await fetch()
        fetched.append(task)
        return task if check(task) else None

    found: Task = await eventually(
        probe, what=lambda: f"{what} (last: {fetched[-1:]})", timeout=timeout, interval=interval
    )
    return found


async def reaches(
    client: BareClient,
    task_id: str,
    *statuses: str,
    seen: list[Task] | None = None,
    timeout: float = WAIT,
    interval: float = INTERVAL,
    name_header: str | NameHeader | None = NameHeader.TASK_ID,
    capabilities: dict[str, Any] | None = None,
    authorization: str | None = None,
) -> Task:
    """Poll :func:`get` (:func:`until`) until the task is in one of ``statuses``; return it."""
    assert statuses, "reaches which status?"
    return await until(
        lambda: get(client, task_id, name_header=name_header, capabilities=capabilities, authorization=authorization),
        lambda task: task["status"] in statuses,
        what=f"task {task_id} reaches {' or '.join(statuses)}",
        seen=seen,
        timeout=timeout,
        interval=interval,
    )


def created(reply: Reply) -> Task:
    """The ``CreateTaskResult`` of a ``tools/call`` that must have made a task, checked (module docstring)."""
    assert reply.status == 200, reply.body
    task: Task = reply.result
    assert task["resultType"] == "task", task
    assert task["status"] == "working", task
    assert isinstance(task["taskId"], str), task
    assert task["taskId"], task
    assert CREATED_FIELDS <= set(task) <= CREATED_FIELDS | CREATED_OPTIONAL, task  # flat: no result, no `task`
    return task


async def create(
    client: BareClient,
    tool: str,
    arguments: dict[str, Any] | None = None,
    *,
    capabilities: dict[str, Any] | None = None,
    authorization: str | None = None,
) -> Task:
    """``tools/call`` of ``tool`` that the gateway must answer with a task: its ``CreateTaskResult``."""
    reply = await client.call_tool(
        tool, arguments, capabilities=_capabilities(client, capabilities), authorization=authorization
    )
    return created(reply)


def ack_only(reply: Reply) -> None:
    """A ``tasks/update`` / ``tasks/cancel`` acknowledgement: HTTP 200, ``resultType: complete`` and
    no task fields."""
    assert reply.status == 200, reply.body
    assert reply.result["resultType"] == "complete", reply.result
    assert not TASK_FIELDS & set(reply.result), reply.result
