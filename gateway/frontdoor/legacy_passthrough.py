"""Old clients through the same route: handshake-era streamable HTTP, passed through as it is.

A client that opens with ``initialize`` and no 2026-07-28 envelope is a handshake-era client
(wire reference §2.9). Nothing it says needs translating: the route's backend speaks its language.
So its exchanges are forwarded byte for byte to the backend and the answers (JSON or SSE) are
streamed back chunk by chunk; server-to-client requests (elicitation, sampling, roots) reach the
client inline on the POST's stream or the GET stream, and its answers go back the same way.

Session ids. The client gets its own backend session, but never the backend's id: on
``initialize`` the gateway seals the backend id (with a digest of the client's credential) into
the id it returns (:class:`PassthroughSessions`), and opens it on every later request. Nothing is
stored, so any replica serves any legacy session. An id that does not open, or opens for another
route or credential, answers 404, which is what a legacy server says for an expired session, so
the client re-initializes; the backend's own 404 (its session expired) reaches the client the same
way.

Failures. The backend not answering is never the client's fault: the same answer a modern client
gets (:class:`gateway.errors.BackendUnavailable`: HTTP 502, -32603 "Backend unavailable",
``data.reason`` ``backend_unavailable`` and ``data.cause`` such as ``connect_failed``). Connecting
is bounded by the route's ``connect_timeout`` and the answer's headers by its ``timeout``; a body,
once it flows, has no deadline (an SSE stream may idle for minutes while a user thinks), but a
client that went away ends it.

Not covered: routes whose backend speaks the 2024-11-05 HTTP+SSE transport (``transport: sse``)
or stdio (``transport: stdio``). Neither wire (one GET stream announcing a POST endpoint, every
answer on the stream; a child process's pipes) maps one exchange to one exchange onto streamable
HTTP, so the front door refuses handshake-era clients there with -32022.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import os
import re
import time
from collections.abc import Sequence
from typing import Any, Final

import aiohttp
import structlog
from aiohttp import web
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from mcp_types.jsonrpc import INVALID_REQUEST
from mcp_types.methods import CLIENT_NOTIFICATIONS, CLIENT_REQUESTS
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from multidict import CIMultiDict

from gateway import keys
from gateway.calls import RouteRuntime
from gateway.errors import BackendUnavailable
from gateway.legacy.base import backend_errors
from gateway.legacy.pool import credential_digest

log = structlog.get_logger("gateway.frontdoor")

SESSION_HEADER: Final = "Mcp-Session-Id"
_SESSION_INFO: Final = b"mrtr-gateway/legacy-session/v1/aes-256-gcm"
_B64URL: Final = re.compile(r"[A-Za-z0-9_-]+")
DISCONNECT_POLL: Final = 1.0
"""Seconds between checks that the client is still there while a backend stream is silent."""

_FORWARDED: Final = ("Content-Type", "Accept", "MCP-Protocol-Version", "Last-Event-ID")
_NOT_RETURNED: Final = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",
        "content-encoding",  # the client session decompresses
        "date",
        "server",
        "mcp-session-id",
    }
)
_KNOWN_METHODS: Final = frozenset(method for method, _ in (*CLIENT_REQUESTS, *CLIENT_NOTIFICATIONS))


class PassthroughSessions:
    """Gateway session ids for old clients: sealed references to backend sessions.

    An id is ``s1.`` + base64url(nonce ‖ AES-256-GCM(backend session id, credential digest)), with
    the route name in the associated data and a key derived from each state key (its own HKDF
    label; the first key seals, every key opens). Nothing is stored: any replica serves any
    session, nothing expires here (the backend's own 404 ends a session and the client
    re-initializes), and an id only works on its route, for the credential that opened it.
    """

    PREFIX: Final = "s1."
    MAX_LENGTH: Final = 2048

    def __init__(self, secrets: Sequence[bytes]) -> None:
        self._aeads: list[AESGCM] = []
        self.rekey(secrets)
        self.closing = False
        """Set on shutdown: open streams end at their next quiet moment (the client resumes elsewhere)."""

    def rekey(self, secrets: Sequence[bytes]) -> None:
        """Seal with the first of ``secrets`` from now on, open with any of them (key reload)."""
        if not secrets:
            raise ValueError("at least one key is needed to seal legacy session ids")
        self._aeads = [
            AESGCM(HKDF(algorithm=SHA256(), length=32, salt=None, info=_SESSION_INFO).derive(s)) for s in secrets
        ]

    def open(self, route: str, backend_id: str, credential: str | None) -> str:
        nonce = os.urandom(12)
        plain = json.dumps({"b": backend_id, "p": credential_digest(credential)}, separators=(",", ":")).encode()
        sealed = self._aeads[0].encrypt(nonce, plain, b"s1|" + route.encode())
        return self.PREFIX + base64.urlsafe_b64encode(nonce + sealed).rstrip(b"=").decode()

    def backend_id(self, gateway_id: str, route: str, credential: str | None) -> str | None:
        """The backend session behind ``gateway_id`` for this route and credential, or None."""
        if not gateway_id.startswith(self.PREFIX) or len(gateway_id) > self.MAX_LENGTH:
            return None
        blob = gateway_id[len(self.PREFIX) :]
        # A length of 1 mod 4 is no base64 at all (binascii.Error): a client's typo, not a 500.
        if not _B64URL.fullmatch(blob) or len(blob) % 4 == 1:
            return None
        try:
            raw = base64.urlsafe_b64decode(blob + "=" * (-len(blob) % 4))
        except (binascii.Error, ValueError):
            return None
        if len(raw) < 12 + 16:
            return None
        for aead in self._aeads:
            try:
                plain = aead.decrypt(raw[:12], raw[12:], b"s1|" + route.encode())
            except InvalidTag:
                continue
            claims = json.loads(plain)
            if not isinstance(claims, dict) or claims.get("p") != credential_digest(credential):
                return None
            backend_id = claims.get("b")
            return backend_id if isinstance(backend_id, str) else None
        return None


def claims(request: web.Request, route: RouteRuntime) -> bool:
    """Whether a request carrying a session id belongs to the passthrough, before classification.

    2026-07-28 clients never send ``Mcp-Session-Id``. A known gateway id is unambiguous; GET and
    DELETE are legacy-only verbs; and a POST whose version header is absent or handshake-era is a
    legacy message (a JSON-RPC response to a server request, say) that must hear 404 if its
    session is gone. A POST with an unknown id and a modern version header goes to the modern
    path, which ignores the header as the spec says.
    """
    gateway_id = request.headers.get(SESSION_HEADER)
    if gateway_id is None or route.config.backend.transport != "streamable-http":
        return False
    known = request.app[keys.PASSTHROUGH].backend_id(gateway_id, route.name, request.headers.get("Authorization"))
    if request.method != "POST" or known is not None:
        return True
    version = request.headers.get("MCP-Protocol-Version")
    return version is None or version in HANDSHAKE_PROTOCOL_VERSIONS


async def serve(request: web.Request, route: RouteRuntime, body: bytes | None) -> web.StreamResponse:
    """:func:`forward`, plus the canonical request log line the front door would have written."""
    started = time.perf_counter()
    label = _peek(request.method, body)[0]
    response = await forward(request, route, body)
    elapsed = time.perf_counter() - started
    request.app[keys.METRICS].request_seconds.labels(route.name, label).observe(elapsed)
    log.info(
        "request",
        route=route.name,
        rpc_method=label,
        era="legacy",
        status=response.status,
        duration_ms=round(elapsed * 1000, 2),
    )
    return response


async def forward(request: web.Request, route: RouteRuntime, body: bytes | None) -> web.StreamResponse:
    """Forward one handshake-era exchange to the route's backend and stream the answer back."""
    app = request.app
    backend = route.config.backend
    assert backend.url is not None  # only streamable-http routes are passed through
    sessions = app[keys.PASSTHROUGH]
    label, request_id, is_initialize = _peek(request.method, body)
    app[keys.METRICS].requests.labels(route.name, label, "legacy_passthrough").inc()
    if body is not None and len(body) > app[keys.SETTINGS].config.listen.max_body_bytes:
        return web.Response(status=413)

    gateway_id = None if is_initialize else request.headers.get(SESSION_HEADER)
    backend_id = None
    credential = request.headers.get("Authorization")
    if gateway_id is not None:
        backend_id = sessions.backend_id(gateway_id, route.name, credential)
        if backend_id is None:
            return _error(404, request_id, INVALID_REQUEST, "Session not found")

    headers = {name: request.headers[name] for name in _FORWARDED if name in request.headers}
    if body is None:
        headers.pop("Content-Type", None)
    headers.update(backend.headers)
    if backend.forward_authorization and credential:
        headers["Authorization"] = credential
    if backend_id is not None:
        headers[SESSION_HEADER] = backend_id

    timeout = aiohttp.ClientTimeout(total=None, sock_connect=backend.connect_timeout, sock_read=None)
    try:
        async with asyncio.timeout(backend.timeout):
            upstream = await app[keys.HTTP_CLIENT].request(
                request.method, backend.url, data=body, headers=headers, timeout=timeout, allow_redirects=False
            )
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        failure = _unavailable(exc)
        app[keys.METRICS].backend_errors.labels(route.name, failure.reason).inc()
        log.warning(
            "legacy_passthrough_failed",
            route=route.name,
            reason=failure.reason,
            detail=failure.detail,
            rpc_method=label,
        )
        return _error(failure.http_status, request_id, failure.code, failure.message, failure.data)

    if _lost_newcomer(request, gateway_id, is_initialize, label, upstream.status):
        upstream.release()
        return _error(400, request_id, INVALID_REQUEST, MISSING_VERSION_MESSAGE)
    try:
        out = CIMultiDict((k, v) for k, v in upstream.headers.items() if k.lower() not in _NOT_RETURNED)
        returned_id = upstream.headers.get(SESSION_HEADER)
        if gateway_id is not None:
            if returned_id is not None:
                out[SESSION_HEADER] = gateway_id
        elif is_initialize and returned_id and upstream.status == 200:
            out[SESSION_HEADER] = sessions.open(route.name, returned_id, credential)
        return await _relay(request, upstream, out)
    finally:
        upstream.release()


async def _relay(
    request: web.Request, upstream: aiohttp.ClientResponse, headers: CIMultiDict[str]
) -> web.StreamResponse:
    response = web.StreamResponse(status=upstream.status, reason=upstream.reason, headers=headers)
    if upstream.content_type == "text/event-stream":
        response.headers["X-Accel-Buffering"] = "no"
    elif upstream.content_length is not None and "Content-Encoding" not in upstream.headers:
        response.content_length = upstream.content_length
    try:
        await response.prepare(request)
        while True:
            try:
                async with asyncio.timeout(DISCONNECT_POLL):
                    chunk = await upstream.content.readany()
            except TimeoutError:
                transport = request.transport
                if transport is None or transport.is_closing() or request.app[keys.PASSTHROUGH].closing:
                    return response
                continue
            if not chunk:
                break
            await response.write(chunk)
        await response.write_eof()
    except ConnectionError:
        pass  # the client went away; closing the backend stream is all that is left to do
    except aiohttp.ClientError as exc:
        # Headers are out, so no 502 can be sent: end the stream and let the client resume or retry.
        log.warning("legacy_passthrough_stream_broken", reason=_unavailable(exc).reason)
    return response


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


def _error(status: int, request_id: Any, code: int, message: str, data: Any = None) -> web.Response:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    body = {"jsonrpc": "2.0", "id": request_id, "error": error}
    return web.json_response(body, status=status)
