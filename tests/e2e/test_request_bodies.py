"""Request bodies: read whole up to the limit (however the client's bytes are split), 413 past it,
and a body that never arrives does not hold its connection past ``listen.body_timeout``."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from harness import MODERN, GatewayHandle, route, running_gateway
from hostile import hostile_backend, text_result

BOUND = 20.0
LIMIT = 4 * 1024 * 1024


@pytest.fixture
async def echo_url() -> AsyncIterator[str]:
    """A backend whose ``echo`` tool returns its text argument (JSON answers of any size)."""

    async def echo(request: web.Request, message: dict[str, Any]) -> web.StreamResponse:
        return web.json_response(text_result(message["id"], message["params"]["arguments"]["text"]))

    async with hostile_backend() as backend:
        backend.tools["echo"] = echo
        yield backend.url


def call_body(text: str) -> bytes:
    params = {
        "name": "echo",
        "arguments": {"text": text},
        "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}},
    }
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}).encode()


HEADERS = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
    "MCP-Protocol-Version": MODERN,
    "Mcp-Method": "tools/call",
    "Mcp-Name": "echo",
}


async def trickled(body: bytes, piece: int = 65536) -> AsyncIterator[bytes]:
    """The body in pieces, each sent on its own (no Content-Length: chunked transfer encoding)."""
    for offset in range(0, len(body), piece):
        yield body[offset : offset + piece]
        await asyncio.sleep(0)  # pacing: each piece goes out on its own


async def post(http: aiohttp.ClientSession, gw: GatewayHandle, data: Any) -> tuple[int, dict[str, Any] | None]:
    if isinstance(data, bytes):
        data = io.BytesIO(data)  # sent with its Content-Length
    async with asyncio.timeout(BOUND), http.post(gw.url(), data=data, headers=HEADERS) as resp:
        raw = await resp.read()
        return resp.status, (json.loads(raw) if raw else None)


async def test_large_bodies_are_read_whole(echo_url: str, http: aiohttp.ClientSession) -> None:
    async with running_gateway([route("echo", "/mcp", echo_url)]) as gw:
        for size in (200 * 1024, 1024 * 1024, 3 * 1024 * 1024):
            text = "z" * size
            for data in (call_body(text), trickled(call_body(text))):
                status, reply = await post(http, gw, data)
                assert status == 200, reply
                assert reply is not None
                assert reply["result"]["content"][0]["text"] == text


async def test_a_body_one_byte_over_the_limit_is_413(echo_url: str, http: aiohttp.ClientSession) -> None:
    async with running_gateway([route("echo", "/mcp", echo_url)]) as gw:
        body = call_body("")
        padded = body[:-1] + b" " * (LIMIT - len(body)) + b"}"
        assert len(padded) == LIMIT
        assert (await post(http, gw, padded))[0] == 200
        over = padded[:-1] + b" }"
        assert (await post(http, gw, over))[0] == 413  # Content-Length says so: refused up front
        assert (await post(http, gw, trickled(over)))[0] == 413  # no Content-Length: refused while reading
        assert (await post(http, gw, trickled(call_body("q" * (5 * 1024 * 1024)))))[0] == 413


@pytest.mark.parametrize("sent", [b"", b'{"jsonrpc": "2.0", '], ids=["no-byte", "part"])
async def test_a_body_that_never_arrives_is_dropped_after_the_body_timeout(echo_url: str, sent: bytes) -> None:
    async with running_gateway([route("echo", "/mcp", echo_url)], listen={"body_timeout": 0.3}) as gw:
        port = int(gw.base.rsplit(":", 1)[1])
        async with asyncio.timeout(BOUND):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            head = "".join(f"{name}: {value}\r\n" for name, value in HEADERS.items())
            writer.write(f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n{head}Content-Length: 1000\r\n\r\n".encode())
            writer.write(sent)  # and then nothing more
            await writer.drain()
            answer = await reader.read()  # until the gateway closes the connection
            writer.close()
    assert answer.startswith(b"HTTP/1.1 408")
