"""Input rounds: holding a paused call, answering its server requests, asking again, URL mode.

A call the backend pauses with server requests (elicitation, sampling, roots) is held here between
the client's retries. :class:`Rounds` opens the hold (:meth:`Rounds.hold_round`), seals each round's
requestState through the boundary and answers ``input_required`` (:meth:`Rounds.input_required`),
checks and posts a retry's answers upstream (:meth:`Rounds.answers`, :meth:`Rounds.post_answers`),
and turns a legacy -32042 into url-mode elicitations whose consent re-sends the call
(:meth:`Rounds.url_hold`, :meth:`Rounds.consented`). It never reads the exchange: the drive loop in
:mod:`gateway.calls.driver` does.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from mcp_types.jsonrpc import INTERNAL_ERROR

from gateway.calls.backend import Backend
from gateway.calls.context import CallContext
from gateway.calls.request import Call
from gateway.errors import GatewayError, InvalidParams, MissingCapability, UpstreamError
from gateway.holds.registry import Hold, HoldRegistry, Pending
from gateway.legacy.session import JsonObj, ServerRequest
from gateway.observability import tracing
from gateway.observability.metrics import Metrics
from gateway.state.boundary import RequestStateBoundary
from gateway.state.claims import RequestIdentity, request_digest
from gateway.translate import capabilities as caps
from gateway.translate import inputs, results


class Rounds:
    """Holds and rounds of the interactive calls of one replica."""

    def __init__(
        self,
        *,
        backend: Backend,
        registry: HoldRegistry[CallContext],
        boundary: RequestStateBoundary,
        metrics: Metrics,
    ) -> None:
        self._backend = backend
        self._registry = registry
        self._boundary = boundary
        self._metrics = metrics

    def hold_round(
        self,
        ctx: CallContext,
        call: Call,
        hold: Hold[CallContext] | None,
        batch: list[ServerRequest],
        *,
        logged: bool = True,
    ) -> JsonObj:
        """Hold ``batch`` as the next round. ``logged=False``: requests asked before the call was sent
        stay out of the replay log (a replayed call runs on a fresh session that asks them anew).

        The round limits are checked once, by the registry when the round opens
        (:meth:`~gateway.holds.registry.HoldRegistry.put_back`): a round past ``max_rounds`` ends the
        hold with ``batch`` pending, so its expiry answers the backend, and raises
        :class:`~gateway.errors.HoldLimitReached`, as for a retry that answered nothing."""
        if hold is None:
            hold = self._new_hold(ctx, call)
            try:
                self._registry.add(hold)
            except GatewayError:
                self._backend.answer_pending_for_expiry(ctx, batch)
                raise
        group = max((e.get("n", 0) for e in hold.log if isinstance(e.get("n"), int)), default=0) + 1
        for server_request in batch:
            entry, elicitation_id = inputs.input_request(server_request.method, server_request.params)
            digest = request_digest(server_request.method, server_request.params)
            # A question a lost owner had asked keeps its key when a replay asks it again.
            key = ctx.replay.key_for(digest) if ctx.replay is not None else None
            key = key or hold.next_key(inputs.input_key, server_request.method)
            hold.pending[key] = Pending(server_request.id, server_request.method, entry, elicitation_id)
            if logged:
                hold.log.append({"m": server_request.method, "k": key, "d": digest, "n": group, "r": None})
        return self.input_required(ctx, hold, call)

    def _new_hold(self, ctx: CallContext, call: Call) -> Hold[CallContext]:
        """A hold for the call, claimed (busy) by the call that creates it; round 0 until sealed.

        Its absolute deadline is the route's ``holds.max_duration`` from now, or a replayed call's
        original deadline; its key counter continues after every key a replayed call had used."""
        limits = ctx.route.config.holds
        now = time.monotonic()
        not_after = now + limits.max_duration
        if ctx.replay is not None and ctx.replay.until is not None:
            not_after = min(not_after, now + (ctx.replay.until - time.time()))
        identity = call.request.identity
        return Hold(
            id=self._registry.new_id(),
            route=ctx.route.name,
            principal=self._boundary.principal(call.caller.principal),
            method=identity.method,
            target=identity.target,
            args_digest=identity.args_digest,
            deadline=time.monotonic() + limits.ttl,
            context=ctx,
            round=0,
            busy=True,
            log=list(ctx.replayed),
            counter=ctx.replay.key_base if ctx.replay is not None else 0,
            not_after=not_after,
            max_rounds=limits.max_rounds,
        )

    def input_required(self, ctx: CallContext, hold: Hold[CallContext], call: Call) -> JsonObj:
        """Seal a new round's state and answer with the pending requests."""
        route = ctx.route
        limits = route.config.holds
        if hold.busy:
            self._registry.put_back(hold, next_round=True, deadline=time.monotonic() + limits.ttl)
        replayable = limits.on_lost == "replay" and not ctx.reissue
        token = self._boundary.seal(
            route=route.name,
            identity=RequestIdentity(hold.method, hold.target, hold.args_digest),
            principal=hold.principal,
            hold_id=hold.id,
            round_=hold.round,
            lifetime=limits.ttl,
            not_after=hold.not_after,
            transcript=hold.log if replayable else None,
            trace_link=tracing.first_round(),
        )
        self._metrics.input_rounds.labels(route.name).inc()
        call.held(hold.id, hold.round)
        result: JsonObj = {
            "resultType": "input_required",
            "inputRequests": {key: p.request for key, p in hold.pending.items()},
            "requestState": token,
        }
        init = ctx.session.initialize_result if not ctx.released else {}
        return results.with_server_info(result, results.server_info_of(init))

    def url_hold(self, ctx: CallContext, call: Call, error: JsonObj) -> JsonObj | None:
        """A legacy -32042 becomes url-mode elicitations; the call is re-sent after consent."""
        elicitations = inputs.url_elicitations(error)
        if not elicitations:
            return None
        missing = caps.allows(ctx.normalized_caps, "elicitation/create", {"mode": "url"})
        if missing is not None:
            self._backend.release(ctx)  # the backend's call is over; its session is fine
            raise MissingCapability(missing)
        ctx.reissue = True
        ctx.exchange = None
        hold = self._new_hold(ctx, call)
        self._registry.add(hold)
        for item in elicitations:
            params = {"mode": "url", "message": str(item.get("message", "")), "url": item["url"]}
            entry, _ = inputs.input_request("elicitation/create", params)
            key = hold.next_key(inputs.input_key, "elicitation/create")
            hold.pending[key] = Pending(-1, "elicitation/create", entry, str(item.get("elicitationId") or ""))
        return self.input_required(ctx, hold, call)

    def answers(self, hold: Hold[CallContext], responses: Mapping[str, Any]) -> dict[str, JsonObj]:
        """The retry's answers to the requests of the claimed ``hold``, each checked against the kind of
        request it answers (unknown keys ignored). A malformed one releases the claim: the same round's
        state stays valid for a corrected retry."""
        answers: dict[str, JsonObj] = {}
        for key, pending in hold.pending.items():
            if key not in responses:
                continue
            try:
                answers[key] = inputs.check_response(pending.method, responses[key])
            except inputs.MalformedInputResponse as exc:
                self._registry.release_claim(hold)
                raise InvalidParams(f"Invalid inputResponses[{key!r}]: {exc}", reason="bad_input_response") from None
        return answers

    async def post_answers(self, ctx: CallContext, hold: Hold[CallContext], answers: dict[str, JsonObj]) -> None:
        """Send each answer upstream as the response to its server request, and record it for a replay."""
        try:
            for key, answer in answers.items():
                pending = hold.pending.pop(key)
                await self._backend.answer_server_request(ctx, pending.backend_id, pending.method, answer)
                for entry in hold.log:
                    if entry["k"] == key:
                        entry["r"] = answer
        except BaseException as exc:  # incl. a client disconnect: the hold must never stay claimed
            self._registry.remove(hold)
            self._backend.failed(ctx, exc)
            raise

    def consented(self, ctx: CallContext, hold: Hold[CallContext], answers: dict[str, JsonObj]) -> bool:
        """A url-mode round's answers: True when every URL interaction was accepted (re-send the call),
        False while some are still unanswered (ask again); any decline ends the call."""
        for key in answers:
            hold.pending.pop(key)
        if hold.pending:
            return False
        if any(a.get("action") != "accept" for a in answers.values()):
            self._registry.remove(hold)
            self._backend.release(ctx)
            # The backend's answer stands: it required an interaction the user did not complete.
            raise UpstreamError(INTERNAL_ERROR, "The required URL interaction was not completed", reason="url_declined")
        return True
