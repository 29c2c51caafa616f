"""One listen stream served as SSE: the acknowledgement first, then notifications, until either side ends."""

from __future__ import annotations

import asyncio
import time

from aiohttp import web

from gateway.envelopes import SSE_PING, sse_event
from gateway.errors import BackendUnavailable
from gateway.event_stream import KEEPALIVE_SECONDS, open_sse
from gateway.listen.hub import ListenHub
from gateway.listen.translate import Listener


async def stream_listener(
    request: web.Request, hub: ListenHub, listener: Listener, *, until: float | None = None
) -> web.StreamResponse:
    """Serve one listen stream: the acknowledgement first, then notifications, until either side ends.

    ``until`` (Unix time): the client's token expires then (``auth.jwt``), and the stream ends with
    it, without a result, so the client reconnects with a fresh token."""
    response = await open_sse(request)
    try:
        await response.write(sse_event(listener.acknowledgement()))
        while True:
            wait = KEEPALIVE_SECONDS if until is None else min(KEEPALIVE_SECONDS, until - time.time())
            if wait <= 0:
                return response
            try:
                message = await asyncio.wait_for(listener.next(), wait)
            except TimeoutError:
                if until is None or time.time() < until:
                    await response.write(SSE_PING)
                continue
            if message is None:
                return response  # backend lost: end without a result so the client reconnects
            await response.write(sse_event(message))
            if "result" in message:
                await response.write_eof()
                return response
    except (ConnectionError, BackendUnavailable):
        return response
    finally:
        await hub.remove(listener)
