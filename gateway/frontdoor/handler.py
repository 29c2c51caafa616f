"""The HTTP endpoint of one route: the checks every request passes, then the path it takes.

In order: the Origin policy (before the body is read), the body (bounded in size and time:
:mod:`gateway.frontdoor.body`), the replica hop's signature, the route's auth gate; then an old
client's session goes to the passthrough, and everything else is classified by the pure ladder
(:func:`~gateway.frontdoor.classify.classify`) and answered: a rejection, a notification's 202, an
old client's handshake, or a modern request (:mod:`gateway.frontdoor.modern`). Every response is
written with the status of the one table (:mod:`gateway.errors`), and the request middleware
(:mod:`gateway.observability.requests`) writes its canonical line from what is recorded here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import structlog
from aiohttp import web

from gateway.frontdoor import legacy_passthrough, modern
from gateway.frontdoor.body import BodyTimeout, BodyTooLarge, close_after, read_body
from gateway.frontdoor.classify import Accepted, LegacyHandshake, NotificationAccepted, Rejection, classify
from gateway.frontdoor.door import FrontDoor, Inbound
from gateway.frontdoor.responses import refuse
from gateway.observability.requests import record_of
from gateway.replicas.auth import FORWARD_HEADER
from gateway.replicas.forward import hop_credential

log = structlog.get_logger("gateway.frontdoor")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def make_handler(door: FrontDoor, path: str) -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        route = door.routes[path]
        record = record_of(request)
        record.call(route.name, "-")
        if not door.origins.allows(request.headers.get("Origin")):
            # Before anything else, the body included: transports/streamable-http.mdx §Security.
            return refuse(door.metrics, request, Rejection(None, "Forbidden", "origin", status=403))
        listen = door.settings.config.listen
        try:
            body = await read_body(request, limit=listen.max_body_bytes, timeout=listen.body_timeout)
        except BodyTooLarge:
            return refuse(door.metrics, request, Rejection(None, "Content Too Large", "body_too_large", status=413))
        except BodyTimeout:
            refusal = refuse(door.metrics, request, Rejection(None, "Request Timeout", "body_timeout", status=408))
            return await close_after(request, refusal)
        forwarded = FORWARD_HEADER in request.headers
        if forwarded:
            record.forwarded = True
            refused = door.signer.check(
                request.headers[FORWARD_HEADER],
                method=request.method,
                target=door.settings.config.replicas.advertise_url,
                path=path,
                body=body,
                credential=hop_credential(request.headers, route),
            )
            if refused is not None:
                log.warning("forward_refused", route=route.name, reason=refused)
                return refuse(door.metrics, request, Rejection(None, "Forbidden", "forward_signature", status=403))
        identified = await door.auth.identify(request, path, forwarded=forwarded)
        if isinstance(identified, web.StreamResponse):
            record.outcome = "rejected"
            record.reason = "auth"
            return identified
        inbound = Inbound(request, route, body, identified.principal, forwarded, identified.token, identified.expires)
        if legacy_passthrough.claims(door, inbound):
            return await legacy_passthrough.forward(door, inbound, with_body=request.method == "POST")
        return await _dispatch(door, inbound)

    return handle


async def _dispatch(door: FrontDoor, inbound: Inbound) -> web.StreamResponse:
    request, route = inbound.request, inbound.route
    outcome = classify(
        request.method,
        request.headers.items(),
        inbound.body,
        max_body_bytes=door.settings.config.listen.max_body_bytes,
    )
    record = record_of(request)
    if isinstance(outcome, Rejection):
        return refuse(door.metrics, request, outcome)
    if isinstance(outcome, NotificationAccepted):
        record.call(route.name, outcome.method)
        record.outcome = "notification"
        return web.Response(status=202)
    if isinstance(outcome, LegacyHandshake):
        return await legacy_passthrough.handshake(door, inbound, outcome)
    assert isinstance(outcome, Accepted)
    return await modern.serve(door, inbound, outcome)
