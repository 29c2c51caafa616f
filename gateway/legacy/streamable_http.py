"""The gateway as a handshake-era streamable-HTTP client (2025-03-26, 2025-06-18, 2025-11-25).

One :class:`StreamableHttpSession` is one backend session: ``initialize`` with the capabilities of
the modern request that caused it, ``notifications/initialized``, then ``Mcp-Session-Id`` and
``MCP-Protocol-Version`` on every request. Request answers may be JSON or an SSE stream on which
the server also sends its own requests; a background reader per stream pushes what it reads into
the :class:`~gateway.legacy.session.Exchange`. A standalone GET stream is kept open per session
because servers send some requests there (mcp 1.30.0 sends ``roots/list`` on it).

Foreign failures (aiohttp errors, timeouts, bad status, bad bodies) are translated to
:class:`~gateway.errors.BackendUnavailable` in :func:`_backend_errors`, the only place that knows
aiohttp's exception tree.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import structlog
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION, is_version_at_least

from gateway.errors import BackendUnavailable
from gateway.legacy.session import (
    Exchange,
    FinalResponse,
    JsonObj,
    ServerNotification,
    ServerRequest,
    SessionExpired,
)
from gateway.legacy.sse import SSEParser

log = structlog.get_logger("gateway.legacy")

CLIENT_INFO: JsonObj = {"name": "mrtr-gateway", "version": "0.1.0"}
_MAX_JSON_BYTES = 32 * 1024 * 1024
_RESUME_ATTEMPTS = 3


@contextlib.contextmanager
def _backend_errors(what: str) -> Iterator[None]:
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


def _messages(payload: Any) -> list[JsonObj]:
    """Backend bodies are one JSON-RPC message or (2025-03-26) a batch of them."""
    items = payload if isinstance(payload, list) else [payload]
    out = [m for m in items if isinstance(m, dict) and m.get("jsonrpc") == "2.0"]
    if len(out) != len(items) or not out:
        raise ValueError("not a JSON-RPC message")
    return out


class StreamableHttpSession:
    """One handshake-era session on a streamable-HTTP backend."""

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
    ) -> None:
        self._http = http
        self._url = url
        self._capabilities = capabilities
        self._base_headers = dict(headers)
        self._timeout = timeout
        self._connect_timeout = connect_timeout
        self._offer = offer_version or LATEST_HANDSHAKE_VERSION
        self._ids = itertools.count(1)
        self._session_id: str | None = None
        self._version = self._offer
        self._init_result: JsonObj = {}
        self._broken = False
        self._attached: Exchange | None = None
        self._get_task: asyncio.Task[None] | None = None
        self._closed = False
        self.notification_sink: asyncio.Queue[ServerNotification] | None = None

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

    @property
    def session_id(self) -> str | None:
        return self._session_id

    # -- lifecycle --------------------------------------------------------------------------

    async def open(self) -> None:
        """initialize → notifications/initialized → standalone GET stream."""
        params = {
            "protocolVersion": self._offer,
            "capabilities": self._capabilities,
            "clientInfo": CLIENT_INFO,
        }
        body = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}
        headers = self._headers(with_version=False)
        with _backend_errors("initialize"):
            async with self._http.post(
                self._url, json=body, headers=headers, timeout=self._client_timeout(total=True)
            ) as resp:
                if resp.status >= 300:
                    raise BackendUnavailable("bad_status", f"initialize answered HTTP {resp.status}")
                sid = resp.headers.get("Mcp-Session-Id")
                if sid is not None and not (sid.isascii() and sid.isprintable() and " " not in sid):
                    raise BackendUnavailable("malformed_response", "invalid Mcp-Session-Id")
                self._session_id = sid
                final = await self._single_response(resp, 0)
        if final.error is not None or final.result is None:
            raise BackendUnavailable("initialize_failed", str((final.error or {}).get("message", "")))
        version = final.result.get("protocolVersion")
        if version not in HANDSHAKE_PROTOCOL_VERSIONS:
            raise BackendUnavailable("unsupported_version", f"backend chose protocol version {version!r}")
        self._version = str(version)
        self._init_result = final.result
        await self.notify("notifications/initialized")
        self._get_task = asyncio.create_task(self._standalone_stream(), name="legacy-get-stream")

    async def close(self) -> None:
        """Stop the GET stream and DELETE the session (best effort)."""
        if self._closed:
            return
        self._closed = True
        if self._get_task is not None:
            self._get_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._get_task
        if self._session_id is not None and not self._http.closed:
            with contextlib.suppress(Exception):
                async with self._http.delete(
                    self._url, headers=self._headers(), timeout=aiohttp.ClientTimeout(total=5)
                ):
                    pass

    def attach(self, exchange: Exchange | None) -> None:
        self._attached = exchange

    def mark_broken(self) -> None:
        self._broken = True

    # -- requests ---------------------------------------------------------------------------

    async def start(self, method: str, params: JsonObj, headers: dict[str, str]) -> Exchange:
        request_id = next(self._ids)
        exchange = Exchange(request_id=request_id, method=method)
        body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        resp = await self._post(body, headers, what=method)
        if isinstance(resp, FinalResponse):
            exchange.push(resp)
            return exchange
        if resp.headers.get("Content-Type", "").startswith("text/event-stream"):
            # the reader task owns (and releases) the response from here on
            exchange.reader = asyncio.create_task(self._read_call_stream(resp, exchange), name="legacy-call")
            return exchange
        try:
            exchange.push(await self._single_response(resp, request_id))
        finally:
            resp.release()
        return exchange

    async def respond(
        self, request_id: str | int, *, result: JsonObj | None = None, error: JsonObj | None = None
    ) -> None:
        body: JsonObj = {"jsonrpc": "2.0", "id": request_id}
        if error is not None:
            body["error"] = error
        else:
            body["result"] = result if result is not None else {}
        await self._post_expect_accepted(body, what="response")

    async def notify(self, method: str, params: JsonObj | None = None) -> None:
        body: JsonObj = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            body["params"] = params
        await self._post_expect_accepted(body, what=method)

    # -- internals --------------------------------------------------------------------------

    def _headers(self, *, with_version: bool = True, extra: dict[str, str] | None = None) -> dict[str, str]:
        headers = {
            **self._base_headers,
            **(extra or {}),
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
        }
        if self._session_id is not None:
            headers["Mcp-Session-Id"] = self._session_id
        if with_version and is_version_at_least(self._version, "2025-06-18"):
            headers["MCP-Protocol-Version"] = self._version
        return headers

    def _client_timeout(self, *, total: bool) -> aiohttp.ClientTimeout:
        if total:
            return aiohttp.ClientTimeout(total=self._timeout, connect=self._connect_timeout)
        return aiohttp.ClientTimeout(total=None, connect=self._connect_timeout, sock_connect=self._connect_timeout)

    async def _post(self, body: JsonObj, extra: dict[str, str], *, what: str) -> aiohttp.ClientResponse | FinalResponse:
        """POST a request; returns the open response (caller releases), a JSON-RPC error, or raises."""
        with _backend_errors(what):
            async with asyncio.timeout(self._timeout):
                resp = await self._http.post(
                    self._url,
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
        raw = await resp.content.read(64 * 1024)
        try:
            message = _messages(json.loads(raw))[0]
            if "error" in message and message.get("id") in (request_id, None):
                return _final(message)
        except ValueError:
            pass
        raise BackendUnavailable("bad_status", f"{what} answered HTTP {resp.status}")

    async def _post_expect_accepted(self, body: JsonObj, *, what: str) -> None:
        with _backend_errors(what):
            async with self._http.post(
                self._url, json=body, headers=self._headers(), timeout=self._client_timeout(total=True)
            ) as resp:
                if resp.status == 404 and self._session_id is not None:
                    self._broken = True
                    raise BackendUnavailable("session_lost", f"{what}: backend session expired")
                if resp.status not in (200, 202, 204):
                    raise BackendUnavailable("bad_status", f"{what} answered HTTP {resp.status}")

    async def _single_response(self, resp: aiohttp.ClientResponse, request_id: int | str) -> FinalResponse:
        """Read a JSON or SSE answer to a request that must not involve server requests."""
        ctype = resp.headers.get("Content-Type", "")
        if ctype.startswith("text/event-stream"):
            exchange = Exchange(request_id=request_id, method="")
            await self._read_call_stream(resp, exchange)
            while True:
                event = await exchange.next(self._timeout)
                if isinstance(event, FinalResponse):
                    return event
        if not ctype.startswith("application/json"):
            raise BackendUnavailable("malformed_response", f"unexpected Content-Type {ctype or 'none'!r}")
        raw = await resp.content.read(_MAX_JSON_BYTES + 1)
        if len(raw) > _MAX_JSON_BYTES:
            raise BackendUnavailable("malformed_response", "response too large")
        for message in _messages(json.loads(raw)):
            if message.get("id") == request_id and ("result" in message or "error" in message):
                return _final(message)
        raise BackendUnavailable("malformed_response", "no response for our request id")

    async def _read_call_stream(self, resp: aiohttp.ClientResponse, exchange: Exchange) -> None:
        """Pump one POST's SSE stream into ``exchange`` until the final response (resuming if cut)."""
        last_id: str | None = None
        retry_ms = 1000
        attempts = 0
        try:
            while True:
                try:
                    with _backend_errors(exchange.method or "request"):
                        async for event in self._events(resp):
                            if event.id:
                                last_id = event.id
                            if event.retry is not None:
                                retry_ms = event.retry
                            if not event.data or event.event != "message":
                                continue
                            for message in _messages(json.loads(event.data)):
                                await self._dispatch(message, exchange)
                            if exchange.answered:
                                return
                finally:
                    resp.release()
                if last_id is None or attempts >= _RESUME_ATTEMPTS:
                    raise BackendUnavailable("stream_closed", "the backend closed the stream before answering")
                attempts += 1
                await asyncio.sleep(min(retry_ms, 5000) / 1000)
                resp = await self._resume(last_id)
        except BackendUnavailable as exc:
            if exc.reason == "malformed_response":
                self._broken = True
            exchange.push(exc)
        except asyncio.CancelledError:
            raise

    async def _resume(self, last_event_id: str) -> aiohttp.ClientResponse:
        with _backend_errors("resume"):
            resp = await self._http.get(
                self._url,
                headers={**self._headers(), "Accept": "text/event-stream", "Last-Event-ID": last_event_id},
                timeout=self._client_timeout(total=False),
            )
            if resp.status != 200:
                resp.release()
                raise BackendUnavailable("stream_closed", f"resume answered HTTP {resp.status}")
            return resp

    async def _events(self, resp: aiohttp.ClientResponse) -> AsyncIterator[Any]:
        parser = SSEParser()
        async for chunk in resp.content.iter_any():
            for event in parser.feed(chunk):
                yield event

    async def _dispatch(self, message: JsonObj, exchange: Exchange | None) -> None:
        """Route one backend message: our response, a server request, or a notification."""
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
                    await self.respond(
                        request_id,
                        error={
                            "code": -32601,
                            "message": "No client request is in flight for this server request",
                        },
                    )
                    return
                target.push(ServerRequest(request_id, method, params))
                return
            notification = ServerNotification(method, params)
            if exchange is not None:
                exchange.push(notification)
            elif self._attached is not None:
                self._attached.push(notification)
            if self.notification_sink is not None:
                with contextlib.suppress(asyncio.QueueFull):
                    self.notification_sink.put_nowait(notification)
            return
        if exchange is not None and message.get("id") == exchange.request_id:
            exchange.push(_final(message))

    async def _standalone_stream(self) -> None:
        """Keep the session's GET stream open and dispatch what arrives (reconnect on drop)."""
        failures = 0
        while not self._closed and failures < 5:
            try:
                async with self._http.get(
                    self._url,
                    headers={**self._headers(), "Accept": "text/event-stream"},
                    timeout=self._client_timeout(total=False),
                ) as resp:
                    if resp.status in (404,):
                        self._broken = True
                        return
                    if resp.status != 200 or not resp.headers.get("Content-Type", "").startswith("text/event-stream"):
                        return  # 405: the server offers no standalone stream
                    failures = 0
                    async for event in self._events(resp):
                        if event.data and event.event == "message":
                            for message in _messages(json.loads(event.data)):
                                await self._dispatch(message, None)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # deny-on-error: a broken GET stream only loses unsolicited messages
                log.debug("backend GET stream dropped", error=type(exc).__name__)
            failures += 1
            await asyncio.sleep(min(0.2 * 2**failures, 5))


def _final(message: JsonObj) -> FinalResponse:
    if "error" in message:
        error = message["error"]
        if not isinstance(error, dict):
            raise ValueError("malformed JSON-RPC error")
        return FinalResponse(error=error)
    result = message.get("result")
    if not isinstance(result, dict):
        raise ValueError("malformed JSON-RPC result")
    return FinalResponse(result=result)
