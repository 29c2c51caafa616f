"""Hostile legacy servers: small aiohttp streamable-HTTP backends that misbehave on purpose.

:class:`HostileBackend` answers ``initialize`` and ``tools/list`` like a well-behaved server and
hands every ``tools/call`` to the handler registered under the tool's name, and the standalone GET
stream to ``on_get``; each test writes the misbehaviour it needs. It records what it receives
(method, path, headers) so a test can also assert what the gateway did *not* send.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from harness import serving

Handler = Callable[[web.Request, dict[str, Any]], Awaitable[web.StreamResponse]]
GetHandler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]


@dataclass
class HostileBackend:
    base: str = ""
    tools: dict[str, Handler] = field(default_factory=dict)
    on_get: GetHandler | None = None
    received: list[Received] = field(default_factory=list)
    posted: list[dict[str, Any]] = field(default_factory=list)
    """Responses and notifications the gateway POSTed."""
    initializations: int = 0
    pings: int = 0
    on_ping: Callable[[], Awaitable[None]] | None = None
    """Awaited before a ``ping`` is answered (a test's fence)."""
    gets: int = 0
    deletes: int = 0
    get_count_reached: dict[int, asyncio.Event] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return self.base + "/mcp"

    def when_gets(self, count: int) -> asyncio.Event:
        """Set once the backend has received ``count`` GET requests."""
        event = self.get_count_reached.setdefault(count, asyncio.Event())
        if self.gets >= count:
            event.set()
        return event

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.received.append(Received(request.method, request.path, dict(request.headers)))
        if request.method == "GET":
            self.gets += 1
            for count, event in self.get_count_reached.items():
                if self.gets >= count:
                    event.set()
            if self.on_get is None:
                return web.Response(status=405)
            return await self.on_get(request)
        if request.method == "DELETE":
            self.deletes += 1
            return web.Response(status=200)
        message = await request.json()
        if "id" not in message or "method" not in message:
            self.posted.append(message)
            return web.Response(status=202)
        if message["method"] == "initialize":
            self.initializations += 1
            result = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "hostile", "version": "1"},
            }
            body = {"jsonrpc": "2.0", "id": message["id"], "result": result}
            return web.json_response(body, headers={"Mcp-Session-Id": f"s{self.initializations}"})
        if message["method"] == "ping":
            self.pings += 1
            if self.on_ping is not None:
                await self.on_ping()
            return web.json_response({"jsonrpc": "2.0", "id": message["id"], "result": {}})
        if message["method"] == "tools/list":
            tools = [{"name": name, "inputSchema": {"type": "object"}} for name in self.tools]
            return web.json_response({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": tools}})
        handler = self.tools[message["params"]["name"]]
        return await handler(request, message)


def event(message: dict[str, Any]) -> bytes:
    return f"event: message\ndata: {json.dumps(message)}\n\n".encode()


def text_result(request_id: Any, text: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text", "text": text}]}}


async def sse_response(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    return response


async def answer_ok(request: web.Request, message: dict[str, Any]) -> web.StreamResponse:
    return web.json_response(text_result(message["id"], "ok"))


@asynccontextmanager
async def hostile_backend() -> AsyncIterator[HostileBackend]:
    backend = HostileBackend(tools={"ok": answer_ok})
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_route("*", "/mcp", backend.handle)
    async with serving(app) as base:
        backend.base = base
        yield backend
