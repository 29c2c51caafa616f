"""Replaying a call whose hold is provably gone (the rules are in :mod:`gateway.calls.replay`).

:meth:`Replayer.replay_or_lost` decides (a route that allows it, a transcript sealed in the state,
and proof the owner lost the hold), runs the call again on a fresh session and answers its server
requests from the transcript. When the transcript is used up, or the backend asks something it does
not hold, the call goes on as a normal one: :class:`Continue` hands the lease and the requests not
yet answered back to the drive loop (:mod:`gateway.calls.driver`), which this module never imports.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import structlog

from gateway.calls import replay
from gateway.calls.backend import Backend
from gateway.calls.context import CallContext
from gateway.calls.request import Call
from gateway.errors import GatewayError, HoldLost, Overloaded
from gateway.holds.registry import HoldRegistry
from gateway.legacy.session import Exchange, FinalResponse, JsonObj, ServerNotification, ServerRequest
from gateway.observability.metrics import REPLAYED, Metrics
from gateway.state.boundary import RequestStateBoundary
from gateway.state.claims import Claims, request_digest
from gateway.translate import capabilities as caps

log = structlog.get_logger("gateway.calls")


@dataclass(eq=False)
class Continue:
    """The replay ends here; the drive loop goes on with ``exchange``, asking ``initial`` first."""

    ctx: CallContext
    exchange: Exchange
    initial: list[ServerRequest] = field(default_factory=list)


class Replayer:
    def __init__(
        self,
        *,
        backend: Backend,
        registry: HoldRegistry[CallContext],
        boundary: RequestStateBoundary,
        metrics: Metrics,
        guard: replay.ReplayGuard,
        state_ttl: float,
    ) -> None:
        self._backend = backend
        self._registry = registry
        self._boundary = boundary
        self._metrics = metrics
        self._guard = guard
        self._state_ttl = state_ttl

    async def replay_or_lost(
        self, call: Call, claims: Claims, *, proven: bool, lost: HoldLost | None = None
    ) -> JsonObj | Continue:
        """The retry's hold is not here and its owner cannot serve it: replay, or answer ``lost``.

        Replay needs all of: a route that allows it, a transcript in the state, and ``proven``
        (the owner has lost the hold: this replica restarted under its id, or the owner's address
        is unreachable or answered by another replica). An owner that is merely unknown or slow may
        still be running the call, and running it twice is what a replay must never do.
        """
        entries = claims.extra.get("log")
        if call.route.config.holds.on_lost != "replay" or not isinstance(entries, list) or not proven:
            self._metrics.state_rejections.labels("owner_elsewhere").inc()
            self._count_failed_forward(call, lost)
            raise lost or HoldLost("owner_unreachable")
        return await self._replay(call, claims, entries, lost)

    def _count_failed_forward(self, call: Call, lost: HoldLost | None) -> None:
        """A retry whose forward to the owner failed and that was not replayed: counted once, under
        the forward's outcome (a replayed one counts as ``replayed`` only)."""
        if lost is not None:
            self._metrics.forwards.labels(call.route.name, lost.reason).inc()

    async def _replay(
        self, call: Call, claims: Claims, entries: list[Any], lost: HoldLost | None
    ) -> JsonObj | Continue:
        """Run the call again on a fresh session, answering its server requests from the sealed
        transcript (earlier rounds) and this retry's ``inputResponses`` (the round that was
        pending) — each answer only to a request with the digest of the one it answered. The first
        request that matches no recorded one becomes a normal round."""
        route = call.route
        until = claims.extra.get("until")
        transcript = replay.Transcript(
            replay.plan(entries, call.request.input_responses), float(until) if isinstance(until, int | float) else None
        )
        lifetime = min(self._state_ttl, route.config.holds.ttl)
        try:  # a retry counts once in forwards_total: under its failed forward until the replay runs
            self._registry.admit(self._boundary.principal(call.caller.principal))
            if not self._guard.consume(claims.hold_id, replay.remember_until(claims.exp, until, lifetime)):
                self._boundary.reject(route.name, "replay_consumed")
        except GatewayError:
            self._count_failed_forward(call, lost)
            raise
        normalized = caps.normalize(call.request.client_capabilities)
        try:
            ctx, exchange = await self._backend.begin(route, call.request, call.caller, normalized, exclusive=True)
        except Overloaded:  # no session to run it on: nothing reached the backend, the token stays usable
            self._guard.release(claims.hold_id)
            self._count_failed_forward(call, lost)
            raise
        except BaseException:  # the token is spent: the replay ran, and failed at the backend
            self._metrics.forwards.labels(route.name, REPLAYED).inc()
            raise
        ctx.replay = transcript.carry
        self._metrics.forwards.labels(route.name, REPLAYED).inc()
        log.info("hold_replayed", route=route.name, recorded=len(entries))
        ctx.session.attach(exchange)
        try:
            while transcript:
                event = await self._next_request_or_final(ctx, exchange, call)
                if isinstance(event, FinalResponse):
                    return self._backend.finish(ctx, call.request, event, retry=True)
                digest = request_digest(event.method, event.params)
                step = transcript.take(digest)
                if step is None or step.answer is None:
                    if step is None:
                        self._metrics.state_rejections.labels("replay_diverged").inc()
                        log.warning("replay_diverged", route=route.name, method=event.method)
                    transcript.stop(step)
                    return Continue(ctx, exchange, [event])
                await self._backend.answer_server_request(ctx, event.id, event.method, step.answer)
                ctx.replayed.append({"m": step.method, "k": step.key, "d": digest, "n": step.group, "r": step.answer})
        except BaseException as exc:
            self._backend.failed(ctx, exc, cancel="replay abandoned")
            raise
        return Continue(ctx, exchange)

    @staticmethod
    async def _next_request_or_final(ctx: CallContext, exchange: Exchange, call: Call) -> ServerRequest | FinalResponse:
        while True:
            event = await exchange.next(ctx.route.config.backend.timeout)
            if isinstance(event, ServerNotification):
                await call.notify(event)
                continue
            return event
