"""The path of one modern call through a legacy backend (docs/architecture.md, "The path of one call").

:class:`CallCore` owns a call from the request that starts it to its final answer:

* plain methods (lists, completion, discover) lease a session, send, and translate the answer;
* interactive methods (``tools/call``, ``prompts/get``, ``resources/read``) may be paused by
  server requests: the drive loop gathers them for the route's batch window and opens a round
  (:class:`~gateway.calls.holding.Holding`, shaped by :mod:`gateway.calls.rounds`): the call is
  held, its lease handed over to the hold, and the client answered ``input_required`` with the
  round's sealed requestState; on a route with tasks on, a call that runs long becomes a task
  (:class:`TaskMaker`), and on any other route no task code runs;
* a retry arrives with its requestState already opened by the front door
  (:class:`~gateway.state.boundary.RequestStateBoundary`); :meth:`CallCore.resume` takes the hold
  this replica owns back, posts the answers upstream and keeps reading the same exchange. A hold
  that is provably gone is replayed by the core's replay strategy
  (:class:`~gateway.calls.replayer.Replayer`) or answered as lost.

Every backend session a request uses is a :class:`~gateway.calls.lease.Lease`, given up in one
place when the request fails. Everything raised to the caller is a :class:`~gateway.errors.GatewayError`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from functools import partial
from typing import Protocol

from mcp_types.jsonrpc import URL_ELICITATION_REQUIRED
from mcp_types.methods import INPUT_REQUIRED_METHODS

from gateway.calls import rounds
from gateway.calls.backend import Backend
from gateway.calls.catalogue import Catalogue
from gateway.calls.context import CallContext
from gateway.calls.holding import Holding
from gateway.calls.lease import Lease
from gateway.calls.replayer import Replayer
from gateway.calls.request import Call
from gateway.calls.resends import Resends
from gateway.errors import GatewayError, HoldLost, MissingCapability, UpstreamError
from gateway.holds.registry import Hold, HoldRegistry, RefusedHold
from gateway.legacy.session import Exchange, FinalResponse, JsonObj, ServerNotification, ServerRequest
from gateway.observability.metrics.registry import Metrics
from gateway.state.boundary import RequestStateBoundary
from gateway.state.claims import Claims
from gateway.translate import capabilities as caps
from gateway.translate import results


class TaskMaker(Protocol):
    """Makes a task of a call that runs long (``io.modelcontextprotocol/tasks``): implemented by
    :class:`gateway.mcptasks.passthrough.AllTasks`, handed to the core (``calls`` never imports
    ``mcptasks``). The core asks it only about calls on routes with tasks enabled."""

    def threshold(self, call: Call) -> float | None:
        """Seconds ``call`` may run before it becomes a task; None: never. Raises
        :class:`~gateway.errors.MissingCapability` for a tool that requires the extension."""
        ...

    def detach(self, lease: Lease, call: Call, exchange: Exchange) -> JsonObj:
        """Take the call's lease over as a task, recorded before it is answered; its ``CreateTaskResult``."""
        ...

    async def pass_through(self, lease: Lease, call: Call) -> JsonObj | Exchange | None:
        """Start ``call`` as the backend's own (2025-11-25) task when the backend and tool support one:
        the call's answer (a ``CreateTaskResult``, or the backend's plain answer), or the exchange
        that carries the task's questions and result for the core to drive as any call (a client
        without the extension); None: the call is sent as usual."""
        ...


class CallCore:
    """The call lifecycle of one replica: dispatch, the drive loop, rounds, resume; replay is its strategy."""

    def __init__(
        self,
        *,
        backend: Backend,
        registry: HoldRegistry[CallContext],
        boundary: RequestStateBoundary,
        metrics: Metrics,
        replayer: Replayer,
        resends: Resends,
        task_maker: TaskMaker | None = None,
    ) -> None:
        self._backend = backend
        self._resends = resends
        self._task_maker = task_maker
        self._registry = registry
        self._boundary = boundary
        self._metrics = metrics
        self._replayer = replayer
        self._catalogue = Catalogue(self._plain)
        self._holding = Holding(backend=backend, registry=registry, boundary=boundary, metrics=metrics)

    # -- entry points -----------------------------------------------------------------------

    async def call(self, call: Call) -> JsonObj:
        """Answer a new request (not a retry) with a modern result, or raise GatewayError."""
        return await self._checked(call, self._call(call))

    async def resume(self, call: Call, claims: Claims) -> JsonObj:
        """Continue the held call ``claims`` names, which this replica owns, with the retry's answers;
        a resend of a retry that already ran gets its answer again (:mod:`gateway.calls.resends`)."""
        return await self._resends.answer(
            call,
            claims,
            lambda: self._checked(call, self._resume(call, claims)),
            spent=lambda: not self._registry.serves(claims.hold_id, claims.round),
            refuse=partial(self._boundary.reject, call.route.name),
        )

    async def replay_or_lost(
        self, call: Call, claims: Claims, *, proven: bool, lost: HoldLost | None = None
    ) -> JsonObj:
        """The retry's hold is not here and its owner cannot serve it: replay it on a fresh session
        and go on as a normal call, or answer ``lost`` (:meth:`~gateway.calls.replayer.Replayer.start`).
        A resend of a retry replayed here gets the replay's answer again."""
        return await self._resends.answer(
            call,
            claims,
            lambda: self._checked(call, self._replay_or_lost(call, claims, proven=proven, lost=lost)),
            spent=lambda: self._replayer.replayed(claims.hold_id),
            refuse=partial(self._boundary.reject, call.route.name),
        )

    async def _checked(self, call: Call, answering: Awaitable[JsonObj]) -> JsonObj:
        """The call's answer; a failure the backend's listings show was the client's naming something
        unknown becomes its -32602, within the same call (:mod:`gateway.calls.catalogue`)."""
        try:
            answer = await answering
        except UpstreamError as exc:
            refined = await self._catalogue.refine(call, exc)
            if refined is exc:
                raise
            raise refined from exc
        await self._catalogue.check_tool_result(call, answer)
        return answer

    async def _call(self, call: Call) -> JsonObj:
        method = call.request.method
        if method == "server/discover":
            return await self._discover(call)
        if method in INPUT_REQUIRED_METHODS:
            self._admit(call)
            may_become_task = self._task_threshold(call) is not None  # -32021 here for a tasks-only tool
            task_ttl = call.route.config.tasks.ttl if may_become_task else None
            async with self._backend.lease(call, exclusive=True, task_ttl=task_ttl) as lease:
                return await self._send_after_early_rounds(lease, call, None)
        return await self._plain(call)

    async def _resume(self, call: Call, claims: Claims) -> JsonObj:
        try:
            hold = self._registry.take(claims.hold_id, claims.round)
        except RefusedHold as exc:
            if exc.reason == "hold_unknown" and self._boundary.sealed_before_restart(claims):
                # Sealed by this replica id in an earlier life: the hold died in the restart.
                return await self._replay_or_lost(call, claims, proven=True)
            self._boundary.reject(call.route.name, exc.reason)
        try:
            answers = rounds.checked_answers(hold, call.request.input_responses)
        except GatewayError:
            # Nothing reached the backend: the same round's state stays valid for a corrected retry.
            self._registry.release_claim(hold)
            raise
        async with self._backend.reclaim(hold.context) as lease:
            lease.claim(partial(self._registry.remove, hold))
            ctx = lease.ctx
            if ctx.reissue:
                asked_again = self._holding.after_consent(lease, call, hold, answers)
                return asked_again if asked_again is not None else await self._send(lease, call, hold)
            if ctx.exchange is not None and ctx.exchange.backend_turn():
                call.route.round_fences.together(_asking(call))  # the last round came split
            for key, answer in answers.items():
                question = hold.take_answer(key, answer)
                await self._backend.answer_server_request(ctx, question.backend_id, question.method, answer)
            if hold.pending:
                # The client answered only part of the round: ask again for what is missing (the
                # hold keeps the session whether the round opens or not).
                lease.hand_over(hold)
                return self._holding.input_required(lease, hold, call)
            if ctx.exchange is None:
                return await self._send_after_early_rounds(lease, call, hold)
            return await self._drive(lease, ctx.exchange, call, hold)

    async def _replay_or_lost(
        self, call: Call, claims: Claims, *, proven: bool, lost: HoldLost | None = None
    ) -> JsonObj:
        transcript = self._replayer.start(call, claims, lambda: self._admit(call), proven=proven, lost=lost)
        lease = self._backend.lease(call, exclusive=True)
        await self._replayer.acquire(lease, call, claims, lost)
        async with lease:
            recorded = claims.extra["log"]
            exchange, outcome = await self._replayer.run(lease, call, transcript, len(recorded))
            if isinstance(outcome, FinalResponse):
                return self._backend.finish(lease.ctx, call.request, outcome, retry=True)
            return await self._drive(lease, exchange, call, None, initial=outcome)

    # -- plain methods ----------------------------------------------------------------------

    async def _discover(self, call: Call) -> JsonObj:
        route = call.route
        normalized = caps.normalize(call.request.client_capabilities)
        init = await self._backend.initialize_result(route, call.caller, normalized)
        cache = route.config.cache
        return results.discover_result(
            init, ttl_ms=cache.ttl_ms, cache_scope=cache.scope, tasks=route.config.tasks.enabled
        )

    async def _plain(self, call: Call) -> JsonObj:
        async with self._backend.lease(call, exclusive=False) as lease:
            answer = await self._backend.plain_answer(lease.ctx, await lease.send())
            return self._backend.finish(lease.ctx, call.request, answer)

    # -- interactive methods ----------------------------------------------------------------

    def _admit(self, call: Call) -> None:
        self._registry.admit(self._boundary.principal(call.caller.principal))

    async def _send_after_early_rounds(self, lease: Lease, call: Call, hold: Hold[CallContext] | None) -> JsonObj:
        """Requests the server sent while nobody held the session (roots/list at session start) are
        asked first, before the call leaves, so the server has its answers when it runs: ask what is
        kept (a new round, under ``hold`` when there is one), else send the call upstream and read it."""
        early = await self._backend.claim_unclaimed(lease.ctx)
        if early:
            # Nothing runs on the session yet: a round that cannot open gives it up with the lease.
            return self._holding.ask(lease, call, hold, early, logged=False, hand_over_first=False)
        return await self._send(lease, call, hold)

    async def _send(self, lease: Lease, call: Call, hold: Hold[CallContext] | None) -> JsonObj:
        """Send the call upstream (again, after a url-mode consent) and drive it."""
        maker = self._task_maker_for(call)
        started = None if maker is None else await maker.pass_through(lease, call)
        if isinstance(started, Exchange):  # the backend's task, its result awaited here: no task of ours
            return await self._drive(lease, started, call, hold, initial=[])
        if started is not None:
            if hold is not None:
                self._registry.remove(hold)  # answered in full: a task (or the backend's answer) ends the call
            return started
        exchange = await lease.send()
        return await self._drive(lease, exchange, call, hold)

    async def _drive(
        self,
        lease: Lease,
        exchange: Exchange,
        call: Call,
        hold: Hold[CallContext] | None,
        initial: list[ServerRequest] | None = None,
    ) -> JsonObj:
        """Read the exchange until it ends or needs input; then answer or hold. A failure (a client
        disconnect included) ends the call through its lease: session freed, upstream cancelled."""
        ctx = lease.ctx
        route = ctx.route
        ctx.session.attach(exchange)
        batch: list[ServerRequest] = list(initial or [])
        threshold = self._task_threshold(call) if initial is None else None
        if threshold == 0:
            return self._detach(lease, exchange, call, hold)  # mode "always": a task at once
        loop = asyncio.get_running_loop()
        detach_at = None if threshold is None else loop.time() + threshold
        asking = _asking(call)
        fenced = route.round_fences.fenced(asking)
        while True:
            if batch:
                event = await exchange.poll(route.config.holds.batch_window, fenced=fenced)
                if event is None:
                    if fenced:
                        route.round_fences.gathered(asking, len(batch))
                    break
            elif detach_at is not None:
                # Until the call may become a task, its threshold bounds the wait, not backend.timeout.
                event = await exchange.next_or_none(detach_at - loop.time())
                if event is None:
                    return self._detach(lease, exchange, call, hold)
            else:
                event = await exchange.next(route.config.backend.timeout)
            if isinstance(event, FinalResponse):
                for unasked in batch:  # the call ended before its client could be asked them
                    exchange.unanswered(unasked)
                return self._final(lease, call, hold, event)
            if isinstance(event, ServerNotification):
                await call.notify(event)
                continue
            try:
                asked = await self._backend.screen(ctx, event)
            except MissingCapability:  # the call ended with -32021, the backend's work cancelled
                if hold is not None:
                    self._registry.remove(hold)
                raise
            if asked:
                batch.append(event)
        return self._holding.ask(lease, call, hold, batch)

    # -- tasks ------------------------------------------------------------------------------

    def _task_maker_for(self, call: Call) -> TaskMaker | None:
        """The task maker, when the call's route makes tasks: on a route with tasks off its own
        config decides, and no task code runs for the call."""
        return self._task_maker if call.route.config.tasks.enabled else None

    def _task_threshold(self, call: Call) -> float | None:
        maker = self._task_maker_for(call)
        return None if maker is None else maker.threshold(call)

    def _detach(self, lease: Lease, exchange: Exchange, call: Call, hold: Hold[CallContext] | None) -> JsonObj:
        """The call ran past its threshold: it becomes a task, which takes its lease over."""
        maker = self._task_maker_for(call)
        assert maker is not None, "only a route with tasks on gives a call a threshold"
        if hold is not None:
            self._registry.remove(hold)  # answered in full: the task, not the hold, keeps the session now
        return maker.detach(lease, call, exchange)

    def _final(self, lease: Lease, call: Call, hold: Hold[CallContext] | None, event: FinalResponse) -> JsonObj:
        """The backend's answer ends the call, unless it is a legacy -32042 (url-mode consent first)."""
        if hold is not None:
            self._registry.remove(hold)
        if event.error is not None and event.error.get("code") == URL_ELICITATION_REQUIRED:
            url_result = self._holding.url_round(lease, call, event.error)
            if url_result is not None:
                return url_result
        return self._backend.finish(lease.ctx, call.request, event, retry=hold is not None)


def _asking(call: Call) -> str:
    """What a route keeps a call's round record by (:class:`~gateway.calls.route.RoundFences`)."""
    return f"{call.request.method} {call.request.target}"
