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
the session goes back to the pool, or is closed if the backend's work has not ended by then.

The exchange is driven, answered and ended by the call core's own operations, as a held call's is:
:meth:`~gateway.calls.backend.Backend.screen` decides what may be asked,
:func:`~gateway.calls.rounds.answers_to` checks the answers, :meth:`~gateway.calls.backend.Backend.finish`
reads the result and :meth:`~gateway.calls.backend.Backend.release` (with the task's
:class:`~gateway.calls.ending.Ending`) ends the backend's work and gives the session back. The
runner keeps only what is a task's own: its record, its status and its polling.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import structlog

from gateway.calls import rounds
from gateway.calls.backend import Backend
from gateway.calls.context import CallContext
from gateway.calls.ending import Ending
from gateway.calls.request import CallRequest
from gateway.errors import GatewayError, MissingCapability, UpstreamError, task_lost
from gateway.holds.registry import Pending
from gateway.keyset import b64url_nopad
from gateway.legacy.session import Exchange, FinalResponse, ServerNotification, ServerRequest
from gateway.mcptasks import wire
from gateway.mcptasks.table import TaskRecord, TaskTable
from gateway.observability.requests import task_digest
from gateway.owned import TaskGroup
from gateway.translate import inputs

log = structlog.get_logger("gateway.mcptasks")

CANCELLED = "task cancelled"
TTL_ELAPSED = "task ttl elapsed"
SHUTDOWN = "gateway shutting down"


@dataclass(kw_only=True, eq=False, repr=False)
class TaskRunner:
    """Drives one task's held legacy exchange; see the module docstring."""

    record: TaskRecord
    table: TaskTable
    backend: Backend
    ctx: CallContext
    """The lease of the call the task was made of (:meth:`~gateway.calls.core.TaskMaker.detach`)."""
    exchange: Exchange
    request: CallRequest
    deadline: float
    """``loop.time()`` at which the task's ttl has passed."""
    _pending: dict[str, Pending] = field(default_factory=dict, init=False)
    _run: asyncio.Task[None] | None = field(default=None, init=False)

    def start(self, group: TaskGroup) -> None:
        self._run = group.spawn(self.run(), name="mcp-task")

    async def run(self) -> None:
        structlog.contextvars.clear_contextvars()  # the creating request's context is not this task's
        structlog.contextvars.bind_contextvars(task=task_digest(self.record.task_id), route=self.record.route)
        try:
            await self._drive()
        except asyncio.CancelledError:
            self._stop(CANCELLED if self.record.status == "cancelled" else SHUTDOWN)
            raise
        except GatewayError as exc:  # the session failed under the task
            log.info("task_backend_failed", reason=exc.reason)
            self.table.finish(self.record, "failed", reason="backend_gone", error=task_lost("backend_gone"))
            self.backend.failed(self.ctx, exc)
        except Exception as exc:  # deny-on-error: a task must end, and its session be given up, whatever broke
            log.exception("task_runner_failed")
            self.table.finish(self.record, "failed", reason="backend_gone", error=task_lost("backend_gone"))
            self.backend.failed(self.ctx, exc)

    async def _drive(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            left = self.deadline - loop.time()
            event = await self.exchange.next_or_none(left) if left > 0 else None
            if event is None:
                self.table.finish(self.record, "failed", reason="ttl_elapsed", error=task_lost("ttl_elapsed"))
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
                self.table.progress(self.record, message)

    async def _question(self, event: ServerRequest) -> bool:
        """Keep ``event`` as an outstanding question; False when it ends the task."""
        try:
            if not await self.backend.screen(self.ctx, event):
                return True
        except MissingCapability as exc:  # the backend's work is cancelled in the background
            self.table.finish(self.record, "failed", reason="missing_capability", error=exc.to_error())
            return False
        entry, _ = inputs.input_request(event.method, event.params)
        key = b64url_nopad(os.urandom(16))
        self._pending[key] = Pending(event.id, event.method, entry)
        self.table.ask(self.record, key, entry)
        return True

    def _final(self, event: FinalResponse) -> None:
        try:
            result = self.backend.finish(self.ctx, self.request, event, retry=True)
        except UpstreamError as exc:
            self.table.finish(self.record, "failed", reason="backend_error", error=exc.to_error())
            return
        size = len(json.dumps(result, separators=(",", ":")))
        if size > self._max_result_bytes:
            self.table.finish(self.record, "failed", reason="result_too_large", error=task_lost("result_too_large"))
            return
        self.table.finish(self.record, "completed", reason="completed", result=result, size=size)

    @property
    def _max_result_bytes(self) -> int:
        return self.ctx.route.config.tasks.max_result_bytes

    # -- the client's side -------------------------------------------------------------------

    async def update(self, responses: Mapping[str, Any]) -> int:
        """Post the answers to outstanding keys upstream (all checked first: one malformed answer
        raises :class:`InvalidParams` and nothing is posted); returns how many keys were ignored."""
        if self.record.terminal:
            return len(responses)  # nothing is outstanding any more
        answers = rounds.answers_to(self._pending, responses)
        ignored = len(responses) - len(answers)
        if not answers:
            return ignored
        self.exchange.backend_turn()
        taken = [(key, self._pending.pop(key)) for key in answers]
        self.table.answered(self.record, [key for key, _ in taken])
        try:
            for key, pending in taken:
                await self.backend.answer_server_request(self.ctx, pending.backend_id, pending.method, answers[key])
        except GatewayError as exc:  # the session failed: the run loop reads the same failure and ends the task
            log.info("task_answer_failed", reason=exc.reason)
        return ignored

    def cancel(self) -> None:
        """Mark the task ``cancelled`` (a finished task stays as it is) and stop its backend work."""
        if not self.table.finish(self.record, "cancelled", reason="cancelled"):
            return
        self._stop(CANCELLED)  # here, not in the run loop: a run cancelled before its first step runs no line
        if self._run is not None:
            self._run.cancel()

    # -- ending the backend's work -----------------------------------------------------------

    def _stop(self, reason: str) -> None:
        """Give the session up as a held call's is (:meth:`~gateway.calls.backend.Backend.release`), in
        the background: pending questions answered as cancelled, ``notifications/cancelled`` upstream,
        the backend's last words read and discarded; the session is reused if the backend's work ended."""
        pending, self._pending = tuple(self._pending.values()), {}
        self.ctx.end_span(reason.replace(" ", "_"))
        self.backend.release(self.ctx, cancel=self._ending(reason, pending))

    def _ending(self, reason: str, pending: tuple[Pending, ...]) -> Ending:
        """How the task's backend work ends (a legacy task passed through tells its backend first)."""
        return Ending(reason, pending, subject="task", reuse_if_ended=True)
