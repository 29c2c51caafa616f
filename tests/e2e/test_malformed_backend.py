"""A backend that breaks the SSE wire mid-call: a clear error, and the session is not reused."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web
from harness import BareClient, route, running_gateway, serving
from mcp_types.jsonrpc import INTERNAL_ERROR

from gateway import keys


@pytest.fixture
async def broken_sse_backend() -> AsyncIterator[tuple[str, dict[str, int]]]:
    counters = {"initialize": 0}

    async def mcp(request: web.Request) -> web.StreamResponse:
        if request.method != "POST":
            return web.Response(status=405)
        message = await request.json()
        if "id" not in message or "method" not in message:
            return web.Response(status=202)
        if message["method"] == "initialize":
            counters["initialize"] += 1
            result = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "b", "version": "1"},
            }
            body = {"jsonrpc": "2.0", "id": message["id"], "result": result}
            return web.json_response(body, headers={"Mcp-Session-Id": f"s{counters['initialize']}"})
        if message["method"] == "tools/list":
            return web.json_response({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": []}})
        if message["method"] == "ping":  # only tool calls break the wire
            return web.json_response({"jsonrpc": "2.0", "id": message["id"], "result": {}})
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        if message["params"].get("name") == "ok":
            final = {"jsonrpc": "2.0", "id": message["id"], "result": {"content": []}}
            await response.write(f"event: message\ndata: {json.dumps(final)}\n\n".encode())
        else:
            await response.write(b"event: message\ndata: {this is not json\n\n")
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_route("*", "/mcp", mcp)
    async with serving(app) as base:
        yield f"{base}/mcp", counters


async def test_malformed_sse_is_backend_unavailable_and_the_session_is_discarded(
    broken_sse_backend: tuple[str, dict[str, int]],
) -> None:
    url, counters = broken_sse_backend
    async with (
        aiohttp.ClientSession() as http,
        running_gateway([route("b", "/mcp", url, backend={"timeout": 2})]) as gw,
    ):
        client = BareClient(http, gw.url())
        assert (await client.call_tool("ok")).result["resultType"] == "complete"
        assert counters["initialize"] == 1
        broken = await client.call_tool("garbage")
        assert broken.status == 502
        assert (broken.error["code"], broken.error["data"]["reason"]) == (INTERNAL_ERROR, "backend_unavailable")
        assert broken.error["data"]["cause"] == "malformed_response"
        assert (await client.call_tool("ok")).result["resultType"] == "complete"
        assert counters["initialize"] == 2  # the poisoned session was not handed out again
        assert gw.app[keys.ROUTES]["/mcp"].pool.initializations == 2
