"""The HTTP+SSE (2024-11-05) backend session against a small in-process fake of that transport.

The fake does what the SDK servers do: ``GET /sse`` answers an SSE stream whose first event is
``endpoint``; every client message is a ``POST`` to that endpoint answered ``202``; everything the
server says - responses included - is a ``message`` event on the one stream. Tests drive the
stream by hand (``fake.send``) and read what the session POSTed (``fake.received``). Every wait is
bounded by ``WAIT``; nothing sleeps.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from mcp_types.jsonrpc import METHOD_NOT_FOUND

from gateway.config.load import parse_config
from gateway.errors import BackendUnavailable
from gateway.legacy.http_sse import HttpSseSession, resolve_endpoint
from gateway.legacy.pool import SessionPool
from gateway.legacy.session import Exchange, FinalResponse, ServerNotification, ServerRequest, SessionExpired
from gateway.translate import capabilities as caps

WAIT = 5.0
CAPABILITIES = {"roots": {"listChanged": False}, "sampling": {}}
TOKEN = "Bearer sse-token"

Json = dict[str, Any]


class FakeSseServer:
    """The 2024-11-05 transport in miniature, one stream at a time."""

    def __init__(self) -> None:
        self.base = ""
        self.endpoint = "/messages/?session_id=s1"
        self.send_endpoint = True
        self.sse_status = 200
        self.version: str | None = None
        """protocolVersion the server picks; None echoes the client's offer."""
        self.refuse_with: int | None = None
        """HTTP status for every POST after the handshake (None: 202)."""
        self.received: asyncio.Queue[Json] = asyncio.Queue()
        """Messages POSTed after the handshake, in order."""
        self.requests: list[tuple[str, str, dict[str, str], Json | None]] = []
        """(method, path with query, headers, body) of every HTTP request."""
        self._stream: web.StreamResponse | None = None
        self._hangup = asyncio.Event()

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/sse", self._handle_sse)
        app.router.add_post("/messages/", self._handle_post)
        return app

    def hang_up(self) -> None:
        """End the SSE response normally (the client sees end of stream)."""
        self._hangup.set()

    async def send(self, message: Json) -> None:
        await self.send_raw(json.dumps(message))

    async def send_raw(self, data: str) -> None:
        assert self._stream is not None, "no client is connected"
        await self._stream.write(f"event: message\ndata: {data}\n\n".encode())

    async def next_post(self) -> Json:
        async with asyncio.timeout(WAIT):
            return await self.received.get()

    async def _handle_sse(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(("GET", request.path_qs, dict(request.headers), None))
        if self.sse_status != 200:
            return web.Response(status=self.sse_status)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store"})
        await resp.prepare(request)
        self._stream = resp
        await resp.write(b": a comment, like the keep-alives servers send\n\n")
        if self.send_endpoint:
            await resp.write(f"event: endpoint\ndata: {self.endpoint}\n\n".encode())
        await self._hangup.wait()
        return resp

    async def _handle_post(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(("POST", request.path_qs, dict(request.headers), body))
        method = body.get("method")
        if method == "initialize":
            # Answered on the stream *before* the 202: the response overtakes the POST's answer.
            result: dict[str, Any] = {
                "protocolVersion": self.version or body["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "fake-sse", "version": "0"},
            }
            await self.send({"jsonrpc": "2.0", "id": body["id"], "result": result})
        elif method == "ping":  # the session's settle step after notifications/initialized
            await self.send({"jsonrpc": "2.0", "id": body["id"], "result": {}})
        elif method != "notifications/initialized":
            if self.refuse_with is not None:
                return web.Response(status=self.refuse_with, text="refused")
            self.received.put_nowait(body)
        return web.Response(status=202, text="Accepted")


@pytest.fixture
async def fake() -> AsyncIterator[FakeSseServer]:
    server = FakeSseServer()
    runner = web.AppRunner(server.app(), access_log=None, shutdown_timeout=1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server.base = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        yield server
    finally:
        server.hang_up()
        await runner.cleanup()


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def new_session(http: aiohttp.ClientSession, url: str, *, timeout: float = WAIT) -> HttpSseSession:
    return HttpSseSession(
        http,
        url,
        capabilities=CAPABILITIES,
        headers={"Authorization": TOKEN},
        timeout=timeout,
        connect_timeout=WAIT,
    )


@asynccontextmanager
async def opened(http: aiohttp.ClientSession, fake: FakeSseServer) -> AsyncIterator[HttpSseSession]:
    session = new_session(http, fake.base + "/sse")
    await session.open()
    try:
        yield session
    finally:
        await session.close()


async def open_refused(session: HttpSseSession) -> BackendUnavailable:
    with pytest.raises(BackendUnavailable) as caught:
        async with asyncio.timeout(WAIT):
            await session.open()
    assert session.broken
    return caught.value


async def failure_of(exchange: Exchange) -> BackendUnavailable:
    with pytest.raises(BackendUnavailable) as caught:
        await exchange.next(WAIT)
    return caught.value


def response(request_id: int | str, **result: Any) -> Json:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


# --- the endpoint event ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sse_url", "data", "expected"),
    [
        ("http://h:1/sse", "/messages/?session_id=abc", "http://h:1/messages/?session_id=abc"),
        ("http://h:1/mcp/sse", "messages?session_id=abc", "http://h:1/mcp/messages?session_id=abc"),
        ("http://h:1/sse", " http://h:1/post#frag \n", "http://h:1/post"),
        ("http://h/sse", "http://h:80/post", "http://h/post"),
        ("https://H/sse", "https://h:443/post", "https://h/post"),
    ],
    ids=["absolute-path", "relative-path", "absolute-url", "explicit-default-port", "host-case-and-https-port"],
)
def test_endpoint_resolves_against_the_sse_url(sse_url: str, data: str, expected: str) -> None:
    assert str(resolve_endpoint(sse_url, data)) == expected


@pytest.mark.parametrize(
    "data",
    ["http://other:1/messages", "http://h:2/messages", "https://h:1/messages", "//other:1/messages", "file:///etc"],
    ids=["other-host", "other-port", "other-scheme", "network-path", "other-scheme-no-host"],
)
def test_endpoints_on_another_origin_are_refused(data: str) -> None:
    with pytest.raises(BackendUnavailable) as caught:
        resolve_endpoint("http://h:1/sse", data)
    assert caught.value.reason == "endpoint_cross_origin"


def test_an_empty_endpoint_event_is_malformed() -> None:
    with pytest.raises(BackendUnavailable) as caught:
        resolve_endpoint("http://h:1/sse", "  ")
    assert caught.value.reason == "malformed_response"


# --- opening a session -----------------------------------------------------------------------


async def test_open_initializes_through_the_announced_endpoint(
    http: aiohttp.ClientSession, fake: FakeSseServer
) -> None:
    async with opened(http, fake) as session:
        assert session.endpoint == fake.base + "/messages/?session_id=s1"
        assert session.session_id == "s1"
        assert session.protocol_version == "2025-11-25"
        assert session.initialize_result["serverInfo"]["name"] == "fake-sse"
        assert not session.broken
    (get, init, initialized, ping) = fake.requests
    assert get[:2] == ("GET", "/sse")
    assert get[2]["Accept"] == "text/event-stream"
    assert get[2]["Authorization"] == TOKEN
    assert init[1] == initialized[1] == ping[1] == "/messages/?session_id=s1"
    assert init[3] is not None
    assert init[3]["params"]["protocolVersion"] == "2025-11-25"
    assert init[3]["params"]["capabilities"] == CAPABILITIES
    assert initialized[3] == {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert ping[3] is not None
    assert ping[3]["method"] == "ping"  # the settle step: session-start server requests arrive before it is leased
    for _, _, headers, _ in (init, initialized, ping):
        assert headers["Authorization"] == TOKEN
        assert headers["Content-Type"] == "application/json"
        # This transport has neither a session header nor a version header.
        assert not {"mcp-session-id", "mcp-protocol-version"} & {name.lower() for name in headers}


async def test_open_accepts_an_absolute_endpoint_on_the_same_origin(
    http: aiohttp.ClientSession, fake: FakeSseServer
) -> None:
    fake.endpoint = fake.base + "/messages/?session_id=abs"
    async with opened(http, fake) as session:
        assert session.session_id == "abs"
    assert [path for _, path, _, _ in fake.requests[1:]] == ["/messages/?session_id=abs"] * 3


async def test_open_refuses_an_endpoint_on_another_origin_and_posts_nothing(
    http: aiohttp.ClientSession, fake: FakeSseServer
) -> None:
    fake.endpoint = fake.base.replace("127.0.0.1", "localhost") + "/messages/?session_id=s1"
    error = await open_refused(new_session(http, fake.base + "/sse"))
    assert error.reason == "endpoint_cross_origin"
    assert [method for method, *_ in fake.requests] == ["GET"]


async def test_open_accepts_the_revision_the_server_picks(http: aiohttp.ClientSession, fake: FakeSseServer) -> None:
    fake.version = "2024-11-05"
    async with opened(http, fake) as session:
        assert session.protocol_version == "2024-11-05"


async def test_open_refuses_a_revision_that_is_not_handshake_era(
    http: aiohttp.ClientSession, fake: FakeSseServer
) -> None:
    fake.version = "2026-07-28"
    error = await open_refused(new_session(http, fake.base + "/sse"))
    assert error.reason == "unsupported_version"


async def test_open_without_an_endpoint_event_times_out(http: aiohttp.ClientSession, fake: FakeSseServer) -> None:
    fake.send_endpoint = False
    error = await open_refused(new_session(http, fake.base + "/sse", timeout=0.2))
    assert error.reason == "timeout"


async def test_open_refused_by_the_sse_url_is_a_bad_status(http: aiohttp.ClientSession, fake: FakeSseServer) -> None:
    fake.sse_status = 404
    error = await open_refused(new_session(http, fake.base + "/sse"))
    assert error.reason == "bad_status"


async def test_open_against_a_closed_port_is_connect_failed(http: aiohttp.ClientSession) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    error = await open_refused(new_session(http, f"http://127.0.0.1:{port}/sse"))
    assert error.reason == "connect_failed"


async def test_the_pool_opens_an_http_sse_session_for_an_sse_route(
    http: aiohttp.ClientSession, fake: FakeSseServer
) -> None:
    settings = parse_config(
        {
            "state": {"keys": ["k" * 40]},
            "routes": [{"name": "old", "path": "/old", "backend": {"url": fake.base + "/sse", "transport": "sse"}}],
        },
        env={},
    )
    pool = SessionPool(http, settings.routes[0])
    normalized = caps.normalize({})
    try:
        async with asyncio.timeout(WAIT):
            pooled = await pool.lease(pool.key_for(None, normalized), normalized, {})
        assert isinstance(pooled.session, HttpSseSession)
        assert pooled.session.session_id == "s1"
        pool.release(pooled)
    finally:
        await pool.close()


# --- demultiplexing the one stream -----------------------------------------------------------


async def test_responses_are_routed_by_id_to_concurrent_exchanges(
    http: aiohttp.ClientSession, fake: FakeSseServer
) -> None:
    async with opened(http, fake) as session:
        first, second = await asyncio.gather(session.start("tools/list", {}, {}), session.start("prompts/list", {}, {}))
        posted = {(await fake.next_post())["method"], (await fake.next_post())["method"]}
        assert posted == {"tools/list", "prompts/list"}
        # Answered in the opposite order.
        await fake.send(response(second.request_id, prompts=[]))
        await fake.send(response(first.request_id, tools=[]))
        assert await second.next(WAIT) == FinalResponse(result={"prompts": []})
        assert await first.next(WAIT) == FinalResponse(result={"tools": []})


async def test_a_server_request_goes_to_the_attached_exchange(http: aiohttp.ClientSession, fake: FakeSseServer) -> None:
    async with opened(http, fake) as session:
        call = await session.start("tools/call", {"name": "ask_city", "arguments": {}}, {"Authorization": TOKEN})
        assert (await fake.next_post())["id"] == call.request_id
        session.attach(call)
        # Servers number their own requests: the same id as our call must not be taken for its response.
        elicit = {"jsonrpc": "2.0", "id": call.request_id, "method": "elicitation/create", "params": {"message": "?"}}
        await fake.send(elicit)
        assert await call.next(WAIT) == ServerRequest(call.request_id, "elicitation/create", {"message": "?"})
        await session.respond(call.request_id, result={"action": "accept", "content": {"city": "Oslo"}})
        answer = await fake.next_post()
        assert answer == {
            "jsonrpc": "2.0",
            "id": call.request_id,
            "result": {"action": "accept", "content": {"city": "Oslo"}},
        }
        await fake.send(response(call.request_id, content=[{"type": "text", "text": "city=Oslo"}]))
        final = await call.next(WAIT)
        assert isinstance(final, FinalResponse)
        assert final.result == {"content": [{"type": "text", "text": "city=Oslo"}]}


async def test_a_server_request_that_overtakes_the_post_belongs_to_the_lease_holder(
    http: aiohttp.ClientSession, fake: FakeSseServer
) -> None:
    """The lease holder's exchange is attached before its POST is sent (``owner=True``)."""
    async with opened(http, fake) as session:
        call = await session.start("tools/call", {"name": "show_roots", "arguments": {}}, {}, owner=True)
        await fake.next_post()
        await fake.send({"jsonrpc": "2.0", "id": 0, "method": "roots/list"})
        assert await call.next(WAIT) == ServerRequest(0, "roots/list", {})


async def test_a_server_request_no_call_owns_is_kept_for_the_next_interactive_call(
    http: aiohttp.ClientSession, fake: FakeSseServer
) -> None:
    """Not handed to a plain call in flight (it did not cause it), not refused: kept unclaimed."""
    async with opened(http, fake) as session:
        plain = await session.start("tools/list", {}, {})
        await fake.next_post()
        await fake.send({"jsonrpc": "2.0", "id": 7, "method": "sampling/createMessage", "params": {}})
        await fake.send({"jsonrpc": "2.0", "id": plain.request_id, "result": {"tools": []}})
        assert await plain.next(WAIT) == FinalResponse(result={"tools": []})
        assert session.take_unclaimed() == [ServerRequest(7, "sampling/createMessage", {})]
        assert session.take_unclaimed() == []
        assert not session.broken


async def test_a_server_request_no_client_could_answer_is_refused(
    http: aiohttp.ClientSession, fake: FakeSseServer
) -> None:
    async with opened(http, fake) as session:
        await fake.send({"jsonrpc": "2.0", "id": 8, "method": "tasks/get", "params": {}})
        refusal = await fake.next_post()
        assert refusal["id"] == 8
        assert refusal["error"]["code"] == METHOD_NOT_FOUND
        assert session.take_unclaimed() == []
        assert not session.broken


async def test_ping_is_answered_by_the_session(http: aiohttp.ClientSession, fake: FakeSseServer) -> None:
    async with opened(http, fake) as session:
        call = await session.start("tools/call", {"name": "slow", "arguments": {}}, {})
        session.attach(call)
        await fake.next_post()
        await fake.send({"jsonrpc": "2.0", "id": "ping-1", "method": "ping"})
        assert await fake.next_post() == {"jsonrpc": "2.0", "id": "ping-1", "result": {}}
        assert call.queue.empty()  # the ping never reached the call


async def test_notifications_reach_the_attached_exchange_and_the_sink(
    http: aiohttp.ClientSession, fake: FakeSseServer
) -> None:
    async with opened(http, fake) as session:
        sink: asyncio.Queue[ServerNotification] = asyncio.Queue()
        session.notification_sink = sink
        call = await session.start("tools/call", {"name": "count", "arguments": {"n": 1}}, {})
        session.attach(call)
        await fake.next_post()
        progress = {"progressToken": 1, "progress": 1, "total": 1}
        await fake.send({"jsonrpc": "2.0", "method": "notifications/progress", "params": progress})
        expected = ServerNotification("notifications/progress", progress)
        assert await call.next(WAIT) == expected
        assert sink.get_nowait() == expected


async def test_a_response_for_no_request_is_ignored(http: aiohttp.ClientSession, fake: FakeSseServer) -> None:
    async with opened(http, fake) as session:
        call = await session.start("tools/list", {}, {})
        await fake.next_post()
        await fake.send(response(999, tools=[]))
        await fake.send(response(call.request_id, tools=[]))
        assert await call.next(WAIT) == FinalResponse(result={"tools": []})
        assert not session.broken


# --- failures --------------------------------------------------------------------------------


async def test_a_dropped_stream_fails_every_exchange_in_flight(
    http: aiohttp.ClientSession, fake: FakeSseServer
) -> None:
    async with opened(http, fake) as session:
        first = await session.start("tools/call", {"name": "slow", "arguments": {}}, {})
        second = await session.start("tools/list", {}, {})
        session.attach(first)
        fake.hang_up()
        assert (await failure_of(first)).reason == "stream_closed"
        assert (await failure_of(second)).reason == "stream_closed"
        assert session.broken
        with pytest.raises(BackendUnavailable) as caught:
            await session.start("tools/list", {}, {})
        assert caught.value.reason == "stream_closed"


async def test_malformed_json_fails_the_call_and_breaks_the_session(
    http: aiohttp.ClientSession, fake: FakeSseServer
) -> None:
    async with opened(http, fake) as session:
        call = await session.start("tools/list", {}, {})
        await fake.next_post()
        await fake.send_raw("{not json")
        assert (await failure_of(call)).reason == "malformed_response"
        assert session.broken


async def test_a_json_value_that_is_not_json_rpc_breaks_the_session(
    http: aiohttp.ClientSession, fake: FakeSseServer
) -> None:
    async with opened(http, fake) as session:
        call = await session.start("tools/list", {}, {})
        await fake.next_post()
        await fake.send({"id": call.request_id, "result": {}})  # no "jsonrpc": "2.0"
        assert (await failure_of(call)).reason == "malformed_response"
        assert session.broken


async def test_a_refused_post_is_a_bad_status(http: aiohttp.ClientSession, fake: FakeSseServer) -> None:
    async with opened(http, fake) as session:
        fake.refuse_with = 400
        with pytest.raises(BackendUnavailable) as caught:
            await session.start("tools/list", {}, {})
        assert caught.value.reason == "bad_status"
        with pytest.raises(BackendUnavailable) as caught:
            await session.respond(3, result={})
        assert caught.value.reason == "bad_status"


async def test_a_forgotten_session_is_expired_so_the_call_can_reinitialize(
    http: aiohttp.ClientSession, fake: FakeSseServer
) -> None:
    async with opened(http, fake) as session:
        fake.refuse_with = 404
        with pytest.raises(SessionExpired):
            await session.start("tools/list", {}, {})
        assert session.broken


async def test_close_fails_what_is_in_flight_and_ends_the_stream(
    http: aiohttp.ClientSession, fake: FakeSseServer
) -> None:
    session = new_session(http, fake.base + "/sse")
    await session.open()
    call = await session.start("tools/call", {"name": "slow", "arguments": {}}, {})
    await session.close()
    assert (await failure_of(call)).reason == "stream_closed"
    assert session.broken
    await session.close()  # idempotent
