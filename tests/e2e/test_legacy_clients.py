"""Issue 4 item 6: handshake-era clients through the same route, against the fake legacy server.

The client here is raw aiohttp speaking 2025-11-25 streamable HTTP, so every header and every SSE
event the gateway passes through can be asserted: its own session id, inline server requests on
the POST stream, ``roots/list`` on the GET stream, the 404 that makes a client re-initialize.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
from fake_backend import FakeBackend
from harness import BareClient, route, running_gateway, stdio_route
from mcp_types.jsonrpc import INTERNAL_ERROR, INVALID_REQUEST, UNSUPPORTED_PROTOCOL_VERSION

from gateway import keys, relay
from gateway.frontdoor.legacy_ids import LegacySessionIds
from gateway.frontdoor.legacy_passthrough import MISSING_VERSION_MESSAGE
from gateway.keyset import KeySet

Backend = tuple[FakeBackend, str]

VERSION = "2025-11-25"
WAIT = 10.0
CAPS: dict[str, Any] = {"elicitation": {"form": {}}, "roots": {"listChanged": False}}


async def sse_messages(resp: aiohttp.ClientResponse) -> AsyncIterator[dict[str, Any]]:
    """The JSON-RPC messages of an SSE body, one per event with data (comments skipped)."""
    data: list[str] = []
    async for raw in resp.content:
        line = raw.decode().rstrip("\r\n")
        if line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
        elif not line and data:
            yield json.loads("\n".join(data))
            data = []


@dataclass
class LegacyWire:
    """A handshake-era client on the wire: one session, request ids counted up."""

    http: aiohttp.ClientSession
    url: str
    session_id: str | None = None
    authorization: str | None = None
    ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def headers(self, **extra: str) -> dict[str, str]:
        sent = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        if self.authorization is not None:
            sent["Authorization"] = self.authorization
        if self.session_id is not None:
            sent |= {"Mcp-Session-Id": self.session_id, "MCP-Protocol-Version": VERSION}
        return sent | extra

    @asynccontextmanager
    async def post(self, message: dict[str, Any], **extra: str) -> AsyncIterator[aiohttp.ClientResponse]:
        async with self.http.post(self.url, data=json.dumps(message), headers=self.headers(**extra)) as resp:
            yield resp

    async def initialize(self, **extra: str) -> None:
        params = {"protocolVersion": VERSION, "capabilities": CAPS, "clientInfo": {"name": "raw", "version": "0"}}
        async with self.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}, **extra) as resp:
            assert resp.status == 200, await resp.text()
            (answer,) = [m async for m in sse_messages(resp)]
            assert answer["result"]["protocolVersion"] == VERSION
            self.session_id = resp.headers["Mcp-Session-Id"]
        async with self.post({"jsonrpc": "2.0", "method": "notifications/initialized"}) as ack:
            assert ack.status == 202

    def message(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": next(self.ids), "method": method, "params": params or {}}

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        async with self.post(self.message(method, params)) as resp:
            assert resp.status == 200, await resp.text()
            return [m async for m in sse_messages(resp)][-1]

    async def answer(self, request_id: int | str, result: dict[str, Any]) -> int:
        async with self.post({"jsonrpc": "2.0", "id": request_id, "result": result}) as resp:
            return resp.status


def text_of(answer: dict[str, Any]) -> str:
    return " ".join(c["text"] for c in answer["result"]["content"])


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"


async def test_initialize_mints_a_gateway_session_id_and_the_route_still_serves_modern_clients(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    backend, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url, backend={"headers": {"X-Api-Key": "k1"}})]) as gw:
        wire = LegacyWire(http, gw.url(), authorization="Bearer legacy")
        async with asyncio.timeout(WAIT):
            await wire.initialize()
            (backend_id,) = backend.sessions
            assert wire.session_id not in (None, backend_id)
            assert (backend.last_headers["Mcp-Session-Id"], backend.last_headers["X-Api-Key"]) == (backend_id, "k1")

            modern = BareClient(http, gw.url())
            assert (await modern.call_tool("add", {"a": 20, "b": 22})).text == "42"

            listed = (await wire.request("tools/list"))["result"]
            assert {"add", "ask_city", "show_roots"} <= {tool["name"] for tool in listed["tools"]}
            assert "resultType" not in listed, "a legacy client hears the legacy server verbatim"
            assert text_of(await wire.request("tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}})) == "5"
            assert backend.last_headers["Mcp-Session-Id"] == backend_id
            stolen = LegacyWire(http, gw.url(), session_id=wire.session_id, authorization="Bearer other")
            async with stolen.post(stolen.message("tools/list")) as resp:
                assert resp.status == 404, "a session id only opens for the credential that created it"

            assert (await modern.request("tools/list")).result["resultType"] == "complete"
        assert backend.initialize_count == 2, "one session for the legacy client, one pooled for the modern one"


async def test_inline_elicitation_flows_on_the_post_stream(fake_backend: Backend, http: aiohttp.ClientSession) -> None:
    backend, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url)]) as gw:
        wire = LegacyWire(http, gw.url())
        async with asyncio.timeout(WAIT):
            await wire.initialize()
            async with wire.post(wire.message("tools/call", {"name": "ask_city", "arguments": {}})) as resp:
                assert resp.headers["Content-Type"].startswith("text/event-stream")
                assert resp.headers["X-Accel-Buffering"] == "no"
                assert resp.headers["Mcp-Session-Id"] == wire.session_id
                messages = sse_messages(resp)
                asked = await anext(messages)
                assert asked["method"] == "elicitation/create"
                assert asked["params"]["message"] == "Which city?"
                assert await wire.answer(asked["id"], {"action": "accept", "content": {"city": "Paris"}}) == 202
                final = await anext(messages)
        assert text_of(final) == "city=Paris"
        assert backend.received_responses[-1]["id"] == asked["id"]


async def test_roots_list_arrives_on_the_get_stream_and_delete_ends_the_backend_session(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    backend, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url)]) as gw:
        wire = LegacyWire(http, gw.url())
        async with asyncio.timeout(WAIT):
            await wire.initialize()
            (backend_id,) = backend.sessions
            get_headers = {"Accept": "text/event-stream", **wire.headers()}
            del get_headers["Content-Type"]
            async with http.get(gw.url(), headers=get_headers) as stream:
                assert stream.status == 200
                assert stream.headers["X-Accel-Buffering"] == "no"
                call = asyncio.create_task(wire.request("tools/call", {"name": "show_roots", "arguments": {}}))
                pushed = sse_messages(stream)
                asked = await anext(pushed)
                assert asked["method"] == "roots/list"
                assert await wire.answer(asked["id"], {"roots": [{"uri": "file:///tmp/a"}]}) == 202
                assert text_of(await call) == "roots=file:///tmp/a"

                async with http.delete(gw.url(), headers=wire.headers()) as deleted:
                    assert deleted.status == 200
                assert [m async for m in pushed] == [], "the backend ended the GET stream with the session"
            assert backend.deleted_sessions == [backend_id]
            async with wire.post(wire.message("tools/list")) as gone:
                assert gone.status == 404, "the backend forgot the session; its 404 reaches the client"


async def test_a_quiet_get_stream_ends_when_the_gateway_shuts_down(
    fake_backend: Backend, http: aiohttp.ClientSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(relay, "DISCONNECT_POLL", 0.05)
    _, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url)]) as gw:
        wire = LegacyWire(http, gw.url())
        await wire.initialize()
        async with http.get(gw.url(), headers={**wire.headers(), "Accept": "text/event-stream"}) as stream:
            assert stream.status == 200
            gw.app[keys.DOOR].closing = True
            async with asyncio.timeout(WAIT):
                assert [m async for m in sse_messages(stream)] == []


@pytest.mark.parametrize("fake_backend", [{"json_response": True}], indirect=True)
async def test_json_answers_pass_through_with_their_length(fake_backend: Backend, http: aiohttp.ClientSession) -> None:
    _, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url)]) as gw:
        wire = LegacyWire(http, gw.url())
        params = {"protocolVersion": VERSION, "capabilities": CAPS, "clientInfo": {"name": "raw", "version": "0"}}
        async with wire.post(wire.message("initialize", params)) as resp:
            assert resp.headers["Content-Type"].startswith("application/json")
            assert int(resp.headers["Content-Length"]) == len(await resp.read())
            wire.session_id = resp.headers["Mcp-Session-Id"]
        async with wire.post(wire.message("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}})) as resp:
            assert text_of(await resp.json()) == "3"


async def test_unknown_session_id_answers_404_so_the_client_reinitializes(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    backend, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url)]) as gw:
        wire = LegacyWire(http, gw.url(), session_id="not-a-gateway-session")
        async with wire.post(wire.message("tools/list")) as resp:
            assert resp.status == 404
            assert (await resp.json())["error"]["message"] == "Session not found"
        async with wire.post({"jsonrpc": "2.0", "id": 7, "result": {}}) as resp:
            assert resp.status == 404, "a stale answer to a server request is handshake-era too"
        async with http.get(gw.url(), headers={"Accept": "text/event-stream", **wire.headers()}) as resp:
            assert resp.status == 404
        async with http.delete(gw.url(), headers=wire.headers()) as resp:
            assert resp.status == 404
        async with http.get(gw.url()) as resp:
            assert resp.status == 405, "without a session id GET is still refused by the modern front door"
        modern = await BareClient(http, gw.url()).request(
            "tools/list", headers={"Mcp-Session-Id": "not-a-gateway-session"}
        )
        assert modern.result["resultType"] == "complete", "a modern client's stray session header is ignored"
        wire.session_id = None
        await wire.initialize()
    assert backend.initialize_count == 2


@pytest.mark.parametrize("fake_backend", [{"expire_sessions_after_requests": 1}], indirect=True)
async def test_backend_404_reaches_the_client_so_it_reinitializes(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    backend, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url)]) as gw:
        wire = LegacyWire(http, gw.url())
        await wire.initialize()
        await wire.request("tools/list")
        async with wire.post(wire.message("tools/list")) as resp:
            assert resp.status == 404, "the backend expired its session"
        wire.session_id = None
        await wire.initialize()
        await wire.request("tools/list")
    assert backend.initialize_count == 2


async def test_sessionless_handshake_era_requests_pass_through_unmapped(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url)]) as gw:
        wire = LegacyWire(http, gw.url())
        async with wire.post(wire.message("tools/list"), **{"MCP-Protocol-Version": VERSION}) as resp:
            # The fake backend is stateful, so it refuses a request without a session; the point is
            # that its own answer reaches the client, headers and all.
            assert resp.status == 400
            assert "Missing session ID" in (await resp.json())["error"]["message"]


async def test_a_request_with_neither_version_header_nor_session_hears_which_header_is_missing(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    """A first curl at the endpoint, without the 2026-07-28 headers, is told what to send.

    Without ``MCP-Protocol-Version`` and without a session the request is passed through (a
    stateless legacy backend would serve it); a stateful backend refuses it for a session id the
    caller never knew it needed, so the gateway answers in its place and names the header.
    """
    _, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url)]) as gw:
        wire = LegacyWire(http, gw.url())
        message = wire.message("tools/list")
        async with wire.post(message) as resp:
            assert resp.status == 400
            body = await resp.json()
    assert body["id"] == message["id"]
    assert body["error"]["code"] == INVALID_REQUEST
    assert body["error"]["message"] == MISSING_VERSION_MESSAGE
    assert "MCP-Protocol-Version" in body["error"]["message"]
    assert "session" not in body["error"]["message"].split(".")[0].lower()


async def test_backend_down_answers_502_backend_unavailable_quickly(http: aiohttp.ClientSession) -> None:
    legacy_route = route("demo", "/mcp", closed_port_url(), backend={"timeout": 2, "connect_timeout": 1})
    async with running_gateway([legacy_route]) as gw:
        wire = LegacyWire(http, gw.url())
        started = time.monotonic()
        async with wire.post(wire.message("initialize", {"protocolVersion": VERSION, "capabilities": {}})) as resp:
            assert resp.status == 502
            error = (await resp.json())["error"]
    assert (error["code"], error["message"]) == (INTERNAL_ERROR, "Backend unavailable")
    assert error["data"] == {"reason": "backend_unavailable", "cause": "connect_failed"}
    assert time.monotonic() - started < 2


@pytest.mark.parametrize("transport", ["sse", "stdio"])
async def test_sse_and_stdio_routes_still_refuse_handshake_era_clients(
    http: aiohttp.ClientSession, transport: str
) -> None:
    if transport == "sse":
        old_route = route("old", "/mcp", closed_port_url(), backend={"transport": "sse"})
    else:
        old_route = stdio_route("old", "/mcp", ["mrtr-no-such-stdio-server"])
    async with running_gateway([old_route]) as gw:
        wire = LegacyWire(http, gw.url())
        async with wire.post(wire.message("initialize", {"protocolVersion": VERSION, "capabilities": {}})) as resp:
            assert resp.status == 400
            error = (await resp.json())["error"]
        # A session id never routes an old client's message to a passthrough that cannot exist here.
        headers = {"Mcp-Session-Id": "s1.whatever", "MCP-Protocol-Version": VERSION}
        async with wire.post(wire.message("tools/list", {}), **headers) as resp:
            assert resp.status == 400
            assert (await resp.json())["error"]["code"] == UNSUPPORTED_PROTOCOL_VERSION
    assert error["code"] == UNSUPPORTED_PROTOCOL_VERSION
    expected = "2024-11-05 HTTP+SSE" if transport == "sse" else "the stdio transport"
    assert expected in error["message"]


KEYS = (b"k" * 32, b"j" * 32)


def test_session_ids_open_only_on_their_route_and_for_their_credential() -> None:
    sessions = LegacySessionIds(KeySet(KEYS))
    token = sessions.open("r", "backend-1", "Bearer a")
    assert token.startswith("s1.")
    assert "backend-1" not in token
    assert sessions.backend_id(token, "r", "Bearer a") == "backend-1"
    assert sessions.backend_id(token, "other-route", "Bearer a") is None
    assert sessions.backend_id(token, "r", "Bearer b") is None
    assert sessions.backend_id(token, "r", None) is None
    anonymous = sessions.open("r", "backend-2", None)
    assert sessions.backend_id(anonymous, "r", None) == "backend-2"


@pytest.mark.parametrize(
    "mangle",
    [
        lambda t: t[:-1] + ("A" if t[-1] != "A" else "B"),
        lambda t: "s2" + t[2:],
        lambda t: t + "=",
        lambda t: t[:10],
        lambda t: "s1." + "A" * 3000,
    ],
)
def test_tampered_or_malformed_session_ids_do_not_open(mangle: Any) -> None:
    sessions = LegacySessionIds(KeySet(KEYS))
    assert sessions.backend_id(mangle(sessions.open("r", "b", None)), "r", None) is None


def test_session_ids_survive_key_rotation_and_any_replica_opens_them() -> None:
    old_ring = LegacySessionIds(KeySet((KEYS[1],)))
    token = old_ring.open("r", "b", None)
    assert LegacySessionIds(KeySet((KEYS[0], KEYS[1]))).backend_id(token, "r", None) == "b"
    assert LegacySessionIds(KeySet((KEYS[0],))).backend_id(token, "r", None) is None


async def test_a_legacy_session_continues_on_another_replica(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    from harness import running_replicas

    backend, url = fake_backend
    async with running_replicas(2, [route("demo", "/mcp", url)]) as (a, b):
        on_a = LegacyWire(http, a.url())
        await on_a.initialize()
        on_b = LegacyWire(http, b.url(), session_id=on_a.session_id)
        assert text_of(await on_b.request("tools/call", {"name": "add", "arguments": {"a": 4, "b": 5}})) == "9"
    assert backend.initialize_count == 1
