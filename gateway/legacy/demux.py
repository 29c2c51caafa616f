"""Transports whose every backend message arrives on one stream (HTTP+SSE, stdio).

A JSON-RPC answer is matched to its call by id; a server request goes to the lease holder (kept
unclaimed when there is none); when the stream ends, every call still waiting hears why.
"""

from __future__ import annotations

import abc

import structlog

from gateway.errors import BackendUnavailable
from gateway.legacy.base import LegacySessionBase
from gateway.legacy.session import Exchange, FinalResponse, JsonObj

log = structlog.get_logger("gateway.legacy")


class DemuxedSession(LegacySessionBase):
    """Transports whose every backend message arrives on one stream (HTTP+SSE, stdio): answers are
    matched to calls by JSON-RPC id, server requests go to the lease holder (unclaimed when there is
    none), and when the stream ends every call still waiting hears why."""

    def _init_demux(self) -> None:
        self._inflight: dict[str | int, Exchange] = {}
        self._failure: tuple[str, str] | None = None

    @abc.abstractmethod
    async def _send_request(self, body: JsonObj, headers: dict[str, str], *, what: str) -> None:
        """Send one JSON-RPC request on this transport (its answer arrives on the stream)."""

    async def start(
        self,
        method: str,
        params: JsonObj,
        headers: dict[str, str],
        *,
        owner: bool = False,
        answer_timeout: float | None = None,
    ) -> Exchange:
        del answer_timeout  # the answer arrives on the stream: nothing here waits for it
        request_id = next(self._ids)
        exchange = self._register(request_id, method)
        self._own(exchange, owner)
        body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        try:
            await self._send_request(body, headers, what=method)
        except BaseException:  # cancelled too: a request that may not have been sent must not wait for an answer
            self._inflight.pop(request_id, None)
            self._disown(exchange)
            raise
        return exchange

    async def _initialize_answer(self, init: Exchange) -> FinalResponse:
        """Notifications may come first; server requests never reach ``init`` (see ``_owner``)."""
        while True:
            event = await init.next(self._timeout)
            if isinstance(event, FinalResponse):
                return event

    def _register(self, request_id: int, method: str) -> Exchange:
        """Track an exchange before sending it: the answer may overtake the send's own completion."""
        if self._failure is not None:
            raise BackendUnavailable(*self._failure)
        exchange = self._new_exchange(request_id, method)
        self._inflight[request_id] = exchange
        return exchange

    async def _route(self, message: JsonObj, size: int = 0) -> None:
        if "method" in message:
            await self._dispatch(message, self._owner(request="id" in message), size)
            return
        request_id = message.get("id")
        exchange = None
        if isinstance(request_id, str | int) and not isinstance(request_id, bool):
            exchange = self._inflight.pop(request_id, None)
        if exchange is None:
            log.debug("backend response matches no request", id=repr(request_id)[:40])
            return
        await self._dispatch(message, exchange, size)

    def _owner(self, *, request: bool) -> Exchange | None:
        """Whom a server request belongs to: the lease holder only (attached before its request was
        sent); a notification: the lease holder, else the sole call in flight."""
        if self._attached is not None or request:
            return self._attached
        live = [e for e in self._inflight.values() if not e.done and e.method != "initialize"]
        return live[0] if len(live) == 1 else None

    def _fail_inflight(self, failure: BackendUnavailable, stream: str) -> None:
        """The stream is gone: the session is broken and nothing in flight will be answered."""
        self._broken = True
        reason = failure.reason if failure.reason == "malformed_response" else "stream_closed"
        detail = failure.detail
        self._failure = (reason, detail)
        waiting = list(self._inflight.values())
        self._inflight.clear()
        if self._attached is not None:
            waiting.append(self._attached)
        for exchange in waiting:
            exchange.push(BackendUnavailable(reason, detail))
        if not self._closed:
            log.info(f"backend {stream} stream ended", reason=failure.reason, detail=detail)
