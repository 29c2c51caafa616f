"""The owner's tasks: those the call core's :class:`~gateway.calls.core.TaskMaker`
(:class:`~gateway.mcptasks.passthrough.AllTasks`) makes, and the front door's one entry for
``tasks/get``, ``tasks/update`` and ``tasks/cancel``.

Making a task. The core asks :meth:`TaskService.threshold` (through its task maker) whether a call may become a task (a
``tools/call`` on a route with tasks enabled, whose tool's mode is ``after`` or ``always``, from a
request that declared the extension, on a replica that is not draining) and how long it may run
first. At that threshold with no final answer, :meth:`TaskService.detach` seals the task id, inserts
the record (before the answer is written, so an immediate ``tasks/get`` resolves), hands the call's
lease to a :class:`~gateway.mcptasks.runner.TaskRunner` started in the ``mcp-tasks`` group, and
returns the ``CreateTaskResult``. A table at its caps refuses the task (HTTP 503): the request's
lease then gives the call up, cancelled upstream.

Answering. The order of checks is the spec's (docs/conformance.md A11): the routing headers were
checked by the front door's ladder, then the extension must be declared in the request (-32021),
then the task id must open for this route and caller (-32602, one fixed message; the real reason is
logged and counted). A task this replica runs is answered from its table (an id it sealed that it no
longer keeps is "not found"). A task another replica owns is that replica's to answer: :meth:`answer`
says where (:class:`Elsewhere`), the front door forwards the request over the authenticated replica
hop (:mod:`gateway.replicas.forward`), and the owner answers it as if it had come to it directly (the
same checks: the id binds the route and the caller). The owner's fate is decided as for a held call
(docs/conformance.md A21): provably gone — no connection could be made to its address, another
replica answers at that address, or this replica is the owner restarted (another boot) — the task is
answered ``failed`` with ``data.reason`` ``owner_gone``; merely not answering (no acknowledgement
within ``replicas.forward_timeout``, a failure after it, no known address) it may still be running,
and the request is refused as retryable (:class:`~gateway.errors.TaskOwnerUnavailable`, HTTP 503).

Stopping. A draining replica makes no task (:meth:`TaskService.threshold`) and keeps answering while
it keeps tasks, until its drain deadline (:mod:`gateway.app` counts them as the drain's work); then
:meth:`TaskService.stop` ends every task still running ``failed`` with ``replica_stopped`` before the
runners are cancelled. From then on other replicas, finding no one at its address, say ``owner_gone``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, NoReturn

import structlog

from gateway.calls.backend import Backend
from gateway.calls.lease import Lease
from gateway.calls.request import Call
from gateway.config.tasks import TasksPolicy
from gateway.errors import InvalidParams, MissingCapability, TaskNotFound, TaskOwnerUnavailable, task_lost
from gateway.legacy.session import Exchange, JsonObj
from gateway.mcptasks import wire
from gateway.mcptasks.ids import TaskClaims, TaskIdRejected, TaskIds
from gateway.mcptasks.runner import TaskRunner
from gateway.mcptasks.table import TaskRecord, TaskTable
from gateway.mcptasks.watch import MAX_TASK_IDS, TaskWatch
from gateway.observability.metrics.forwards import OWNER_UNREACHABLE
from gateway.observability.metrics.registry import Metrics
from gateway.observability.requests import task_digest
from gateway.owned import TaskGroup
from gateway.translate import capabilities as caps
from gateway.translate import results

log = structlog.get_logger("gateway.mcptasks")

MISSING_EXTENSION = f"Missing required client capability: {caps.TASKS_EXTENSION}"
OWNER_GONE: Final = "owner_gone"
REPLICA_STOPPED: Final = "replica_stopped"
OWNER_UNKNOWN: Final = "owner_unknown"
"""``data.cause`` of :class:`~gateway.errors.TaskOwnerUnavailable` when the owner has no address to be
reached at (or a hop arrived at an address that is not the owner's): it may be alive."""


def missing_extension() -> MissingCapability:
    return MissingCapability(caps.tasks_required(), MISSING_EXTENSION)


def _input_responses(params: Mapping[str, Any]) -> Mapping[str, Any]:
    responses = params.get("inputResponses")
    if not isinstance(responses, Mapping):
        raise InvalidParams("Invalid params: inputResponses must be an object", reason="bad_input_responses")
    return responses


@dataclass(frozen=True, slots=True)
class Elsewhere:
    """A ``tasks/*`` request for a task another replica owns, which may be alive: the front door
    forwards it to ``owner_url`` and hands a failed hop to :meth:`TaskService.unreached`."""

    route: str
    method: str
    params: Mapping[str, Any]
    policy: TasksPolicy
    claims: TaskClaims
    task_id: str

    @property
    def owner_url(self) -> str:
        return self.claims.owner_url or ""


@dataclass(kw_only=True, eq=False, repr=False)
class TaskService:
    """Tasks owned by this replica; see the module docstring."""

    ids: TaskIds
    table: TaskTable
    backend: Backend
    metrics: Metrics
    group: TaskGroup
    """The ``mcp-tasks`` group the runners run in."""
    replica_id: str
    boot: str
    """This replica's id and boot, sealed in each task id as its owner."""
    advertise_url: str | None
    """Where the other replicas reach this one (sealed in each task id); None: nowhere."""
    principal_tag: Callable[[str | None], str | None]
    """What a task id binds of its caller's principal."""
    draining: Callable[[], bool]
    retry_after: int = 1
    _running: set[TaskRecord] = field(default_factory=set, init=False)
    """Records of the tasks this replica made, until :meth:`sweep` finds them ended."""

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
        if self.draining():
            return None  # a draining replica makes no task: the call runs as an ordinary one
        return 0.0 if policy.mode == "always" else policy.after_ms / 1000

    def detach(
        self,
        lease: Lease,
        call: Call,
        exchange: Exchange,
        *,
        ttl: float | None = None,
        poll_interval_ms: int | None = None,
        runner_type: Callable[..., TaskRunner] = TaskRunner,
    ) -> JsonObj:
        """Make ``call`` a task (see the module docstring); its ``CreateTaskResult``. A legacy task
        passed through (:mod:`gateway.mcptasks.passthrough`) brings its own ``ttl`` (seconds),
        ``poll_interval_ms`` and runner; the route's are the defaults."""
        ctx = lease.ctx
        route = call.route
        policy = route.config.tasks
        ttl = policy.ttl if ttl is None else ttl
        now = self.table.now()
        principal = self.principal_tag(call.caller.principal)
        claims = TaskClaims.new(
            owner=self.replica_id,
            owner_url=self.advertise_url,
            boot=self.boot,
            principal=principal,
            created_ms=int(now * 1000),
            not_after_ms=int((now + ttl + policy.retention) * 1000),
        )
        record = TaskRecord(
            key=claims.key,
            task_id=self.ids.seal(route.name, claims),
            route=route.name,
            principal=principal,
            created=now,
            ttl=ttl,
            retention=policy.retention,
            poll_interval_ms=policy.poll_interval_ms if poll_interval_ms is None else poll_interval_ms,
            server_info=results.server_info_of(ctx.session.initialize_result),
        )
        lease.cancel_on_failure("task limit reached")  # a refused task: the request's lease cancels the call
        self.table.add(record)
        self._running.add(record)
        runner = runner_type(
            record=record,
            table=self.table,
            backend=self.backend,
            ctx=ctx,
            exchange=exchange,
            request=call.request,
            deadline=asyncio.get_running_loop().time() + ttl,
        )
        record.control = runner
        lease.hand_over(runner)
        runner.start(self.group)
        log.info("task_created", route=route.name, task=task_digest(record.task_id), target=call.request.target)
        return wire.create_result(record, record.server_info)

    # -- tasks/get, tasks/update, tasks/cancel -----------------------------------------------

    async def answer(
        self,
        route: str,
        method: str,
        params: Mapping[str, Any],
        capabilities: Mapping[str, Any],
        caller: str | None,
        *,
        policy: TasksPolicy,
        forwarded: bool = False,
    ) -> tuple[JsonObj, TaskRecord] | Elsewhere:
        """The answer to a ``tasks/*`` request on ``route`` (tasks configured by ``policy``) from
        ``caller`` (its principal), and the task; or, for a task another replica owns that may be
        alive, where to forward the request (never for one that came over the hop: ``forwarded``)."""
        if not caps.declares_tasks(capabilities):
            raise missing_extension()
        task_id = params.get("taskId")
        claims = self._open(route, task_id, self.principal_tag(caller))
        assert isinstance(task_id, str)  # it opened
        mine = claims.owner == self.replica_id
        if mine and claims.boot == self.boot:
            return await self._here(route, method, params, self._record(route, claims))
        # Forwarded here because this is the owner's address, yet another replica answers at it; or
        # this replica is the owner, restarted: the owner is gone. A hop to any other address proves nothing.
        moved = forwarded and claims.owner_url is not None and claims.owner_url == self.advertise_url
        if mine or moved:
            return self._gone(Elsewhere(route, method, params, policy, claims, task_id))
        if forwarded or claims.owner_url is None:
            raise self._unavailable(route, OWNER_UNKNOWN)  # deny-on-error: an owner we cannot reach may be alive
        return Elsewhere(route, method, params, policy, claims, task_id)

    def unreached(self, where: Elsewhere, cause: str) -> tuple[JsonObj, TaskRecord]:
        """The answer when the hop to the owner failed with ``cause`` (a ``forwards_total`` outcome,
        counted here): no connection could be made (``owner_unreachable``), so the owner is gone and
        the task ``failed``; otherwise the owner may be running the task: refused as retryable."""
        self.metrics.forwards.labels(where.route, cause).inc()
        if cause != OWNER_UNREACHABLE:
            raise self._unavailable(where.route, cause)
        return self._gone(where)

    async def _here(
        self, route: str, method: str, params: Mapping[str, Any], record: TaskRecord
    ) -> tuple[JsonObj, TaskRecord]:
        if method == "tasks/get":
            return wire.detailed(record, record.server_info), record
        if method == "tasks/update":
            responses = _input_responses(params)
            control = record.control
            ignored = await control.update(responses) if control is not None else len(responses)
            if ignored:
                self.metrics.task_update_ignored_keys.labels(route).inc(ignored)
        elif method == "tasks/cancel" and record.control is not None:
            record.control.cancel()
        return results.with_server_info(dict(wire.ACK), record.server_info), record

    def _gone(self, where: Elsewhere) -> tuple[JsonObj, TaskRecord]:
        """A task whose owner is gone, answered ``failed`` (``owner_gone``) as a finished task is:
        ``tasks/update`` and ``tasks/cancel`` acknowledged, nothing applied. Its record exists for
        this answer only; ``lastUpdatedAt`` is now, when this replica found the owner gone (A21)."""
        now = self.table.now()
        error = task_lost(OWNER_GONE)
        policy, claims = where.policy, where.claims
        record = TaskRecord(
            key=claims.key,
            task_id=where.task_id,
            route=where.route,
            principal=claims.principal,
            created=claims.created_ms / 1000,
            ttl=policy.ttl,
            retention=policy.retention,
            poll_interval_ms=policy.poll_interval_ms,
            status="failed",
            updated=now,
            status_message=str(error["message"]),
            error=error,
            ended=now,
            reason=OWNER_GONE,
        )
        log.info("task_owner_gone", route=where.route, task=task_digest(where.task_id), owner=claims.owner)
        if where.method == "tasks/get":
            return wire.detailed(record, None), record
        if where.method == "tasks/update" and (responses := _input_responses(where.params)):
            self.metrics.task_update_ignored_keys.labels(where.route).inc(len(responses))
        return dict(wire.ACK), record

    def _unavailable(self, route: str, cause: str) -> TaskOwnerUnavailable:
        log.info("task_owner_unavailable", route=route, cause=cause)
        return TaskOwnerUnavailable(cause, self.retry_after)

    def _open(self, route: str, task_id: object, principal: str | None) -> TaskClaims:
        try:
            return self.ids.open(task_id, route=route, principal=principal, now_ms=int(self.table.now() * 1000))
        except TaskIdRejected as exc:
            self._refuse(route, exc.reason)

    def _record(self, route: str, claims: TaskClaims) -> TaskRecord:
        record = self.table.get(claims.key)
        if record is None or record.route != route:
            self._refuse(route, "unknown_here")
        return record

    # -- stopping ----------------------------------------------------------------------------

    def sweep(self) -> None:
        """Drop finished records past their time (:meth:`TaskTable.sweep`) and forget ended tasks."""
        self.table.sweep()
        self._running = {record for record in self._running if not record.terminal}

    def stop(self) -> int:
        """This replica stops: every task still running ends ``failed`` (``replica_stopped``); its
        runner is cancelled when the ``mcp-tasks`` group closes (the backend is told). How many."""
        stopped = 0
        for record in self._running:
            if self.table.finish(record, "failed", reason=REPLICA_STOPPED, error=task_lost(REPLICA_STOPPED)):
                stopped += 1
        self._running = set()
        if stopped:
            log.warning("tasks_stopped", tasks=stopped, reason=REPLICA_STOPPED)
        return stopped

    def _refuse(self, route: str, reason: str) -> NoReturn:
        self.metrics.task_id_refused.labels(route, reason).inc()
        log.info("task_id_refused", route=route, reason=reason)
        raise TaskNotFound(reason)

    # -- subscriptions/listen with notifications.taskIds -------------------------------------

    def follow(self, route: str, task_ids: object, capabilities: Mapping[str, Any], caller: str | None) -> TaskWatch:
        """The tasks a ``subscriptions/listen`` on ``route`` from ``caller`` (its principal) may follow,
        of those its ``notifications.taskIds`` names. -32021 when the request does not declare the
        extension (EXT §Task Status Notifications), -32602 when ``taskIds`` is not an array. Then each
        of the first :data:`~gateway.mcptasks.watch.MAX_TASK_IDS` ids that opens for this route and
        caller (:meth:`TaskIds.open`) and names a task this replica keeps is followed, once; any other
        is only left out of the acknowledgment, whatever the reason (unknown, expired, tampered,
        another route's or caller's, or owned by another replica: docs/conformance.md), and the
        reasons are logged, never the ids."""
        if not caps.declares_tasks(capabilities):
            raise missing_extension()
        if not isinstance(task_ids, list):
            raise InvalidParams("Invalid params: notifications.taskIds must be an array", reason="bad_task_ids")
        now_ms = int(self.table.now() * 1000)
        principal = self.principal_tag(caller)
        records: dict[str, TaskRecord] = {}
        left_out: dict[str, int] = {}
        if len(task_ids) > MAX_TASK_IDS:
            left_out["too_many"] = len(task_ids) - MAX_TASK_IDS
        for task_id in task_ids[:MAX_TASK_IDS]:
            try:
                claims = self.ids.open(task_id, route=route, principal=principal, now_ms=now_ms)
            except TaskIdRejected as exc:
                left_out[exc.reason] = left_out.get(exc.reason, 0) + 1
                continue
            record = self.table.get(claims.key)
            if claims.owner != self.replica_id or claims.boot != self.boot:
                left_out["elsewhere"] = left_out.get("elsewhere", 0) + 1
            elif record is None or record.route != route:
                left_out["unknown_here"] = left_out.get("unknown_here", 0) + 1
            else:
                records.setdefault(record.key, record)
        if left_out:
            log.info("listen_task_ids_left_out", route=route, reasons=left_out)
        return TaskWatch(self.table, list(records.values()))
