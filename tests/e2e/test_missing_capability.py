"""-32021 ends the client's call; what the backend sees: its request answered with an error, its call
cancelled with ``notifications/cancelled``, and the same session used for the next call.

The backend here is a small aiohttp legacy server that asks for a form elicitation whatever the
client declared and, like a server that honours cancellation, then waits for the cancellation and
ends the call's stream without a response (2025-11-25 utilities/cancellation: a receiver SHOULD
NOT respond to a cancelled request).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from fake_backend import FakeBackend
from harness import BareClient, route, running_gateway, serving
from mcp_types.jsonrpc import MISSING_REQUIRED_CLIENT_CAPABILITY
from waiting import eventually

from gateway import keys

WAIT = 10.0


@dataclass
class Seen:
    initialize: int = 0
    responses: list[dict[str, Any]] = field(default_factory=list)
    cancelled: list[dict[str, Any]] = field(default_factory=list)
    cancel: asyncio.Event = field(default_factory=asyncio.Event)


def _sse(message: dict[str, Any]) -> bytes:
    return f"event: message\ndata: {json.dumps(message)}\n\n".encode()


@pytest.fixture
async def asking_backend() -> AsyncIterator[tuple[str, Seen]]:
    seen = Seen()

    async def mcp(request: web.Request) -> web.StreamResponse:
        if request.method != "POST":
            return web.Response(status=405)
        message = await request.json()
        method = message.get("method")
        if method is None:  # a response to our server request
            seen.responses.append(message)
            return web.Response(status=202)
        if "id" not in message:
            if method == "notifications/cancelled":
                seen.cancelled.append(message["params"])
                seen.cancel.set()
            return web.Response(status=202)
        if method == "initialize":
            seen.initialize += 1
            init = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "a"}}
            return web.json_response(
                {"jsonrpc": "2.0", "id": message["id"], "result": init}, headers={"Mcp-Session-Id": "s1"}
            )
        if method != "tools/call" or message["params"]["name"] != "ask":
            result: dict[str, Any] = {"tools": []} if method == "tools/list" else {}
            if method == "tools/call":
                result = {"content": [{"type": "text", "text": "ok"}]}
            return web.json_response({"jsonrpc": "2.0", "id": message["id"], "result": result})
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        schema = {"type": "object", "properties": {"city": {"type": "string"}}}
        ask = {"message": "Which city?", "requestedSchema": schema}
        await response.write(_sse({"jsonrpc": "2.0", "id": "e1", "method": "elicitation/create", "params": ask}))
        await asyncio.wait_for(seen.cancel.wait(), WAIT)
        await response.write_eof()  # cancelled: no response
        return response

    app = web.Application()
    app.router.add_route("*", "/mcp", mcp)
    async with serving(app) as base:
        yield f"{base}/mcp", seen


async def test_the_backend_request_is_refused_its_call_cancelled_and_the_session_reused(
    asking_backend: tuple[str, Seen], http: aiohttp.ClientSession
) -> None:
    url, seen = asking_backend
    async with running_gateway([route("a", "/mcp", url)]) as gw:
        client = BareClient(http, gw.url(), capabilities={"sampling": {}})
        reply = await client.call_tool("ask")
        assert reply.status == 400
        assert reply.error["code"] == MISSING_REQUIRED_CLIENT_CAPABILITY
        assert reply.error["data"] == {"requiredCapabilities": {"elicitation": {"form": {}}}}
        pool = gw.app[keys.ROUTES]["/mcp"].pool
        await eventually(
            lambda: not pool.leased_count and pool.idle_count, what="the session back in the pool", timeout=WAIT
        )
        ((answer,), (cancelled,)) = seen.responses, seen.cancelled
        assert answer["id"] == "e1"
        assert "error" in answer
        assert "result" not in answer  # never a made-up decline
        assert cancelled["requestId"] != "e1"
        assert (await client.call_tool("ok")).text == "ok"
        assert seen.initialize == 1


async def test_a_url_required_error_for_a_client_without_url_mode_is_minus_32021(
    fake_backend: tuple[FakeBackend, str], http: aiohttp.ClientSession
) -> None:
    """A legacy -32042 (URLElicitationRequiredError) needs url-mode elicitation from the client."""
    _, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url)]) as gw:
        reply = await BareClient(http, gw.url()).call_tool("url_login", capabilities={"elicitation": {}})
        assert reply.status == 400
        assert reply.error["code"] == MISSING_REQUIRED_CLIENT_CAPABILITY
        assert reply.error["data"] == {"requiredCapabilities": {"elicitation": {"url": {}}}}
        assert gw.app[keys.ROUTES]["/mcp"].pool.leased_count == 0
