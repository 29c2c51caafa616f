"""Stream an upstream HTTP answer to the client as it arrives: the one relay of the gateway.

Two paths answer a client with another server's bytes: an old client's exchange passed through to
its backend (:mod:`gateway.frontdoor.legacy_passthrough`) and a retry forwarded to the replica that
holds its call (:mod:`gateway.replicas.forward`). Both copy the status and the end-to-end headers
and then the body chunk by chunk, as it comes (an SSE answer may idle for minutes while a user
thinks). Both must notice a client that went away while the upstream is silent, and both must end
sensibly when the upstream breaks after the headers are out and no error status can be sent any
more: an SSE answer gets ``broken_event`` (a JSON-RPC error event) when the path has one, any
other answer is cut off when ``cut_when_broken``, else it simply ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from typing import Final

import aiohttp
from aiohttp import web
from multidict import CIMultiDict

from gateway.http_errors import CLIENT_FAILURES, raised_by_client

DISCONNECT_POLL: Final = 1.0
"""Seconds between checks that the client is still there while the upstream is silent."""
HOP_BY_HOP: Final = frozenset(
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
    }
)
"""Upstream headers never returned: they describe the upstream connection, not the answer."""


def end_to_end(headers: Mapping[str, str], also_dropped: Iterable[str] = ()) -> CIMultiDict[str]:
    """The upstream's headers that travel on to the client."""
    dropped = HOP_BY_HOP | {name.lower() for name in also_dropped}
    return CIMultiDict((k, v) for k, v in headers.items() if k.lower() not in dropped)


def _never() -> bool:
    return False


async def relay(
    request: web.Request,
    upstream: aiohttp.ClientResponse,
    headers: CIMultiDict[str],
    *,
    on_broken: Callable[[BaseException], None],
    broken_event: bytes | None = None,
    cut_when_broken: bool = False,
    closing: Callable[[], bool] = _never,
) -> web.StreamResponse:
    """Answer ``request`` with ``upstream``'s status, ``headers`` and body; ``on_broken`` hears of an
    upstream that failed mid-body (to log and count it). ``closing()`` true ends a silent stream at
    its next check (shutdown: the client resumes elsewhere)."""
    response = web.StreamResponse(status=upstream.status, reason=upstream.reason, headers=headers)
    is_sse = upstream.content_type == "text/event-stream"
    if is_sse:
        response.headers["X-Accel-Buffering"] = "no"
    elif upstream.content_length is not None and "Content-Encoding" not in upstream.headers:
        response.content_length = upstream.content_length
    try:
        await response.prepare(request)
        while True:
            try:
                async with asyncio.timeout(DISCONNECT_POLL):
                    chunk = await upstream.content.readany()
            except TimeoutError as exc:
                if raised_by_client(exc):  # the upstream's own read timeout
                    raise
                transport = request.transport
                if transport is None or transport.is_closing() or closing():
                    return response
                continue
            if not chunk:
                break
            await response.write(chunk)
        await response.write_eof()
    except ConnectionError:
        pass  # the client went away; closing the upstream is all that is left to do
    except CLIENT_FAILURES as exc:
        # Headers are out, so no error status can be sent: end the stream as the path asks.
        on_broken(exc)
        if is_sse and broken_event is not None:
            await response.write(broken_event)
            await response.write_eof()
        elif cut_when_broken:
            response.force_close()
    return response
