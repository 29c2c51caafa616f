"""Graceful drain: a replica told to stop finishes the calls it holds before it goes.

A held call lives in the memory of the replica that created it; stopping that replica at once
ends the call (its client gets ``hold_lost`` and starts over, or a replay route re-runs it). So a
replica that receives SIGTERM first *drains*:

1. ``/readyz`` answers 503 at once, so the load balancer stops sending it new calls;
2. a new interactive call (one that could be held: ``tools/call``, ``prompts/get``,
   ``resources/read`` without ``requestState``) and a new ``subscriptions/listen`` stream are
   refused with the retryable -32603 ``data.reason: "draining"`` (HTTP 503 + ``Retry-After``),
   which a client retries and the load balancer sends to a live replica;
3. everything else is still served: above all the retries of calls held here (from clients
   directly, or forwarded by other replicas to this owner), which may take further rounds, and
   plain requests (lists, ``server/discover``), which end within the backend timeout;
4. the drain ends when no call is held and no request is in flight, or after ``drain_timeout``
   seconds; then the normal shutdown runs (:mod:`gateway.app`): listen streams end, the holds
   still left expire as they always do (the backend is answered, so legacy tools finish), and
   backend sessions are closed.

A second SIGTERM (or SIGINT) ends the drain at once. :class:`Drain` is the one object the app and
the front door share; :mod:`gateway.server` begins it on the signal and waits for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import structlog
from aiohttp import web
from mcp_types.methods import INPUT_REQUIRED_METHODS

from gateway.errors import Draining

log = structlog.get_logger("gateway.drain")

RETRY_AFTER: Final = 1
"""Seconds a refused client should wait: another replica can take the call now."""
_NOT_COUNTED: Final = frozenset({"/healthz", "/readyz", "/metrics"})


class Drain:
    """This replica's drain state: what it still admits, and when it may stop."""

    def __init__(self, timeout: float, *, on_refuse: Callable[[], None] | None = None) -> None:
        self.timeout = timeout
        self.draining = False
        self._on_refuse = on_refuse
        self._holds: Callable[[], int] = lambda: 0
        self._in_flight = 0
        self._changed = asyncio.Event()
        self._ended = asyncio.Event()

    def watch_holds(self, count: Callable[[], int]) -> None:
        """Where to read the number of held calls (the hold registry's size)."""
        self._holds = count

    def changed(self) -> None:
        """A hold was added or removed: the drain may be over."""
        self._changed.set()

    def begin(self) -> None:
        """Stop admitting new calls (SIGTERM); a second call ends the drain at once."""
        if self.draining:
            log.warning("drain_cut_short", holds=self._holds(), in_flight=self._in_flight)
            self._ended.set()
            self._changed.set()
            return
        self.draining = True
        log.info("drain_started", holds=self._holds(), in_flight=self._in_flight, timeout_s=self.timeout)
        self._changed.set()

    def refuse(self, method: str, params: Mapping[str, Any]) -> Draining | None:
        """The error for a request this replica no longer admits, else None.

        Refused: a call that could be held here (it has no ``requestState``) and a new listen
        stream. A retry carries ``requestState`` and is served: its call may be held here."""
        if not self.draining:
            return None
        new_call = method in INPUT_REQUIRED_METHODS and not isinstance(params.get("requestState"), str)
        if not new_call and method != "subscriptions/listen":
            return None
        if self._on_refuse is not None:
            self._on_refuse()
        return Draining(RETRY_AFTER)

    @property
    def idle(self) -> bool:
        return self._holds() == 0 and self._in_flight == 0

    async def wait(self) -> bool:
        """Wait until nothing is held or in flight (True), or ``timeout`` passed or the drain was cut
        short (False)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        while not self.idle and not self._ended.is_set():
            self._changed.clear()
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            try:
                async with asyncio.timeout(remaining):
                    await self._changed.wait()
            except TimeoutError:
                break
        drained = self.idle
        log.info("drain_ended", drained=drained, holds=self._holds(), in_flight=self._in_flight)
        return drained

    @web.middleware
    async def middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        """Count requests in flight (a call not yet held is as much in progress as a held one).

        Only POSTs to route endpoints count: GET streams (old clients' standalone streams) and
        listen streams last until shutdown, and counting them would keep every drain to its timeout."""
        if (
            request.method != "POST"
            or request.path in _NOT_COUNTED
            or request.headers.get("Mcp-Method") == "subscriptions/listen"
        ):
            return await handler(request)
        self._in_flight += 1
        try:
            return await handler(request)
        finally:
            self._in_flight -= 1
            if self.draining:
                self._changed.set()
