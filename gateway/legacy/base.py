"""What every handshake-era transport shares: the session state, the ``initialize`` check, and how
one backend message is routed.

:class:`LegacySessionBase` holds what a session is regardless of how bytes travel - offered and
negotiated revision, ``initialize`` result, broken flag, the attached (leased) exchange - and
:meth:`LegacySessionBase._dispatch`, the one place that decides where a backend message goes: a
response to the exchange it answers, a server request to the exchange it belongs to (or to the
lease holder), ``ping`` answered on the spot, notifications to the exchange and to the
``notification_sink``. Streamable HTTP (:mod:`gateway.legacy.streamable_http`), HTTP+SSE
(:mod:`gateway.legacy.http_sse`) and stdio (:mod:`gateway.legacy.stdio`) differ only in which
exchange they pass in. :class:`~gateway.legacy.demux.DemuxedSession` adds what the single-stream
transports share, :class:`~gateway.legacy.http_base.HttpSessionBase` what the two HTTP transports
share (client, URL, headers, timeouts, redirects).

A session owns every task it starts - its streams' readers, each call's answer reader, its answers
to server requests nobody else will answer - in one :class:`~gateway.owned.TaskGroup`, and ends
them all when it closes: ``async with session:`` opens it and closes it, and :meth:`close` (once,
whoever calls it first) ends the transport, then the group. :func:`route_options` is what each
transport's session takes from its route. What becomes of a server request no call owns (kept for
the next interactive call, answered, or refused) is :class:`~gateway.legacy.unclaimed.UnclaimedRequests`.

How bytes on the wire become messages, and foreign failures become
:class:`~gateway.errors.BackendUnavailable`, lives in :mod:`gateway.legacy.wire`.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import itertools
import time
from types import TracebackType
from typing import Self, TypedDict

import structlog
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION

from gateway.config.model import RouteConfig
from gateway.errors import BackendUnavailable
from gateway.legacy.limits import BackendLimits, BoundedExchange
from gateway.legacy.session import (
    UNCLAIMED_STALL,
    Exchange,
    FinalResponse,
    JsonObj,
    ServerNotification,
    ServerRequest,
    SessionExpired,
    Unclaimed,
    expiry_answer,
)
from gateway.legacy.unclaimed import UnclaimedRequests
from gateway.legacy.wire import final_response
from gateway.owned import TaskGroup

__all__ = ["CLIENT_INFO", "LegacySessionBase", "SessionOptions", "route_options"]

log = structlog.get_logger("gateway.legacy")

CLIENT_INFO: JsonObj = {"name": "mrtr-gateway", "version": "0.1.0"}


class SessionOptions(TypedDict):
    capabilities: JsonObj
    timeout: float
    connect_timeout: float
    offer_version: str | None
    limits: BackendLimits


def route_options(route: RouteConfig, capabilities: JsonObj) -> SessionOptions:
    """What every transport's session takes from its route: the handshake's ``capabilities`` (the
    client's, in the revision offered), the backend's timeouts, pinned revision and limits."""
    backend = route.backend
    return {
        "capabilities": capabilities,
        "timeout": backend.timeout,
        "connect_timeout": backend.connect_timeout,
        "offer_version": backend.protocol_version,
        "limits": BackendLimits(**backend.limits.model_dump()),
    }


class LegacySessionBase(UnclaimedRequests):
    """State and message routing shared by every handshake-era transport (HTTP or stdio).

    The session classes declare their attributes in ``__slots__``: a held call keeps its session for
    minutes, and a session's attribute dict (over 30 names, so not shared between instances) cost
    1.5 KiB of the ~43 KiB per held call against mcp 1.30.0 (``bench.holds --legacy``). Sessions are
    weakly referenced (:mod:`gateway.mcptasks.passthrough`), hence ``__weakref__``.
    """

    __slots__ = (
        "__weakref__",
        "_attached",
        "_broken",
        "_capabilities",
        "_closed",
        "_connect_timeout",
        "_ids",
        "_init_result",
        "_limits",
        "_offer",
        "_self_answering",
        "_tasks",
        "_timeout",
        "_uncarried",
        "_version",
        "keep_unclaimed",
        "notification_sink",
        "self_answers",
    )

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
        """One future per answer from ``self_answers`` on its way (``_ping_after_initialize`` waits for them)."""
        self.keep_unclaimed = True
        """False for a session no interactive call will ever lease (a listener): refuse them at once."""
        self._uncarried: dict[Exchange, float] = {}
        """Requests in flight that cannot carry a server request to a client (a list: any request but
        a lease holder's or a ``ping``), by when each was sent; see :meth:`_unblock`."""
        self._unblocking: asyncio.Task[None] | None = None
        self._stall = UNCLAIMED_STALL
        """How long such a request waits before the unclaimed ones are answered; 0 once one has."""
        self.notification_sink: asyncio.Queue[ServerNotification] | None = None
        self._tasks = TaskGroup("legacy-session")
        """Every task of the session: its stream readers (an exchange's :attr:`~Exchange.reader`
        too) and its answers to server requests whose call ended unread. :meth:`close` ends them."""
        self._init_transport()

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def open(self) -> None:
        """The handshake (:meth:`_handshake`); a session that fails to open is closed."""
        try:
            await self._handshake()
        except BaseException:  # cancelled too: a half-open session keeps no stream, task or process
            await self.close()
            raise

    @abc.abstractmethod
    async def _handshake(self) -> None:
        """Open the transport (a stdio session first starts its process) and do the handshake."""

    async def close(self) -> None:
        """End the transport (:meth:`_end_transport`), then every task the session still has."""
        if self._closed:
            return
        self._closed = True
        try:
            await self._end_transport()
        finally:
            await self._tasks.aclose()

    @abc.abstractmethod
    async def _end_transport(self) -> None:
        """Close what carries the session's messages (a stream, a process, the backend's session)."""

    @abc.abstractmethod
    def _init_transport(self) -> None:
        """Transport-specific state; subclasses set theirs here instead of overriding __init__."""

    @abc.abstractmethod
    async def start(
        self,
        method: str,
        params: JsonObj,
        headers: dict[str, str],
        *,
        owner: bool = False,
        answer_timeout: float | None = None,
    ) -> Exchange:
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
        exchange = BoundedExchange(request_id=request_id, method=method, limits=self._limits, on_flood=self._flooded)
        exchange.fence_ping, exchange.fence_group = self.ping_round_trip, self._tasks
        exchange.on_unread = self._unread
        return exchange

    def _unread(self, request: ServerRequest) -> None:
        """A server request attributed to a call that ended without reading or answering it (queued
        at its end, or sent on the call's own stream after its answer): answered here (from
        ``self_answers`` when the route gave one, else an elicitation cancelled and anything else a
        JSON-RPC error), with a log line, so the server is never left waiting and nothing is lost
        silently."""
        log.info("server_request_unanswered", method=request.method, reason="its call ended first")
        self._tasks.spawn(self._answer_unread(request), name="legacy-answer-unread")

    async def _answer_unread(self, request: ServerRequest) -> None:
        await self._answer_itself(request, expiry_answer(request.method, "The request this belongs to has ended"))

    async def ping_round_trip(self) -> None:
        """One ``ping`` sent and answered: the backend has run what it had ready before (how a
        round knows it is complete, see :meth:`~gateway.legacy.session.Exchange.poll`). Anything
        else that arrives on the ping's own stream goes to the lease holder."""
        exchange = await self.start("ping", {}, {})
        try:
            while not isinstance(event := await exchange.next(self._timeout), FinalResponse):
                if self._attached is not None:
                    self._attached.push(event)
                elif isinstance(event, ServerRequest):
                    exchange.unanswered(event)
        finally:
            exchange.close_nowait()

    def _flooded(self, detail: str) -> None:
        self._broken = True
        log.warning("backend_flood", detail=detail)

    def _own(self, exchange: Exchange, owner: bool) -> None:
        """Attach the lease holder's exchange before its request leaves (see ``start``). Any other
        request but a ``ping`` cannot carry a server request to a client: it is watched while
        requests are kept unclaimed (:meth:`_unblock`)."""
        if owner:
            self._attached = exchange
        elif exchange.method != "ping" and self.keep_unclaimed:
            self._uncarried = {e: t for e, t in self._uncarried.items() if not (e.done or e.answered)}
            self._uncarried[exchange] = time.monotonic()
            if self._unclaimed:
                self._watch_unclaimed()

    def _disown(self, exchange: Exchange) -> None:
        """The request was never sent: whatever it owned is unowned again."""
        self._uncarried.pop(exchange, None)
        if self._attached is exchange:
            self._attached = None

    async def _ping_after_initialize(self) -> None:
        """After ``notifications/initialized``, one ``ping`` round trip: a server that asks something as
        soon as it is initialized (``roots/list``) has sent it before it answers the ping, so it is
        kept as unclaimed (or answered from ``self_answers``, and that answer delivered) before the
        session is first leased. Best effort and bounded."""
        try:
            async with asyncio.timeout(min(self._timeout, 5.0)):
                exchange = await self.start("ping", {}, {})
                try:
                    while not isinstance(event := await exchange.next(self._timeout), FinalResponse):
                        if isinstance(event, ServerRequest):
                            await self._unowned(event)  # nobody holds the session yet
                finally:
                    exchange.close_nowait()
                if self._self_answering:
                    await asyncio.wait(self._self_answering)
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
                if not isinstance(request_id, str | int) or isinstance(request_id, bool):
                    raise ValueError("malformed JSON-RPC request id")  # MCP: a string or an integer
                if method == "ping":
                    await self.respond(request_id, result={})
                    return
                if exchange is not None:
                    # On the exchange's own stream: its call's, even once the call has its answer
                    # (then the session answers it, see Exchange.unanswered).
                    _push(exchange, ServerRequest(request_id, method, params), size)
                    return
                if self._attached is None or self._attached.done:
                    await self._unowned(ServerRequest(request_id, method, params))
                    return
                _push(self._attached, ServerRequest(request_id, method, params), size)
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
