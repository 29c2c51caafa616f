"""Test harness: a gateway on a real loopback port, and a bare 2026-07-28 HTTP client.

The bare client speaks the wire directly (aiohttp), so tests can send what an SDK never would:
tampered states, wrong headers, partial answers. Interop tests use the official SDK instead.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from gateway.app import build_app
from gateway.config.load import parse_config
from gateway.frontdoor.headers import encode_header_value
from gateway.observability import requests

TEST_KEY = "test-key-0123456789abcdef0123456789abcdef"
MODERN = "2026-07-28"
ALL_CAPS: dict[str, Any] = {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}}


@dataclass
class GatewayHandle:
    app: web.Application
    base: str
    runner: web.AppRunner | None = None

    def url(self, path: str = "/mcp") -> str:
        return self.base + path


def route(name: str, path: str, backend_url: str, **overrides: Any) -> dict[str, Any]:
    backend = {"url": backend_url, "timeout": 10, **overrides.pop("backend", {})}
    return {"name": name, "path": path, "backend": backend, **overrides}


def stdio_route(name: str, path: str, command: list[str], **overrides: Any) -> dict[str, Any]:
    """A route whose backend is a stdio server the gateway runs (``command`` is its argv)."""
    backend = {"transport": "stdio", "command": command, "timeout": 10, **overrides.pop("backend", {})}
    return {"name": name, "path": path, "backend": backend, **overrides}


@asynccontextmanager
async def running_gateway(
    routes: list[dict[str, Any]], *, port: int = 0, **config: Any
) -> AsyncIterator[GatewayHandle]:
    """A gateway app serving ``routes`` on 127.0.0.1 (``port``: 0 for a free one)."""
    data = {"state": {"keys": [TEST_KEY]}, "replica_id": "test-replica", "routes": routes, **config}
    settings = parse_config(data, env={})
    app = build_app(settings)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=5, handler_cancellation=True)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield GatewayHandle(app, f"http://127.0.0.1:{port}", runner)
    finally:
        await runner.cleanup()


@dataclass
class Reply:
    status: int
    headers: Mapping[str, str]
    body: dict[str, Any]
    raw: bytes = b""
    """The HTTP body as it came."""

    @property
    def result(self) -> dict[str, Any]:
        assert "result" in self.body, self.body
        result: dict[str, Any] = self.body["result"]
        return result

    @property
    def error(self) -> dict[str, Any]:
        assert "error" in self.body, self.body
        error: dict[str, Any] = self.body["error"]
        return error

    @property
    def text(self) -> str:
        return " ".join(c["text"] for c in self.result.get("content", []) if c.get("type") == "text")


@dataclass
class BareClient:
    """A minimal 2026-07-28 client over raw HTTP."""

    http: aiohttp.ClientSession
    url: str
    capabilities: dict[str, Any] = field(default_factory=lambda: dict(ALL_CAPS))
    authorization: str | None = None
    ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    async def request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        headers: dict[str, str] | None = None,
        capabilities: dict[str, Any] | None = None,
        authorization: str | None = None,
    ) -> Reply:
        params = dict(params or {})
        meta = dict(params.pop("_meta", {}))
        meta.setdefault("io.modelcontextprotocol/protocolVersion", MODERN)
        meta.setdefault(
            "io.modelcontextprotocol/clientCapabilities",
            self.capabilities if capabilities is None else capabilities,
        )
        params["_meta"] = meta
        body = {"jsonrpc": "2.0", "id": next(self.ids), "method": method, "params": params}
        sent = {
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": MODERN,
            "Mcp-Method": method,
            "Content-Type": "application/json",
        }
        if method in ("tools/call", "prompts/get"):
            sent["Mcp-Name"] = encode_header_value(str(params.get("name")))
        elif method == "resources/read":
            sent["Mcp-Name"] = encode_header_value(str(params.get("uri")))
        auth = authorization if authorization is not None else self.authorization
        if auth:
            sent["Authorization"] = auth
        sent.update(headers or {})
        async with self.http.post(self.url, data=json.dumps(body), headers=sent) as resp:
            raw = await resp.read()
            payload = json.loads(raw) if raw else {}
            return Reply(resp.status, dict(resp.headers), payload, raw)

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None, **kw: Any) -> Reply:
        extra = kw.pop("extra", {})
        return await self.request("tools/call", {"name": name, "arguments": arguments or {}, **extra}, **kw)

    async def retry(
        self, name: str, state: str, responses: dict[str, Any], arguments: dict[str, Any] | None = None, **kw: Any
    ) -> Reply:
        return await self.call_tool(name, arguments, extra={"inputResponses": responses, "requestState": state}, **kw)


LISTEN_META: dict[str, Any] = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
}


def listen_request(request_id: str = "listen-1", authorization: str | None = None) -> tuple[str, dict[str, str]]:
    """A ``subscriptions/listen`` request for tool-list changes, over raw HTTP: (its JSON body, its headers)."""
    body = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "subscriptions/listen",
        "params": {"_meta": LISTEN_META, "notifications": {"toolsListChanged": True}},
    }
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "subscriptions/listen",
    }
    if authorization is not None:
        headers["Authorization"] = authorization
    return json.dumps(body), headers


class _LineSignal:
    """Stands in for the request middleware's logger: signals when a request's line says its client went away."""

    def __init__(self) -> None:
        self.disconnected = asyncio.Event()

    def info(self, event: str, **fields: Any) -> None:
        if fields.get("outcome") == "client_disconnected":
            self.disconnected.set()

    debug = info


def client_disconnects(monkeypatch: pytest.MonkeyPatch) -> asyncio.Event:
    """An event set once the gateway has logged a request whose client went away (its handler ended)."""
    signal = _LineSignal()
    monkeypatch.setattr(requests, "log", signal)
    return signal.disconnected


def accept(**content: Any) -> dict[str, Any]:
    return {"action": "accept", "content": content}


SAMPLED = {"role": "assistant", "content": {"type": "text", "text": "short"}, "model": "m", "stopReason": "endTurn"}


@asynccontextmanager
async def running_replicas(
    count: int, routes: list[dict[str, Any]], **config: Any
) -> AsyncIterator[list[GatewayHandle]]:
    """``count`` gateway replicas sharing the key ring, each advertising its own address.

    Each replica is stopped when the block ends; a test may stop one earlier with
    ``await handle.runner.cleanup()`` (idempotent)."""
    handles: list[GatewayHandle] = []
    runners: list[web.AppRunner] = []
    try:
        for index in range(count):
            port = _free_port()
            data = {
                "state": {"keys": [TEST_KEY]},
                "replica_id": f"replica-{index}",
                "listen": {"host": "127.0.0.1", "port": port},
                "replicas": {"advertise_url": f"http://127.0.0.1:{port}"},
                "routes": routes,
                **config,
            }
            app = build_app(parse_config(data, env={}))
            runner = web.AppRunner(app, access_log=None, shutdown_timeout=5, handler_cancellation=True)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", port).start()
            runners.append(runner)
            handles.append(GatewayHandle(app, f"http://127.0.0.1:{port}", runner))
        yield handles
    finally:
        for runner in runners:
            await runner.cleanup()


async def start_serve(config: Path, env: dict[str, str] | None = None) -> asyncio.subprocess.Process:
    """``python -m gateway serve --config CONFIG`` as a process of its own (stdout dropped, stderr
    piped), in ``env`` (default: this process's environment)."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway",
        "serve",
        "--config",
        str(config),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )


async def held_by_a_gone_replica(http: aiohttp.ClientSession, owner: GatewayHandle) -> tuple[str, dict[str, Any]]:
    """Call ``ask_city`` on ``owner``, then stop it: (requestState, the inputResponses that answer it)."""
    first = (await BareClient(http, owner.url()).call_tool("ask_city")).result
    (key,) = first["inputRequests"]
    assert owner.runner is not None
    await owner.runner.cleanup()
    return first["requestState"], {key: accept(city="Oslo")}


@asynccontextmanager
async def serving(app: web.Application) -> AsyncIterator[str]:
    """Serve ``app`` on a free loopback port; yields its base URL."""
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


_HOP = {"host", "content-length", "transfer-encoding", "connection"}


async def relay(request: web.Request, target: str) -> web.StreamResponse:
    """Forward ``request`` to the URL ``target`` and stream its answer back, both unchanged but for
    the hop-by-hop headers (a body the handler has read already is sent again: aiohttp keeps it)."""
    headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
    body = await request.read()
    async with (
        aiohttp.ClientSession(auto_decompress=False) as http,
        http.request(request.method, target, headers=headers, data=body) as upstream,
    ):
        response = web.StreamResponse(
            status=upstream.status,
            headers={k: v for k, v in upstream.headers.items() if k.lower() not in _HOP},
        )
        await response.prepare(request)
        async for chunk in upstream.content.iter_any():
            await response.write(chunk)
        await response.write_eof()
        return response


@asynccontextmanager
async def round_robin(targets: list[str]) -> AsyncIterator[str]:
    """A load balancer with no affinity: request n goes to ``targets[n % len(targets)]``.

    Returns its base URL. Bodies and answers are streamed through unchanged."""
    counter = itertools.count()
    app = web.Application()

    async def forward(request: web.Request) -> web.StreamResponse:
        return await relay(request, targets[next(counter) % len(targets)] + request.path_qs)

    app.router.add_route("*", "/{tail:.*}", forward)
    async with serving(app) as base:
        yield base
