"""Issue 2 behaviour through the gateway against the fake legacy server: translation, sessions,
backend failures, front-door rejections end to end, ops endpoints."""

from __future__ import annotations

import socket
import time

import aiohttp
import pytest
from fake_backend import FAKE_BACKEND_KEY, FakeBackend, start_fake_backend
from harness import BareClient, route, running_gateway
from mcp_types.jsonrpc import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
)
from waiting import eventually

from gateway import keys

Backend = tuple[FakeBackend, str]


async def test_discover_is_built_from_the_backend_initialize(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url)]) as gw:
        reply = await BareClient(http, gw.url()).request("server/discover")
    result = reply.result
    assert result["resultType"] == "complete"
    assert result["supportedVersions"] == ["2026-07-28"]
    assert "tools" in result["capabilities"]
    assert "tasks" not in result["capabilities"]
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "mrtr-demo-backend"
    assert {"ttlMs", "cacheScope"} <= result.keys()


@pytest.mark.parametrize("fake_backend", [{"json_response": False}, {"json_response": True}], indirect=True)
async def test_lists_and_plain_calls_work_with_json_and_sse_backends(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url, cache={"ttl_ms": 1500, "scope": "public"})]) as gw:
        client = BareClient(http, gw.url())
        tools = (await client.request("tools/list")).result
        assert tools["resultType"] == "complete"
        assert (tools["ttlMs"], tools["cacheScope"]) == (1500, "public")
        assert "add" in {t["name"] for t in tools["tools"]}
        added = await client.call_tool("add", {"a": 2, "b": 3})
        assert added.result["resultType"] == "complete"
        assert added.text == "5"
        assert added.result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "mrtr-demo-backend"
        prompt = (await client.request("prompts/get", {"name": "greet", "arguments": {"name": "Ada"}})).result
        assert prompt["resultType"] == "complete"
        assert "Ada" in str(prompt["messages"])
        for method in ("prompts/list", "resources/list", "resources/templates/list"):
            listed = (await client.request(method)).result
            assert listed["resultType"] == "complete"
            assert "ttlMs" in listed
        read = (await client.request("resources/read", {"uri": "demo://readme"})).result
        assert read["resultType"] == "complete"
        assert read["contents"]
        completion = await client.request(
            "completion/complete",
            {"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "name", "value": "A"}},
        )
        assert completion.result["resultType"] == "complete"


async def test_legacy_resource_not_found_becomes_invalid_params(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url)]) as gw:
        reply = await BareClient(http, gw.url()).request("resources/read", {"uri": "demo://missing"})
    assert reply.error["code"] == INVALID_PARAMS
    assert reply.error["data"] == {"uri": "demo://missing"}, "resources.mdx §Error Handling names the URI"


@pytest.mark.parametrize("fake_backend", [{"page_size": 2}], indirect=True)
async def test_pagination_cursors_pass_through(fake_backend: Backend, http: aiohttp.ClientSession) -> None:
    _, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url)]) as gw:
        client = BareClient(http, gw.url())
        first = (await client.request("tools/list")).result
        cursor = first["nextCursor"]
        second = (await client.request("tools/list", {"cursor": cursor})).result
    assert len(first["tools"]) == 2
    assert {t["name"] for t in second["tools"]}.isdisjoint({t["name"] for t in first["tools"]})


async def test_expired_backend_session_is_reinitialized_transparently(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    backend, url = fake_backend
    backend.expire_sessions_after_requests = 2
    async with running_gateway([route("demo", "/mcp", url)]) as gw:
        client = BareClient(http, gw.url())
        texts = [(await client.call_tool("add", {"a": i, "b": 1})).text for i in range(5)]
    assert texts == ["1", "2", "3", "4", "5"]
    assert backend.initialize_count >= 3


async def test_sessions_are_reused_and_keyed_by_credential_and_capabilities(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    backend, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url)]) as gw:
        client = BareClient(http, gw.url())
        for _ in range(3):
            await client.call_tool("add", {"a": 1, "b": 1})
        assert backend.initialize_count == 1
        await client.call_tool("add", {"a": 1, "b": 1}, authorization="Bearer other")
        assert backend.initialize_count == 2
        await client.call_tool("add", {"a": 1, "b": 1}, capabilities={})
        assert backend.initialize_count == 3
        caps_seen = [s.client_capabilities for s in backend.sessions.values()]
    assert {} in caps_seen
    assert any("elicitation" in c for c in caps_seen)


async def test_client_authorization_is_forwarded_and_host_is_not_rewritten(http: aiohttp.ClientSession) -> None:
    runner, url = await start_fake_backend()
    backend_host = url.split("/")[2]
    runner.app[FAKE_BACKEND_KEY].require_host = backend_host
    try:
        async with running_gateway([route("demo", "/mcp", url)]) as gw:
            reply = await BareClient(http, gw.url(), authorization="Bearer s3cret").call_tool("whoami")
    finally:
        await runner.cleanup()
    assert reply.text == "Bearer s3cret"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_backend_down_is_a_clear_backend_unavailable_error(http: aiohttp.ClientSession) -> None:
    url = f"http://127.0.0.1:{_closed_port()}/mcp"
    async with running_gateway([route("demo", "/mcp", url, backend={"timeout": 2, "connect_timeout": 1})]) as gw:
        started = time.monotonic()
        reply = await BareClient(http, gw.url()).call_tool("add", {"a": 1, "b": 2})
    assert reply.status == 502
    assert (reply.error["code"], reply.error["data"]["reason"]) == (INTERNAL_ERROR, "backend_unavailable")
    assert reply.error["data"]["cause"] == "connect_failed"
    assert time.monotonic() - started < 2


async def test_silent_backend_times_out_within_the_route_timeout(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    backend, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url, backend={"timeout": 0.5})]) as gw:
        client = BareClient(http, gw.url())
        await client.call_tool("add", {"a": 1, "b": 2})  # session is up
        backend.hang = True
        started = time.monotonic()
        reply = await client.call_tool("add", {"a": 1, "b": 2})
        elapsed = time.monotonic() - started
        backend.hang = False
    assert (reply.status, reply.error["code"], reply.error["data"]["reason"]) == (
        502,
        INTERNAL_ERROR,
        "backend_unavailable",
    )
    assert reply.error["data"]["cause"] == "timeout"
    assert elapsed < 2.5


@pytest.mark.parametrize(("fault", "reason"), [("fail_status", "bad_status"), ("garbage", "malformed_response")])
async def test_failing_or_garbage_backend_is_unavailable_not_client_error(
    fake_backend: Backend, http: aiohttp.ClientSession, fault: str, reason: str
) -> None:
    backend, url = fake_backend
    setattr(backend, fault, 503 if fault == "fail_status" else True)
    async with running_gateway([route("demo", "/mcp", url, backend={"timeout": 2})]) as gw:
        reply = await BareClient(http, gw.url()).call_tool("add", {"a": 1, "b": 2})
    assert reply.status == 502
    assert (reply.error["code"], reply.error["data"]["reason"]) == (INTERNAL_ERROR, "backend_unavailable")
    assert reply.error["data"]["cause"] == reason


async def test_backend_that_recovers_serves_the_next_call(fake_backend: Backend, http: aiohttp.ClientSession) -> None:
    backend, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url, backend={"timeout": 2})]) as gw:
        client = BareClient(http, gw.url())
        backend.garbage = True
        assert (await client.call_tool("add", {"a": 1, "b": 2})).error["data"]["reason"] == "backend_unavailable"
        backend.garbage = False
        assert (await client.call_tool("add", {"a": 1, "b": 2})).text == "3"


async def test_front_door_rejections_travel_end_to_end(fake_backend: Backend, http: aiohttp.ClientSession) -> None:
    _, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url)], listen={"max_body_bytes": 2048}) as gw:
        client = BareClient(http, gw.url())
        async with http.get(gw.url()) as resp:
            assert (resp.status, resp.headers["Allow"]) == (405, "POST")
        async with http.delete(gw.url()) as resp:
            assert resp.status == 405
        unknown = await client.request("ping")
        assert (unknown.status, unknown.error["code"]) == (404, METHOD_NOT_FOUND)
        bad_version = await client.request(
            "tools/list",
            {"_meta": {"io.modelcontextprotocol/protocolVersion": "1900-01-01"}},
            headers={"MCP-Protocol-Version": "1900-01-01"},
        )
        assert (bad_version.status, bad_version.error["code"]) == (400, UNSUPPORTED_PROTOCOL_VERSION)
        assert bad_version.error["data"]["supported"] == ["2026-07-28"]
        mismatch = await client.call_tool("add", {"a": 1, "b": 1}, headers={"Mcp-Name": "other"})
        assert (mismatch.status, mismatch.error["code"]) == (400, HEADER_MISMATCH)
        big = await client.call_tool("echo", {"text": "x" * 4096})
        assert big.status == 413
        notification = await http.post(
            gw.url(),
            json={"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}},
            headers={"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28"},
        )
        assert notification.status == 202
        notification.release()
        async with http.post(
            gw.url(),
            data=b"{nope",
            headers={
                "Accept": "application/json",
                "Content-Type": "application/json",
                "MCP-Protocol-Version": "2026-07-28",
            },
        ) as resp:
            assert resp.status == 400
            assert (await resp.json())["error"]["code"] == PARSE_ERROR


async def test_health_ready_and_metrics(fake_backend: Backend, http: aiohttp.ClientSession) -> None:
    _, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url)]) as gw:
        await BareClient(http, gw.url()).call_tool("add", {"a": 1, "b": 1})
        async with http.get(gw.url("/healthz")) as resp:
            assert resp.status == 200
        async with http.get(gw.url("/readyz")) as resp:
            assert resp.status == 200
        async with http.get(gw.url("/metrics")) as resp:
            text = await resp.text()
    assert 'mrtr_gateway_requests_total{method="tools/call",outcome="complete",route="demo"} 1.0' in text
    assert "mrtr_gateway_backend_sessions" in text
    assert 'mrtr_gateway_backend_initializations_total{route="demo"} 1.0' in text


async def test_shutdown_deletes_backend_sessions(fake_backend: Backend, http: aiohttp.ClientSession) -> None:
    backend, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url)]) as gw:
        await BareClient(http, gw.url()).call_tool("add", {"a": 1, "b": 1})
        assert gw.app[keys.ROUTES]["/mcp"].pool.size == 1
    await eventually(lambda: backend.deleted_sessions, what="the backend session deleted")
    assert len(backend.deleted_sessions) == 1


async def test_origin_is_checked_when_allowed_origins_are_configured(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    listen = {"allowed_origins": ["https://app.example.com"]}
    async with running_gateway([route("demo", "/mcp", url)], listen=listen) as gw:
        client = BareClient(http, gw.url())
        assert (await client.request("tools/list", headers={"Origin": "https://evil.example"})).status == 403
        allowed = await client.request("tools/list", headers={"Origin": "https://app.example.com"})
        assert allowed.result["resultType"] == "complete"
        assert (await client.request("tools/list")).status == 200, "clients without Origin are not affected"
