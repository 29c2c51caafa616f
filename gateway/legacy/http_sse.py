"""The gateway as a 2024-11-05 HTTP+SSE client (the deprecated transport some servers still speak).

One :class:`HttpSseSession` is one backend session, and one long-lived ``GET`` stream is its whole
back channel:

1. ``GET <sse url>`` (``Accept: text/event-stream``); the first event, ``endpoint``, names the
   URI to POST to. It is resolved against the SSE URL and refused unless it has the same origin
   (scheme, host, port): the gateway would otherwise send the client's credentials wherever the
   backend points (``endpoint_cross_origin``). Redirects of the GET and of the POSTs are
   followed only within that origin (``redirect_refused`` otherwise, see
   :meth:`~gateway.legacy.http_base.HttpSessionBase._send`).
2. Every client message - requests, notifications, answers to server requests - is its own
   ``POST`` to that endpoint, answered ``202`` (or 200/204) with no JSON-RPC content.
3. Every server message - responses, server requests, notifications - arrives as a ``message``
   event on the one stream. A single reader task demultiplexes them: responses by JSON-RPC id
   to the waiting :class:`~gateway.legacy.session.Exchange`, server requests to the attached
   exchange (the lease holder), ``ping`` answered on the spot, notifications to the attached
   exchange and to ``notification_sink``. Nothing else ties a server request to a call here,
   which is why the lease matters: the lease holder is attached before its POST is sent, so a
   request that overtakes the ``202`` of the call's POST is still the call's; one that arrives
   while no call holds the lease is kept unclaimed for the next (see ``gateway.legacy.session``).

There is no session header, no version header, no resumability: if the stream ends or breaks,
every exchange in flight fails with ``stream_closed`` (``malformed_response`` when the backend
sent garbage) and the session is broken for good; the pool opens a new one. ``close()`` ends the
stream; there is no ``DELETE``.
"""

from __future__ import annotations

import asyncio

import structlog
from yarl import URL

from gateway.errors import BackendUnavailable
from gateway.legacy.demux import DemuxedSession
from gateway.legacy.http_base import HttpSessionBase
from gateway.legacy.session import JsonObj, SessionExpired
from gateway.legacy.wire import backend_errors, message_size, parse_messages, sse_events

log = structlog.get_logger("gateway.legacy")

_ACCEPTED = (200, 202, 204)


def resolve_endpoint(sse_url: str, data: str) -> URL:
    """The POST endpoint an ``endpoint`` event names, if it is on the SSE URL's origin."""
    raw = data.strip()
    if not raw:
        raise BackendUnavailable("malformed_response", "empty endpoint event")
    base = URL(sse_url)
    try:
        target = base.join(URL(raw)).with_fragment(None)
    except ValueError as exc:
        raise BackendUnavailable("malformed_response", f"endpoint event: {exc}") from exc
    if (target.scheme, target.host, target.port) != (base.scheme, base.host, base.port):
        raise BackendUnavailable("endpoint_cross_origin", "the endpoint event names another origin")
    return target


class HttpSseSession(HttpSessionBase, DemuxedSession):
    """One handshake-era session on an HTTP+SSE (2024-11-05) backend."""

    def _init_transport(self) -> None:
        self._endpoint: URL | None = None
        self._init_demux()

    @property
    def session_id(self) -> str | None:
        """The session named in the endpoint's query (``session_id``/``sessionId``), if any."""
        if self._endpoint is None:
            return None
        return self._endpoint.query.get("session_id") or self._endpoint.query.get("sessionId")

    @property
    def endpoint(self) -> str | None:
        return None if self._endpoint is None else str(self._endpoint)

    # -- lifecycle --------------------------------------------------------------------------

    async def _handshake(self) -> None:
        """GET stream → ``endpoint`` event → initialize → notifications/initialized → ping
        (``_ping_after_initialize``)."""
        endpoint: asyncio.Future[URL] = asyncio.get_running_loop().create_future()
        self._tasks.spawn(self._read_stream(endpoint), name="legacy-sse-stream")
        try:
            async with asyncio.timeout(self._timeout):
                self._endpoint = await endpoint
        except TimeoutError:
            raise BackendUnavailable("timeout", f"no endpoint event within {self._timeout:g}s") from None
        init = self._register(0, "initialize")
        await self._post(self._initialize_body(), {}, what="initialize")
        self._accept_initialize(await self._initialize_answer(init))
        await self.notify("notifications/initialized")
        await self._ping_after_initialize()

    async def _end_transport(self) -> None:
        """Nothing before the reader is cancelled with the session's other tasks: that closes the
        stream and fails whatever is still in flight. (There is no ``DELETE``.)"""

    # -- requests ---------------------------------------------------------------------------

    async def _send_request(self, body: JsonObj, headers: dict[str, str], *, what: str) -> None:
        await self._post(body, headers, what=what, expiry_is_retryable=True)

    async def _deliver(self, body: JsonObj, *, what: str) -> None:
        """POST a response or notification (no answer expected beyond 202)."""
        await self._post(body, {}, what=what)

    # -- internals --------------------------------------------------------------------------

    async def _post(
        self,
        body: JsonObj,
        extra: dict[str, str],
        *,
        what: str,
        expiry_is_retryable: bool = False,
    ) -> None:
        """POST one message to the endpoint; the answer to it (if any) comes on the stream."""
        if self._failure is not None:
            raise BackendUnavailable(*self._failure)
        if self._endpoint is None:
            raise BackendUnavailable("stream_closed", f"{what}: the session has no endpoint")
        headers = {**self._base_headers, **extra, "Content-Type": "application/json"}
        with backend_errors(what):
            resp = await self._send(
                "POST", self._endpoint, what=what, json=body, headers=headers, timeout=self._client_timeout(total=True)
            )
            async with resp:
                if resp.status == 404:
                    # The backend forgot the session (restart, its own idle timeout).
                    self._broken = True
                    if expiry_is_retryable:
                        raise SessionExpired(self.session_id or "")
                    raise BackendUnavailable("session_lost", f"{what}: backend session expired")
                if resp.status not in _ACCEPTED:
                    raise BackendUnavailable("bad_status", f"{what} answered HTTP {resp.status}")

    async def _read_stream(self, endpoint: asyncio.Future[URL]) -> None:
        """Own the GET stream: resolve the endpoint, then route every message until it ends."""
        failure = BackendUnavailable("stream_closed", "the backend closed the SSE stream")
        try:
            with backend_errors("sse stream"):
                resp = await self._send(
                    "GET",
                    self._url,
                    what="SSE GET",
                    headers={**self._base_headers, "Accept": "text/event-stream"},
                    timeout=self._client_timeout(total=False),
                )
                async with resp:
                    if resp.status != 200:
                        raise BackendUnavailable("bad_status", f"SSE GET answered HTTP {resp.status}")
                    ctype = resp.headers.get("Content-Type", "")
                    if not ctype.startswith("text/event-stream"):
                        raise BackendUnavailable("malformed_response", f"SSE GET answered {ctype or 'none'!r}")
                    async for event in sse_events(resp, max_event_bytes=self._limits.max_message_bytes):
                        if not endpoint.done():
                            if event.event == "endpoint":
                                endpoint.set_result(resolve_endpoint(self._url, event.data))
                            elif event.event == "message" and event.data:
                                raise ValueError("message event before the endpoint event")
                            continue
                        if event.event == "message" and event.data:
                            messages = await parse_messages(event.data)
                            size = message_size(event.data, len(messages))
                            for message in messages:
                                await self._route(message, size)
        except asyncio.CancelledError:
            failure = BackendUnavailable("stream_closed", "the session was closed")
            raise
        except BackendUnavailable as exc:
            failure = exc
        except Exception as exc:  # deny-on-error: whatever broke the stream, the session is over
            failure = BackendUnavailable("transport_error", f"sse stream: {type(exc).__name__}")
        finally:
            self._fail(failure, endpoint)

    def _fail(self, failure: BackendUnavailable, endpoint: asyncio.Future[URL]) -> None:
        if not endpoint.done():
            endpoint.set_exception(failure)
        self._fail_inflight(failure, "SSE")
