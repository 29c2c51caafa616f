"""The backend half of a call: lease a session, send, answer or cancel server requests, and hand
the session back — or close it when the backend may still be busy with an abandoned call.

Every function here takes the call's :class:`~gateway.calls.context.CallContext`; failures are
:class:`~gateway.errors.GatewayError` and are counted in ``mrtr_gateway_backend_errors_total``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any

import structlog

from gateway.calls.context import CallContext, Caller, RouteRuntime
from gateway.errors import BackendUnavailable, GatewayError
from gateway.frontdoor.classify import Accepted
from gateway.holds.registry import Pending
from gateway.legacy.pool import PooledSession
from gateway.legacy.session import Exchange, FinalResponse, JsonObj, ServerRequest, SessionExpired
from gateway.observability.metrics import Metrics
from gateway.translate import results

log = structlog.get_logger("gateway.calls")

_background: set[asyncio.Task[None]] = set()


def spawn(coro: Coroutine[Any, Any, None]) -> None:
    """Run ``coro`` in the background, keeping a reference until it is done."""
    task = asyncio.create_task(coro)
    _background.add(task)
    task.add_done_callback(_background.discard)


def cancel_reason(exc: BaseException) -> str | None:
    """Why an unanswered backend call is being abandoned, if it should be cancelled upstream."""
    if isinstance(exc, asyncio.CancelledError):
        return "client disconnected"
    if isinstance(exc, BackendUnavailable) and exc.reason == "timeout":
        return "gateway timeout"
    if isinstance(exc, GatewayError):
        return None
    return "gateway error"


class Backend:
    """Backend operations of the call driver, with the metrics they report to."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    async def lease(
        self, route: RouteRuntime, caller: Caller, normalized: JsonObj, *, exclusive: bool
    ) -> PooledSession:
        key = route.pool.key_for(caller.session_identity, normalized)
        try:
            return await route.pool.lease(key, normalized, caller.forward_headers, exclusive=exclusive)
        except BackendUnavailable as exc:
            self._metrics.backend_errors.labels(route.name, exc.reason).inc()
            raise

    async def begin(
        self, route: RouteRuntime, request: Accepted, caller: Caller, normalized: JsonObj, *, exclusive: bool
    ) -> CallContext:
        """Lease (exclusively for an interactive call) and send ``request``."""
        pooled = await self.lease(route, caller, normalized, exclusive=exclusive)
        ctx = CallContext(
            route=route,
            pooled=pooled,
            exchange=None,
            normalized_caps=normalized,
            headers=caller.forward_headers,
            backend_method=request.method,
            backend_params=results.legacy_params(request.params),
            exclusive=exclusive,
        )
        try:
            ctx.exchange = await self.send(ctx, ctx.backend_method, ctx.backend_params)
        except BaseException:
            self.discard(ctx)
            raise
        return ctx

    async def send(self, ctx: CallContext, method: str, params: JsonObj) -> Exchange:
        """Start ``method`` on the leased session, re-initializing once if the session expired."""
        assert ctx.pooled is not None
        session = ctx.pooled.session
        try:
            try:
                return await session.start(method, params, ctx.headers)
            except SessionExpired:
                log.info("backend_session_expired", route=ctx.route.name)
                await ctx.route.pool.reopen(ctx.pooled, session, ctx.normalized_caps, ctx.headers)
                try:
                    return await ctx.pooled.session.start(method, params, ctx.headers)
                except SessionExpired:
                    raise BackendUnavailable("session_lost", "backend expired a fresh session") from None
        except BackendUnavailable as exc:
            self._metrics.backend_errors.labels(ctx.route.name, exc.reason).inc()
            raise

    async def refuse_server_request(self, ctx: CallContext, event: ServerRequest, why: str) -> None:
        """Answer a server request the client must not see with an error (never a made-up answer:
        a "decline" would claim the user said no); the backend decides what its call does next."""
        assert ctx.pooled is not None
        await ctx.pooled.session.respond(event.id, error={"code": -32601, "message": f"{event.method}: {why}"})

    def answer_pending_for_expiry(self, ctx: CallContext, batch: list[ServerRequest]) -> None:
        pending = [Pending(r.id, r.method, {}) for r in batch]
        spawn(self.unblock(ctx, pending))

    async def unblock(self, ctx: CallContext, pending: list[Pending]) -> None:
        """Cancel pending server requests, then drain the exchange to its end and free the session."""
        if ctx.pooled is None or ctx.exchange is None:
            return
        session = ctx.pooled.session
        timeout = ctx.route.config.backend.timeout
        try:
            for item in pending:
                await self._cancel_server_request(session, item.backend_id, item.method)
            while True:
                event = await ctx.exchange.next(timeout)
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
        if method == "elicitation/create":
            await session.respond(backend_id, result={"action": "cancel"})
        else:
            await session.respond(backend_id, error={"code": -32603, "message": "The client did not answer in time"})

    def release(self, ctx: CallContext, *, reusable: bool = True, cancel: str | None = None) -> None:
        if ctx.pooled is None:
            return
        pooled, ctx.pooled = ctx.pooled, None
        exchange, ctx.exchange = ctx.exchange, None
        if exchange is not None and not exchange.answered:
            reusable = False  # the backend is still working on it: don't hand the session on
        else:
            cancel = None
        if ctx.exclusive:
            pooled.session.attach(None)
        if cancel is None:
            # The common case stays synchronous, so the next call on this key finds the session idle.
            if exchange is not None:
                exchange.close_nowait()
            ctx.route.pool.release(pooled, reusable=reusable, exclusive=ctx.exclusive)
            return
        spawn(self._wind_down(ctx, pooled, exchange, reusable=reusable, cancel=cancel))

    async def _wind_down(
        self,
        ctx: CallContext,
        pooled: PooledSession,
        exchange: Exchange | None,
        *,
        reusable: bool,
        cancel: str,
    ) -> None:
        """Tell the backend an abandoned call is cancelled, then close the exchange and the session.

        Legacy servers do not treat a dropped connection as cancellation, so an abandoned call gets
        an explicit ``notifications/cancelled`` before its session is closed.
        """
        try:
            if exchange is not None:
                with contextlib.suppress(GatewayError):
                    await pooled.session.notify(
                        "notifications/cancelled", {"requestId": exchange.request_id, "reason": cancel}
                    )
                log.info("backend_call_cancelled", route=ctx.route.name, reason=cancel)
            if exchange is not None:
                await exchange.aclose()
        finally:
            ctx.route.pool.release(pooled, reusable=reusable, exclusive=ctx.exclusive)

    def discard(self, ctx: CallContext, *, cancel: str | None = None) -> None:
        self.release(ctx, reusable=False, cancel=cancel)
