"""The gateway as a handshake-era streamable-HTTP client (2025-03-26, 2025-06-18, 2025-11-25).

One :class:`StreamableHttpSession` is one backend session: ``initialize`` with the capabilities of
the modern request that caused it, ``notifications/initialized``, then ``Mcp-Session-Id`` and
``MCP-Protocol-Version`` on every request. Request answers may be JSON or an SSE stream on which
the server also sends its own requests; what a stream carries is routed into the
:class:`~gateway.legacy.session.Exchange` by a reader task of the session
(:class:`~gateway.legacy.call_stream.CallStream`).
A standalone GET stream is kept open per session because servers send some requests there
(mcp 1.30.0 sends ``roots/list`` on it).

Session state, the ``initialize`` check and message routing live in :mod:`gateway.legacy.base`;
the mapping of foreign failures onto :class:`~gateway.errors.BackendUnavailable` in
:mod:`gateway.legacy.wire`; both are shared with the HTTP+SSE transport.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import aiohttp
import structlog
from mcp_types.version import is_version_at_least

from gateway.errors import BackendUnavailable
from gateway.http_errors import CLIENT_FAILURES
from gateway.legacy.call_stream import CallStream
from gateway.legacy.http_base import HttpSessionBase
from gateway.legacy.session import (
    Exchange,
    FinalResponse,
    JsonObj,
    ServerRequest,
    SessionExpired,
)
from gateway.legacy.wire import (
    backend_errors,
    final_response,
    jittered,
    message_size,
    parse_messages,
    read_bounded,
    sse_events,
)

log = structlog.get_logger("gateway.legacy")

_MAX_ERROR_BYTES = 64 * 1024
"""Most of a 4xx body read to find a JSON-RPC error in it."""


class StreamableHttpSession(HttpSessionBase):
    """One handshake-era session on a streamable-HTTP backend."""

    __slots__ = ("_get_answered", "_get_task", "_header_cache", "_session_id", "ending")

    def _init_transport(self) -> None:
        self._session_id: str | None = None
        self._header_cache: tuple[tuple[str | None, str, bool], dict[str, str], dict[str, str]] | None = None
        self._get_task: asyncio.Task[None] | None = None
        self._get_answered: asyncio.Future[None] | None = None
        """Done once the backend has answered the standalone GET (stream open, 405, or failure); only
        the handshake waits for it, so it is dropped after (an Event kept for a held session's
        lifetime cost it 1 KiB)."""
        self.ending: set[aiohttp.ClientResponse] = set()
        """Answered call streams whose end has not arrived yet (:func:`~gateway.legacy.wire.release_at_end`)."""

    @property
    def session_id(self) -> str | None:
        return self._session_id

    # -- lifecycle --------------------------------------------------------------------------

    async def _handshake(self) -> None:
        """initialize → standalone GET stream → notifications/initialized → ping.

        The GET stream is open before the server hears ``notifications/initialized``: servers that
        ask ``roots/list`` as soon as they are initialized send it there (the TypeScript SDK drops a
        message for a standalone stream that is not open). The ping after it lets such a request
        arrive before the session is first leased (see ``_ping_after_initialize``)."""
        body = self._initialize_body()
        headers = self._headers(with_version=False)
        with backend_errors("initialize"):
            timeout = self._client_timeout(total=True)
            resp = await self._send("POST", self._url, what="initialize", json=body, headers=headers, timeout=timeout)
            async with resp:
                if resp.status >= 300:
                    raise BackendUnavailable("bad_status", f"initialize answered HTTP {resp.status}")
                sid = resp.headers.get("Mcp-Session-Id")
                if sid is not None and not (sid.isascii() and sid.isprintable() and " " not in sid):
                    raise BackendUnavailable("malformed_response", "invalid Mcp-Session-Id")
                self._session_id = sid
                final = await self._single_response(resp, 0)
        self._accept_initialize(final)
        answered = self._get_answered = asyncio.get_running_loop().create_future()
        self._get_task = self._tasks.spawn(self._standalone_stream(), name="legacy-get-stream")
        # Servers drop requests meant for the standalone stream while it is not open (mcp 1.x and
        # the TypeScript SDK both send roots/list only there): do not go on before it is.
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(self._timeout, 5.0)):
                    await answered
        finally:
            self._get_answered = None
        await self.notify("notifications/initialized")
        await self._ping_after_initialize()

    async def _end_transport(self) -> None:
        """Stop the GET stream first (the DELETE ends it on the backend's side, which its reader
        would take for a dropped stream), then DELETE the session (best effort) and release the
        answered streams still waiting for their end; the calls' streams are cancelled after it,
        with the session's other tasks."""
        if self._get_task is not None:
            self._get_task.cancel()
            await asyncio.wait([self._get_task])
        if self._session_id is not None and not self._http.closed:
            with contextlib.suppress(Exception):
                resp = await self._send(
                    "DELETE", self._url, what="close", headers=self._headers(), timeout=aiohttp.ClientTimeout(total=5)
                )
                resp.release()
        for answered in list(self.ending):  # their connections are not kept past the session
            answered.release()
        self.ending.clear()

    # -- requests ---------------------------------------------------------------------------

    async def start(
        self,
        method: str,
        params: JsonObj,
        headers: dict[str, str],
        *,
        owner: bool = False,
        answer_timeout: float | None = None,
    ) -> Exchange:
        request_id = next(self._ids)
        exchange = self._new_exchange(request_id, method)
        body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        # The lease holder owns the session before the POST leaves: servers (the TypeScript SDK) run
        # the tool before they send the response headers, and its requests on the GET stream are
        # this call's.
        self._own(exchange, owner)
        if answer_timeout is not None:
            # A JSON-mode server sends no header until the tool has finished: wait in the background.
            exchange.reader = self._tasks.spawn(
                self._answer(body, headers, exchange, answer_timeout), name="legacy-call"
            )
            return exchange
        try:
            resp = await self._post(body, headers, what=method)
        except BaseException:  # cancelled too: a request that was never sent owns nothing
            self._disown(exchange)
            raise
        if isinstance(resp, FinalResponse):
            exchange.push(resp)
            return exchange
        if resp.headers.get("Content-Type", "").startswith("text/event-stream"):
            # the reader owns (and releases) the response from here on
            exchange.reader = self._tasks.spawn(CallStream(self, resp, exchange).run(), name="legacy-call")
            return exchange
        try:
            with backend_errors(method):
                exchange.push(await self._single_response(resp, request_id))
        finally:
            resp.release()
        return exchange

    async def _answer(self, body: JsonObj, headers: dict[str, str], exchange: Exchange, timeout: float) -> None:
        """POST a call that may become a task and read its answer into ``exchange``, waiting up to
        ``timeout`` for the response headers; a failure is the exchange's."""
        method = str(body["method"])
        try:
            resp = await self._post(body, headers, what=method, header_timeout=timeout)
            if isinstance(resp, FinalResponse):
                exchange.push(resp)
            elif resp.headers.get("Content-Type", "").startswith("text/event-stream"):
                await CallStream(self, resp, exchange).run()  # it releases the response
            else:
                try:
                    with backend_errors(method):
                        exchange.push(await self._single_response(resp, body["id"]))
                finally:
                    resp.release()
        except SessionExpired:
            exchange.push(BackendUnavailable("session_lost", f"{method}: backend session expired"))
        except BackendUnavailable as exc:
            exchange.push(exc)

    async def _deliver(self, body: JsonObj, *, what: str) -> None:
        """POST a response or notification (no answer expected beyond 202)."""
        await self._post_expect_accepted(body, what=what)

    # -- internals --------------------------------------------------------------------------

    def _headers(self, *, with_version: bool = True, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The headers of a request to the backend: the route's, then ``extra`` (the caller's
        forwarded ones), then the protocol's, which neither may override. Without ``extra`` the
        dict is shared (built once per session state): the caller must not change it."""
        state = (self._session_id, self._version, with_version)
        cached = self._header_cache
        if cached is None or cached[0] != state:
            protocol = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
            if self._session_id is not None:
                protocol["Mcp-Session-Id"] = self._session_id
            if with_version and is_version_at_least(self._version, "2025-06-18"):
                protocol["MCP-Protocol-Version"] = self._version
            cached = self._header_cache = (state, protocol, {**self._base_headers, **protocol})
        if not extra:
            return cached[2]
        return {**self._base_headers, **extra, **cached[1]}

    async def _post(
        self, body: JsonObj, extra: dict[str, str], *, what: str, header_timeout: float | None = None
    ) -> aiohttp.ClientResponse | FinalResponse:
        """POST a request; returns the open response (caller releases), a JSON-RPC error, or raises.
        The response headers are awaited for ``backend.timeout``, or ``header_timeout`` when given."""
        with backend_errors(what):
            async with asyncio.timeout(self._timeout if header_timeout is None else header_timeout):
                resp = await self._send(
                    "POST",
                    self._url,
                    what=what,
                    json=body,
                    headers=self._headers(extra=extra),
                    timeout=self._client_timeout(total=False),
                )
            if resp.status == 404 and self._session_id is not None:
                resp.release()
                self._broken = True
                raise SessionExpired(self._session_id)
            if resp.status >= 500:
                resp.release()
                raise BackendUnavailable("bad_status", f"{what} answered HTTP {resp.status}")
            if resp.status >= 400:
                # A 4xx may carry a JSON-RPC error for our id (e.g. invalid params); otherwise it is
                # the backend refusing the gateway, which is not the client's fault either.
                try:
                    return await self._error_response(resp, body.get("id"), what)
                finally:
                    resp.release()
            return resp

    async def _error_response(self, resp: aiohttp.ClientResponse, request_id: Any, what: str) -> FinalResponse:
        try:
            async with asyncio.timeout(self._timeout):
                raw = await read_bounded(resp.content, _MAX_ERROR_BYTES, what=what)
            message = (await parse_messages(raw))[0]
            if "error" in message and message.get("id") in (request_id, None):
                return final_response(message)
        except (ValueError, BackendUnavailable, *CLIENT_FAILURES):
            pass
        raise BackendUnavailable("bad_status", f"{what} answered HTTP {resp.status}")

    async def _post_expect_accepted(self, body: JsonObj, *, what: str) -> None:
        with backend_errors(what):
            headers, timeout = self._headers(), self._client_timeout(total=True)
            resp = await self._send("POST", self._url, what=what, json=body, headers=headers, timeout=timeout)
            async with resp:
                if resp.status == 404 and self._session_id is not None:
                    self._broken = True
                    raise BackendUnavailable("session_lost", f"{what}: backend session expired")
                if resp.status not in (200, 202, 204):
                    raise BackendUnavailable("bad_status", f"{what} answered HTTP {resp.status}")

    @property
    def max_message_bytes(self) -> int:
        return self._limits.max_message_bytes

    async def _single_response(self, resp: aiohttp.ClientResponse, request_id: int | str) -> FinalResponse:
        """Read a JSON or SSE answer to a request that must not involve server requests."""
        ctype = resp.headers.get("Content-Type", "")
        if ctype.startswith("text/event-stream"):
            exchange = self._new_exchange(request_id, "")
            await CallStream(self, resp, exchange).run()
            while True:
                event = await exchange.next(self._timeout)
                if isinstance(event, FinalResponse):
                    return event
                if isinstance(event, ServerRequest):
                    exchange.unanswered(event)  # no call is there to ask it
        if not ctype.startswith("application/json"):
            raise BackendUnavailable("malformed_response", f"unexpected Content-Type {ctype or 'none'!r}")
        raw = await self._read_body(resp, what="response")
        for message in await parse_messages(raw):
            if message.get("id") == request_id and ("result" in message or "error" in message):
                return final_response(message)
        raise BackendUnavailable("malformed_response", "no response for our request id")

    async def resume(self, last_event_id: str) -> aiohttp.ClientResponse:
        with backend_errors("resume"):
            resp = await self._send(
                "GET",
                self._url,
                what="resume",
                headers={**self._headers(), "Accept": "text/event-stream", "Last-Event-ID": last_event_id},
                timeout=self._client_timeout(total=False),
            )
            if resp.status != 200:
                resp.release()
                raise BackendUnavailable("stream_closed", f"resume answered HTTP {resp.status}")
            return resp

    async def dispatch_event(self, data: str, exchange: Exchange | None) -> None:
        """Route the JSON-RPC messages of one SSE event (``exchange``: the stream's own, if any)."""
        messages = await parse_messages(data)
        size = message_size(data, len(messages))
        for message in messages:
            await self._dispatch(message, exchange, size)

    def _tell_get_answered(self) -> None:
        answered = self._get_answered
        if answered is not None and not answered.done():
            answered.set_result(None)

    async def _standalone_stream(self) -> None:
        """Keep the session's GET stream open and dispatch what arrives.

        Bounded like every backend stream (event size, see :func:`~gateway.legacy.wire.sse_events`)
        and also by silence: after ``stream_idle_timeout`` without a byte it is reopened. Reopening
        waits a jittered, doubling backoff, and gives up after ``stream_reconnects`` consecutive
        openings that were of no use: that delivered no message, or broke a bound or sent garbage
        (a stream that floods comments, sends one endless line or garbage counts as failing however
        often the backend answers 200, and whatever it sent before). A stream that was
        merely quiet for the whole idle period neither counts as a failure nor as a success
        (servers send nothing on it for hours, and it costs nothing while it waits).
        """
        limits = self._limits
        failures = 0
        while not self._closed and failures < limits.stream_reconnects:
            delivered = idle = abused = False
            try:
                with backend_errors("GET stream"):
                    resp = await self._send(
                        "GET",
                        self._url,
                        what="GET stream",
                        headers={**self._headers(), "Accept": "text/event-stream"},
                        timeout=self._client_timeout(total=False),
                    )
                    async with resp:
                        self._tell_get_answered()
                        if resp.status in (404,):
                            self._broken = True
                            return
                        ctype = resp.headers.get("Content-Type", "")
                        if resp.status != 200 or not ctype.startswith("text/event-stream"):
                            return  # 405: the server offers no standalone stream
                        events = sse_events(
                            resp, max_event_bytes=limits.max_message_bytes, idle_timeout=limits.stream_idle_timeout
                        )
                        try:
                            async for event in events:
                                if event.data and event.event == "message":
                                    await self.dispatch_event(event.data, None)
                                    delivered = True
                        except TimeoutError:
                            idle = True  # silent past stream_idle_timeout: reopen it
            except asyncio.CancelledError:
                raise
            except BackendUnavailable as exc:
                # deny-on-error: a broken GET stream only loses unsolicited messages
                abused = exc.reason == "malformed_response"
                log.info("backend GET stream dropped", reason=exc.reason, detail=exc.detail)
            except Exception as exc:  # deny-on-error: as above, for what the dispatch itself raises
                log.info("backend GET stream dropped", reason="transport_error", detail=type(exc).__name__)
            self._tell_get_answered()  # never keep open() waiting on a stream that failed
            if delivered and not abused:
                failures = 0
            elif not idle:
                failures += 1
            await asyncio.sleep(jittered(min(0.2 * 2**failures, 5)))
        if failures >= limits.stream_reconnects:
            log.warning("backend GET stream given up", reconnects=failures)
