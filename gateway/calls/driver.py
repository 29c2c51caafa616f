"""The path of one modern call through a legacy backend (DESIGN.md, "The path of one call").

:class:`CallDriver` turns one accepted 2026-07-28 request into backend work and back:

* plain methods (lists, completion, discover) lease a session, send, and translate the answer;
* interactive methods (``tools/call``, ``prompts/get``, ``resources/read``) may be paused by
  server requests: the driver gathers them for the route's batch window, registers a hold and
  answers the client with an ``InputRequiredResult`` whose ``requestState`` is sealed;
* a retry unseals and binds the state, claims the hold (single use), posts each answer upstream
  as the JSON-RPC response to the matching backend request, and keeps reading the same exchange.

Everything raised to the caller is a :class:`~gateway.errors.GatewayError`.
"""

from __future__ import annotations

import dataclasses
import secrets
import time
from collections.abc import Mapping
from typing import Any

import structlog
from mcp_types.jsonrpc import URL_ELICITATION_REQUIRED
from mcp_types.methods import INPUT_REQUIRED_METHODS

from gateway.calls import replay
from gateway.calls.backend import Backend, cancel_reason
from gateway.calls.context import (
    CallContext,
    Caller,
    NotificationSink,
    RouteRuntime,
    arguments_of,
    internal_request,
    target_of,
)
from gateway.calls.replay import ReplayGuard
from gateway.errors import (
    GatewayError,
    HoldElsewhere,
    HoldLost,
    InvalidParams,
    InvalidRequestState,
    MissingCapability,
    Overloaded,
    UpstreamError,
)
from gateway.frontdoor.classify import Accepted
from gateway.holds.registry import Hold, HoldRegistry, Pending, RefusedHold
from gateway.legacy.pool import credential_digest
from gateway.legacy.session import FinalResponse, JsonObj, ServerNotification, ServerRequest
from gateway.observability.metrics import Metrics
from gateway.state.claims import Claims, args_digest, principal_tag, request_digest
from gateway.state.codec import KeyRing, StateError, check_bindings
from gateway.translate import capabilities as caps
from gateway.translate import inputs, results

log = structlog.get_logger("gateway.calls")


class CallDriver:
    def __init__(
        self,
        *,
        keyring: KeyRing,
        registry: HoldRegistry,
        metrics: Metrics,
        replica_id: str,
        state_ttl: float,
        advertise_url: str | None = None,
        replay_guard: ReplayGuard | None = None,
    ) -> None:
        self._keyring = keyring
        self._registry = registry
        self._metrics = metrics
        self._replica = replica_id
        self._state_ttl = state_ttl
        self._advertise_url = advertise_url
        self._backend = Backend(metrics)
        self._replays = replay_guard or ReplayGuard()
        # This process's incarnation, sealed into every state: a replica restarted under the same
        # id knows a hold its predecessor sealed died with it (and may be replayed).
        self._boot = secrets.token_urlsafe(9)

    # -- entry point ------------------------------------------------------------------------

    async def call(
        self,
        route: RouteRuntime,
        request: Accepted,
        caller: Caller,
        on_notification: NotificationSink | None = None,
    ) -> JsonObj:
        """Answer one accepted request with a modern result, or raise GatewayError."""
        method = request.method
        if method == "server/discover":
            return await self._discover(route, request, caller)
        if method in INPUT_REQUIRED_METHODS:
            state = request.params.get("requestState")
            if isinstance(state, str):
                return await self._resume(route, request, caller, state, on_notification)
            return await self._start_interactive(route, request, caller, on_notification)
        return await self._plain(route, request, caller)

    async def tool_input_schema(
        self, route: RouteRuntime, caller: Caller, name: str, capabilities: Mapping[str, Any]
    ) -> JsonObj | None:
        """The backend's inputSchema for tool ``name`` (cached per credential; None if unknown).

        The listing runs with the caller's capabilities so it reuses the session the call will
        lease. Fail-open: when the listing fails the call proceeds without ``Mcp-Param-*`` validation,
        and the call itself then reports the backend's state. The cache is the route's
        :class:`~gateway.bounded.LruTtlCache`: every distinct credential adds an entry, so it is
        bounded in size as well as in time.
        """
        digest = credential_digest(caller.principal)
        schemas = route.tool_schemas.get(digest)
        if schemas is None:
            schemas = {}
            cursor: str | None = None
            try:
                for _ in range(100):  # bounded paging
                    params: JsonObj = {"cursor": cursor} if cursor else {}
                    listing = await self._plain(route, internal_request("tools/list", params, capabilities), caller)
                    for tool in listing.get("tools") or []:
                        if isinstance(tool, Mapping) and isinstance(tool.get("inputSchema"), Mapping):
                            schemas[str(tool.get("name"))] = dict(tool["inputSchema"])
                    cursor = listing.get("nextCursor") if isinstance(listing.get("nextCursor"), str) else None
                    if not cursor:
                        break
            except GatewayError as exc:
                log.info("tool_schema_unavailable", route=route.name, reason=exc.reason)
                return None
            route.tool_schemas.put(digest, schemas)
        return schemas.get(name)

    # -- plain methods ----------------------------------------------------------------------

    async def _discover(self, route: RouteRuntime, request: Accepted, caller: Caller) -> JsonObj:
        normalized = caps.normalize(request.client_capabilities)
        pooled = await self._backend.lease(route, caller, normalized, exclusive=False)
        try:
            init = pooled.session.initialize_result
        finally:
            route.pool.release(pooled, exclusive=False)
        cache = route.config.cache
        return results.discover_result(init, ttl_ms=cache.ttl_ms, cache_scope=cache.scope)

    async def _plain(self, route: RouteRuntime, request: Accepted, caller: Caller) -> JsonObj:
        normalized = caps.normalize(request.client_capabilities)
        ctx = await self._backend.begin(route, request, caller, normalized, exclusive=False)
        try:
            while True:
                assert ctx.exchange is not None
                event = await ctx.exchange.next(route.config.backend.timeout)
                if isinstance(event, FinalResponse):
                    return self._finish(ctx, request, event, reusable=True)
                if isinstance(event, ServerRequest):
                    await self._backend.refuse_server_request(ctx, event, "not allowed during this method")
        except BaseException as exc:
            self._backend.discard(ctx, cancel=cancel_reason(exc))
            raise

    # -- interactive methods ----------------------------------------------------------------

    async def _start_interactive(
        self, route: RouteRuntime, request: Accepted, caller: Caller, on_notification: NotificationSink | None
    ) -> JsonObj:
        principal = principal_tag(caller.principal, self._keyring.salt)
        self._registry.admit(principal)
        normalized = caps.normalize(request.client_capabilities)
        ctx = await self._backend.prepare(route, request, caller, normalized, exclusive=True)
        return await self._send_after_early_rounds(ctx, None, request, caller, on_notification)

    async def _send_after_early_rounds(
        self,
        ctx: CallContext,
        hold: Hold | None,
        request: Accepted,
        caller: Caller,
        on_notification: NotificationSink | None,
    ) -> JsonObj:
        """Requests the server sent while nobody held the session (roots/list at session start) are
        asked first, before the call leaves, so the server has its answers when it runs: ask what is
        kept (a new round, under ``hold`` when there is one), else send the call upstream and read it."""
        try:
            early = await self._backend.claim_unclaimed(ctx)
            if early:
                return self._hold_round(ctx, request, caller, hold, early, logged=False)
            ctx.exchange = await self._backend.send(ctx, ctx.backend_method, ctx.backend_params)
        except BaseException:
            if hold is not None:
                self._registry.remove(hold)
            self._backend.discard(ctx)
            raise
        return await self._drive(ctx, request, caller, hold, on_notification)

    async def _resume(
        self,
        route: RouteRuntime,
        request: Accepted,
        caller: Caller,
        token: str,
        on_notification: NotificationSink | None,
    ) -> JsonObj:
        claims = self._check_state(route, request, caller, token)
        if claims.owner != self._replica:
            owner_url = claims.extra.get("owner_url")
            if not isinstance(owner_url, str):
                # deny-on-error: an owner with no known address may well be alive and holding the call.
                return await self.replay_or_lost(route, request, caller, claims, on_notification, proven=False)
            if not caller.forwarded:
                raise HoldElsewhere(owner_url, claims)  # the front door forwards the retry to the owner
            # Forwarded here because this is the owner's address, yet another replica answers at it:
            # the owner is gone. A hop that reached any other address proves nothing.
            moved = self._advertise_url is not None and owner_url == self._advertise_url
            return await self.replay_or_lost(route, request, caller, claims, on_notification, proven=moved)
        try:
            hold = self._registry.take(claims.hold_id, claims.round)
        except RefusedHold as exc:
            if exc.reason == "hold_unknown" and claims.extra.get("boot") != self._boot:
                # Sealed by this replica id in an earlier life: the hold died in the restart.
                return await self.replay_or_lost(route, request, caller, claims, on_notification, proven=True)
            raise self._state_refused(route, exc.reason) from None
        ctx: CallContext = hold.context
        responses = request.params.get("inputResponses")
        responses = responses if isinstance(responses, Mapping) else {}
        try:
            answers = self._validated_answers(hold, responses)
        except InvalidParams:
            self._registry.release_claim(hold)
            raise
        if ctx.reissue:
            return await self._resume_url(ctx, hold, request, caller, answers, on_notification)
        if ctx.exchange is not None:
            ctx.exchange.backend_turn()  # the backend's answer time (metrics) runs from its answers' sending
        try:
            for key, answer in answers.items():
                pending = hold.pending.pop(key)
                assert ctx.pooled is not None
                await ctx.pooled.session.respond(pending.backend_id, result=answer)
                for entry in hold.log:
                    if entry["k"] == key:
                        entry["r"] = answer
        except BaseException as exc:  # incl. a client disconnect: the hold must never stay claimed
            self._registry.remove(hold)
            self._backend.discard(ctx, cancel=cancel_reason(exc))
            raise
        if hold.pending:
            # The client answered only part of the round: ask again for what is missing.
            return self._input_required(ctx, hold, request, caller)
        if ctx.exchange is None:
            return await self._send_after_early_rounds(ctx, hold, request, caller, on_notification)
        return await self._drive(ctx, request, caller, hold, on_notification)

    async def _resume_url(
        self,
        ctx: CallContext,
        hold: Hold,
        request: Accepted,
        caller: Caller,
        answers: dict[str, JsonObj],
        on_notification: NotificationSink | None,
    ) -> JsonObj:
        for key in answers:
            hold.pending.pop(key)
        if hold.pending:
            return self._input_required(ctx, hold, request, caller)
        if any(a.get("action") != "accept" for a in answers.values()):
            self._registry.remove(hold)
            self._backend.release(ctx)
            raise GatewayError("The required URL interaction was not completed", reason="url_declined")
        ctx.reissue = False
        assert ctx.pooled is not None
        try:
            ctx.exchange = await self._backend.send(ctx, ctx.backend_method, ctx.backend_params)
        except BaseException:
            self._registry.remove(hold)
            self._backend.discard(ctx)
            raise
        return await self._drive(ctx, request, caller, hold, on_notification)

    async def _drive(
        self,
        ctx: CallContext,
        request: Accepted,
        caller: Caller,
        hold: Hold | None,
        on_notification: NotificationSink | None,
        initial: list[ServerRequest] | None = None,
    ) -> JsonObj:
        """Read the exchange until it ends or needs input; then answer or hold."""
        route = ctx.route
        assert ctx.exchange is not None
        assert ctx.pooled is not None
        ctx.pooled.session.attach(ctx.exchange)
        refused: tuple[ServerRequest, JsonObj] | None = None
        try:
            batch: list[ServerRequest] = list(initial or [])
            while True:
                if batch:
                    event = await ctx.exchange.poll(route.config.holds.batch_window)
                    if event is None:
                        break
                else:
                    event = await ctx.exchange.next(route.config.backend.timeout)
                if isinstance(event, FinalResponse):
                    if hold is not None:
                        self._registry.remove(hold)
                    if event.error is not None and event.error.get("code") == URL_ELICITATION_REQUIRED:
                        url_result = self._url_hold(ctx, request, caller, event.error, hold)
                        if url_result is not None:
                            return url_result
                    return self._finish(ctx, request, event, reusable=True, retry=hold is not None)
                if isinstance(event, ServerNotification):
                    if on_notification is not None:
                        await on_notification(event)
                    continue
                missing = caps.allows(ctx.normalized_caps, event.method, event.params)
                if missing == {}:  # nothing any client could be asked
                    await self._backend.refuse_server_request(ctx, event, "not supported by the gateway")
                    continue
                if missing is not None:
                    refused = (event, missing)
                    break
                batch.append(event)
        except BaseException as exc:
            if hold is not None:
                self._registry.remove(hold)
            self._backend.discard(ctx, cancel=cancel_reason(exc))
            raise
        if refused is not None:
            # The client did not declare what the backend needs (basic/index.mdx §_meta, a MUST):
            # never forward it; end the call with -32021 and cancel the backend's work.
            event, missing = refused
            if hold is not None:
                self._registry.remove(hold)
            self._backend.abandon(ctx, event)
            raise MissingCapability(missing)
        return self._hold_round(ctx, request, caller, hold, batch)

    async def replay_or_lost(
        self,
        route: RouteRuntime,
        request: Accepted,
        caller: Caller,
        claims: Claims,
        on_notification: NotificationSink | None,
        *,
        proven: bool,
        lost: HoldLost | None = None,
    ) -> JsonObj:
        """The retry's hold is not here and its owner cannot serve it: replay, or answer ``lost``.

        Replay needs all of: a route that allows it, a transcript in the state, and ``proven``
        (the owner has lost the hold: this replica restarted under its id, or the owner's address
        is unreachable or answered by another replica). An owner that is merely unknown or slow may
        still be running the call, and running it twice is what a replay must never do.
        """
        entries = claims.extra.get("log")
        if route.config.holds.on_lost != "replay" or not isinstance(entries, list) or not proven:
            self._metrics.state_rejections.labels("owner_elsewhere").inc()
            self._count_failed_forward(route, lost)
            raise lost or HoldLost("owner_unreachable")
        return await self._replay(route, request, caller, claims, entries, on_notification, lost=lost)

    def _count_failed_forward(self, route: RouteRuntime, lost: HoldLost | None) -> None:
        """A retry whose forward to the owner failed and that was not replayed: counted once, under
        the forward's outcome (a replayed one counts as ``replayed`` only)."""
        if lost is not None:
            self._metrics.forwards.labels(route.name, lost.reason).inc()

    async def _replay(
        self,
        route: RouteRuntime,
        request: Accepted,
        caller: Caller,
        claims: Claims,
        entries: list[Any],
        on_notification: NotificationSink | None,
        *,
        lost: HoldLost | None = None,
    ) -> JsonObj:
        """Run the call again on a fresh session, answering its server requests from the sealed
        transcript (earlier rounds) and this retry's ``inputResponses`` (the round that was
        pending) — each answer only to a request with the digest of the one it answered. The first
        request that matches no recorded one becomes a normal round (:mod:`gateway.calls.replay`)."""
        responses = request.params.get("inputResponses")
        responses = responses if isinstance(responses, Mapping) else {}
        until = claims.extra.get("until")
        transcript = replay.Transcript(
            replay.plan(entries, responses), float(until) if isinstance(until, int | float) else None
        )
        lifetime = min(self._state_ttl, route.config.holds.ttl)
        try:  # a retry counts once in forwards_total: under its failed forward until the replay runs
            self._registry.admit(principal_tag(caller.principal, self._keyring.salt))
            if not self._replays.consume(claims.hold_id, replay.remember_until(claims.exp, until, lifetime)):
                raise self._state_refused(route, "replay_consumed")
        except GatewayError:
            self._count_failed_forward(route, lost)
            raise
        normalized = caps.normalize(request.client_capabilities)
        try:
            ctx = await self._backend.begin(route, request, caller, normalized, exclusive=True)
        except Overloaded:  # no session to run it on: nothing reached the backend, the token stays usable
            self._replays.release(claims.hold_id)
            self._count_failed_forward(route, lost)
            raise
        except BaseException:  # the token is spent: the replay ran, and failed at the backend
            self._metrics.forwards.labels(route.name, "replayed").inc()
            raise
        ctx.replay = transcript.carry
        self._metrics.forwards.labels(route.name, "replayed").inc()
        log.info("hold_replayed", route=route.name, recorded=len(entries))
        assert ctx.exchange is not None
        assert ctx.pooled is not None
        ctx.pooled.session.attach(ctx.exchange)
        try:
            while transcript:
                event = await self._next_request_or_final(ctx, on_notification)
                if isinstance(event, FinalResponse):
                    return self._finish(ctx, request, event, reusable=True, retry=True)
                digest = request_digest(event.method, event.params)
                step = transcript.take(digest)
                if step is None or step.answer is None:
                    if step is None:
                        self._metrics.state_rejections.labels("replay_diverged").inc()
                        log.warning("replay_diverged", route=route.name, method=event.method)
                    transcript.stop(step)
                    return await self._drive(ctx, request, caller, None, on_notification, initial=[event])
                await ctx.pooled.session.respond(event.id, result=step.answer)
                ctx.replayed.append({"m": step.method, "k": step.key, "d": digest, "n": step.group, "r": step.answer})
        except BaseException as exc:
            if ctx.pooled is not None:
                self._backend.discard(ctx, cancel=cancel_reason(exc) or "replay abandoned")
            raise
        return await self._drive(ctx, request, caller, None, on_notification)

    async def _next_request_or_final(
        self, ctx: CallContext, on_notification: NotificationSink | None
    ) -> ServerRequest | FinalResponse:
        assert ctx.exchange is not None
        while True:
            event = await ctx.exchange.next(ctx.route.config.backend.timeout)
            if isinstance(event, ServerNotification):
                if on_notification is not None:
                    await on_notification(event)
                continue
            return event

    def _hold_round(
        self,
        ctx: CallContext,
        request: Accepted,
        caller: Caller,
        hold: Hold | None,
        batch: list[ServerRequest],
        *,
        logged: bool = True,
    ) -> JsonObj:
        """Hold ``batch`` as the next round. ``logged=False``: requests asked before the call was sent
        stay out of the replay log (a replayed call runs on a fresh session that asks them anew)."""
        route = ctx.route
        if hold is None:
            hold = self._new_hold(ctx, request, caller)
            try:
                self._registry.add(hold)
            except GatewayError:
                self._backend.answer_pending_for_expiry(ctx, batch)
                raise
        if hold.round >= route.config.holds.max_rounds:
            self._registry.remove(hold)
            self._backend.answer_pending_for_expiry(ctx, batch)
            raise GatewayError(
                f"The backend asked for input more than {route.config.holds.max_rounds} times",
                reason="max_rounds",
            )
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
        return self._input_required(ctx, hold, request, caller)

    def _new_hold(self, ctx: CallContext, request: Accepted, caller: Caller) -> Hold:
        """A hold for ``request``, claimed (busy) by the call that creates it; round 0 until sealed.

        Its absolute deadline is the route's ``holds.max_duration`` from now, or a replayed call's
        original deadline; its key counter continues after every key a replayed call had used."""
        now = time.monotonic()
        not_after = now + ctx.route.config.holds.max_duration
        if ctx.replay is not None and ctx.replay.until is not None:
            not_after = min(not_after, now + (ctx.replay.until - time.time()))
        return Hold(
            id=self._registry.new_id(),
            route=ctx.route.name,
            principal=principal_tag(caller.principal, self._keyring.salt),
            method=request.method,
            target=target_of(request.method, request.params),
            args_digest=args_digest(arguments_of(request.method, request.params)),
            deadline=time.monotonic() + ctx.route.config.holds.ttl,
            context=ctx,
            round=0,
            busy=True,
            log=list(ctx.replayed),
            counter=ctx.replay.key_base if ctx.replay is not None else 0,
            not_after=not_after,
            max_rounds=ctx.route.config.holds.max_rounds,
        )

    def _input_required(self, ctx: CallContext, hold: Hold, request: Accepted, caller: Caller) -> JsonObj:
        """Seal a new round's state and answer with the pending requests."""
        route = ctx.route
        if hold.busy:
            self._registry.put_back(hold, next_round=True, deadline=time.monotonic() + route.config.holds.ttl)
        now = int(time.time())
        ttl = int(min(self._state_ttl, route.config.holds.ttl))
        until = int(time.time() + (hold.not_after - time.monotonic()))  # the call's absolute deadline
        extra: JsonObj = {"boot": self._boot, "until": until}
        if self._advertise_url:
            extra["owner_url"] = self._advertise_url
        claims = Claims(
            iat=now,
            exp=max(min(now + max(ttl, 1), until), now + 1),
            aud=route.name,
            method=hold.method,
            target=hold.target,
            args_digest=hold.args_digest,
            principal=hold.principal,
            hold_id=hold.id,
            round=hold.round,
            owner=self._replica,
            extra=extra,
        )
        token = None
        if route.config.holds.on_lost == "replay" and not ctx.reissue:
            try:
                token = self._keyring.seal(dataclasses.replace(claims, extra={**extra, "log": hold.log}))
            except ValueError:  # the answers do not fit in a token: this round cannot be replayed
                log.info("replay_log_too_large", route=route.name, entries=len(hold.log))
        self._metrics.input_rounds.labels(route.name).inc()
        result: JsonObj = {
            "resultType": "input_required",
            "inputRequests": {key: p.request for key, p in hold.pending.items()},
            "requestState": token or self._keyring.seal(claims),
        }
        init = ctx.pooled.session.initialize_result if ctx.pooled is not None else {}
        return results.with_server_info(result, results.server_info_of(init))

    def _url_hold(
        self, ctx: CallContext, request: Accepted, caller: Caller, error: JsonObj, hold: Hold | None
    ) -> JsonObj | None:
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
        hold = self._new_hold(ctx, request, caller)
        self._registry.add(hold)
        for item in elicitations:
            params = {"mode": "url", "message": str(item.get("message", "")), "url": item["url"]}
            entry, _ = inputs.input_request("elicitation/create", params)
            key = hold.next_key(inputs.input_key, "elicitation/create")
            hold.pending[key] = Pending(-1, "elicitation/create", entry, str(item.get("elicitationId") or ""))
        return self._input_required(ctx, hold, request, caller)

    # -- state ------------------------------------------------------------------------------

    def _check_state(self, route: RouteRuntime, request: Accepted, caller: Caller, token: str) -> Claims:
        try:
            claims = self._keyring.unseal(token)
            # A tag sealed before a key rotation was made with an older ring entry's salt.
            for salt in self._keyring.salts:
                try:
                    check_bindings(
                        claims,
                        aud=route.name,
                        method=request.method,
                        target=target_of(request.method, request.params),
                        args_digest=args_digest(arguments_of(request.method, request.params)),
                        principal=principal_tag(caller.principal, salt),
                    )
                    break
                except StateError as exc:
                    if exc.reason != "principal" or salt is self._keyring.salts[-1]:
                        raise
        except StateError as exc:
            raise self._state_refused(route, exc.reason) from None
        return claims

    def _state_refused(self, route: RouteRuntime, reason: str) -> InvalidRequestState:
        self._metrics.state_rejections.labels(reason).inc()
        log.warning("request_state_refused", route=route.name, reason=reason)
        return InvalidRequestState(reason)

    def _validated_answers(self, hold: Hold, responses: Mapping[str, Any]) -> dict[str, JsonObj]:
        answers: dict[str, JsonObj] = {}
        for key, pending in hold.pending.items():
            if key not in responses:
                continue
            try:
                answers[key] = inputs.check_response(pending.method, responses[key])
            except inputs.MalformedInputResponse as exc:
                raise InvalidParams(f"Invalid inputResponses[{key!r}]: {exc}", reason="bad_input_response") from None
        return answers

    async def expire(self, hold: Hold) -> None:
        """A hold's client never came back: answer the backend ourselves so the tool can finish."""
        ctx: CallContext = hold.context
        self._metrics.hold_expirations.labels(hold.route).inc()
        log.info("hold_expired", route=hold.route, hold=hold.id, pending=len(hold.pending))
        if ctx.reissue:
            self._backend.release(ctx)
            return
        await self._backend.unblock(ctx, list(hold.pending.values()))

    def _finish(
        self,
        ctx: CallContext,
        request: Accepted,
        final: FinalResponse,
        *,
        reusable: bool,
        retry: bool = False,
    ) -> JsonObj:
        server_info = results.server_info_of(ctx.pooled.session.initialize_result) if ctx.pooled else None
        self._backend.release(ctx, reusable=reusable)
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
