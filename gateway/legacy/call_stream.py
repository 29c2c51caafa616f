"""The SSE stream a streamable-HTTP backend answers one POST with, read for its exchange.

:mod:`gateway.legacy.streamable_http` opens these streams; here each is read, by a reader task of
the session (:meth:`CallStream.run`), and what it carries is routed into its exchange's queue.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

import aiohttp

from gateway.errors import BackendUnavailable
from gateway.legacy.session import Exchange
from gateway.legacy.sse import SSEParser
from gateway.legacy.wire import backend_errors, jittered, release_at_end, sse_pieces
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

    @property
    def ending(self) -> set[aiohttp.ClientResponse]:
        """Answered responses whose end has not arrived yet (released when the session closes)."""
        ...


class CallStream:
    """One POST's SSE stream, read to its exchange's answer by :meth:`run`.

    A stream cut before the answer is resumed with ``Last-Event-ID``, up to ``RESUME_ATTEMPTS``
    times. Parsing holds the event loop at most about :data:`~gateway.turns.LOOP_HOLD_SECONDS` at a
    time, as :func:`~gateway.legacy.wire.sse_events` does. Once the answer is in, the reader ends:
    the rest of the stream is not read, and its connection goes back to aiohttp's pool when its end
    arrives (:func:`~gateway.legacy.wire.release_at_end`, bounded in time).
    """

    __slots__ = ("_ended", "_exchange", "_last_id", "_over", "_parser", "_resp", "_retry_ms", "_session")

    def __init__(self, session: StreamOwner, resp: aiohttp.ClientResponse, exchange: Exchange) -> None:
        self._session = session
        self._resp = resp
        self._exchange = exchange
        self._parser = SSEParser(session.max_message_bytes)
        exchange.receiving = self._parser.mid_event
        self._last_id: str | None = None
        self._retry_ms = 1000
        self._ended = False
        """The stream ended before the answer (it is resumed)."""
        self._over = False
        """The answer or a failure is in: nothing more is read but the drain."""

    async def run(self) -> None:
        """Read the stream to the answer (resuming it when it is cut), and no further."""
        exchange = self._exchange
        attempts = 0
        answered = False
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
                await self._read()
            answered = True
        except BackendUnavailable as exc:
            self._fail(exc)
        except asyncio.CancelledError:
            # The exchange was closed (nobody waits: the failure is not queued) or its session was.
            self._fail(BackendUnavailable("stream_closed", "the session was closed"))
            raise
        finally:
            exchange.receiving = None
            if answered:
                release_at_end(self._resp, self._session.ending)  # the rest is not read; the connection is kept
            else:
                self._resp.release()  # (again, harmless) whatever ended the read: the connection is not kept

    async def _read(self) -> None:
        """Read what has arrived and route the messages it completes."""
        with backend_errors(self._exchange.method or "request"):
            chunk = await self._resp.content.readany()
            if not chunk:
                self._ended = True
                self._exchange.receiving = None
                self._resp.release()
                return
            await self._feed(chunk)

    async def _feed(self, chunk: bytes) -> None:
        """Route the messages ``chunk`` completes, giving the loop a turn after each
        :data:`~gateway.turns.LOOP_HOLD_SECONDS` of parsing. What the answer's chunk holds after the
        answer is routed all the same (a server request there is answered by the session, see
        :meth:`~gateway.legacy.session.Exchange.unanswered`)."""
        exchange = self._exchange
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
                    self._over = True
                    exchange.receiving = None
                    # The exchange lets go of this reader: closing it (its call has the answer now)
                    # does not cut the routing of what arrived with the answer. The session's group
                    # still owns the task, which ends with this chunk.
                    exchange.reader = None
            if loop.time() - held_since > LOOP_HOLD_SECONDS:
                await give_turn()
                held_since = loop.time()

    def _fail(self, exc: BackendUnavailable) -> None:
        self._over = True
        self._exchange.receiving = None
        self._resp.release()
        if exc.reason == "malformed_response":
            self._session.mark_broken()
        self._exchange.push(exc)
