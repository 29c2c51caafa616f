"""The 2026-07-28 HTTP endpoint of one route.

Reads the whole body (bounded in size and time: :mod:`gateway.frontdoor.body`), asks the pure
classifier what the request is, hands accepted requests to the call driver and writes one JSON-RPC
response. Rejections and gateway errors are written with the status from
:func:`gateway.errors.http_status_for`.
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

import structlog
from aiohttp import web
from mcp_types.jsonrpc import HEADER_MISMATCH, UNSUPPORTED_PROTOCOL_VERSION
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from gateway import keys
from gateway.calls import Caller, RouteRuntime
from gateway.errors import GatewayError, HoldElsewhere, InvalidParams, Overloaded
from gateway.frontdoor import legacy_passthrough, upstream_errors
from gateway.frontdoor.body import BodyTimeout, BodyTooLarge, close_after, read_body
from gateway.frontdoor.classify import Accepted, LegacyHandshake, NotificationAccepted, Rejection, classify
from gateway.frontdoor.headers import check_param_headers
from gateway.frontdoor.stream import ResponseStream
from gateway.legacy.pool import credential_digest
from gateway.listen import Listener, acknowledged, stream_listener
from gateway.replicas.auth import FORWARD_HEADER
from gateway.replicas.forward import OWNER_UNREACHABLE, forward_to_owner, hop_credential
from gateway.translate.cursors import InvalidCursor

log = structlog.get_logger("gateway.frontdoor")

_HOP_HEADERS = {"authorization"}
PAGINATED_METHODS = frozenset({"tools/list", "prompts/list", "resources/list", "resources/templates/list"})
"""Methods whose ``cursor``/``nextCursor`` the gateway wraps (server/utilities/pagination.mdx)."""
_TRANSPORT_NAMES = {"sse": "2024-11-05 HTTP+SSE", "stdio": "stdio"}


def _jsonrpc(id_: Any, *, result: Any = None, error: Any = None) -> bytes:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": id_}
    if error is not None:
        body["error"] = error
    else:
        body["result"] = result
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


def _json_response(payload: bytes, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(body=payload, status=status, content_type="application/json", headers=headers)


def render_rejection(rejection: Rejection) -> web.Response:
    if rejection.code is None:
        return web.Response(status=rejection.http_status, headers=dict(rejection.headers))
    error: dict[str, Any] = {"code": rejection.code, "message": rejection.message}
    if rejection.data is not None:
        error["data"] = rejection.data
    return _json_response(_jsonrpc(rejection.id, error=error), rejection.http_status, dict(rejection.headers))


def render_error(id_: Any, exc: GatewayError) -> web.Response:
    headers = {"Retry-After": str(exc.retry_after)} if isinstance(exc, Overloaded) else None
    return _json_response(_jsonrpc(id_, error=exc.to_error()), exc.http_status, headers)


def caller_of(request: web.Request, route: RouteRuntime, *, forwarded: bool = False) -> Caller:
    backend = route.config.backend
    credential = request.headers.get("Authorization")
    forward = dict(backend.headers)
    if backend.forward_authorization and credential:
        forward["Authorization"] = credential
    return Caller(principal=request.get(keys.PRINCIPAL), forward_headers=forward, forwarded=forwarded)


def _refuse_body(request: web.Request, rejection: Rejection) -> web.Response:
    request.app[keys.METRICS].rejections.labels(rejection.reason).inc()
    log.info("request_rejected", reason=rejection.reason, status=rejection.http_status)
    return render_rejection(rejection)


def make_handler(path: str) -> Any:
    async def handle(request: web.Request) -> web.StreamResponse:
        app = request.app
        route = app[keys.ROUTES][path]
        settings = app[keys.SETTINGS]
        metrics = app[keys.METRICS]
        started = time.perf_counter()
        if not app[keys.ORIGINS].allows(request.headers.get("Origin")):
            # Before anything else, the body included: transports/streamable-http.mdx §Security.
            metrics.rejections.labels("origin").inc()
            log.info("request_rejected", route=route.name, reason="origin", status=403)
            return web.Response(status=403)
        limit = settings.config.listen.max_body_bytes
        try:
            body = await read_body(request, limit=limit, timeout=settings.config.listen.body_timeout)
        except BodyTooLarge:
            return _refuse_body(request, Rejection(413, None, "Content Too Large", "body_too_large"))
        except BodyTimeout:
            refusal = _refuse_body(request, Rejection(408, None, "Request Timeout", "body_timeout"))
            return await close_after(request, refusal)
        forwarded = FORWARD_HEADER in request.headers
        if forwarded:
            refused = app[keys.FORWARD_SIGNER].check(
                request.headers[FORWARD_HEADER],
                method=request.method,
                target=settings.config.replicas.advertise_url,
                path=path,
                body=body,
                credential=hop_credential(request.headers, route),
            )
            if refused is not None:
                metrics.rejections.labels("forward_signature").inc()
                log.warning("forward_refused", route=route.name, reason=refused)
                return web.Response(status=403)
        identified = await app[keys.AUTH].identify(request, path, forwarded=forwarded)
        if isinstance(identified, web.StreamResponse):
            return identified
        request[keys.PRINCIPAL] = identified.principal
        if legacy_passthrough.claims(request, route):
            return await legacy_passthrough.serve(request, route, body if request.method == "POST" else None)
        outcome = classify(request.method, list(request.headers.items()), body, max_body_bytes=limit)
        method = outcome.method if isinstance(outcome, Accepted | NotificationAccepted) else "-"
        structlog.contextvars.bind_contextvars(route=route.name, rpc_method=method)
        try:
            response = await _dispatch(request, route, outcome, body, forwarded=forwarded)
        finally:
            structlog.contextvars.unbind_contextvars("route", "rpc_method")
        elapsed = time.perf_counter() - started
        metrics.request_seconds.labels(route.name, method).observe(elapsed)
        log.info(
            "request",
            route=route.name,
            rpc_method=method,
            status=response.status,
            duration_ms=round(elapsed * 1000, 2),
        )
        return response

    return handle


async def _dispatch(
    request: web.Request,
    route: RouteRuntime,
    outcome: Accepted | NotificationAccepted | LegacyHandshake | Rejection,
    body: bytes,
    *,
    forwarded: bool = False,
) -> web.StreamResponse:
    app = request.app
    metrics = app[keys.METRICS]
    if isinstance(outcome, Rejection):
        metrics.rejections.labels(outcome.reason).inc()
        metrics.requests.labels(route.name, "-", "rejected").inc()
        log.info("request_rejected", reason=outcome.reason, status=outcome.http_status)
        return render_rejection(outcome)
    if isinstance(outcome, NotificationAccepted):
        metrics.requests.labels(route.name, outcome.method, "notification").inc()
        return web.Response(status=202)
    if isinstance(outcome, LegacyHandshake):
        transport = route.config.backend.transport
        if transport == "streamable-http":
            return await legacy_passthrough.forward(request, route, body)
        # Neither the 2024-11-05 HTTP+SSE wire nor a stdio process can be passed through exchange by
        # exchange.
        metrics.rejections.labels("handshake_era").inc()
        message = outcome.message
        requested = request.headers.get("MCP-Protocol-Version")
        params = message.get("params")
        if requested is None and isinstance(params, dict):
            requested = params.get("protocolVersion")
        error = {
            "code": UNSUPPORTED_PROTOCOL_VERSION,
            "message": f"Unsupported protocol version: this route's backend uses the {_TRANSPORT_NAMES[transport]} "
            "transport, which handshake-era clients cannot be passed through to; use 2026-07-28",
            "data": {"supported": list(MODERN_PROTOCOL_VERSIONS), "requested": requested},
        }
        id_ = message.get("id")
        if "id" not in message:
            return web.Response(status=202)
        return _json_response(_jsonrpc(id_, error=error), 400)
    return await _serve_modern(request, route, outcome, body, forwarded=forwarded)


async def _check_param_headers(request: web.Request, route: RouteRuntime, outcome: Accepted) -> Rejection | None:
    """``Mcp-Param-*`` headers against the tool's ``x-mcp-header`` annotations (needs its inputSchema)."""
    name = outcome.params.get("name")
    if not isinstance(name, str):
        return None
    driver = request.app[keys.DRIVER]
    schema = await driver.tool_input_schema(route, caller_of(request, route), name, outcome.client_capabilities)
    arguments = outcome.params.get("arguments")
    problem = check_param_headers(
        list(request.headers.items()), arguments if isinstance(arguments, dict) else None, schema
    )
    if problem is None:
        return None
    return Rejection(400, HEADER_MISMATCH, problem, "header_mismatch.mcp-param", id=outcome.id)


async def _serve_listen(request: web.Request, route: RouteRuntime, outcome: Accepted) -> web.StreamResponse:
    """``subscriptions/listen``: always a long-lived SSE stream (406 when the client cannot take one)."""
    if not outcome.wants_sse:
        return web.Response(status=406)
    hubs = request.app[keys.LISTEN_HUBS]
    caller = caller_of(request, route)
    requested = outcome.params.get("notifications")
    requested = requested if isinstance(requested, dict) else {}

    async def open_session(sink: Any) -> Any:
        return await route.pool.open_detached(caller.forward_headers, sink)

    def listener_for(capabilities: Any) -> Listener:
        return Listener(outcome.id, acknowledged(requested, capabilities))

    key = (route.config.path, credential_digest(caller.session_identity))
    try:
        hub, listener = await hubs.join(
            key, open_session, route.config.backend.timeout, listener_for, route.pool.close_detached
        )
    except GatewayError as exc:
        return render_error(outcome.id, exc)
    request.app[keys.METRICS].requests.labels(route.name, outcome.method, "listen").inc()
    try:
        return await stream_listener(request, hub, listener)
    finally:
        hubs.leave(key)
        await hubs.close_idle()


def _unwrap_cursor(request: web.Request, route: RouteRuntime, outcome: Accepted) -> Accepted:
    """The request with the backend's own cursor in place of the one the gateway issued."""
    cursor = outcome.params.get("cursor")
    if cursor is None:
        return outcome
    if not isinstance(cursor, str):
        raise InvalidParams("Invalid cursor", reason="invalid_cursor")
    try:
        backend_cursor = request.app[keys.CURSORS].unwrap(route.name, outcome.method, cursor)
    except InvalidCursor:
        raise InvalidParams("Invalid cursor", reason="invalid_cursor") from None
    return dataclasses.replace(outcome, params={**outcome.params, "cursor": backend_cursor})


def _wrap_cursor(request: web.Request, route: RouteRuntime, method: str, result: dict[str, Any]) -> dict[str, Any]:
    cursor = result.get("nextCursor")
    if isinstance(cursor, str) and cursor:
        return {**result, "nextCursor": request.app[keys.CURSORS].wrap(route.name, method, cursor)}
    return result


async def _serve_modern(
    request: web.Request, route: RouteRuntime, outcome: Accepted, body: bytes, *, forwarded: bool = False
) -> web.StreamResponse:
    if (draining := request.app[keys.DRAIN].refuse(outcome.method, outcome.params)) is not None:
        return render_error(outcome.id, draining)  # a new call while this replica drains (gateway.drain)
    if outcome.method == "subscriptions/listen":
        return await _serve_listen(request, route, outcome)
    metrics = request.app[keys.METRICS]
    driver = request.app[keys.DRIVER]
    if outcome.method == "tools/call":
        rejection = await _check_param_headers(request, route, outcome)
        if rejection is not None:
            metrics.rejections.labels(rejection.reason).inc()
            return render_rejection(rejection)
    stream = ResponseStream(
        request,
        progress_token=outcome.progress_token,
        log_level=outcome.log_level,
        enabled=outcome.wants_sse,
    )
    caller = caller_of(request, route, forwarded=forwarded)
    paged = outcome.method in PAGINATED_METHODS
    try:
        try:
            try:
                if paged:
                    outcome = _unwrap_cursor(request, route, outcome)
                result = await driver.call(route, outcome, caller, stream.on_notification)
                await upstream_errors.check_tool_result(driver, route, caller, outcome, result)
            except HoldElsewhere as elsewhere:
                # Nothing was sent to the client yet: the owner answers it, through us.
                forwarded_response = await forward_to_owner(
                    request, route, body, elsewhere.owner_url, request_id=outcome.id
                )
                if not isinstance(forwarded_response, GatewayError):
                    metrics.requests.labels(route.name, outcome.method, "forwarded").inc()
                    return forwarded_response
                # The owner did not answer: the route's policy decides (replay only if it is gone, or hold_lost).
                result = await driver.replay_or_lost(
                    route,
                    outcome,
                    caller,
                    elsewhere.claims,
                    stream.on_notification,
                    proven=forwarded_response.reason == OWNER_UNREACHABLE,
                    lost=forwarded_response,
                )
        except GatewayError as raised:
            exc = await upstream_errors.refine_error(driver, route, caller, outcome, raised)
            metrics.requests.labels(route.name, outcome.method, f"error:{exc.reason}"[:60]).inc()
            if exc.code not in (-32602, -32601):
                log.warning("request_failed", reason=exc.reason, code=exc.code, detail=getattr(exc, "detail", None))
            if stream.committed:
                return await stream.finish(_jsonrpc(outcome.id, error=exc.to_error()))
            return render_error(outcome.id, exc)
        if paged:
            result = _wrap_cursor(request, route, outcome.method, result)
        kind = result.get("resultType", "complete")
        metrics.requests.labels(route.name, outcome.method, str(kind)).inc()
        payload = _jsonrpc(outcome.id, result=result)
        if stream.committed:
            return await stream.finish(payload)
        return _json_response(payload)
    finally:
        await stream.stop_keepalive()
