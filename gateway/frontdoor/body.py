"""Reading a client's request body: whole, bounded in size, bounded in time.

``request.content.read(n)`` returns whatever happens to be buffered, not ``n`` bytes: a valid
1 MiB request read that way is a truncated JSON document. So the body is read to its end, piece by
piece, and two things a client controls are bounded on the way:

* size: a ``Content-Length`` over ``listen.max_body_bytes`` is refused before a byte is read, and
  a body without one is refused as soon as it grows past the limit (:class:`BodyTooLarge`, HTTP
  413);
* time: the whole body must arrive within ``listen.body_timeout`` seconds (:class:`BodyTimeout`,
  HTTP 408 and the connection is closed at once: :func:`close_after`). aiohttp's keep-alive
  timer does not run while a handler waits for a body, so without this a connection that
  announces a body and never sends it is held forever.

A body that has already arrived whole (most requests: it came in the same packets as the headers,
and the HTTP parser has seen its end before the handler runs) is taken from the buffer at once:
there is nothing left to wait for, so no timer is armed; its size is bounded all the same.
"""

from __future__ import annotations

import asyncio

from aiohttp import web


class BodyTooLarge(Exception):
    """The body is, or says it is, over the limit."""


class BodyTimeout(Exception):
    """The body did not arrive in time."""


async def read_body(request: web.Request, *, limit: int, timeout: float) -> bytes:
    """The whole request body, at most ``limit`` bytes, received within ``timeout`` seconds."""
    declared = request.content_length
    if declared is not None and declared > limit:
        raise BodyTooLarge
    content = request.content
    if content.is_eof():  # the whole body is buffered already (feed_eof ran): nothing to wait for
        body = content.read_nowait()
        if len(body) > limit:
            raise BodyTooLarge
        return body
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(timeout):
            while chunk := await request.content.readany():
                size += len(chunk)
                if size > limit:
                    raise BodyTooLarge
                chunks.append(chunk)
    except TimeoutError:
        raise BodyTimeout from None
    return b"".join(chunks)


async def close_after(request: web.Request, response: web.Response) -> web.Response:
    """Send ``response``, then close the connection at once.

    aiohttp would otherwise keep reading ("lingering") for the rest of an unfinished body, for up
    to ten seconds, before it closes: the very wait a stalled body must not get.
    """
    response.force_close()
    await response.prepare(request)
    await response.write_eof()
    request.protocol.force_close()  # the answer is flushed before the socket closes
    return response
