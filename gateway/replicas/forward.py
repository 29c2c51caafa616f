"""Forward a retry to the replica that owns its hold, and stream the owner's answer back."""

from __future__ import annotations

import aiohttp
import structlog
from aiohttp import web

from gateway import keys
from gateway.calls import RouteRuntime
from gateway.errors import HoldLost
from gateway.replicas.auth import FORWARD_HEADER

log = structlog.get_logger("gateway.replicas")

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


async def forward_to_owner(
    request: web.Request, route: RouteRuntime, body: bytes, owner_url: str
) -> web.StreamResponse | HoldLost:
    """Stream ``request`` to ``owner_url``; a :class:`HoldLost` when the owner cannot be reached."""
    app = request.app
    settings = app[keys.SETTINGS]
    path = route.config.path
    headers = {
        k: v for k, v in request.headers.items() if k.lower() in _FORWARDED or k.lower().startswith("mcp-param-")
    }
    auth = route.config.auth
    if auth is not None and auth.trusted_header is not None and auth.trusted_header.header in request.headers:
        # The owner honours a trusted-header principal on a signed hop: this replica already checked the peer.
        headers[auth.trusted_header.header] = request.headers[auth.trusted_header.header]
    headers[FORWARD_HEADER] = app[keys.FORWARD_SIGNER].sign(path, body)
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=settings.config.replicas.forward_timeout, sock_read=None)
    metrics = app[keys.METRICS]
    try:
        upstream = await app[keys.HTTP_CLIENT].post(
            owner_url + path, data=body, headers=headers, timeout=timeout, allow_redirects=False
        )
    except (aiohttp.ClientError, TimeoutError) as exc:
        metrics.forwards.labels(route.name, "owner_unreachable").inc()
        log.warning("forward_failed", route=route.name, owner=owner_url, error=type(exc).__name__)
        return HoldLost("owner_unreachable")
    metrics.forwards.labels(route.name, "forwarded").inc()
    try:
        response = web.StreamResponse(
            status=upstream.status,
            headers={k: v for k, v in upstream.headers.items() if k.lower() not in _NOT_RETURNED},
        )
        await response.prepare(request)
        async for chunk in upstream.content.iter_any():
            await response.write(chunk)
        await response.write_eof()
        return response
    finally:
        upstream.release()
