"""What every handshake-era transport shares: the session state, the ``initialize`` check, and how
one backend message is routed.

:class:`LegacySessionBase` holds what a session is regardless of how bytes travel - offered and
negotiated revision, ``initialize`` result, broken flag, the attached (leased) exchange - and
:meth:`LegacySessionBase._dispatch`, the one place that decides where a backend message goes: a
response to the exchange it answers, a server request to the exchange it belongs to (or to the
lease holder), ``ping`` answered on the spot, notifications to the exchange and to the
``notification_sink``. Streamable HTTP (:mod:`gateway.legacy.streamable_http`), HTTP+SSE
(:mod:`gateway.legacy.http_sse`) and stdio (:mod:`gateway.legacy.stdio`) differ only in which
exchange they pass in. :class:`HttpSessionBase` adds what the two HTTP transports share (client,
URL, headers, timeouts).

Foreign failures (aiohttp errors, timeouts, bad bodies) are translated to
:class:`~gateway.errors.BackendUnavailable` in :func:`backend_errors`, the only place that knows
aiohttp's exception tree.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import io
import itertools
import json
import random
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import structlog
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION
from yarl import URL

from gateway.errors import BackendUnavailable
from gateway.legacy.limits import BackendLimits, BoundedExchange
from gateway.legacy.session import (
    CLAIMABLE_METHODS,
    MAX_UNCLAIMED,
    Exchange,
    FinalResponse,
    JsonObj,
    ServerNotification,
    ServerRequest,
    SessionExpired,
    Unclaimed,
)
from gateway.legacy.sse import DEFAULT_MAX_EVENT_BYTES, SSEEvent, SSEParser

log = structlog.get_logger("gateway.legacy")

CLIENT_INFO: JsonObj = {"name": "mrtr-gateway", "version": "0.1.0"}


@contextlib.contextmanager
def backend_errors(what: str) -> Iterator[None]:
    """Map every foreign failure while talking to the backend onto BackendUnavailable."""
    try:
        yield
    except BackendUnavailable:
        raise
    except SessionExpired:
        raise
    except aiohttp.ClientConnectorError as exc:
        raise BackendUnavailable("connect_failed", f"{what}: {exc.os_error or exc}") from exc
    except (aiohttp.ServerTimeoutError, TimeoutError) as exc:
        raise BackendUnavailable("timeout", f"{what}: timed out") from exc
    except aiohttp.ClientPayloadError as exc:
        raise BackendUnavailable("stream_broken", f"{what}: {exc}") from exc
    except aiohttp.ClientError as exc:
        raise BackendUnavailable("transport_error", f"{what}: {type(exc).__name__}") from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise BackendUnavailable("malformed_response", f"{what}: {exc}") from exc


def jittered(seconds: float) -> float:
    """``seconds`` spread over [50 %, 100 %], so sessions dropped together do not come back together."""
    return seconds * (0.5 + random.random() / 2)  # noqa: S311 - jitter, not a secret


def jsonrpc_messages(payload: Any) -> list[JsonObj]:
    """Backend bodies are one JSON-RPC message or (2025-03-26) a batch of them."""
    items = payload if isinstance(payload, list) else [payload]
    out = [m for m in items if isinstance(m, dict) and m.get("jsonrpc") == "2.0"]
    if len(out) != len(items) or not out:
        raise ValueError("not a JSON-RPC message")
    return out


def final_response(message: JsonObj) -> FinalResponse:
    if "error" in message:
        error = message["error"]
        if not isinstance(error, dict):
            raise ValueError("malformed JSON-RPC error")
        return FinalResponse(error=error)
    result = message.get("result")
    if not isinstance(result, dict):
        raise ValueError("malformed JSON-RPC result")
    return FinalResponse(result=result)


SSE_SLICE_BYTES = 4 * 1024
"""Bytes parsed between two checks of how long the event loop has been held."""
LOOP_HOLD_SECONDS = 0.002
"""Parsing yields to the event loop once it has held it this long (one slice may overshoot)."""


async def sse_events(
    resp: aiohttp.ClientResponse,
    *,
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
    idle_timeout: float | None = None,
) -> AsyncIterator[SSEEvent]:
    """The events of one backend SSE response, without ever holding the event loop for long.

    Chunks are parsed in slices of :data:`SSE_SLICE_BYTES`; once parsing has held the loop for
    :data:`LOOP_HOLD_SECONDS` it yields (``sleep(0)``), so a flood of tiny lines or one huge event
    costs other requests a few milliseconds at most. ``idle_timeout`` bounds the silence between
    two reads (``TimeoutError``); the parser bounds the bytes between two events
    (:class:`~gateway.legacy.sse.SSELimitError`).
    """
    parser = SSEParser(max_event_bytes)
    loop = asyncio.get_running_loop()
    held_since = loop.time()
    while True:
        if idle_timeout is None:
            chunk = await resp.content.readany()
        else:
            async with asyncio.timeout(idle_timeout):
                chunk = await resp.content.readany()
        if not chunk:
            return
        for offset in range(0, len(chunk), SSE_SLICE_BYTES):
            for event in parser.feed(chunk[offset : offset + SSE_SLICE_BYTES]):
                yield event
            if loop.time() - held_since > LOOP_HOLD_SECONDS:
                await asyncio.sleep(0)
                held_since = loop.time()


class LegacySessionBase(abc.ABC):
    """State and message routing shared by every handshake-era transport (HTTP or stdio)."""

    def __init__(
        self,
        *,
        capabilities: JsonObj,
        timeout: float,
        connect_timeout: float,
        offer_version: str | None = None,
        limits: BackendLimits | None = None,
    ) -> None:
        self._limits = limits or BackendLimits()
        self._capabilities = capabilities
        self._timeout = timeout
        self._connect_timeout = connect_timeout
        self._offer = offer_version or LATEST_HANDSHAKE_VERSION
        self._ids = itertools.count(1)
        self._version = self._offer
        self._init_result: JsonObj = {}
        self._broken = False
        self._attached: Exchange | None = None
        self._closed = False
        self._unclaimed: list[Unclaimed] = []
        self.self_answers: dict[str, JsonObj] = {}
        """Results the gateway itself gives to unowned server requests, by method (a route's roots)."""
        self._self_answering: set[asyncio.Future[None]] = set()
        self.keep_unclaimed = True
        """False for a session no interactive call will ever lease (a listener): refuse them at once."""
        self.notification_sink: asyncio.Queue[ServerNotification] | None = None
        self._init_transport()

    @abc.abstractmethod
    def _init_transport(self) -> None:
        """Transport-specific state; subclasses set theirs here instead of overriding __init__."""

    @abc.abstractmethod
    async def start(self, method: str, params: JsonObj, headers: dict[str, str], *, owner: bool = False) -> Exchange:
        """Send a request (see :class:`~gateway.legacy.session.BackendSession`)."""

    @abc.abstractmethod
    async def _deliver(self, body: JsonObj, *, what: str) -> None:
        """Send a message that expects no JSON-RPC answer (transport-specific)."""

    async def respond(
        self, request_id: str | int, *, result: JsonObj | None = None, error: JsonObj | None = None
    ) -> None:
        """Answer a server request (``result`` or ``error``)."""
        body: JsonObj = {"jsonrpc": "2.0", "id": request_id}
        if error is not None:
            body["error"] = error
        else:
            body["result"] = result if result is not None else {}
        await self._deliver(body, what="response")

    async def notify(self, method: str, params: JsonObj | None = None) -> None:
        body: JsonObj = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            body["params"] = params
        await self._deliver(body, what=method)

    # -- properties -------------------------------------------------------------------------

    @property
    def protocol_version(self) -> str:
        return self._version

    @property
    def initialize_result(self) -> JsonObj:
        return self._init_result

    @property
    def broken(self) -> bool:
        return self._broken or self._closed

    def attach(self, exchange: Exchange | None) -> None:
        self._attached = exchange

    def _new_exchange(self, request_id: int | str, method: str) -> BoundedExchange:
        """An exchange bounded by the route's limits; crossing one breaks this session."""
        return BoundedExchange(request_id=request_id, method=method, limits=self._limits, on_flood=self._flooded)

    def _flooded(self, detail: str) -> None:
        self._broken = True
        log.warning("backend_flood", detail=detail)

    def _own(self, exchange: Exchange, owner: bool) -> None:
        """Attach the lease holder's exchange before its request leaves (see ``start``)."""
        if owner:
            self._attached = exchange

    def _disown(self, exchange: Exchange) -> None:
        """The request was never sent: whatever it owned is unowned again."""
        if self._attached is exchange:
            self._attached = None

    # -- server requests no call owns ------------------------------------------------------------

    async def _unowned(self, request: ServerRequest) -> None:
        """Answer it from ``self_answers``, keep it for the next interactive call, or refuse it."""
        answer = self.self_answers.get(request.method)
        if answer is not None:
            task = asyncio.ensure_future(self.respond(request.id, result=answer))
            self._self_answering.add(task)  # _settle waits for it: the server has it before a call
            task.add_done_callback(self._self_answering.discard)
            await task
            return
        if self.keep_unclaimed and request.method in CLAIMABLE_METHODS and len(self._unclaimed) < MAX_UNCLAIMED:
            self._unclaimed.append(Unclaimed(request, time.monotonic()))
            log.info("server_request_unclaimed", method=request.method)
            return
        await self.respond(
            request.id, error={"code": -32601, "message": "No client request is in flight for this server request"}
        )

    def take_unclaimed(self) -> list[ServerRequest]:
        taken, self._unclaimed = self._unclaimed, []
        return [u.request for u in taken]

    def expired_unclaimed(self, older_than: float) -> list[ServerRequest]:
        expired = [u.request for u in self._unclaimed if u.since < older_than]
        self._unclaimed = [u for u in self._unclaimed if u.since >= older_than]
        return expired

    async def _settle(self) -> None:
        """After ``notifications/initialized``, one ``ping`` round trip: a server that asks something as
        soon as it is initialized (``roots/list``) has sent it before it answers the ping, so it is
        kept as unclaimed (or answered from ``self_answers``, and that answer delivered) before the
        session is first leased. Best effort and bounded."""
        try:
            async with asyncio.timeout(min(self._timeout, 5.0)):
                exchange = await self.start("ping", {}, {})
                try:
                    while not isinstance(await exchange.next(self._timeout), FinalResponse):
                        pass
                finally:
                    exchange.close_nowait()
                if self._self_answering:
                    await asyncio.gather(*self._self_answering, return_exceptions=True)
        except (TimeoutError, BackendUnavailable, SessionExpired) as exc:
            log.info("backend_ping_after_initialize_failed", error=type(exc).__name__)

    def mark_broken(self) -> None:
        self._broken = True

    # -- shared steps -----------------------------------------------------------------------

    def _initialize_body(self) -> JsonObj:
        params = {
            "protocolVersion": self._offer,
            "capabilities": self._capabilities,
            "clientInfo": CLIENT_INFO,
        }
        return {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}

    def _accept_initialize(self, final: FinalResponse) -> None:
        """Take the backend's InitializeResult, or refuse it (any handshake revision is accepted)."""
        if final.error is not None or final.result is None:
            raise BackendUnavailable("initialize_failed", str((final.error or {}).get("message", "")))
        version = final.result.get("protocolVersion")
        if version not in HANDSHAKE_PROTOCOL_VERSIONS:
            raise BackendUnavailable("unsupported_version", f"backend chose protocol version {version!r}")
        self._version = str(version)
        self._init_result = final.result

    async def _dispatch(self, message: JsonObj, exchange: Exchange | None, size: int = 0) -> None:
        """Route one backend message (``size`` bytes on the wire): our response, a server request,
        or a notification."""
        if "method" in message:
            method = message["method"]
            params = message.get("params") or {}
            if not isinstance(method, str) or not isinstance(params, dict):
                raise ValueError("malformed JSON-RPC message")
            if "id" in message:
                request_id = message["id"]
                if method == "ping":
                    await self.respond(request_id, result={})
                    return
                target = exchange if exchange is not None else self._attached
                if target is None or target.done:
                    await self._unowned(ServerRequest(request_id, method, params))
                    return
                _push(target, ServerRequest(request_id, method, params), size)
                return
            notification = ServerNotification(method, params)
            if exchange is not None:
                _push(exchange, notification, size)
            elif self._attached is not None:
                _push(self._attached, notification, size)
            if self.notification_sink is not None:
                with contextlib.suppress(asyncio.QueueFull):
                    self.notification_sink.put_nowait(notification)
            return
        if exchange is not None and message.get("id") == exchange.request_id:
            exchange.push(final_response(message))


def _push(exchange: Exchange, event: ServerRequest | ServerNotification, size: int) -> None:
    if isinstance(exchange, BoundedExchange):
        exchange.push_sized(event, size)
    else:
        exchange.push(event)


def message_size(raw: str | bytes, count: int) -> int:
    """Wire bytes charged to each of ``count`` messages decoded from ``raw`` (a batch shares them)."""
    return len(raw) // max(count, 1) + 1


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

    async def start(self, method: str, params: JsonObj, headers: dict[str, str], *, owner: bool = False) -> Exchange:
        request_id = next(self._ids)
        exchange = self._register(request_id, method)
        self._own(exchange, owner)
        body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        try:
            await self._send_request(body, headers, what=method)
        except BaseException:
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


MAX_REDIRECTS = 3
_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})


def _origin(url: URL) -> tuple[str, str | None, int | None]:
    return (url.scheme, url.host, url.port)


async def read_bounded(content: aiohttp.StreamReader, limit: int, *, what: str) -> bytes:
    """Every byte of a body up to ``limit`` (``readany`` until EOF; a single ``read(n)`` returns
    only what happens to be buffered)."""
    chunks: list[bytes] = []
    size = 0
    while chunk := await content.readany():
        size += len(chunk)
        if size > limit:
            raise BackendUnavailable("malformed_response", f"{what}: response over {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


class HttpSessionBase(LegacySessionBase):
    """What the two HTTP transports add: the shared client, the backend URL, the headers sent."""

    def __init__(
        self,
        http: aiohttp.ClientSession,
        url: str,
        *,
        capabilities: JsonObj,
        headers: dict[str, str],
        timeout: float,
        connect_timeout: float,
        offer_version: str | None = None,
        limits: BackendLimits | None = None,
    ) -> None:
        self._http = http
        self._url = url
        self._base_headers = dict(headers)
        super().__init__(
            capabilities=capabilities,
            timeout=timeout,
            connect_timeout=connect_timeout,
            offer_version=offer_version,
            limits=limits,
        )

    async def _send(self, method: str, url: str | URL, *, what: str, **kwargs: Any) -> aiohttp.ClientResponse:
        """One backend HTTP request; redirects are followed only within the backend URL's origin.

        The route's ``backend.headers`` and a forwarded ``Authorization`` were meant for the backend
        URL's origin: a redirect elsewhere fails with ``redirect_refused`` and nothing is sent
        there. Only 307/308 are followed (they keep the method and the body, which a JSON-RPC
        POST needs), at most :data:`MAX_REDIRECTS` times. The caller releases the response.
        """
        origin = _origin(URL(self._url))
        target = URL(url)
        body = kwargs.pop("json", None)
        encoded = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        for _ in range(MAX_REDIRECTS + 1):
            if encoded is not None:
                # a file-like body is written in pieces: a large argument never holds the event loop
                kwargs["data"] = io.BytesIO(encoded)
            resp = await self._http.request(method, target, allow_redirects=False, **kwargs)
            if resp.status not in _REDIRECT_STATUSES:
                return resp
            location = resp.headers.get("Location")
            resp.release()
            try:
                following = target.join(URL(location)) if location else None
            except ValueError:
                following = None
            if following is None or _origin(following) != origin:
                raise BackendUnavailable("redirect_refused", f"{what}: HTTP {resp.status} to another origin")
            if resp.status not in (307, 308):
                raise BackendUnavailable("bad_status", f"{what} answered HTTP {resp.status}")
            target = following.with_fragment(None)
        raise BackendUnavailable("bad_status", f"{what}: more than {MAX_REDIRECTS} redirects")

    async def _read_body(self, resp: aiohttp.ClientResponse, *, what: str) -> bytes:
        """A whole backend response body, at most ``max_message_bytes``, read within the timeout."""
        limit = self._limits.max_message_bytes
        if resp.content_length is not None and resp.content_length > limit:
            raise BackendUnavailable("malformed_response", f"{what}: response over {limit} bytes")
        async with asyncio.timeout(self._timeout):
            return await read_bounded(resp.content, limit, what=what)

    def _client_timeout(self, *, total: bool) -> aiohttp.ClientTimeout:
        if total:
            return aiohttp.ClientTimeout(total=self._timeout, connect=self._connect_timeout)
        return aiohttp.ClientTimeout(total=None, connect=self._connect_timeout, sock_connect=self._connect_timeout)
