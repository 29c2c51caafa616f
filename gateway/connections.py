"""The cap on concurrent client connections (``listen.max_connections``), without resets.

At the cap a new connection is admitted if an idle connection can be closed for it, as nginx
does: the connection that has waited longest for its next request (keep-alive, between requests,
or with a request head unfinished) is closed, provided it has waited at least
:data:`REUSE_IDLE_AFTER` (a client that had its answer recently may be sending its next request
on that connection right now, and that request would meet the close). A connection with a request
in flight is never closed.

Otherwise the new connection is refused, and refused cleanly (:class:`_Refuse`): its request head
is read (at most :data:`REFUSAL_HEAD_BYTES`, :data:`REFUSAL_TIMEOUT` seconds), it is answered
``503`` with ``Retry-After``, ``Connection: close`` and the JSON-RPC error of the gateway's other
503s (``data.reason: overloaded``, ``data.cause: max_connections``), the write side is shut, and
whatever the client still sends (a body) is read and dropped until it closes its side, for at most
:data:`REFUSAL_LINGER` seconds. Closing a socket whose received bytes were never read makes the
kernel send a reset, and a reset can destroy the 503 before the client reads it (the client sees
``ConnectionResetError`` instead of the 503).

Connections being refused this way are bounded too (:func:`refusal_slots`); past that bound a
connection gets the 503 written at once and is closed (a flood of connections must not take every
file descriptor).

The default cap is derived from the process's open-file limit (:func:`default_max_connections`).
"""

from __future__ import annotations

import asyncio
import json
import resource
import time
from collections.abc import Awaitable, Callable, Collection
from typing import Any, Final, cast

from aiohttp import web

from gateway.errors import Overloaded

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

REUSE_IDLE_AFTER: Final = 10.0
"""Seconds a connection must have waited for its next request before it may be closed to admit a
new one. A client's next request on a kept-alive connection can follow its previous answer by
seconds when the client is busy (a retry right after its ``InputRequiredResult``), and a request
that meets the close gets no answer: with 1 s, 243 of 1,000 concurrent two-round calls through a
cap of 500 were lost that way (``bench.connection_cap``), with 10 s none."""
REFUSAL_RETRY_AFTER: Final = 1
"""``Retry-After`` of a connection refused at the cap (a place frees as soon as any client closes)."""
REFUSAL_HEAD_BYTES: Final = 65536
"""Most bytes read of a refused connection's request head before it is answered anyway."""
REFUSAL_TIMEOUT: Final = 5.0
"""Longest a refused connection's request head is waited for before it is answered anyway."""
REFUSAL_LINGER: Final = 2.0
"""Longest a refused connection is read (and its bytes dropped) after its 503, until the client closes."""
CAP_CEILING: Final = 10_000
"""The derived default cap never exceeds this."""
FD_RESERVED: Final = 256
"""Descriptors kept out of the derivation: listening sockets, logs, key files, the interpreter's own."""


def default_max_connections(soft_limit: int | None = None) -> int:
    """The default ``listen.max_connections``: a third of the open-file soft limit (``ulimit -n``)
    left after :data:`FD_RESERVED`, between 64 and :data:`CAP_CEILING`.

    Connections being refused take up to half as many again (:func:`refusal_slots`); the other
    half is for what client connections bring with them: the backend connection an interactive
    call keeps open while it runs or is held (two with a standalone GET stream), a stdio server's
    pipes, the hop to another replica."""
    if soft_limit is None:
        soft_limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft_limit == resource.RLIM_INFINITY or soft_limit < 0:
        return CAP_CEILING
    return max(64, min(CAP_CEILING, (soft_limit - FD_RESERVED) // 3))


def refusal_slots(limit: int) -> int:
    """How many connections past a cap of ``limit`` may be in the middle of their clean refusal
    (usually a few milliseconds each: the request head is already there when it is accepted)."""
    return max(256, limit // 2)


def refusal_response() -> bytes:
    """The bytes of the 503 a connection refused at the cap receives."""
    error = Overloaded("max_connections", REFUSAL_RETRY_AFTER).to_error()
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": error}, separators=(",", ":")).encode()
    head = (
        "HTTP/1.1 503 Service Unavailable\r\n"
        "Connection: close\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n"
        f"Retry-After: {REFUSAL_RETRY_AFTER}\r\n\r\n"
    )
    return head.encode("ascii") + body


_RESPONSE: Final = refusal_response()


class _Refuse(asyncio.Protocol):
    """A connection over the cap: its request head is read, it gets one 503, then a clean close."""

    def __init__(self, done: Callable[[], None]) -> None:
        self._done = done
        self._transport: asyncio.Transport | None = None
        self._head = bytearray()
        self._answered = False
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport, asyncio's or uvloop's (which has its methods without subclassing it).
        self._transport = cast(asyncio.Transport, transport)
        self._timer = asyncio.get_running_loop().call_later(REFUSAL_TIMEOUT, self._on_timer)

    def data_received(self, data: bytes) -> None:
        if self._answered:
            return  # a body, or anything else: read and dropped while lingering
        start = max(len(self._head) - 3, 0)
        self._head += data
        if self._head.find(b"\r\n\r\n", start) >= 0 or len(self._head) >= REFUSAL_HEAD_BYTES:
            self._answer()

    def eof_received(self) -> bool:
        if not self._answered and self._head:
            self._answer()  # a head cut short: the client may still read the 503
        self._close()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._transport = None
        self._done()

    def _on_timer(self) -> None:
        if self._answered:
            self._close()  # the linger ran out
        else:
            self._answer()  # the head never came whole: answered anyway

    def _answer(self) -> None:
        transport = self._transport
        if transport is None:
            return
        self._answered = True
        self._head = bytearray()
        transport.write(_RESPONSE)
        if transport.can_write_eof():
            transport.write_eof()  # FIN after the 503; the client's own close then ends the linger
        if self._timer is not None:
            self._timer.cancel()
        self._timer = asyncio.get_running_loop().call_later(REFUSAL_LINGER, self._on_timer)

    def _close(self) -> None:
        if self._transport is not None:
            self._transport.close()


class _RefuseAtOnce(asyncio.Protocol):
    """Past :func:`refusal_slots`: the 503 written at once, then closed (a reset is possible)."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        stream = cast(asyncio.Transport, transport)  # asyncio's or uvloop's, as in _Refuse
        stream.write(_RESPONSE)
        stream.close()


class ConnectionActivity:
    """What the gateway itself sees of each client connection, through aiohttp's public API only: a
    connection is waiting for its next request from when its handler was made (the limiter makes
    it) or its last request left the middleware chain; it is busy while a request is in the chain.

    The end of a request is when its handler returned: a plain answer is written a moment after,
    which the :data:`REUSE_IDLE_AFTER` margin (seconds) covers. A request whose head has begun to
    arrive on a connection waiting that long is not seen, and may be closed, as nginx closes it."""

    def __init__(self) -> None:
        self._waiting_since: dict[Any, float] = {}
        self._busy: dict[Any, int] = {}

    def opened(self, handler: Any, live: Collection[Any]) -> None:
        """A connection's handler was made; forget those no longer among the ``live`` ones, now and then."""
        self._waiting_since[handler] = time.monotonic()
        if len(self._waiting_since) > 2 * len(live) + 64:
            keep = set(live) | {handler}
            self._waiting_since = {h: t for h, t in self._waiting_since.items() if h in keep}

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        connection = request.protocol
        self._busy[connection] = self._busy.get(connection, 0) + 1
        try:
            return await handler(request)
        finally:
            left = self._busy.pop(connection) - 1
            if left:
                self._busy[connection] = left
            self._waiting_since[connection] = time.monotonic()

    def idle_since(self, handler: Any) -> float | None:
        """Since when (``time.monotonic()``) ``handler``'s connection waits for a request; None while a
        request is in flight, once it is closing, or for a connection this object never saw."""
        if handler.transport is None or handler in self._busy:
            return None
        return self._waiting_since.get(handler)


class ConnectionLimiter:
    """A protocol factory that hands out at most ``limit`` live connections of ``server``, closing
    an idle one for a new one, refusing cleanly otherwise (module docstring)."""

    def __init__(
        self,
        server: web.Server,
        limit: int,
        activity: ConnectionActivity,
        on_refuse: Callable[[], None] | None = None,
        reuse_idle_after: float = REUSE_IDLE_AFTER,
    ) -> None:
        self._server = server
        self._activity = activity
        self._limit = limit
        self._on_refuse = on_refuse
        self._reuse_idle_after = reuse_idle_after
        self._refusing = 0
        self._slots = refusal_slots(limit)
        self.idle_closed = 0
        """Idle connections closed to admit a new one (for tests and logs)."""

    def __call__(self) -> asyncio.BaseProtocol:
        connections = self._server.connections
        if len(connections) >= self._limit and not self._make_room(connections):
            if self._on_refuse is not None:
                self._on_refuse()
            if self._refusing >= self._slots:
                return _RefuseAtOnce()
            self._refusing += 1
            return _Refuse(self._refused)
        handler = self._server()
        self._activity.opened(handler, connections)
        return handler

    def _refused(self) -> None:
        self._refusing -= 1

    def _make_room(self, connections: list[Any]) -> bool:
        """True if there is a place for one more: connections still counted but already closing are
        not live, else the longest-idle connection (idle long enough) is closed for it."""
        closing = 0
        oldest: tuple[float, Any] | None = None
        for handler in connections:
            if handler.transport is None:
                closing += 1
                continue
            since = self._activity.idle_since(handler)
            if since is not None and (oldest is None or since < oldest[0]):
                oldest = (since, handler)
        if len(connections) - closing < self._limit:
            return True
        if oldest is None or time.monotonic() - oldest[0] < self._reuse_idle_after:
            return False
        oldest[1].force_close()  # what aiohttp's own keep-alive timer does to an idle connection
        self.idle_closed += 1
        return True
