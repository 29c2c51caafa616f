"""The listener backend session of one (route, credential) and the listen streams it feeds.

:class:`ListenHubs` bounds them (issue 8 items 4 and 11): at most ``max_streams`` listen streams in
all and ``max_per_principal`` per credential; a hub's backend session counts in its route's
``max_sessions`` (the pool opens it). When the listener session breaks, every stream of its hub
ends without a final result, so clients reconnect; on gateway shutdown streams end gracefully with
the final ``complete`` result. Each hub owns its fan-out task (a task group of its own) and ends it in
:meth:`ListenHub.close`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from gateway.errors import GatewayError, Overloaded, UpstreamError
from gateway.legacy.session import BackendSession, FinalResponse, ServerNotification, ServerRequest
from gateway.listen.translate import Listener
from gateway.owned import TaskGroup
from gateway.translate.results import modern_error, server_info_of

HEALTH_CHECK_SECONDS = 1.0


class ListenHub:
    """One listener backend session and the listen streams it feeds."""

    def __init__(
        self,
        session: BackendSession,
        sink: asyncio.Queue[ServerNotification],
        timeout: float,
        close_session: Callable[[Any], Awaitable[None]] | None = None,
    ) -> None:
        self.session = session
        self._close_session = close_session
        self._sink = sink
        self._timeout = timeout
        self._listeners: set[Listener] = set()
        self._uris: Counter[str] = Counter()
        self._lock = asyncio.Lock()
        self._tasks = TaskGroup("listen-fan-out")
        self._pump = self._tasks.spawn(self._fan_out(), name="listen-fan-out")
        self.closed = False

    @property
    def capabilities(self) -> Mapping[str, Any]:
        caps = self.session.initialize_result.get("capabilities")
        return caps if isinstance(caps, Mapping) else {}

    @property
    def listener_count(self) -> int:
        return len(self._listeners)

    async def add(self, listener: Listener) -> None:
        async with self._lock:
            for uri in listener.wants.get("resourceSubscriptions", []):
                if self._uris[uri] == 0:
                    await self._request("resources/subscribe", {"uri": uri})
                self._uris[uri] += 1
            self._listeners.add(listener)

    async def remove(self, listener: Listener) -> None:
        async with self._lock:
            self._listeners.discard(listener)
            for uri in listener.wants.get("resourceSubscriptions", []):
                self._uris[uri] -= 1
                if self._uris[uri] <= 0:
                    del self._uris[uri]
                    if not self.closed:
                        with contextlib.suppress(GatewayError):
                            await self._request("resources/unsubscribe", {"uri": uri})

    async def _request(self, method: str, params: dict[str, Any]) -> None:
        exchange = await self.session.start(method, params, {})
        try:
            while True:
                event = await exchange.next(self._timeout)
                if isinstance(event, FinalResponse):
                    if event.error is not None:
                        error = modern_error(event.error)
                        raise UpstreamError(error["code"], error["message"], error.get("data"))
                    return
                if isinstance(event, ServerRequest):
                    exchange.unanswered(event)  # a listener has nobody to ask
        finally:
            await exchange.aclose()

    async def _fan_out(self) -> None:
        while True:
            try:
                notification = await asyncio.wait_for(self._sink.get(), HEALTH_CHECK_SECONDS)
            except TimeoutError:
                if self.session.broken:
                    await self.close(graceful=False)
                    return
                continue
            for listener in list(self._listeners):
                if listener.accepts(notification):
                    listener.offer(notification)

    async def close(self, *, graceful: bool) -> None:
        """End every stream (with the final result when ``graceful``) and close the session."""
        if self.closed:
            return
        self.closed = True
        server_info = server_info_of(self.session.initialize_result)
        for listener in list(self._listeners):
            final = listener.final_result(server_info) if graceful else None
            with contextlib.suppress(asyncio.QueueFull):
                listener.queue.put_nowait(final)
        if asyncio.current_task() is not self._pump:  # the pump closes the hub itself when its session breaks
            await self._tasks.aclose()
        if self._close_session is not None:
            await self._close_session(self.session)  # the pool counts it until then
        else:
            await self.session.close()


class ListenHubs:
    """The hubs of one gateway, keyed by (route path, credential digest); opened on first use.

    Bounds (issue 8 items 4 and 11): at most ``max_streams`` listen streams in all and
    ``max_per_principal`` per credential (past either, :class:`~gateway.errors.Overloaded`, HTTP 503
    with ``Retry-After``); a hub's backend session counts in its route's ``max_sessions`` (the pool
    opens it). Opening a hub initializes a backend session, which a hung backend may stretch to its
    timeout: the lock held meanwhile is the hub key's own, so listens on other routes, or of other
    credentials, never wait for it.
    """

    def __init__(self, *, max_streams: int = 1000, max_per_principal: int = 16, retry_after: int = 5) -> None:
        self._hubs: dict[tuple[str, str], ListenHub] = {}
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}
        self._max_streams = max_streams
        self._max_per_principal = max_per_principal
        self._retry_after = retry_after
        self._streams: Counter[str] = Counter()
        """Listen streams admitted, per credential digest (including those still opening)."""

    def __len__(self) -> int:
        return len(self._hubs)

    @property
    def stream_count(self) -> int:
        return sum(self._streams.values())

    def _admit(self, principal: str) -> None:
        if self.stream_count >= self._max_streams:
            raise Overloaded("listen_stream_limit", self._retry_after)
        if self._streams[principal] >= self._max_per_principal:
            raise Overloaded("principal_listen_stream_limit", self._retry_after)
        self._streams[principal] += 1

    def leave(self, key: tuple[str, str]) -> None:
        """A stream admitted by :meth:`join` for ``key`` ended."""
        principal = key[1]
        self._streams[principal] -= 1
        if self._streams[principal] <= 0:
            del self._streams[principal]

    async def join(
        self,
        key: tuple[str, str],
        open_session: Any,
        timeout: float,
        wants: Any,
        close_session: Callable[[Any], Awaitable[None]] | None = None,
    ) -> tuple[ListenHub, Listener]:
        """Add a listener to the hub for ``key`` (opening it if needed); ``wants(capabilities)``
        gives the listener, so the acknowledgement follows what the backend supports. Every
        successful join is matched by one :meth:`leave`."""
        self._admit(key[1])
        try:
            lock = self._locks.setdefault(key, asyncio.Lock())
            async with lock:
                hub = self._hubs.get(key)
                if hub is None or hub.closed or hub.session.broken:
                    sink: asyncio.Queue[ServerNotification] = asyncio.Queue(maxsize=10_000)
                    session: BackendSession = await open_session(sink)
                    hub = ListenHub(session, sink, timeout, close_session)
                    self._hubs[key] = hub
                listener: Listener = wants(hub.capabilities)
                try:
                    await hub.add(listener)
                except BaseException:  # a cancelled join too: a hub nobody joined must not keep its session
                    if hub.listener_count == 0 and self._hubs.get(key) is hub:
                        del self._hubs[key]
                        await hub.close(graceful=False)
                    raise
                return hub, listener
        except BaseException:  # a cancelled join too: its admission and lock are given back either way
            self.leave(key)
            self._forget_lock(key)
            raise

    def _forget_lock(self, key: tuple[str, str]) -> None:
        """Drop the lock of a key with no hub and no join in progress (keys are client-chosen)."""
        lock = self._locks.get(key)
        if lock is not None and not lock.locked() and key not in self._hubs:
            del self._locks[key]

    async def close_idle(self) -> None:
        """Close hubs nobody listens to any more (their backend session is not free).

        A hub whose key is being joined right now is left to that join."""
        for key, hub in list(self._hubs.items()):
            lock = self._locks.get(key)
            if (hub.closed or hub.listener_count == 0) and not (lock is not None and lock.locked()):
                if self._hubs.get(key) is hub:
                    del self._hubs[key]
                    self._forget_lock(key)
                await hub.close(graceful=True)

    async def close_all(self) -> None:
        hubs, self._hubs = list(self._hubs.values()), {}
        await asyncio.gather(*(h.close(graceful=True) for h in hubs), return_exceptions=True)
