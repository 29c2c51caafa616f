"""Replaying a call whose hold is provably gone: the call core's replay strategy (the rules are in
:mod:`gateway.calls.transcript`).

:meth:`Replayer.start` decides (a route that allows it, a transcript sealed in the state, and proof
the owner lost the hold) and spends the token; :meth:`Replayer.acquire` leases the fresh session
the call runs on again; :meth:`Replayer.run` sends it and answers its server requests from the
transcript. When the transcript is used up, or the backend asks something it does not hold, the
call goes on as a normal one: :meth:`Replayer.run` hands the requests not yet answered back to the
core's drive loop (:mod:`gateway.calls.core`), which this module never imports.
"""

from __future__ import annotations

from collections.abc import Callable

import structlog

from gateway.calls import transcript as replay_transcript
from gateway.calls.backend import Backend
from gateway.calls.lease import Lease
from gateway.calls.request import Call
from gateway.errors import GatewayError, HoldLost, Overloaded
from gateway.legacy.session import Exchange, FinalResponse, ServerNotification, ServerRequest
from gateway.observability.metrics.forwards import REPLAYED
from gateway.observability.metrics.registry import Metrics
from gateway.state.boundary import RequestStateBoundary
from gateway.state.claims import Claims, request_digest

log = structlog.get_logger("gateway.calls")

ABANDONED = "replay abandoned"
"""Why a replay's backend call is cancelled when it fails with no reason of its own."""


class Replayer:
    """Runs a lost hold's call again, once per hold on this replica (:class:`replay_transcript.ReplayGuard`)."""

    def __init__(
        self,
        *,
        backend: Backend,
        boundary: RequestStateBoundary,
        metrics: Metrics,
        guard: replay_transcript.ReplayGuard,
        state_ttl: float,
    ) -> None:
        self._backend = backend
        self._boundary = boundary
        self._metrics = metrics
        self._guard = guard
        self._state_ttl = state_ttl

    def start(
        self, call: Call, claims: Claims, admit: Callable[[], None], *, proven: bool, lost: HoldLost | None
    ) -> replay_transcript.Transcript:
        """The transcript to replay the retry's call with, its token spent; or raise ``lost``.

        Replay needs all of: a route that allows it, a transcript in the state, and ``proven``
        (the owner has lost the hold: this replica restarted under its id, or the owner's address
        is unreachable or answered by another replica). An owner that is merely unknown or slow may
        still be running the call, and running it twice is what a replay must never do. ``admit``
        refuses a call the hold limits have no room for.
        """
        entries = claims.extra.get("log")
        if call.route.config.holds.on_lost != "replay" or not isinstance(entries, list) or not proven:
            self._metrics.state_rejections.labels("owner_elsewhere").inc()
            self._count_failed_forward(call, lost)
            raise lost or HoldLost("owner_unreachable")
        route = call.route
        until = claims.extra.get("until")
        transcript = replay_transcript.Transcript(
            replay_transcript.plan(entries, call.request.input_responses),
            float(until) if isinstance(until, int | float) else None,
        )
        lifetime = min(self._state_ttl, route.config.holds.ttl)
        try:  # a retry counts once in forwards_total: under its failed forward until the replay runs
            admit()
            if not self._guard.consume(claims.hold_id, replay_transcript.remember_until(claims.exp, until, lifetime)):
                self._boundary.reject(route.name, "replay_consumed")
        except GatewayError:
            self._count_failed_forward(call, lost)
            raise
        return transcript

    def replayed(self, hold_id: str) -> bool:
        """Whether the call of ``hold_id`` was replayed here (its token spent)."""
        return self._guard.replayed(hold_id)

    def _count_failed_forward(self, call: Call, lost: HoldLost | None) -> None:
        """A retry whose forward to the owner failed and that was not replayed: counted once, under
        the forward's outcome (a replayed one counts as ``replayed`` only)."""
        if lost is not None:
            self._metrics.forwards.labels(call.route.name, lost.reason).inc()

    async def acquire(self, lease: Lease, call: Call, claims: Claims, lost: HoldLost | None) -> None:
        """Lease the fresh session. With no session to run it on, nothing reached the backend and the
        token stays usable; from here on the replay counts as run."""
        spent = True
        try:
            await lease.acquire()
        except Overloaded:
            spent = False
            self._guard.release(claims.hold_id)
            self._count_failed_forward(call, lost)
            raise
        finally:
            if spent:
                self._metrics.forwards.labels(call.route.name, REPLAYED).inc()

    async def run(
        self, lease: Lease, call: Call, transcript: replay_transcript.Transcript, recorded: int
    ) -> tuple[Exchange, FinalResponse | list[ServerRequest]]:
        """Send the call again and answer its server requests from the sealed transcript (earlier
        rounds) and this retry's ``inputResponses`` (the round that was pending) — each answer only
        to a request with the digest of the one it answered. Ends with the call's final response, or
        the requests the drive loop asks next: the first that matches no recorded one, or none."""
        route = call.route
        ctx = lease.ctx
        exchange = await lease.send()
        ctx.replaying(transcript.carry)
        log.info("hold_replayed", route=route.name, recorded=recorded)
        ctx.session.attach(exchange)
        lease.cancel_on_failure(ABANDONED)
        while transcript:
            event = await self._next_request_or_final(lease, exchange, call)
            if isinstance(event, FinalResponse):
                return exchange, event
            digest = request_digest(event.method, event.params)
            step = transcript.take(digest)
            if step is None or step.answer is None:
                if step is None:
                    self._metrics.state_rejections.labels("replay_diverged").inc()
                    log.warning("replay_diverged", route=route.name, method=event.method)
                transcript.stop(step)
                lease.cancel_on_failure(None)
                return exchange, [event]
            await self._backend.answer_server_request(ctx, event.id, event.method, step.answer)
            ctx.answered_from_transcript(step)
        lease.cancel_on_failure(None)
        return exchange, []

    @staticmethod
    async def _next_request_or_final(lease: Lease, exchange: Exchange, call: Call) -> ServerRequest | FinalResponse:
        while True:
            event = await exchange.next(lease.ctx.route.config.backend.timeout)
            if isinstance(event, ServerNotification):
                await call.notify(event)
                continue
            return event
