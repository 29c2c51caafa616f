"""Holding a call for its client's input: the rounds the call core opens.

When the backend asks the client something (:meth:`gateway.calls.core.CallCore`'s drive loop), the
call is held: :meth:`Holding.ask` puts the questions to the client under a hold (a new one, or the
call's own on a retry) and :meth:`Holding.input_required` seals the round's state and answers
``input_required``; from then on the hold owns the call's lease. A legacy -32042 becomes a url-mode
round (:meth:`Holding.url_round`), whose answers decide whether the call is sent again
(:meth:`Holding.after_consent`). What a round asks and what its answers mean is
:mod:`gateway.calls.rounds` (pure); this module does the holding, sealing and handing over.
"""

from __future__ import annotations

import time
from functools import partial

from mcp_types.jsonrpc import INTERNAL_ERROR

from gateway.calls import rounds
from gateway.calls.backend import Backend
from gateway.calls.context import CallContext
from gateway.calls.lease import Expiry, Lease
from gateway.calls.request import Call
from gateway.errors import GatewayError, MissingCapability, UpstreamError
from gateway.holds.registry import Hold, HoldRegistry
from gateway.legacy.session import JsonObj, ServerRequest
from gateway.observability import tracing
from gateway.observability.metrics.registry import Metrics
from gateway.state.boundary import RequestStateBoundary
from gateway.state.claims import RequestIdentity
from gateway.translate import capabilities as caps
from gateway.translate import inputs


class Holding:
    """Opens the rounds of held calls: holds, sealed states, ``input_required`` answers."""

    def __init__(
        self, *, backend: Backend, registry: HoldRegistry[CallContext], boundary: RequestStateBoundary, metrics: Metrics
    ) -> None:
        self._backend = backend
        self._registry = registry
        self._boundary = boundary
        self._metrics = metrics

    def ask(
        self,
        lease: Lease,
        call: Call,
        hold: Hold[CallContext] | None,
        batch: list[ServerRequest],
        *,
        logged: bool = True,
        hand_over_first: bool = True,
    ) -> JsonObj:
        """Hold ``batch`` as the next round (:func:`rounds.ask`).

        With ``hand_over_first`` the session belongs to the hold (or its expiry) before the round
        opens, so a round that cannot open leaves the backend to be answered, not discarded: a new
        hold the registry refuses answers ``batch`` at once; a round past ``max_rounds`` or the
        call's deadline is ended by the registry with ``batch`` pending
        (:meth:`~gateway.holds.registry.HoldRegistry.put_back`) and raises
        :class:`~gateway.errors.HoldLimitReached`. Without it (requests asked before the call was
        sent: nothing runs on the session to answer) a failed round gives the session up with the lease."""
        ctx = lease.ctx
        if hold is None:
            hold = self._new_hold(ctx, call)
            try:
                self._registry.add(hold)
            except GatewayError:
                if hand_over_first:
                    lease.hand_over(Expiry())
                self._backend.answer_pending_for_expiry(ctx, batch)
                raise
            lease.claim(partial(self._registry.remove, hold))
        if hand_over_first:
            lease.hand_over(hold)
        rounds.ask(hold, ctx, batch, logged=logged)
        return self.input_required(lease, hold, call)

    def input_required(self, lease: Lease, hold: Hold[CallContext], call: Call) -> JsonObj:
        """Open the hold's next round, seal the round's state and answer with the pending requests;
        from here the hold owns the lease until a retry takes it back."""
        ctx = lease.ctx
        route = ctx.route
        limits = route.config.holds
        if hold.busy:
            self._registry.put_back(hold, next_round=True, deadline=time.monotonic() + limits.ttl)
        # A backend's own task, its result awaited on a tasks/result exchange (TaskMaker.pass_through),
        # is not replayed by sending the call again: a lost hold is answered as lost.
        own_task = ctx.exchange is not None and ctx.exchange.method != ctx.backend_method
        replayable = limits.on_lost == "replay" and not ctx.reissue and not own_task
        token = self._boundary.seal(
            route=route.name,
            identity=RequestIdentity(hold.method, hold.target, hold.args_digest),
            principal=hold.principal,
            hold_id=hold.id,
            round_=hold.round,
            lifetime=limits.ttl,
            not_after=hold.not_after,
            transcript=[step.to_wire() for step in hold.log] if replayable else None,
            trace_link=tracing.first_round(),
        )
        lease.hand_over(hold)
        self._metrics.input_rounds.labels(route.name).inc()
        call.held(hold.id, hold.round)
        return rounds.input_required(ctx, hold, token)

    def url_round(self, lease: Lease, call: Call, error: JsonObj) -> JsonObj | None:
        """A legacy -32042 becomes url-mode elicitations; the call is re-sent after consent. None:
        the error names no URL interaction (it is the call's answer)."""
        elicitations = inputs.url_elicitations(error)
        if not elicitations:
            return None
        ctx = lease.ctx
        missing = caps.allows(ctx.normalized_caps, "elicitation/create", {"mode": "url"})
        if missing is not None:
            self._backend.release(ctx)  # the backend's call is over; its session is fine
            raise MissingCapability(missing)
        ctx.await_consent()
        hold = self._new_hold(ctx, call)
        self._registry.add(hold)
        lease.claim(partial(self._registry.remove, hold))
        rounds.ask_urls(hold, elicitations)
        return self.input_required(lease, hold, call)

    def after_consent(
        self, lease: Lease, call: Call, hold: Hold[CallContext], answers: dict[str, JsonObj]
    ) -> JsonObj | None:
        """A url-mode round's answers: asked again while some are unanswered (the next round's
        answer); any decline ends the call. None: every URL interaction was accepted, and the core
        sends the call again."""
        consent = rounds.consent(hold, answers)
        if consent == "waiting":
            lease.hand_over(hold)  # the hold keeps the session whether the round opens or not
            return self.input_required(lease, hold, call)
        if consent == "declined":
            self._registry.remove(hold)
            self._backend.release(lease.ctx)
            # The backend's answer stands: it required an interaction the user did not complete.
            raise UpstreamError(INTERNAL_ERROR, "The required URL interaction was not completed", reason="url_declined")
        return None

    def _new_hold(self, ctx: CallContext, call: Call) -> Hold[CallContext]:
        return rounds.new_hold(ctx, call, self._registry.new_id(), self._boundary.principal(call.caller.principal))
