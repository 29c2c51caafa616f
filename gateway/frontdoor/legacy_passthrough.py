"""Old clients through the same route: handshake-era streamable HTTP, passed through as it is.

A client that opens with ``initialize`` and no 2026-07-28 envelope is a handshake-era client
(wire reference §2.9). Nothing it says needs translating: the route's backend speaks its language.
So its exchanges are forwarded byte for byte to the backend and the answers (JSON or SSE) are
streamed back chunk by chunk; server-to-client requests (elicitation, sampling, roots) reach the
client inline on the POST's stream or the GET stream, and its answers go back the same way.

Session ids. The client gets its own backend session, but never the backend's id: on
``initialize`` the gateway seals the backend id (with a digest of the client's credential) into
the id it returns (:class:`~gateway.frontdoor.legacy_ids.LegacySessionIds`), and opens it on every later
request. Nothing is
stored, so any replica serves any legacy session. An id that does not open, or opens for another
route or credential, answers 404, which is what a legacy server says for an expired session, so
the client re-initializes; the backend's own 404 (its session expired) reaches the client the same
way.

Failures. The backend not answering is never the client's fault: the same answer a modern client
gets (:class:`gateway.errors.BackendUnavailable`: HTTP 502, -32603 "Backend unavailable",
``data.reason`` ``backend_unavailable`` and ``data.cause`` such as ``connect_failed``). Connecting
is bounded by the route's ``connect_timeout`` and the answer's headers by its ``timeout``; a body,
once it flows, has no deadline (an SSE stream may idle for minutes while a user thinks), but a
client that went away ends it. The answer is streamed by the gateway's one relay
(:mod:`gateway.relay`).

Not covered: routes whose backend speaks the 2024-11-05 HTTP+SSE transport (``transport: sse``)
or stdio (``transport: stdio``). Neither wire (one GET stream announcing a POST endpoint, every
answer on the stream; a child process's pipes) maps one exchange to one exchange onto streamable
HTTP, so the front door refuses handshake-era clients there with -32022.
"""

from __future__ import annotations

import asyncio
import json
from typing import Final

import aiohttp
import structlog
from aiohttp import web
from mcp_types.jsonrpc import INVALID_REQUEST, UNSUPPORTED_PROTOCOL_VERSION
from mcp_types.methods import CLIENT_NOTIFICATIONS, CLIENT_REQUESTS
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from gateway import envelopes
from gateway.backend_auth.credentials import BackendCredential
from gateway.errors import BackendUnavailable, http_status_for
from gateway.frontdoor.classify import LegacyHandshake
from gateway.frontdoor.door import FrontDoor, Inbound
from gateway.frontdoor.responses import error_response, json_response
from gateway.http_errors import CLIENT_FAILURES
from gateway.legacy.wire import backend_errors
from gateway.observability.requests import count_backend_error, record_of
from gateway.relay import end_to_end, relay

log = structlog.get_logger("gateway.frontdoor")

SESSION_HEADER: Final = "Mcp-Session-Id"
_FORWARDED: Final = ("Content-Type", "Accept", "MCP-Protocol-Version", "Last-Event-ID")
_KNOWN_METHODS: Final = frozenset(method for method, _ in (*CLIENT_REQUESTS, *CLIENT_NOTIFICATIONS))
_TRANSPORT_NAMES: Final = {"sse": "2024-11-05 HTTP+SSE", "stdio": "stdio"}


def claims(door: FrontDoor, inbound: Inbound) -> bool:
    """Whether a request carrying a session id belongs to the passthrough, before classification.

    2026-07-28 clients never send ``Mcp-Session-Id``. A known gateway id is unambiguous; GET and
    DELETE are legacy-only verbs; and a POST whose version header is absent or handshake-era is a
    legacy message (a JSON-RPC response to a server request, say) that must hear 404 if its
    session is gone. A POST with an unknown id and a modern version header goes to the modern
    path, which ignores the header as the spec says.
    """
    request = inbound.request
    gateway_id = request.headers.get(SESSION_HEADER)
    if gateway_id is None or inbound.route.config.backend.transport != "streamable-http":
        return False
    known = door.legacy_ids.backend_id(gateway_id, inbound.route.name, request.headers.get("Authorization"))
    if request.method != "POST" or known is not None:
        return True
    version = request.headers.get("MCP-Protocol-Version")
    return version is None or version in HANDSHAKE_PROTOCOL_VERSIONS


async def handshake(door: FrontDoor, inbound: Inbound, outcome: LegacyHandshake) -> web.StreamResponse:
    """A handshake-era message the classifier found: passed through on a streamable-HTTP route;
    elsewhere refused with -32022, since neither the 2024-11-05 HTTP+SSE wire nor a stdio process
    can be passed through exchange by exchange."""
    route = inbound.route
    transport = route.config.backend.transport
    if transport == "streamable-http":
        return await forward(door, inbound, with_body=True)
    door.metrics.rejections.labels("handshake_era").inc()
    message = outcome.message
    record = record_of(inbound.request)
    record.era, record.outcome, record.reason = "legacy", "rejected", "handshake_era"
    if "id" not in message:
        return web.Response(status=202)
    requested = inbound.request.headers.get("MCP-Protocol-Version")
    params = message.get("params")
    if requested is None and isinstance(params, dict):
        requested = params.get("protocolVersion")
    error = envelopes.error_object(
        UNSUPPORTED_PROTOCOL_VERSION,
        f"Unsupported protocol version: this route's backend uses the {_TRANSPORT_NAMES[transport]} "
        "transport, which handshake-era clients cannot be passed through to; use 2026-07-28",
        {"supported": list(MODERN_PROTOCOL_VERSIONS), "requested": requested},
    )
    record.error_code = UNSUPPORTED_PROTOCOL_VERSION
    return json_response(envelopes.error(message.get("id"), error), http_status_for(UNSUPPORTED_PROTOCOL_VERSION))


async def _upstream(
    door: FrontDoor,
    inbound: Inbound,
    body: bytes | None,
    headers: dict[str, str],
    credential: BackendCredential | None,
) -> aiohttp.ClientResponse:
    """Send the exchange upstream with the route's credential (``backend.auth``), resolved now; on a
    401 the credential forgets what was sent and, if a new one may help, it is sent once more."""
    backend = inbound.route.config.backend
    url = backend.url
    assert url is not None
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=backend.connect_timeout, sock_read=None)

    async def send(sent: dict[str, str]) -> aiohttp.ClientResponse:
        async with asyncio.timeout(backend.timeout):
            return await door.http().request(
                inbound.request.method,
                url,
                data=body,
                headers={**headers, **sent},
                timeout=timeout,
                allow_redirects=False,
            )

    sent = await credential.headers() if credential is not None else {}
    upstream = await send(sent)
    if upstream.status == 401 and credential is not None and await credential.refused(sent):
        upstream.release()
        upstream = await send(await credential.headers())
    return upstream


async def forward(door: FrontDoor, inbound: Inbound, *, with_body: bool) -> web.StreamResponse:
    """Forward one handshake-era exchange to the route's backend and stream the answer back."""
    request, route = inbound.request, inbound.route
    backend = route.config.backend
    assert backend.url is not None  # only streamable-http routes are passed through
    body = inbound.body if with_body else None
    label, request_id, is_initialize = _peek(request.method, body)
    record = record_of(request)
    record.call(route.name, label)
    record.era, record.outcome = "legacy", "legacy_passthrough"

    gateway_id = None if is_initialize else request.headers.get(SESSION_HEADER)
    backend_id = None
    principal = inbound.principal  # session ids are bound to the caller, never to a backend credential
    if gateway_id is not None:
        backend_id = door.legacy_ids.backend_id(gateway_id, route.name, principal)
        if backend_id is None:
            record.failed(INVALID_REQUEST, "session_not_found")
            error = envelopes.error_object(INVALID_REQUEST, "Session not found")
            return json_response(envelopes.error(request_id, error), 404)

    headers = {name: request.headers[name] for name in _FORWARDED if name in request.headers}
    if body is None:
        headers.pop("Content-Type", None)
    caller = inbound.caller()  # the client's Authorization only where the route forwards it
    headers.update(caller.forward_headers)
    if backend_id is not None:
        headers[SESSION_HEADER] = backend_id

    try:
        upstream = await _upstream(door, inbound, body, headers, caller.credential)
    except (*CLIENT_FAILURES, ValueError, BackendUnavailable) as exc:
        failure = exc if isinstance(exc, BackendUnavailable) else _unavailable(exc)
        count_backend_error(door.metrics, route.name, failure.reason)
        log.warning("legacy_passthrough_failed", route=route.name, reason=failure.reason, detail=failure.detail)
        record.failed(failure.code, failure.reason)
        return error_response(request_id, failure)

    if _lost_newcomer(request, gateway_id, is_initialize, label, upstream.status):
        upstream.release()
        record.failed(INVALID_REQUEST, "missing_version_header")
        error = envelopes.error_object(INVALID_REQUEST, MISSING_VERSION_MESSAGE)
        return json_response(envelopes.error(request_id, error), http_status_for(INVALID_REQUEST))
    try:
        record.backend_status = upstream.status
        out = end_to_end(upstream.headers, also_dropped=(SESSION_HEADER,))
        returned_id = upstream.headers.get(SESSION_HEADER)
        if gateway_id is not None:
            if returned_id is not None:
                out[SESSION_HEADER] = gateway_id
        elif is_initialize and returned_id and upstream.status == 200:
            out[SESSION_HEADER] = door.legacy_ids.open(route.name, returned_id, principal)

        def broken(exc: BaseException) -> None:
            log.warning("legacy_passthrough_stream_broken", reason=_unavailable(exc).reason)

        return await relay(request, upstream, out, on_broken=broken, closing=lambda: door.closing)
    finally:
        upstream.release()


def _peek(http_method: str, body: bytes | None) -> tuple[str, str | int | None, bool]:
    """(metric label, JSON-RPC id, is it ``initialize``) of one exchange; never raises."""
    if body is None:
        return http_method, None, False
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        return "other", None, False
    if isinstance(message, list):
        return "batch", None, False
    if not isinstance(message, dict):
        return "other", None, False
    method = message.get("method")
    raw_id = message.get("id")
    request_id = raw_id if isinstance(raw_id, str | int) and not isinstance(raw_id, bool) else None
    if method is None:
        return "response", None, False
    label = method if method in _KNOWN_METHODS else "other"
    return label, request_id, method == "initialize" and request_id is not None


MISSING_VERSION_MESSAGE: Final = (
    "Bad Request: missing MCP-Protocol-Version header. This endpoint speaks MCP 2026-07-28: send "
    "'MCP-Protocol-Version: 2026-07-28' and put io.modelcontextprotocol/protocolVersion and "
    "io.modelcontextprotocol/clientCapabilities in params._meta. A session-era client sends "
    "initialize first, then its Mcp-Session-Id."
)
"""What a request that is neither 2026-07-28 nor part of a legacy session hears instead of the
backend's refusal (which speaks of a session id the caller never knew it needed)."""


def _lost_newcomer(request: web.Request, gateway_id: str | None, is_initialize: bool, label: str, status: int) -> bool:
    """Whether the backend refused a POST that carried no version header and no session id.

    Such a request is most often a first try at a 2026-07-28 endpoint that left out the headers;
    a session-era client never sends it (it initializes first, and a stateful backend then hands
    it a session id). A stateless legacy backend accepts it, and then its answer is relayed as it
    is: only the backend's 400 or 404 is replaced, never a success.
    """
    return (
        request.method == "POST"
        and gateway_id is None
        and not is_initialize
        and label not in ("response", "batch", "other")
        and "MCP-Protocol-Version" not in request.headers
        and status in (400, 404)
    )


def _unavailable(exc: BaseException) -> BackendUnavailable:
    """A foreign failure as :class:`BackendUnavailable`, through the legacy side's one mapping."""
    try:
        with backend_errors("legacy passthrough"):
            raise exc
    except BackendUnavailable as mapped:
        return mapped
