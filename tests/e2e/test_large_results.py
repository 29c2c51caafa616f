"""Large results through the gateway: however the backend frames and cuts its SSE answer, the client
gets the same bytes, and the message limit is exact (the figures are in bench/, never asserted)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from harness import MODERN, BareClient, route, running_gateway
from hostile import HostileBackend, sse_response, text_result

from gateway import fastjson
from gateway.errors import BackendUnavailable
from gateway.frontdoor.responses import WRITE_SLICE_BYTES

BOUND = 30.0
TEXT = '0123456789abcdef-é€😀\\"\n' * (1024 * 1024 // 24)  # ~1 MiB of characters, escapes and non-ASCII


def framed(message: dict[str, Any], newline: bytes) -> bytes:
    """One SSE ``message`` event carrying ``message``, lines ended by ``newline``."""
    return b"event: message" + newline + b"data: " + json.dumps(message).encode() + newline + newline


def sse_tool(newline: bytes, write_size: int, text: str = TEXT, seen: list[Any] | None = None) -> Any:
    """A tool answering ``text`` as one SSE event, written ``write_size`` bytes at a time."""

    async def tool(request: web.Request, message: dict[str, Any]) -> web.StreamResponse:
        if seen is not None:
            seen.append(message["id"])
        response = await sse_response(request)
        event = framed(text_result(message["id"], text), newline)
        for offset in range(0, len(event), write_size):
            await response.write(event[offset : offset + write_size])
        await response.write_eof()
        return response

    return tool


def json_tool(text: str) -> Any:
    async def tool(request: web.Request, message: dict[str, Any]) -> web.StreamResponse:
        return web.json_response(text_result(message["id"], text))

    return tool


async def raw_call(http: aiohttp.ClientSession, url: str, name: str) -> tuple[int, str, bytes]:
    """A ``tools/call`` with id 1: status, content type and the body's bytes as they arrived."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": name,
            "arguments": {},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/call",
        "Mcp-Name": name,
    }
    async with http.post(url, data=json.dumps(body), headers=headers) as resp:
        return resp.status, resp.content_type, await resp.read()


@pytest.mark.parametrize(
    ("newline", "write_size", "text"),
    [
        (b"\r\n", 7919, TEXT),
        (b"\n", 65536, TEXT),
        (b"\r", 4096, TEXT),
        (b"\r\n", 1 << 22, TEXT),
        (b"\r\n", 1, TEXT[:3000]),
    ],
    ids=["CRLF-prime-writes", "LF-64KiB-writes", "CR-4KiB-writes", "CRLF-one-write", "CRLF-byte-writes"],
)
async def test_an_sse_answer_cut_any_way_reaches_the_client_as_the_same_bytes(
    backend: HostileBackend, http: aiohttp.ClientSession, newline: bytes, write_size: int, text: str
) -> None:
    backend.tools["cut"] = sse_tool(newline, write_size, text)
    backend.tools["plain"] = json_tool(text)
    async with running_gateway([route("h", "/mcp", backend.url)]) as gw:
        async with asyncio.timeout(BOUND):
            cut = await raw_call(http, gw.url(), "cut")
            plain = await raw_call(http, gw.url(), "plain")
    status, content_type, body = cut
    assert (status, content_type) == (200, "application/json")
    assert cut == plain  # the backend's framing and cutting change nothing the client sees
    message = json.loads(body)
    assert message["result"]["content"] == [{"type": "text", "text": text}]
    assert message["result"]["resultType"] == "complete"
    assert body == fastjson.dumps(message)  # compact UTF-8, as every answer is written
    if len(text) == len(TEXT):
        assert len(body) > WRITE_SLICE_BYTES  # this answer left the gateway in slices


@pytest.mark.parametrize("newline", [b"\n", b"\r\n"], ids=["LF", "CRLF"])
async def test_an_sse_answer_of_exactly_the_message_limit_passes_and_one_byte_more_is_refused(
    backend: HostileBackend, http: aiohttp.ClientSession, newline: bytes
) -> None:
    seen: list[Any] = []
    backend.tools["big"] = sse_tool(newline, 65536, seen=seen)
    async with running_gateway([route("h", "/mcp", backend.url)]) as gw, asyncio.timeout(BOUND):
        assert (await BareClient(http, gw.url()).call_tool("big")).result["content"][0]["text"] == TEXT
    size = len(framed(text_result(seen[0], TEXT), newline))  # every bound-checked byte of the event
    exact = route("h", "/mcp", backend.url, backend={"limits": {"max_message_bytes": size}})
    async with running_gateway([exact]) as gw, asyncio.timeout(BOUND):
        reply = await BareClient(http, gw.url()).call_tool("big")
    assert reply.result["content"][0]["text"] == TEXT
    short = route("h", "/mcp", backend.url, backend={"limits": {"max_message_bytes": size - 1}})
    async with running_gateway([short]) as gw, asyncio.timeout(BOUND):
        reply = await BareClient(http, gw.url()).call_tool("big")
    assert reply.error["code"] == BackendUnavailable.code, reply.body
    assert reply.error["data"]["cause"] == "malformed_response", reply.body
    assert seen == [seen[0]] * 3  # the same request id each time: the sizes compared are the same
