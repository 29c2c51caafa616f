"""The runner of one task the gateway made of a legacy call that knows nothing of tasks.

The call core hands the runner the call's lease once the call has run past its threshold
(:meth:`gateway.mcptasks.service.TaskService.detach`): from then on the runner owns the backend
session and reads the held exchange, detached from the client's HTTP request (a client that goes
away cancels nothing), in the owner's ``mcp-tasks`` task group. What the backend sends becomes the
task's record (:class:`~gateway.mcptasks.table.TaskTable`):

* a server request (``elicitation/create``, ``sampling/createMessage``, ``roots/list``) becomes an
  outstanding ``inputRequests`` entry under a key the gateway mints (16 random bytes, unique for the
  task's lifetime; never the backend's JSON-RPC id); one the creating request's client did not
  declare ends the task ``failed`` with -32021 and cancels the backend's work (docs/conformance.md A20);
* ``notifications/progress`` becomes the ``statusMessage``; other notifications are dropped;
* the final result becomes ``completed`` (a tool error, ``isError: true``, included), a JSON-RPC
  error ``failed``.

The task is bounded by its own ttl (``tasks.ttl`` from its creation), never by ``backend.timeout``:
a silent tool may run as long as its task may live. At the ttl it ends ``failed`` (``ttl_elapsed``);
a backend session that fails ends it ``failed`` (``backend_gone``). :meth:`TaskRunner.update` posts
answers upstream; :meth:`TaskRunner.cancel` marks the task ``cancelled`` at once and, in the
background, answers its pending questions as cancelled (:func:`~gateway.legacy.session.expiry_answer`),
sends ``notifications/cancelled`` upstream and reads (and discards) the backend's last words before
the session goes back to the pool, or is closed if the backend does not settle.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Coroutine, Mapping
from typing import Any

import structlog
from mcp_types.jsonrpc import METHOD_NOT_FOUND

from gateway.calls.backend import CANCEL_GRACE, Backend
from gateway.calls.context import CallContext
from gateway.calls.request import CallRequest
from gateway.errors import GatewayError, InvalidParams, MissingCapability, UpstreamError, task_lost
from gateway.holds.registry import Pending
from gateway.keyset import b64url_nopad
from gateway.legacy.session import Exchange, FinalResponse, ServerNotification, ServerRequest, expiry_answer
from gateway.mcptasks import wire
from gateway.mcptasks.table import TaskRecord, TaskTable
from gateway.observability.requests import task_digest
from gateway.tasks import TaskGroup
from gateway.translate import capabilities as caps
from gateway.translate import inputs

log = structlog.get_logger("gateway.mcptasks")

CANCELLED = "task cancelled"
TTL_ELAPSED = "task ttl elapsed"
SHUTDOWN = "gateway shutting down"


class TaskRunner:
    """Drives one task's held legacy exchange; see the module docstring."""

    def __init__(
        self,
        *,
        record: TaskRecord,
        table: TaskTable,
        backend: Backend,
        ctx: CallContext,
        exchange: Exchange,
        request: CallRequest,
        deadline: float,
        background: TaskGroup,
    ) -> None:
        self._record = record
        self._table = table
        self._backend = backend
        self._ctx = ctx
        self._exchange = exchange
        self._request = request
        self._deadline = deadline
        """``loop.time()`` at which the task's ttl has passed."""
        self._background = background
        self._pending: dict[str, Pending] = {}
        self._run: asyncio.Task[None] | None = None

    def start(self, group: TaskGroup) -> None:
        self._run = group.spawn(self.run(), name="mcp-task")

    async def run(self) -> None:
        structlog.contextvars.clear_contextvars()  # the creating request's context is not this task's
        structlog.contextvars.bind_contextvars(task=task_digest(self._record.task_id), route=self._record.route)
        try:
            await self._drive()
        except asyncio.CancelledError:
            self._stop(CANCELLED if self._record.status == "cancelled" else SHUTDOWN)
            raise
        except GatewayError as exc:  # the session failed under the task
            log.info("task_backend_failed", reason=exc.reason)
            self._table.finish(self._record, "failed", reason="backend_gone", error=task_lost("backend_gone"))
            self._backend.failed(self._ctx, exc)
        except Exception as exc:  # deny-on-error: a task must end, and its session be given up, whatever broke
            log.exception("task_runner_failed")
            self._table.finish(self._record, "failed", reason="backend_gone", error=task_lost("backend_gone"))
            self._backend.failed(self._ctx, exc)

    async def _drive(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            left = self._deadline - loop.time()
            event = await self._exchange.next_or_none(left) if left > 0 else None
            if event is None:
                self._table.finish(self._record, "failed", reason="ttl_elapsed", error=task_lost("ttl_elapsed"))
                self._stop(TTL_ELAPSED)
                return
            if isinstance(event, FinalResponse):
                self._final(event)
                return
            if isinstance(event, ServerNotification):
                self._notified(event)
            elif not await self._question(event):
                return

    def _notified(self, event: ServerNotification) -> None:
        if event.method == "notifications/progress":
            message = wire.progress_message(event.params)
            if message is not None:
                self._table.progress(self._record, message)

    async def _question(self, event: ServerRequest) -> bool:
        """Keep ``event`` as an outstanding question; False when it ends the task."""
        ctx = self._ctx
        missing = caps.allows(ctx.normalized_caps, event.method, event.params)
        if missing == {}:  # nothing any client could be asked
            await self._backend.refuse_server_request(ctx, event, "not supported by the gateway")
            return True
        if missing is not None:
            error = MissingCapability(missing).to_error()
            self._table.finish(self._record, "failed", reason="missing_capability", error=error)
            self._backend.abandon(ctx, event)  # refused, cancelled and settled in the background
            return False
        entry, _ = inputs.input_request(event.method, event.params)
        key = b64url_nopad(os.urandom(16))
        self._pending[key] = Pending(event.id, event.method, entry)
        self._table.ask(self._record, key, entry)
        return True

    def _final(self, event: FinalResponse) -> None:
        try:
            result = self._backend.finish(self._ctx, self._request, event, retry=True)
        except UpstreamError as exc:
            self._table.finish(self._record, "failed", reason="backend_error", error=exc.to_error())
            return
        size = len(json.dumps(result, separators=(",", ":")))
        if size > self._max_result_bytes:
            self._table.finish(self._record, "failed", reason="result_too_large", error=task_lost("result_too_large"))
            return
        self._table.finish(self._record, "completed", reason="completed", result=result, size=size)

    @property
    def _max_result_bytes(self) -> int:
        return self._ctx.route.config.tasks.max_result_bytes

    # -- the client's side -------------------------------------------------------------------

    async def update(self, responses: Mapping[str, Any]) -> int:
        """Post the answers to outstanding keys upstream (all checked first: one malformed answer
        raises :class:`InvalidParams` and nothing is posted); returns how many keys were ignored."""
        if self._record.terminal:
            return len(responses)  # nothing is outstanding any more
        answers: dict[str, Any] = {}
        for key, value in responses.items():
            pending = self._pending.get(key)
            if pending is None:
                continue
            try:
                answers[key] = inputs.check_response(pending.method, value)
            except inputs.MalformedInputResponse as exc:
                raise InvalidParams(f"Invalid inputResponses[{key!r}]: {exc}", reason="bad_input_response") from None
        ignored = len(responses) - len(answers)
        if not answers:
            return ignored
        self._exchange.backend_turn()
        taken = [(key, self._pending.pop(key)) for key in answers]
        self._table.answered(self._record, [key for key, _ in taken])
        try:
            for key, pending in taken:
                await self._backend.answer_server_request(self._ctx, pending.backend_id, pending.method, answers[key])
        except GatewayError as exc:  # the session failed: the run loop reads the same failure and ends the task
            log.info("task_answer_failed", reason=exc.reason)
        return ignored

    def cancel(self) -> None:
        """Mark the task ``cancelled`` (a finished task stays as it is) and stop its backend work."""
        if not self._table.finish(self._record, "cancelled", reason="cancelled"):
            return
        self._stop(CANCELLED)  # here, not in the run loop: a run cancelled before its first step runs no line
        if self._run is not None:
            self._run.cancel()

    # -- ending the backend's work -----------------------------------------------------------

    def _stop(self, reason: str) -> None:
        """Give the session up in the background: pending questions answered as cancelled,
        ``notifications/cancelled`` upstream, the backend's last words read and discarded."""
        ctx = self._ctx
        if ctx.released:
            return
        ctx.released = True
        ctx.end_span(reason.replace(" ", "_"))
        exchange, ctx.exchange = ctx.exchange, None
        pending, self._pending = list(self._pending.values()), {}
        self._background.spawn(self._giving_up(ctx, exchange, pending, reason), name="task-wind-down")

    def _giving_up(
        self, ctx: CallContext, exchange: Exchange | None, pending: list[Pending], reason: str
    ) -> Coroutine[Any, Any, None]:
        """The background work of :meth:`_stop` (a legacy task passed through tells its backend first)."""
        return wind_down(ctx, exchange, pending, reason)


async def wind_down(ctx: CallContext, exchange: Exchange | None, pending: list[Pending], reason: str) -> None:
    pooled = ctx.pooled
    session = pooled.session
    reusable = True
    try:
        for item in pending:
            result, error = expiry_answer(item.method, "The task was cancelled")
            await session.respond(item.backend_id, result=result, error=error)
        if exchange is not None and not exchange.answered:
            await session.notify("notifications/cancelled", {"requestId": exchange.request_id, "reason": reason})
            log.info("backend_call_cancelled", route=ctx.route.name, reason=reason.replace(" ", "_"))
            reusable = await settled(ctx, exchange, CANCEL_GRACE)
    except GatewayError as exc:  # the backend did not take our answer: do not trust the session
        log.info("task_wind_down_failed", route=ctx.route.name, reason=exc.reason)
        reusable = False
    except Exception:  # deny-on-error: a cancelled task must never leak a session
        log.exception("task_wind_down_failed", route=ctx.route.name)
        reusable = False
    finally:
        if exchange is not None:
            await exchange.aclose()
        if ctx.exclusive:
            session.attach(None)
        ctx.route.pool.release(pooled, reusable=reusable, exclusive=ctx.exclusive)


async def settled(ctx: CallContext, exchange: Exchange, grace: float) -> bool:
    """Read a cancelled call's last messages for up to ``grace`` seconds (its late result is
    discarded; its questions refused); True once it has ended."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace
    while (left := deadline - loop.time()) > 0:
        event = await exchange.next_or_none(left)
        if event is None:
            return False
        if isinstance(event, FinalResponse):
            return True
        if isinstance(event, ServerRequest):
            error = {"code": METHOD_NOT_FOUND, "message": f"{event.method}: the task was cancelled"}
            await ctx.session.respond(event.id, error=error)
    return False
