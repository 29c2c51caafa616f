"""Forward a retry to the replica that owns its hold, and stream the owner's answer back.

How the hop can fail decides what the route may do next:

* no connection could be made (refused, or no answer to the connect within
  ``replicas.forward_timeout``): the owner is not at its address, :data:`OWNER_UNREACHABLE` — the
  one failure after which a replay route may replay;
* anything after the request was sent (the owner hung past the route's ``backend.timeout``, or
  dropped the connection), and TLS failures: the owner may be alive and running the call, so the
  client gets the hold-lost error and nothing is replayed.

A silent owner never keeps the client past the route's ``backend.timeout``: that is the read
timeout of the hop. If it strikes after the owner's answer has begun, an SSE answer is ended with
a JSON-RPC error event; any other answer is cut off.
"""

from __future__ import annotations

import functools
import ssl
from collections.abc import Mapping
from typing import Any, Final

import aiohttp
import structlog
from aiohttp import web

from gateway import keys
from gateway.calls import RouteRuntime
from gateway.errors import HoldLost
from gateway.frontdoor.stream import sse_event
from gateway.replicas.auth import FORWARD_HEADER

log = structlog.get_logger("gateway.replicas")

OWNER_UNREACHABLE: Final = "owner_unreachable"
OWNER_FAILED: Final = "owner_failed"

# What the owner needs to judge the request exactly as this replica would have.
_FORWARDED = {
    "accept",
    "authorization",
    "content-type",
    "mcp-protocol-version",
    "mcp-method",
    "mcp-name",
    "traceparent",
    "tracestate",
    "baggage",
}
_NOT_RETURNED = {
    "connection",
    "keep-alive",
    "transfer-encoding",
    "content-length",
    "content-encoding",
    "date",
    "server",
}


def hop_credential(headers: Mapping[str, str], route: RouteRuntime) -> str:
    """What identifies the client on the hop, for its MAC: the ``Authorization`` header and, on a
    route whose principal comes from a trusted header, that header too (the owner honours it on a
    signed hop, so it must not be changeable in transit)."""
    parts = [headers.get("Authorization") or ""]
    auth = route.config.auth
    if auth is not None and auth.trusted_header is not None:
        parts.append(headers.get(auth.trusted_header.header) or "")
    return "\n".join(parts)


@functools.lru_cache(maxsize=4)
def _tls_context(ca_file: str | None) -> ssl.SSLContext:
    """Certificate-verifying TLS for an https hop, trusting ``ca_file`` when one is configured."""
    return ssl.create_default_context(cafile=ca_file)


async def forward_to_owner(
    request: web.Request, route: RouteRuntime, body: bytes, owner_url: str, *, request_id: Any = None
) -> web.StreamResponse | HoldLost:
    """Stream ``request`` to ``owner_url``; a :class:`HoldLost` when the owner did not answer.

    Its ``reason`` is :data:`OWNER_UNREACHABLE` only when no connection could be made."""
    app = request.app
    settings = app[keys.SETTINGS]
    replicas = settings.config.replicas
    path = route.config.path
    headers = {
        k: v for k, v in request.headers.items() if k.lower() in _FORWARDED or k.lower().startswith("mcp-param-")
    }
    auth = route.config.auth
    if auth is not None and auth.trusted_header is not None and auth.trusted_header.header in request.headers:
        # The owner honours a trusted-header principal on a signed hop: this replica already checked the peer.
        headers[auth.trusted_header.header] = request.headers[auth.trusted_header.header]
    headers[FORWARD_HEADER] = app[keys.FORWARD_SIGNER].sign(
        method=request.method,
        target=owner_url,
        path=path,
        body=body,
        credential=hop_credential(request.headers, route),
    )
    timeout = aiohttp.ClientTimeout(
        total=None, sock_connect=replicas.forward_timeout, sock_read=route.config.backend.timeout
    )
    tls = _tls_context(replicas.ca_file) if owner_url.startswith("https://") else None
    metrics = app[keys.METRICS]
    try:
        upstream = await app[keys.HTTP_CLIENT].post(
            owner_url + path, data=body, headers=headers, timeout=timeout, allow_redirects=False, ssl=tls or True
        )
    except (aiohttp.ClientError, TimeoutError) as exc:
        unreachable = isinstance(exc, aiohttp.ConnectionTimeoutError) or (
            isinstance(exc, aiohttp.ClientConnectorError) and not isinstance(exc, aiohttp.ClientSSLError)
        )
        outcome = OWNER_UNREACHABLE if unreachable else OWNER_FAILED
        # Not counted here: the caller may still replay the call, and a retry counts once, under
        # the outcome it ends with (``replayed``, or this one; gateway.calls.driver.replay_or_lost).
        log.warning("forward_failed", route=route.name, owner=owner_url, outcome=outcome, error=type(exc).__name__)
        return HoldLost(outcome)
    metrics.forwards.labels(route.name, "forwarded").inc()
    try:
        response = web.StreamResponse(
            status=upstream.status,
            headers={k: v for k, v in upstream.headers.items() if k.lower() not in _NOT_RETURNED},
        )
        await response.prepare(request)
        try:
            async for chunk in upstream.content.iter_any():
                await response.write(chunk)
        except (aiohttp.ClientError, TimeoutError) as exc:
            metrics.forwards.labels(route.name, OWNER_FAILED).inc()
            log.warning("forward_interrupted", route=route.name, owner=owner_url, error=type(exc).__name__)
            if upstream.content_type == "text/event-stream":
                error = HoldLost(OWNER_FAILED).to_error()
                await response.write(sse_event({"jsonrpc": "2.0", "id": request_id, "error": error}))
            else:
                response.force_close()
                return response
        await response.write_eof()
        return response
    finally:
        upstream.release()
