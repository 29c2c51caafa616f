"""Legacy tasks passed through: a backend's own experimental (2025-11-25) task served as a 2026-07-28 task.

A legacy server that declares ``capabilities.tasks.requests.tools.call`` runs a tool whose
``execution.taskSupport`` is ``optional`` or ``required`` as a task of its own when the ``tools/call``
carries ``params.task`` (``{ttl}``, milliseconds): it answers at once with a ``CreateTaskResult``
(``{task: {taskId, status, ttl, pollInterval, ...}}``), and the task's questions (``elicitation/create``
sent with ``relatedTask``) and its final result both travel on the response stream of one
``tasks/result`` request, which the server holds open until the task has ended. A legacy task lives
in its session: the session is pinned (the call's exclusive lease) until the task has ended.

On a route with tasks enabled, :class:`AllTasks` (the call core's
:class:`~gateway.calls.core.TaskMaker`: the route's tasks made by
:class:`~gateway.mcptasks.service.TaskService`, plus this) asks, for each ``tools/call``, whether the
backend session declares tasks for ``tools/call`` and the tool supports them (one ``tools/list`` per
backend session, on that session: tools may differ by session). For such a call it creates the task
upstream (``task.ttl`` = the route's ``tasks.ttl``), then sends ``tasks/result`` at once:

* a client that declared the extension gets a task of the gateway's (its record in the
  :class:`~gateway.mcptasks.table.TaskTable`, its sealed ``t1.`` id, ``tasks/get|update|cancel``
  unchanged), driven by :class:`PassthroughRunner` over the held ``tasks/result`` exchange: the
  questions become ``input_required`` under gateway-minted keys and ``tasks/update`` answers them,
  as for any task (:class:`~gateway.mcptasks.runner.TaskRunner`); ``notifications/tasks/status`` of
  this task becomes the ``statusMessage``; the ``tasks/result`` answer becomes ``completed`` (its
  ``related-task`` ``_meta`` dropped, as from any legacy result) or ``failed``; ``tasks/cancel``
  from the client sends the legacy ``tasks/cancel`` upstream (when the backend declares
  ``tasks.cancel``). Its ttl is the upstream task's when shorter than the route's, its poll
  interval the longer of the two (docs/conformance.md A27-A32);
* a client that did not declare it, calling a ``required`` tool, is answered as for any call: the
  core drives the ``tasks/result`` exchange, the task's questions as MRTR rounds, its result the
  call's result; with the tool's ``without_extension: reject`` it is answered -32021 instead, as a
  tasks-only server answers. An ``optional`` tool, for that client, is called as usual.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Final

import structlog
from mcp_types.jsonrpc import INTERNAL_ERROR

from gateway.calls.backend import Backend
from gateway.calls.context import CallContext
from gateway.calls.ending import CANCEL_GRACE, Ending
from gateway.calls.lease import Lease
from gateway.calls.request import Call
from gateway.errors import GatewayError, UpstreamError
from gateway.holds.registry import Pending
from gateway.legacy.session import (
    Exchange,
    FinalResponse,
    JsonObj,
    ServerNotification,
    SessionExpired,
)
from gateway.mcptasks.runner import TaskRunner
from gateway.mcptasks.service import TaskService, missing_extension
from gateway.translate import capabilities as caps
from gateway.translate import results

log = structlog.get_logger("gateway.mcptasks")

TASK_SUPPORT: Final = frozenset({"optional", "required"})
"""A tool's ``execution.taskSupport`` values that make it a legacy task."""
MAX_PAGES: Final = 20
"""Pages of ``tools/list`` read at most to learn a session's task tools."""
MAX_TASK_ID: Final = 256
"""Characters of a legacy task id accepted (it is sent back upstream, never to the client)."""
MAX_MESSAGE: Final = 1000
"""Characters of a legacy ``statusMessage`` kept."""
INVALID_CREATE = "The backend answered a task-augmented call without a valid task"


def declares(initialize_result: Mapping[str, Any], *path: str) -> bool:
    """The backend's ``initialize`` result declares ``capabilities.<path>`` (an object)."""
    node: Any = initialize_result.get("capabilities")
    for key in path:
        if not isinstance(node, Mapping):
            return False
        node = node.get(key)
    return isinstance(node, Mapping)


class AllTasks:
    """The core's task maker: it makes every task, the gateway's own (:class:`TaskService`: a call past
    its threshold) and a backend's own passed through (:meth:`pass_through`). The core asks it only
    about calls on routes with tasks enabled."""

    def __init__(self, service: TaskService, backend: Backend, draining: Callable[[], bool]) -> None:
        self._service = service
        self._backend = backend
        self._draining = draining
        self._tools: weakref.WeakKeyDictionary[object, dict[str, str]] = weakref.WeakKeyDictionary()
        """Per backend session: its tools that support legacy tasks, by name."""

    def threshold(self, call: Call) -> float | None:
        return self._service.threshold(call)

    def detach(self, lease: Lease, call: Call, exchange: Exchange) -> JsonObj:
        return self._service.detach(lease, call, exchange)

    async def pass_through(self, lease: Lease, call: Call) -> JsonObj | Exchange | None:
        """See :meth:`gateway.calls.core.TaskMaker.pass_through` and the module docstring."""
        request = call.request
        route = call.route
        if request.method != "tools/call" or not route.config.tasks.enabled:
            return None
        ctx = lease.ctx
        if not declares(ctx.session.initialize_result, "tasks", "requests", "tools", "call"):
            return None
        support = (await self._task_tools(ctx)).get(request.target)
        if support is None:
            return None
        policy = route.config.tasks
        as_task = caps.declares_tasks(request.client_capabilities) and not self._draining()
        if as_task and support == "optional" and policy.for_tool(request.target).mode == "off":
            return None  # the operator made no tasks of this tool; the backend runs it without one
        if not as_task and support != "required":
            return None
        if not caps.declares_tasks(request.client_capabilities) and (
            policy.for_tool(request.target).without_extension == "reject"
        ):
            raise missing_extension()
        created = await self._backend.send(ctx, ctx.backend_method, {**ctx.backend_params, "task": _task_param(call)})
        answer = await self._backend.plain_answer(ctx, created)
        task = answer.result.get("task") if answer.result is not None else None
        if not isinstance(task, Mapping):
            return self._backend.finish(ctx, request, answer)  # an error, or the backend ran it without a task
        legacy_id = task.get("taskId")
        if not isinstance(legacy_id, str) or not legacy_id or len(legacy_id) > MAX_TASK_ID:
            raise UpstreamError(INTERNAL_ERROR, INVALID_CREATE, reason="bad_legacy_task")
        await created.aclose()
        ttl = _ttl(task.get("ttl"), policy.ttl)
        if as_task:
            ctx.answer_within(ttl)  # the held tasks/result answers when the task ends
        held = await self._backend.send(ctx, results.LEGACY_TASK_RESULT, {"taskId": legacy_id})
        log.info("legacy_task_created", route=route.name, target=request.target, detached=as_task)
        if not as_task:
            return held
        return self._service.detach(
            lease,
            call,
            held,
            ttl=ttl,
            poll_interval_ms=_poll_interval_ms(task.get("pollInterval"), policy.poll_interval_ms),
            runner_type=partial(
                PassthroughRunner,
                legacy_id=legacy_id,
                cancellable=declares(ctx.session.initialize_result, "tasks", "cancel"),
            ),
        )

    async def _task_tools(self, ctx: CallContext) -> Mapping[str, str]:
        """The session's tools that support legacy tasks; nothing (not remembered) when it cannot list them."""
        session = ctx.session
        known = self._tools.get(session)
        if known is not None:
            return known
        try:
            known = await self._list_task_tools(ctx)
        except (GatewayError, SessionExpired) as exc:
            log.info("legacy_task_tools_unavailable", route=ctx.route.name, reason=getattr(exc, "reason", "expired"))
            return {}
        self._tools[session] = known
        return known

    async def _list_task_tools(self, ctx: CallContext) -> dict[str, str]:
        found: dict[str, str] = {}
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            exchange = await ctx.session.start("tools/list", {"cursor": cursor} if cursor else {}, ctx.headers)
            try:
                page = await self._backend.plain_answer(ctx, exchange)
            finally:
                await exchange.aclose()
            result = page.result if page.result is not None else {}
            tools = result.get("tools")
            for tool in tools if isinstance(tools, list) else []:
                execution = tool.get("execution") if isinstance(tool, Mapping) else None
                support = execution.get("taskSupport") if isinstance(execution, Mapping) else None
                name = tool.get("name") if isinstance(tool, Mapping) else None
                if isinstance(name, str) and support in TASK_SUPPORT:
                    found[name] = support
            next_cursor = result.get("nextCursor")
            cursor = next_cursor if isinstance(next_cursor, str) and next_cursor else None
            if cursor is None:
                break
        return found


def _task_param(call: Call) -> JsonObj:
    return {"ttl": int(call.route.config.tasks.ttl * 1000)}


def _ttl(legacy_ttl: object, route_ttl: float) -> float:
    """The task's ttl in seconds: the upstream task's (milliseconds; null is unlimited) when shorter."""
    if isinstance(legacy_ttl, int | float) and not isinstance(legacy_ttl, bool) and legacy_ttl > 0:
        return min(route_ttl, legacy_ttl / 1000)
    return route_ttl


def _poll_interval_ms(legacy_interval: object, route_interval_ms: int) -> int:
    """Polling faster than the backend suggests gains nothing: the longer of the two."""
    if isinstance(legacy_interval, int | float) and not isinstance(legacy_interval, bool) and legacy_interval > 0:
        return max(route_interval_ms, min(int(legacy_interval), 3_600_000))
    return route_interval_ms


@dataclass(kw_only=True, eq=False, repr=False)
class PassthroughRunner(TaskRunner):
    """A :class:`TaskRunner` over a legacy task's held ``tasks/result`` exchange (module docstring)."""

    legacy_id: str
    cancellable: bool
    """The backend declares ``capabilities.tasks.cancel``: ``tasks/cancel`` is sent upstream."""

    def _notified(self, event: ServerNotification) -> None:
        if event.method != "notifications/tasks/status":
            super()._notified(event)
            return
        message = event.params.get("statusMessage")
        if event.params.get("taskId") == self.legacy_id and isinstance(message, str) and message:
            self.table.progress(self.record, message[:MAX_MESSAGE])

    def _ending(self, reason: str, pending: tuple[Pending, ...]) -> Ending:
        """With the legacy ``tasks/cancel`` upstream first when the backend supports it (without it,
        closing the session is what ends a legacy task)."""
        ending = super()._ending(reason, pending)
        if not self.cancellable:
            return ending
        return replace(ending, first=partial(_cancel_upstream, legacy_id=self.legacy_id, reason=reason))


async def _cancel_upstream(ctx: CallContext, *, legacy_id: str, reason: str) -> None:
    """Send ``tasks/cancel`` upstream and wait for its answer; the wind-down then reads the held
    ``tasks/result`` to its end, and cancels it itself if it has still not ended
    (:meth:`~gateway.calls.backend.Backend.release`)."""
    try:
        cancelling = await ctx.session.start("tasks/cancel", {"taskId": legacy_id}, ctx.headers)
        try:
            async with asyncio.timeout(CANCEL_GRACE):
                while not isinstance(await cancelling.next(CANCEL_GRACE), FinalResponse):
                    pass  # its answer, whatever it is; nothing else is expected of it
        except TimeoutError:
            log.info("legacy_task_cancel_unanswered", route=ctx.route.name)
        finally:
            await cancelling.aclose()
        log.info("legacy_task_cancelled", route=ctx.route.name, reason=reason.replace(" ", "_"))
    except (GatewayError, SessionExpired) as exc:
        log.info("legacy_task_cancel_failed", route=ctx.route.name, reason=getattr(exc, "reason", "expired"))
    except Exception:  # deny-on-error: the session is still given back by the wind-down
        log.exception("legacy_task_cancel_failed", route=ctx.route.name)
