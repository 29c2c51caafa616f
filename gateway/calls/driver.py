"""The path of one modern call through a legacy backend (docs/architecture.md, "The path of one call").

:class:`CallDriver` dispatches one :class:`~gateway.calls.request.Call` and drives its exchange:

* plain methods (lists, completion, discover) lease a session, send, and translate the answer;
* interactive methods (``tools/call``, ``prompts/get``, ``resources/read``) may be paused by
  server requests: the drive loop gathers them for the route's batch window and hands them to
  :class:`~gateway.calls.rounds.Rounds`, which holds the call and answers ``input_required``;
* a retry arrives with its requestState already opened by the front door
  (:class:`~gateway.state.boundary.RequestStateBoundary`); :meth:`CallDriver.resume` claims the hold
  this replica owns, posts the answers upstream and keeps reading the same exchange. A hold that is
  provably gone is replayed (:class:`~gateway.calls.replayer.Replayer`) or answered as lost.

Everything raised to the caller is a :class:`~gateway.errors.GatewayError`.
"""

from __future__ import annotations

import structlog
from mcp_types.jsonrpc import URL_ELICITATION_REQUIRED
from mcp_types.methods import INPUT_REQUIRED_METHODS

from gateway.calls.backend import Backend
from gateway.calls.context import CallContext
from gateway.calls.replayer import Continue, Replayer
from gateway.calls.request import Call
from gateway.calls.rounds import Rounds
from gateway.errors import HoldLost, MissingCapability
from gateway.holds.registry import Hold, HoldRegistry, RefusedHold
from gateway.legacy.session import Exchange, FinalResponse, JsonObj, ServerNotification, ServerRequest
from gateway.state.boundary import RequestStateBoundary
from gateway.state.claims import Claims
from gateway.translate import capabilities as caps
from gateway.translate import results

log = structlog.get_logger("gateway.calls")


class CallDriver:
    """Dispatch, plain calls and the drive loop; rounds and replays are delegated."""

    def __init__(
        self,
        *,
        backend: Backend,
        registry: HoldRegistry[CallContext],
        boundary: RequestStateBoundary,
        rounds: Rounds,
        replayer: Replayer,
    ) -> None:
        self._backend = backend
        self._registry = registry
        self._boundary = boundary
        self._rounds = rounds
        self._replayer = replayer

    # -- entry points -----------------------------------------------------------------------

    async def call(self, call: Call) -> JsonObj:
        """Answer a new request (not a retry) with a modern result, or raise GatewayError."""
        method = call.request.method
        if method == "server/discover":
            return await self._discover(call)
        if method in INPUT_REQUIRED_METHODS:
            return await self._start_interactive(call)
        return await self._plain(call)

    async def resume(self, call: Call, claims: Claims) -> JsonObj:
        """Continue the held call ``claims`` names, which this replica owns, with the retry's answers."""
        try:
            hold = self._registry.take(claims.hold_id, claims.round)
        except RefusedHold as exc:
            if exc.reason == "hold_unknown" and self._boundary.sealed_before_restart(claims):
                # Sealed by this replica id in an earlier life: the hold died in the restart.
                return await self.replay_or_lost(call, claims, proven=True)
            self._boundary.reject(call.route.name, exc.reason)
        ctx = hold.context
        answers = self._rounds.answers(hold, call.request.input_responses)
        if ctx.reissue:
            if not self._rounds.consented(ctx, hold, answers):
                return self._rounds.input_required(ctx, hold, call)
            return await self._send(ctx, call, hold)
        if ctx.exchange is not None:
            ctx.exchange.backend_turn()  # the backend's answer time (metrics) runs from its answers' sending
        await self._rounds.post_answers(ctx, hold, answers)
        if hold.pending:
            # The client answered only part of the round: ask again for what is missing.
            return self._rounds.input_required(ctx, hold, call)
        if ctx.exchange is None:
            return await self._send_after_early_rounds(ctx, call, hold)
        return await self._drive(ctx, ctx.exchange, call, hold)

    async def replay_or_lost(
        self, call: Call, claims: Claims, *, proven: bool, lost: HoldLost | None = None
    ) -> JsonObj:
        """The retry's hold is not here and its owner cannot serve it: replay, or answer ``lost``
        (:meth:`~gateway.calls.replayer.Replayer.replay_or_lost`)."""
        outcome = await self._replayer.replay_or_lost(call, claims, proven=proven, lost=lost)
        if isinstance(outcome, Continue):
            return await self._drive(outcome.ctx, outcome.exchange, call, None, initial=outcome.initial)
        return outcome

    # -- plain methods ----------------------------------------------------------------------

    async def _discover(self, call: Call) -> JsonObj:
        route = call.route
        normalized = caps.normalize(call.request.client_capabilities)
        pooled = await self._backend.lease(route, call.caller, normalized, exclusive=False)
        try:
            init = pooled.session.initialize_result
        finally:
            route.pool.release(pooled, exclusive=False)
        cache = route.config.cache
        return results.discover_result(init, ttl_ms=cache.ttl_ms, cache_scope=cache.scope)

    async def _plain(self, call: Call) -> JsonObj:
        route = call.route
        normalized = caps.normalize(call.request.client_capabilities)
        ctx, exchange = await self._backend.begin(route, call.request, call.caller, normalized, exclusive=False)
        try:
            while True:
                event = await exchange.next(route.config.backend.timeout)
                if isinstance(event, FinalResponse):
                    return self._backend.finish(ctx, call.request, event)
                if isinstance(event, ServerRequest):
                    await self._backend.refuse_server_request(ctx, event, "not allowed during this method")
        except BaseException as exc:
            self._backend.failed(ctx, exc)
            raise

    # -- interactive methods ----------------------------------------------------------------

    async def _start_interactive(self, call: Call) -> JsonObj:
        self._registry.admit(self._boundary.principal(call.caller.principal))
        normalized = caps.normalize(call.request.client_capabilities)
        ctx = await self._backend.prepare(call.route, call.request, call.caller, normalized, exclusive=True)
        return await self._send_after_early_rounds(ctx, call, None)

    async def _send_after_early_rounds(self, ctx: CallContext, call: Call, hold: Hold[CallContext] | None) -> JsonObj:
        """Requests the server sent while nobody held the session (roots/list at session start) are
        asked first, before the call leaves, so the server has its answers when it runs: ask what is
        kept (a new round, under ``hold`` when there is one), else send the call upstream and read it."""
        try:
            early = await self._backend.claim_unclaimed(ctx)
        except BaseException:
            self._drop(ctx, hold)
            raise
        if early:
            try:
                return self._rounds.hold_round(ctx, call, hold, early, logged=False)
            except BaseException:
                self._drop(ctx, hold)
                raise
        return await self._send(ctx, call, hold)

    async def _send(self, ctx: CallContext, call: Call, hold: Hold[CallContext] | None) -> JsonObj:
        """Send the call upstream (again, after a url-mode consent) and drive it."""
        ctx.reissue = False
        try:
            exchange = await self._backend.send(ctx, ctx.backend_method, ctx.backend_params)
        except BaseException:
            self._drop(ctx, hold)
            raise
        return await self._drive(ctx, exchange, call, hold)

    def _drop(self, ctx: CallContext, hold: Hold[CallContext] | None) -> None:
        if hold is not None:
            self._registry.remove(hold)
        self._backend.discard(ctx)

    async def _drive(
        self,
        ctx: CallContext,
        exchange: Exchange,
        call: Call,
        hold: Hold[CallContext] | None,
        initial: list[ServerRequest] | None = None,
    ) -> JsonObj:
        """Read the exchange until it ends or needs input; then answer or hold."""
        route = ctx.route
        ctx.session.attach(exchange)
        refused: tuple[ServerRequest, JsonObj] | None = None
        try:
            batch: list[ServerRequest] = list(initial or [])
            while True:
                if batch:
                    event = await exchange.poll(route.config.holds.batch_window)
                    if event is None:
                        break
                else:
                    event = await exchange.next(route.config.backend.timeout)
                if isinstance(event, FinalResponse):
                    for unasked in batch:  # the call ended before its client could be asked them
                        exchange.unanswered(unasked)
                    return self._final(ctx, call, hold, event)
                if isinstance(event, ServerNotification):
                    await call.notify(event)
                    continue
                missing = caps.allows(ctx.normalized_caps, event.method, event.params)
                if missing == {}:  # nothing any client could be asked
                    await self._backend.refuse_server_request(ctx, event, "not supported by the gateway")
                    continue
                if missing is not None:
                    refused = (event, missing)
                    break
                batch.append(event)
        except BaseException as exc:  # incl. a client disconnect: free the session, cancel upstream
            if hold is not None:
                self._registry.remove(hold)
            self._backend.failed(ctx, exc)
            raise
        if refused is not None:
            # The client did not declare what the backend needs (basic/index.mdx §_meta, a MUST):
            # never forward it; end the call with -32021 and cancel the backend's work.
            event, missing = refused
            if hold is not None:
                self._registry.remove(hold)
            self._backend.abandon(ctx, event)
            raise MissingCapability(missing)
        return self._rounds.hold_round(ctx, call, hold, batch)

    def _final(self, ctx: CallContext, call: Call, hold: Hold[CallContext] | None, event: FinalResponse) -> JsonObj:
        """The backend's answer ends the call, unless it is a legacy -32042 (url-mode consent first)."""
        if hold is not None:
            self._registry.remove(hold)
        if event.error is not None and event.error.get("code") == URL_ELICITATION_REQUIRED:
            url_result = self._rounds.url_hold(ctx, call, event.error)
            if url_result is not None:
                return url_result
        return self._backend.finish(ctx, call.request, event, retry=hold is not None)
