"""A modern (2026-07-28) request past the ladder: into the core, and its answer back out.

``subscriptions/listen`` becomes a long-lived SSE stream (:mod:`gateway.listen`). Everything else
becomes a :class:`~gateway.calls.request.Call`. A retry's requestState is opened here, before the
core runs (:class:`~gateway.state.boundary.RequestStateBoundary`): a call this replica holds is
resumed by the call core; a call another replica holds is forwarded to it over the authenticated hop
(:mod:`gateway.replicas.forward`), or — when that replica is provably gone — replayed or answered as
lost, by the route's policy. ``tasks/*`` go to the task service (:mod:`gateway.mcptasks.service`); a
task another replica owns is forwarded to it over the same hop. The answer is one JSON response, or
an SSE stream when notifications were asked for and sent first
(:class:`~gateway.frontdoor.stream.ResponseStream`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import structlog
from aiohttp import web
from mcp_types.jsonrpc import HEADER_MISMATCH, INVALID_PARAMS, METHOD_NOT_FOUND
from mcp_types.methods import INPUT_REQUIRED_METHODS

from gateway import envelopes
from gateway.calls.request import Call, CallRequest
from gateway.calls.route import RouteRuntime
from gateway.errors import GatewayError, HoldLost, InvalidParams, MethodNotFound
from gateway.frontdoor.classify import Accepted, Rejection
from gateway.frontdoor.door import FrontDoor, Inbound
from gateway.frontdoor.headers import check_param_headers
from gateway.frontdoor.parsing import TASK_METHODS
from gateway.frontdoor.responses import body_response, encoded, error_response, refuse
from gateway.frontdoor.stream import ResponseStream
from gateway.legacy.session import JsonObj
from gateway.listen.serve import stream_listener
from gateway.listen.translate import Listener, acknowledged
from gateway.mcptasks.service import Elsewhere
from gateway.mcptasks.table import TaskRecord
from gateway.observability import tracing
from gateway.observability.requests import record_of
from gateway.replicas.forward import OWNER_UNREACHABLE
from gateway.state.claims import Claims, credential_digest
from gateway.translate.cursors import InvalidCursor

log = structlog.get_logger("gateway.frontdoor")

PAGINATED_METHODS = frozenset({"tools/list", "prompts/list", "resources/list", "resources/templates/list"})
"""Methods whose ``cursor``/``nextCursor`` the gateway wraps (server/utilities/pagination.mdx)."""
CLIENT_MISTAKES = frozenset({INVALID_PARAMS, METHOD_NOT_FOUND})
"""Error codes that are the client's own mistake: answered, counted, not logged as failures."""


async def serve(door: FrontDoor, inbound: Inbound, outcome: Accepted) -> web.StreamResponse:
    """Serve one modern request, inside its round's span (:mod:`gateway.observability.tracing`)."""
    request = inbound.request
    with tracing.round_span(
        request.headers, outcome.method, outcome.params, outcome.id, inbound.route.name, forwarded=inbound.forwarded
    ):
        response = await _serve(door, inbound, outcome)
        record = record_of(request)
        tracing.round_ended(record.outcome, record.error_code, record.reason)
        return response


async def _serve(door: FrontDoor, inbound: Inbound, outcome: Accepted) -> web.StreamResponse:
    route = inbound.route
    record = record_of(inbound.request)
    request = CallRequest(
        outcome.method, outcome.params, outcome.client_capabilities, tracing.trace_headers(inbound.request.headers)
    )
    record.call(route.name, outcome.method, request.target or None)
    if (draining := door.drain.refuse(outcome.method, outcome.params)) is not None:
        record.failed(draining.code, draining.reason)
        return error_response(outcome.id, draining)  # a new call while this replica drains (gateway.drain)
    if outcome.method == "subscriptions/listen":
        return await _serve_listen(door, inbound, outcome)
    if outcome.method in TASK_METHODS:
        return await _serve_task(door, inbound, outcome)
    caller = inbound.caller()
    if outcome.method == "tools/call":
        rejection = await _check_param_headers(door, inbound, outcome, Call(route, request, caller))
        if rejection is not None:
            return refuse(door.metrics, inbound.request, rejection)
    stream = ResponseStream(
        inbound.request, progress_token=outcome.progress_token, log_level=outcome.log_level, enabled=outcome.wants_sse
    )
    call = Call(route, request, caller, stream.on_notification, observer=record)
    try:
        try:
            if outcome.method in PAGINATED_METHODS:
                call = dataclasses.replace(call, request=_unwrap_cursor(door, route, request))
            answer = await _answer(door, inbound, outcome, call)
            if isinstance(answer, web.StreamResponse):
                return answer  # the owner replica answered, through us
        except GatewayError as exc:
            return await _failed(door, inbound, outcome, stream, exc)
        if outcome.method in PAGINATED_METHODS:
            answer = _wrap_cursor(door, route, outcome.method, answer)
        kind = str(answer.get("resultType", "complete"))
        tracing.answered(answer)
        record.outcome = kind
        if kind == "task":
            record.tasked(str(answer.get("taskId")), str(answer.get("status")))
        body = await encoded(envelopes.result(outcome.id, answer))
        if stream.committed:
            return await stream.finish(body)
        return body_response(body)
    finally:
        await stream.stop_keepalive()


async def _answer(door: FrontDoor, inbound: Inbound, outcome: Accepted, call: Call) -> JsonObj | web.StreamResponse:
    """A new call goes to the call core; a retry's state is opened first, and the owner of its hold decides."""
    request = call.request
    if request.method not in INPUT_REQUIRED_METHODS or request.request_state is None:
        return await door.core.call(call)
    claims = door.boundary.open(call.route.name, request.method, request.params, call.caller.principal)
    # This request is the call's round trip number claims.round + 1 (the first call was 1).
    record_of(inbound.request).held(claims.hold_id, claims.round + 1)
    tracing.retry_of(claims.round + 1, door.boundary.trace_link(claims))
    if door.boundary.owned_here(claims):
        return await door.core.resume(call, claims)
    return await _elsewhere(door, inbound, outcome, call, claims)


async def _elsewhere(
    door: FrontDoor, inbound: Inbound, outcome: Accepted, call: Call, claims: Claims
) -> JsonObj | web.StreamResponse:
    """The hold lives in another replica: forward the retry to it, unless it is provably gone."""
    owner_url = door.boundary.owner_url(claims)
    if owner_url is None:
        # deny-on-error: an owner with no known address may well be alive and holding the call.
        return await door.core.replay_or_lost(call, claims, proven=False)
    if inbound.forwarded:
        # Forwarded here because this is the owner's address, yet another replica answers at it:
        # the owner is gone. A hop that reached any other address proves nothing.
        moved = door.boundary.advertise_url is not None and owner_url == door.boundary.advertise_url
        return await door.core.replay_or_lost(call, claims, proven=moved)
    try:
        forwarded = await door.hop.forward(
            inbound.request, inbound.route, inbound.body, owner_url, request_id=outcome.id, resend=True
        )
    except HoldLost as lost:
        # The owner did not answer: the route's policy decides (replay only if it is gone, or hold_lost).
        return await door.core.replay_or_lost(call, claims, proven=lost.reason == OWNER_UNREACHABLE, lost=lost)
    record = record_of(inbound.request)
    record.outcome, record.backend_status = "forwarded", forwarded.status
    return forwarded


async def _failed(
    door: FrontDoor, inbound: Inbound, outcome: Accepted, stream: ResponseStream, exc: GatewayError
) -> web.StreamResponse:
    record_of(inbound.request).failed(exc.code, exc.reason)
    if exc.code not in CLIENT_MISTAKES:
        log.warning("request_failed", reason=exc.reason, code=exc.code, detail=getattr(exc, "detail", None))
    if stream.committed:
        return await stream.finish(envelopes.encode(envelopes.error(outcome.id, exc.to_error())))
    return error_response(outcome.id, exc)


async def _check_param_headers(door: FrontDoor, inbound: Inbound, outcome: Accepted, listing: Call) -> Rejection | None:
    """``Mcp-Param-*`` headers against the tool's ``x-mcp-header`` annotations (needs its inputSchema,
    listed as ``listing``: the call itself, without its notification sink)."""
    name = outcome.params.get("name")
    if not isinstance(name, str):
        return None
    schema = await door.schemas.input_schema(listing, name)
    arguments = outcome.params.get("arguments")
    headers = inbound.request.headers.items()
    problem = check_param_headers(headers, arguments if isinstance(arguments, dict) else None, schema)
    if problem is None:
        return None
    return Rejection(HEADER_MISMATCH, problem, "header_mismatch.mcp-param", id=outcome.id)


async def _serve_task(door: FrontDoor, inbound: Inbound, outcome: Accepted) -> web.StreamResponse:
    """``tasks/get``, ``tasks/update``, ``tasks/cancel``: -32601 on a route without tasks; the route's
    ``require_name_header``; then the task service (-32021, then the task id: docs/conformance.md A11)."""
    route = inbound.route
    record = record_of(inbound.request)
    policy = route.config.tasks
    if policy.enabled and policy.require_name_header and "Mcp-Name" not in inbound.request.headers:
        problem = "Header mismatch: required Mcp-Name header is missing"
        rejection = Rejection(HEADER_MISMATCH, problem, "header_mismatch.mcp-name", id=outcome.id)
        return refuse(door.metrics, inbound.request, rejection)
    try:
        if not policy.enabled:
            raise MethodNotFound("tasks_disabled")
        answered = await door.tasks.answer(
            route.name,
            outcome.method,
            outcome.params,
            outcome.client_capabilities,
            inbound.principal,
            policy=policy,
            forwarded=inbound.forwarded,
        )
        if isinstance(answered, Elsewhere):
            relayed = await _task_elsewhere(door, inbound, outcome, answered)
            if isinstance(relayed, web.StreamResponse):
                return relayed  # the owner replica answered, through us
            answered = relayed
        answer, task = answered
    except GatewayError as exc:
        record.failed(exc.code, exc.reason)
        return error_response(outcome.id, exc)
    record.tasked(task.task_id, task.status)
    record.outcome = "complete"
    return body_response(await encoded(envelopes.result(outcome.id, answer)))


async def _task_elsewhere(
    door: FrontDoor, inbound: Inbound, outcome: Accepted, where: Elsewhere
) -> tuple[JsonObj, TaskRecord] | web.StreamResponse:
    """Forward a ``tasks/*`` request to the replica that owns the task, which answers it as its own;
    when the hop fails the task service decides (owner gone: ``failed``; else retryable). The owner
    answers ``tasks/get`` and ``tasks/cancel`` from memory: its silence is bounded by
    ``replicas.forward_timeout``; ``tasks/update`` posts answers upstream (``backend.timeout``)."""
    quick = None if outcome.method == "tasks/update" else door.settings.config.replicas.forward_timeout
    try:
        forwarded = await door.hop.forward(
            inbound.request, inbound.route, inbound.body, where.owner_url, request_id=outcome.id, read_timeout=quick
        )
    except HoldLost as lost:
        return door.tasks.unreached(where, lost.reason)
    record = record_of(inbound.request)
    record.outcome, record.backend_status = "forwarded", forwarded.status
    return forwarded


async def _serve_listen(door: FrontDoor, inbound: Inbound, outcome: Accepted) -> web.StreamResponse:
    """``subscriptions/listen``: always a long-lived SSE stream (406 when the client cannot take one).
    ``notifications.taskIds`` on a route with tasks: the task service picks the tasks the stream
    follows, or refuses the request (-32021 without the extension) before the stream opens."""
    if not outcome.wants_sse:
        record_of(inbound.request).outcome = "rejected"
        return web.Response(status=406)
    route = inbound.route
    caller = inbound.caller()
    requested = outcome.params.get("notifications")
    requested = requested if isinstance(requested, dict) else {}
    watch = None
    if route.config.tasks.enabled and "taskIds" in requested:
        try:
            task_ids, capabilities = requested["taskIds"], outcome.client_capabilities
            watch = door.tasks.follow(route.name, task_ids, capabilities, inbound.principal)
        except GatewayError as exc:
            record_of(inbound.request).failed(exc.code, exc.reason)
            return error_response(outcome.id, exc)

    async def open_session(sink: Any) -> Any:
        return await route.pool.open_detached(caller.forward_headers, sink)

    def listener_for(capabilities: Any) -> Listener:
        return Listener(outcome.id, acknowledged(requested, capabilities, None if watch is None else watch.task_ids))

    key = (route.config.path, credential_digest(caller.session_identity))
    try:
        hub, listener = await door.hubs.join(
            key, open_session, route.config.backend.timeout, listener_for, route.pool.close_detached
        )
    except GatewayError as exc:
        record_of(inbound.request).failed(exc.code, exc.reason)
        return error_response(outcome.id, exc)
    record_of(inbound.request).outcome = "listen"
    try:
        if watch is not None:
            watch.start(listener.task_changed)  # queued now, written after the acknowledgment
        return await stream_listener(inbound.request, hub, listener, until=inbound.token_expires)
    finally:
        if watch is not None:
            watch.stop()
        door.hubs.leave(key)
        await door.hubs.close_idle()


def _unwrap_cursor(door: FrontDoor, route: RouteRuntime, request: CallRequest) -> CallRequest:
    """The request with the backend's own cursor in place of the one the gateway issued."""
    cursor = request.params.get("cursor")
    if cursor is None:
        return request
    if not isinstance(cursor, str):
        raise InvalidParams("Invalid cursor", reason="invalid_cursor")
    try:
        backend_cursor = door.cursors.unwrap(route.name, request.method, cursor)
    except InvalidCursor:
        raise InvalidParams("Invalid cursor", reason="invalid_cursor") from None
    return dataclasses.replace(request, params={**request.params, "cursor": backend_cursor})


def _wrap_cursor(door: FrontDoor, route: RouteRuntime, method: str, result: JsonObj) -> JsonObj:
    cursor = result.get("nextCursor")
    if isinstance(cursor, str) and cursor:
        return {**result, "nextCursor": door.cursors.wrap(route.name, method, cursor)}
    return result
