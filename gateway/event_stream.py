"""Committing an HTTP answer to ``text/event-stream``: the one place an SSE response is opened.

Two rooms answer with a stream of events: the front door (a modern request's answer, once something
must be streamed first: :mod:`gateway.frontdoor.stream`) and the listen room (a
``subscriptions/listen`` stream: :mod:`gateway.listen.serve`). Both open it here, with the same
headers (no caching, no proxy buffering) and the same keep-alive period; the events themselves are
framed by :mod:`gateway.envelopes`. Bottom floor: aiohttp only, so neither room imports the other.
"""

from __future__ import annotations

from typing import Final

from aiohttp import web

KEEPALIVE_SECONDS: Final = 15.0
"""Seconds of silence after which an open stream gets an SSE comment (:data:`gateway.envelopes.SSE_PING`)."""


async def open_sse(request: web.Request) -> web.StreamResponse:
    """Commit the response to ``text/event-stream`` (unbuffered by proxies)."""
    response = web.StreamResponse(
        status=200,
        headers={
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-cache, no-transform",
            "X-Accel-Buffering": "no",
        },
    )
    await response.prepare(request)
    return response
