"""The owner's tasks: the call core's :class:`~gateway.calls.core.TaskMaker`, and the front door's
one entry for ``tasks/get``, ``tasks/update`` and ``tasks/cancel``.

Making a task. The core asks :meth:`TaskService.threshold` whether a call may become a task (a
``tools/call`` on a route with tasks enabled, whose tool's mode is ``after`` or ``always``, from a
request that declared the extension, on a replica that is not draining) and how long it may run
first. At that threshold with no final answer, :meth:`TaskService.detach` seals the task id, inserts
the record (before the answer is written, so an immediate ``tasks/get`` resolves), hands the call's
lease to a :class:`~gateway.mcptasks.runner.TaskRunner` started in the ``mcp-tasks`` group, and
returns the ``CreateTaskResult``. A table at its caps refuses the task (HTTP 503): the request's
lease then gives the call up, cancelled upstream.

Answering. The order of checks is the spec's (docs/conformance.md A11): the routing headers were
checked by the front door's ladder, then the extension must be declared in the request (-32021),
then the task id must open for this route and caller and name a task this replica keeps (-32602,
one fixed message; the real reason is logged and counted). Forwarding a task id another replica owns
is a later step: here it is "not found" (``elsewhere``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any, NoReturn

import structlog

from gateway.calls.backend import Backend, Lease
from gateway.calls.request import Call
from gateway.errors import InvalidParams, MissingCapability, TaskNotFound
from gateway.legacy.session import Exchange, JsonObj
from gateway.mcptasks import wire
from gateway.mcptasks.ids import TaskClaims, TaskIdRejected, TaskIds
from gateway.mcptasks.runner import TaskRunner
from gateway.mcptasks.table import TaskRecord, TaskTable
from gateway.observability.metrics import Metrics
from gateway.observability.requests import task_digest
from gateway.tasks import TaskGroup
from gateway.translate import capabilities as caps
from gateway.translate import results

log = structlog.get_logger("gateway.mcptasks")

MISSING_EXTENSION = f"Missing required client capability: {caps.TASKS_EXTENSION}"


def missing_extension() -> MissingCapability:
    return MissingCapability(caps.tasks_required(), MISSING_EXTENSION)


class TaskService:
    """Tasks owned by this replica; see the module docstring."""

    def __init__(
        self,
        *,
        ids: TaskIds,
        table: TaskTable,
        backend: Backend,
        metrics: Metrics,
        group: TaskGroup,
        background: TaskGroup,
        replica_id: str,
        boot: str,
        advertise_url: str | None,
        principal_tag: Callable[[str | None], str | None],
        draining: Callable[[], bool],
    ) -> None:
        self._ids = ids
        self.table = table
        self._backend = backend
        self._metrics = metrics
        self._group = group
        self._background = background
        self._replica_id = replica_id
        self._boot = boot
        self._advertise_url = advertise_url
        self._principal_tag = principal_tag
        self._draining = draining

    # -- making tasks (the core's TaskMaker) -------------------------------------------------

    def threshold(self, call: Call) -> float | None:
        """Seconds ``call`` may run before it becomes a task; None: it never does. A tool whose
        ``without_extension`` is ``reject``, called without the extension, raises -32021."""
        request = call.request
        if request.method != "tools/call":
            return None
        policy = call.route.config.tasks.for_tool(request.target)
        if policy.mode == "off":
            return None
        if not caps.declares_tasks(request.client_capabilities):
            if policy.without_extension == "reject":
                raise missing_extension()
            return None
        if self._draining():
            return None  # a draining replica makes no task: the call runs as an ordinary one
        return 0.0 if policy.mode == "always" else policy.after_ms / 1000

    def detach(self, lease: Lease, call: Call, exchange: Exchange) -> JsonObj:
        """Make ``call`` a task (see the module docstring); its ``CreateTaskResult``."""
        ctx = lease.ctx
        route = call.route
        policy = route.config.tasks
        now = self.table.now()
        principal = self._principal_tag(call.caller.principal)
        claims = TaskClaims.new(
            owner=self._replica_id,
            owner_url=self._advertise_url,
            boot=self._boot,
            principal=principal,
            created_ms=int(now * 1000),
            not_after_ms=int((now + policy.ttl + policy.retention) * 1000),
        )
        record = TaskRecord(
            key=claims.key,
            task_id=self._ids.seal(route.name, claims),
            route=route.name,
            principal=principal,
            created=now,
            ttl=policy.ttl,
            retention=policy.retention,
            poll_interval_ms=policy.poll_interval_ms,
            server_info=results.server_info_of(ctx.session.initialize_result),
        )
        lease.cancel = "task limit reached"  # a refused task: the request's lease cancels the call
        self.table.add(record)
        runner = TaskRunner(
            record=record,
            table=self.table,
            backend=self._backend,
            ctx=ctx,
            exchange=exchange,
            request=call.request,
            deadline=asyncio.get_running_loop().time() + policy.ttl,
            background=self._background,
        )
        record.control = runner
        lease.hand_over(runner)
        runner.start(self._group)
        log.info("task_created", route=route.name, task=task_digest(record.task_id), target=call.request.target)
        return wire.create_result(record, record.server_info)

    # -- tasks/get, tasks/update, tasks/cancel -----------------------------------------------

    async def answer(
        self, route: str, method: str, params: Mapping[str, Any], capabilities: Mapping[str, Any], caller: str | None
    ) -> tuple[JsonObj, TaskRecord]:
        """The answer to a ``tasks/*`` request on ``route`` from ``caller`` (its principal), and the task."""
        if not caps.declares_tasks(capabilities):
            raise missing_extension()
        record = self._find(route, params.get("taskId"), self._principal_tag(caller))
        if method == "tasks/get":
            return wire.detailed(record, record.server_info), record
        if method == "tasks/update":
            responses = params.get("inputResponses")
            if not isinstance(responses, Mapping):
                raise InvalidParams("Invalid params: inputResponses must be an object", reason="bad_input_responses")
            control = record.control
            ignored = await control.update(responses) if control is not None else len(responses)
            if ignored:
                self._metrics.task_update_ignored_keys.labels(route).inc(ignored)
        elif method == "tasks/cancel" and record.control is not None:
            record.control.cancel()
        return results.with_server_info(dict(wire.ACK), record.server_info), record

    def _find(self, route: str, task_id: object, principal: str | None) -> TaskRecord:
        try:
            claims = self._ids.open(task_id, route=route, principal=principal, now_ms=int(self.table.now() * 1000))
        except TaskIdRejected as exc:
            self._refuse(route, exc.reason)
        if claims.owner != self._replica_id or claims.boot != self._boot:
            self._refuse(route, "elsewhere")
        record = self.table.get(claims.key)
        if record is None or record.route != route:
            self._refuse(route, "unknown_here")
        return record

    def _refuse(self, route: str, reason: str) -> NoReturn:
        self._metrics.task_id_refused.labels(route, reason).inc()
        log.info("task_id_refused", route=route, reason=reason)
        raise TaskNotFound(reason)
