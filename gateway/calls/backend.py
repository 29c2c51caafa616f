"""The backend half of a call: lease a session, send, answer or cancel server requests, and hand
the session back — or close it when the backend may still be busy with an abandoned call.

A request holds a call's session by a :class:`~gateway.calls.lease.Lease` (``async with
backend.lease(...)``), which gives it up when the request fails, unless a hold took it over. A call
given up while the backend still works on it is wound down here (:meth:`Backend.release`), by the
steps of :mod:`gateway.calls.ending`. Every function here takes the call's
:class:`~gateway.calls.context.CallContext`; failures are
:class:`~gateway.errors.GatewayError` and are counted in ``mrtr_gateway_backend_errors_total``,
once per client request (:func:`~gateway.observability.requests.count_backend_error`: the tool-schema
lookup before a ``tools/call`` and the call itself meeting the same dead backend are one failure).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import structlog

from gateway.calls.context import CallContext, Caller
from gateway.calls.ending import Ending, cancel_reason, end_given_up, refusal, refuse_and_cancel
from gateway.calls.lease import Lease
from gateway.calls.request import Call, CallRequest
from gateway.calls.route import RouteRuntime
from gateway.errors import BackendUnavailable, GatewayError, MissingCapability, UpstreamError
from gateway.holds.registry import Hold, Pending
from gateway.legacy.pool import PooledSession
from gateway.legacy.session import Exchange, FinalResponse, JsonObj, ServerRequest, SessionExpired, expiry_answer
from gateway.observability import tracing
from gateway.observability.metrics.registry import Metrics
from gateway.observability.requests import count_backend_error
from gateway.owned import TaskGroup
from gateway.translate import capabilities as caps
from gateway.translate import results

log = structlog.get_logger("gateway.calls")

SESSION_STATE_ANSWERS = frozenset({"roots/list"})
"""Server requests whose client answer a legacy server may keep for the session (docs/session-state.md)."""


class Backend:
    """Backend operations of the call core, with the metrics they report to.

    Work that outlives the request that caused it (cancelling an abandoned call, answering an
    expired round) runs in ``background``, the group the application owns and ends at shutdown."""

    def __init__(self, metrics: Metrics, background: TaskGroup) -> None:
        self._metrics = metrics
        self._background = background

    async def acquire(
        self, route: RouteRuntime, caller: Caller, normalized: JsonObj, *, exclusive: bool
    ) -> PooledSession:
        """A session of the route's pool for ``caller`` (exclusively for an interactive call)."""
        key = route.pool.key_for(caller.session_identity, normalized)
        try:
            return await route.pool.lease(key, normalized, caller.forward_headers, exclusive=exclusive)
        except BackendUnavailable as exc:
            count_backend_error(self._metrics, route.name, exc.reason)
            raise

    async def initialize_result(self, route: RouteRuntime, caller: Caller, normalized: JsonObj) -> JsonObj:
        """The ``initialize`` result of a (shared) session of the route's pool for ``caller``."""
        pooled = await self.acquire(route, caller, normalized, exclusive=False)
        try:
            return pooled.session.initialize_result
        finally:
            self._give_back(route, pooled, reusable=True, exclusive=False)

    def lease(self, call: Call, *, exclusive: bool, task_ttl: float | None = None) -> Lease:
        """``async with backend.lease(call, exclusive=...) as lease:`` — a session for ``call``, not
        sent yet, given up if the block fails (:class:`~gateway.calls.lease.Lease`); ``task_ttl``:
        the call may become a task that lives that long."""
        return Lease(self, call=call, exclusive=exclusive, task_ttl=task_ttl)

    def reclaim(self, ctx: CallContext) -> Lease:
        """The lease of a held call, taken back by the retry that resumes it."""
        return Lease(self, ctx)

    async def send(self, ctx: CallContext, method: str, params: JsonObj) -> Exchange:
        """Start ``method`` on the leased session, re-initializing once if the session expired.

        An exclusive lease owns the session from before the request leaves (``owner=True``); the
        exchange becomes the call's (:meth:`~gateway.calls.context.CallContext.sent`). With tracing
        on, the exchange's CLIENT span starts here, its context goes upstream, and it ends with the
        lease (:mod:`gateway.observability.tracing`; a failed send ends it when its lease fails).
        """
        transport, version = ctx.route.config.backend.transport, ctx.session.protocol_version
        # A url-mode call sent again after consent: a new exchange, a new span.
        ctx.new_span(tracing.backend_span(method, params, ctx.route.name, transport, version))
        exchange = await self._start(ctx, method, params)
        ctx.sent(exchange)
        tracing.sent(ctx.span, exchange.request_id)
        return exchange

    async def _start(self, ctx: CallContext, method: str, params: JsonObj) -> Exchange:
        session, owner, until = ctx.session, ctx.exclusive, ctx.answer_timeout
        params, headers = tracing.propagated(ctx.span, params, ctx.headers)  # trace context in _meta and headers
        try:
            try:
                exchange = await session.start(method, params, headers, owner=owner, answer_timeout=until)
            except SessionExpired:
                log.info("backend_session_expired", route=ctx.route.name)
                await ctx.route.pool.reopen(ctx.pooled, session, ctx.normalized_caps, ctx.headers)
                try:
                    exchange = await ctx.pooled.session.start(
                        method, params, headers, owner=owner, answer_timeout=until
                    )
                except SessionExpired:
                    raise BackendUnavailable("session_lost", "backend expired a fresh session") from None
        except BackendUnavailable as exc:
            count_backend_error(self._metrics, ctx.route.name, exc.reason)
            raise
        exchange.on_answer = self._metrics.backend_request_seconds.labels(ctx.route.name, method).observe
        return exchange

    async def answer_server_request(
        self, ctx: CallContext, backend_id: str | int, method: str, answer: JsonObj
    ) -> None:
        """Send the client's ``answer`` to a server request upstream. A server may keep a roots answer
        for its whole session (docs/session-state.md): the session becomes this call's alone before
        the answer leaves, and is closed when the call releases it."""
        if method in SESSION_STATE_ANSWERS and not ctx.pooled.doomed:
            ctx.pooled.doomed = True  # no other lease picks it; closed when this call releases it
            log.debug("backend_session_private", route=ctx.route.name, method=method)
        await ctx.session.respond(backend_id, result=answer)

    async def refuse_server_request(self, ctx: CallContext, event: ServerRequest, why: str) -> None:
        """Answer a server request the client must not see with an error (never a made-up answer:
        a "decline" would claim the user said no); the backend decides what its call does next."""
        await ctx.session.respond(event.id, error=refusal(event, why))

    async def plain_answer(self, ctx: CallContext, exchange: Exchange) -> FinalResponse:
        """The answer of a request that must not ask anything (a plain method, a listing, a legacy
        task's creation): its server requests refused, its notifications dropped."""
        while not isinstance(event := await exchange.next(ctx.route.config.backend.timeout), FinalResponse):
            if isinstance(event, ServerRequest):
                await self.refuse_server_request(ctx, event, "not allowed during this method")
        return event

    async def claim_unclaimed(self, ctx: CallContext) -> list[ServerRequest]:
        """Take the server requests no call owned on the leased session (e.g. ``roots/list`` sent right
        after ``notifications/initialized``): those the client declared are this call's to ask; the
        others no client of this session can answer (sessions are keyed by capabilities), so the
        backend is refused at once."""
        claimed: list[ServerRequest] = []
        for event in ctx.session.take_unclaimed():
            if caps.allows(ctx.normalized_caps, event.method, event.params) is None:
                claimed.append(event)
            else:
                await self.refuse_server_request(ctx, event, "the client did not declare this capability")
        return claimed

    async def screen(self, ctx: CallContext, event: ServerRequest) -> bool:
        """Whether the client of an interactive call (a held call's, a task's) may be asked ``event``.
        One no client could be asked is refused here (False). One whose capability the client did
        not declare (basic/index.mdx §_meta, a MUST) is never forwarded: the call is ended
        (:meth:`abandon`) and its -32021 raised."""
        missing = caps.allows(ctx.normalized_caps, event.method, event.params)
        if missing == {}:  # nothing any client could be asked
            await self.refuse_server_request(ctx, event, "not supported by the gateway")
            return False
        if missing is not None:
            self.abandon(ctx, event)  # refused, cancelled and its last words read, in the background
            raise MissingCapability(missing)
        return True

    def abandon(self, ctx: CallContext, refused: ServerRequest) -> None:
        """End an interactive call the client cannot serve (it lacks a capability the backend asked
        for): refuse the request, cancel the call, and hand the session back usable, in the background."""
        if not ctx.mark_released():
            return
        ctx.end_span("missing_capability")
        exchange = ctx.take_exchange()
        steps = partial(refuse_and_cancel, ctx, exchange, refused)
        self._background.spawn(
            self._wind_down(ctx, ctx.pooled, exchange, steps, "backend_cancel_failed"), name="backend-cancel"
        )

    def answer_pending_for_expiry(self, ctx: CallContext, batch: list[ServerRequest]) -> None:
        pending = [Pending(r.id, r.method, {}) for r in batch]
        self._background.spawn(self.unblock(ctx, pending), name="backend-unblock")

    async def unblock(self, ctx: CallContext, pending: list[Pending]) -> None:
        """Cancel pending server requests, then drain the exchange to its end and free the session."""
        if ctx.released:
            return
        session = ctx.session
        timeout = ctx.route.config.backend.timeout
        try:
            for item in pending:
                await self._cancel_server_request(session, item.backend_id, item.method)
            exchange = ctx.exchange
            if exchange is None:  # a first round asked before the call was sent: nothing runs
                self.release(ctx)
                return
            while True:
                event = await exchange.next(timeout)
                if isinstance(event, FinalResponse):
                    self.release(ctx)
                    return
                if isinstance(event, ServerRequest):
                    await self._cancel_server_request(session, event.id, event.method)
        except (GatewayError, asyncio.CancelledError):
            self.discard(ctx)
        except Exception:  # deny-on-error: an expiry must never leak a session
            log.exception("hold_expiry_failed", route=ctx.route.name)
            self.discard(ctx)

    @staticmethod
    async def _cancel_server_request(session: Any, backend_id: str | int, method: str) -> None:
        result, error = expiry_answer(method)
        await session.respond(backend_id, result=result, error=error)

    def release(self, ctx: CallContext, *, reusable: bool = True, cancel: str | Ending | None = None) -> None:
        """Give the call's session up, once: at once when the backend is done with the call; else in
        the background, its work ended as ``cancel`` says (a reason: ``notifications/cancelled`` and
        the session closed; an :class:`~gateway.calls.ending.Ending`: a task's end), by
        :meth:`_wind_down`. With no ``cancel`` a call still running is left to its session."""
        if not ctx.mark_released():
            return
        ctx.end_span()
        pooled = ctx.pooled
        exchange = ctx.take_exchange()
        ending = Ending(cancel) if isinstance(cancel, str) else cancel
        running = exchange is not None and not exchange.answered
        if running and (ending is None or not ending.reuse_if_ended):
            reusable = False  # the backend is still working on it: don't hand the session on
        if ending is None or not (running or ending.pending):
            # The common case stays synchronous, so the next call on this key finds the session idle.
            if exchange is not None:
                exchange.close_nowait()
            self._give_back(ctx.route, pooled, reusable=reusable, exclusive=ctx.exclusive)
            return
        if ctx.exclusive and not ending.reuse_if_ended:
            pooled.session.attach(None)  # otherwise the wind-down reads (and refuses) the call's requests to its end
        steps = partial(end_given_up, ctx, exchange, ending, reusable)
        self._background.spawn(
            self._wind_down(ctx, pooled, exchange, steps, "backend_wind_down_failed"), name="backend-wind-down"
        )

    async def _wind_down(
        self,
        ctx: CallContext,
        pooled: PooledSession,
        exchange: Exchange | None,
        steps: Callable[[], Awaitable[bool]],
        failure: str,
    ) -> None:
        """The end of every call given up in the background: ``steps`` end the backend's work (True:
        the session may serve another call); then the exchange is closed and the session given back.
        A failure (logged as ``failure``) closes the session: the backend did not take our word."""
        reusable = False
        try:
            reusable = await steps()
        except GatewayError as exc:
            log.info(failure, route=ctx.route.name, reason=exc.reason)
        except Exception:  # deny-on-error: a call given up must never leak a session
            log.exception(failure, route=ctx.route.name)
        finally:
            if exchange is not None:
                await exchange.aclose()
            self._give_back(ctx.route, pooled, reusable=reusable, exclusive=ctx.exclusive)

    @staticmethod
    def _give_back(route: RouteRuntime, pooled: PooledSession, *, reusable: bool, exclusive: bool) -> None:
        """The one place a leased session goes back to its pool (closed there when not ``reusable``)."""
        route.pool.release(pooled, reusable=reusable, exclusive=exclusive)

    def discard(self, ctx: CallContext, *, cancel: str | None = None) -> None:
        self.release(ctx, reusable=False, cancel=cancel)

    def failed(self, ctx: CallContext, exc: BaseException, *, cancel: str | None = None) -> None:
        """``exc`` ended a call after it was sent (reading its exchange, answering the backend): a
        backend failure is counted (once per client request: :meth:`_start` counts those of sending
        it), and the session is discarded, the backend's work cancelled when ``exc`` calls for it
        (else with ``cancel``)."""
        if isinstance(exc, BackendUnavailable):
            count_backend_error(self._metrics, ctx.route.name, exc.reason)
        ctx.end_span(tracing.error_type(exc))
        self.discard(ctx, cancel=cancel_reason(exc) or cancel)

    def finish(self, ctx: CallContext, request: CallRequest, final: FinalResponse, *, retry: bool = False) -> JsonObj:
        """Hand the session back and translate the backend's final answer (an error is raised as
        :class:`~gateway.errors.UpstreamError`). A retry's result is never cacheable."""
        server_info = results.server_info_of(ctx.session.initialize_result) if not ctx.released else None
        ctx.end_span(*tracing.answer_error(final.error, final.result))
        self.release(ctx, reusable=True)
        if final.error is not None:
            error = results.modern_error(final.error)
            raise UpstreamError(error["code"], error["message"], error.get("data"))
        assert final.result is not None
        cache = ctx.route.config.cache
        return results.complete_result(
            request.method,
            final.result,
            ttl_ms=cache.ttl_ms,
            cache_scope=cache.scope,
            server_info=server_info,
            cacheable=not retry,
        )

    async def expire_hold(self, hold: Hold[CallContext]) -> None:
        """A hold's client never came back: answer the backend ourselves so the tool can finish."""
        ctx = hold.context
        self._metrics.hold_expirations.labels(hold.route).inc()
        ctx.end_span("hold_expired")
        log.info("hold_expired", route=hold.route, hold=hold.id, pending=len(hold.pending))
        if ctx.reissue:
            self.release(ctx)
            return
        await self.unblock(ctx, list(hold.pending.values()))
