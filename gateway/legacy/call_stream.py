"""The SSE stream a streamable-HTTP backend answers one POST with, read for its exchange.

Split from :mod:`gateway.legacy.streamable_http`, which opens these streams: how one is read -
inline by the task waiting on the exchange, or by a reader task of its own - is
:class:`~gateway.legacy.session.Exchange`'s contract (:class:`~gateway.legacy.session.AnswerStream`).
"""

from __future__ import annotations

import asyncio
from typing import Protocol

import aiohttp

from gateway.errors import BackendUnavailable
from gateway.legacy.session import Exchange
from gateway.legacy.sse import SSEParser
from gateway.legacy.wire import DRAIN_SECONDS, backend_errors, drain, jittered, sse_pieces
from gateway.turns import LOOP_HOLD_SECONDS, give_turn

RESUME_ATTEMPTS = 3
"""Times a stream cut before its answer is resumed with ``Last-Event-ID``."""


class StreamOwner(Protocol):
    """The session a stream belongs to (:class:`~gateway.legacy.streamable_http.StreamableHttpSession`)."""

    @property
    def max_message_bytes(self) -> int: ...

    async def dispatch_event(self, data: str, exchange: Exchange | None) -> None: ...

    async def resume(self, last_event_id: str) -> aiohttp.ClientResponse: ...

    def mark_broken(self) -> None: ...


class CallStream:
    """One POST's SSE stream: the :class:`~gateway.legacy.session.AnswerStream` of its exchange.

    Read chunk by chunk (:meth:`read`) by the task waiting on the exchange, or to the answer by a
    reader task (:meth:`background`, which also resumes a stream cut before the answer with
    ``Last-Event-ID``, up to ``RESUME_ATTEMPTS`` times). Parsing holds the event loop at most
    about :data:`~gateway.turns.LOOP_HOLD_SECONDS` at a time, as :func:`~gateway.legacy.wire.sse_events` does.

    Once the answer is in, the rest of the stream - its end, most often already received - is not
    read: aiohttp hands the connection back to its pool when the end arrives, and a stream whose
    end has not come within :data:`~gateway.legacy.wire.DRAIN_SECONDS` is released then (its
    connection closed; what it sends meanwhile is bounded by aiohttp's flow control). A reader task
    drains its stream instead (:func:`~gateway.legacy.wire.drain`), as it always has.
    """

    __slots__ = ("_drains", "_ended", "_last_id", "_over", "_parser", "_resp", "_retry_ms", "_session")

    def __init__(self, session: StreamOwner, resp: aiohttp.ClientResponse, exchange: Exchange) -> None:
        self._session = session
        self._resp = resp
        self._parser = SSEParser(session.max_message_bytes)
        exchange.receiving = self._parser.mid_event
        self._last_id: str | None = None
        self._retry_ms = 1000
        self._ended = False
        """The stream ended before the answer (a reader task resumes it)."""
        self._over = False
        """The answer or a failure is in: nothing more is read."""
        self._drains = False
        """Read by :meth:`background`, which drains the stream after the answer."""

    async def read(self, exchange: Exchange) -> bool:
        content = self._resp.content
        before = content.total_bytes
        try:
            with backend_errors(exchange.method or "request"):
                chunk = await exchange.parked(
                    content.readany(),
                    lambda: content.total_bytes != before or content.is_eof() or content.exception() is not None,
                )
                if chunk is None:
                    return True  # woken: something else was pushed, or the deadline passed
                if not chunk:
                    self._ended = True
                    exchange.receiving = None
                    self._resp.release()
                    return False
                await self._feed(chunk, exchange)
        except BackendUnavailable as exc:
            self._fail(exchange, exc)
        return True

    async def _feed(self, chunk: bytes, exchange: Exchange) -> None:
        """Route the messages ``chunk`` completes, giving the loop a turn after each
        :data:`~gateway.turns.LOOP_HOLD_SECONDS` of parsing. The stream is read no further than the
        answer's chunk; what that chunk holds after the answer is routed all the same (a server
        request there is answered by the session, see :meth:`~gateway.legacy.session.Exchange.unanswered`)."""
        loop = asyncio.get_running_loop()
        held_since = loop.time()
        parser = self._parser
        for piece in sse_pieces(chunk):
            for event in parser.feed(piece):
                if loop.time() - held_since > LOOP_HOLD_SECONDS:
                    await give_turn()
                    held_since = loop.time()
                if event.id:
                    self._last_id = event.id
                if event.retry is not None:
                    self._retry_ms = event.retry
                if not event.data or event.event != "message":
                    continue
                await self._session.dispatch_event(event.data, exchange)
                if exchange.answered and not self._over:
                    self._answered(exchange)
            if loop.time() - held_since > LOOP_HOLD_SECONDS:
                await give_turn()
                held_since = loop.time()

    def _answered(self, exchange: Exchange) -> None:
        self._over = True
        exchange.receiving = None
        if exchange.stream is self:
            exchange.stream = None
        if self._drains:
            return
        resp = self._resp
        if resp.content.is_eof():
            resp.release()  # the connection is already back in aiohttp's pool
            return
        timer = asyncio.get_running_loop().call_later(DRAIN_SECONDS, resp.release)
        resp.content.on_eof(timer.cancel)

    def _fail(self, exchange: Exchange, exc: BackendUnavailable) -> None:
        self._over = True
        exchange.receiving = None
        if exchange.stream is self:
            exchange.stream = None
        self._resp.release()
        if exc.reason == "malformed_response":
            self._session.mark_broken()
        exchange.push(exc)

    async def background(self, exchange: Exchange) -> None:
        attempts = 0
        self._drains = True
        try:
            while not self._over:
                if self._ended:
                    if self._last_id is None or attempts >= RESUME_ATTEMPTS:
                        raise BackendUnavailable("stream_closed", "the backend closed the stream before answering")
                    attempts += 1
                    await asyncio.sleep(jittered(min(self._retry_ms, 5000) / 1000))
                    self._resp = await self._session.resume(self._last_id)
                    self._parser = SSEParser(self._session.max_message_bytes)
                    exchange.receiving = self._parser.mid_event
                    self._ended = False
                await self.read(exchange)
            if exchange.answered:
                exchange.draining = True
                await drain(self._resp)
                self._resp.release()
        except BackendUnavailable as exc:
            self._fail(exchange, exc)
        except BaseException:
            exchange.receiving = None
            self._resp.release()
            raise

    def close(self) -> None:
        if not self._over:
            self._over = True
            self._resp.release()
