"""Legacy backends that answer ``tools/call emit`` with exactly the bytes the caller chose, on every
legacy wire (issue 17: every backend byte is answered without a 5xx from the gateway itself).

The bytes ride in the call itself (``arguments``, built by :func:`emit_args`), so one backend serves
any number of calls at once and a property-based test needs no state shared with it; ``@ID@`` in the
bytes becomes the JSON of the backend request's id. Everything else (``initialize``, ``ping``,
``tools/list``) is answered correctly, except what a test sets per credential on the streamable-HTTP
backend: the ``initialize`` answer (:attr:`StreamableEmitter.handshakes`) and the standalone GET
stream (:attr:`StreamableEmitter.get_streams`), found by the ``Authorization`` header the gateway
forwards.

* :func:`streamable_emitter` - streamable HTTP. ``mode`` ``json``: the bytes are the body (with
  ``status`` and ``content_type``); ``sse``: an event stream, written in pieces cut at ``cuts``;
  ``stall``: the first half of a JSON body, then nothing.
* :func:`http_sse_emitter` - the 2024-11-05 HTTP+SSE wire: the bytes are written as they are to the
  session's one stream (a test frames them as events itself); ``close`` ends the stream after them.
* :data:`STDIO_EMITTER` - a stdio server (run with ``sys.executable``): the bytes are written as
  they are to stdout (a test ends its lines itself).
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web
from harness import serving

STDIO_EMITTER = Path(__file__).with_name("stdio_emitter.py")
PLACEHOLDER = b"@ID@"
TOOLS = [{"name": "emit", "inputSchema": {"type": "object"}}]


def emit_args(
    body: bytes,
    *,
    mode: str = "json",
    status: int = 200,
    content_type: str = "application/json",
    cuts: list[int] | None = None,
    close: bool = False,
) -> dict[str, Any]:
    """The ``arguments`` of a ``tools/call emit`` whose answer is ``body``."""
    return {
        "b64": base64.b64encode(body).decode(),
        "mode": mode,
        "status": status,
        "content_type": content_type,
        "cuts": cuts or [],
        "close": close,
    }


def answer(text: str = "ok") -> bytes:
    """A valid answer to the call (``@ID@`` for its id)."""
    return (
        b'{"jsonrpc":"2.0","id":@ID@,"result":{"content":[{"type":"text","text":' + json.dumps(text).encode() + b"}]}}"
    )


def as_event(body: bytes) -> bytes:
    """``body`` as one SSE ``message`` event (one ``data`` line per line of it)."""
    lines = body.split(b"\n")
    return b"event: message\n" + b"".join(b"data: " + line + b"\n" for line in lines) + b"\n"


def _emitted(message: dict[str, Any]) -> tuple[bytes, dict[str, Any]]:
    args = message["params"]["arguments"]
    body = base64.b64decode(args["b64"]).replace(PLACEHOLDER, json.dumps(message["id"]).encode())
    return body, args


def _result(message: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": message["id"], "result": result}


def _initialize_result(message: dict[str, Any]) -> dict[str, Any]:
    return _result(
        message,
        {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "emitter", "version": "1"},
        },
    )


def _plain_answer(message: dict[str, Any]) -> dict[str, Any] | None:
    """The correct answer to anything but ``initialize`` and ``tools/call`` (None for those)."""
    if message["method"] == "tools/list":
        return _result(message, {"tools": TOOLS})
    if message["method"] in ("initialize", "tools/call"):
        return None
    return _result(message, {})


@dataclass
class StreamableEmitter:
    base: str = ""
    handshakes: dict[str, bytes] = field(default_factory=dict)
    """By ``Authorization`` header: the body of the ``initialize`` answer (JSON, ``@ID@`` for its id)."""
    get_streams: dict[str, list[bytes]] = field(default_factory=dict)
    """By ``Authorization`` header: the pieces of the standalone GET stream (then it ends)."""
    initializations: int = 0
    gets: int = 0
    closing: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def url(self) -> str:
        return self.base + "/mcp"

    async def shutdown(self, app: web.Application) -> None:
        self.closing.set()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        credential = request.headers.get("Authorization", "")
        if request.method == "GET":
            self.gets += 1
            pieces = self.get_streams.get(credential)
            if pieces is None:
                return web.Response(status=405)
            return await _write_stream(request, pieces)
        if request.method == "DELETE":
            return web.Response(status=200)
        message = await request.json()
        if "id" not in message or "method" not in message:
            return web.Response(status=202)
        if message["method"] == "initialize":
            self.initializations += 1
            headers = {"Mcp-Session-Id": f"s{self.initializations}"}
            hostile = self.handshakes.get(credential)
            if hostile is not None:
                body = hostile.replace(PLACEHOLDER, json.dumps(message["id"]).encode())
                return web.Response(body=body, headers={**headers, "Content-Type": "application/json"})
            return web.json_response(_initialize_result(message), headers=headers)
        plain = _plain_answer(message)
        if plain is not None:
            return web.json_response(plain)
        body, args = _emitted(message)
        if args["mode"] == "sse":
            pieces = [body[start:end] for start, end in itertools.pairwise([0, *sorted(args["cuts"]), len(body)])]
            return await _write_stream(request, pieces)
        if args["mode"] == "stall":
            response = web.StreamResponse(headers={"Content-Type": "application/json"})
            response.content_length = len(body)
            await response.prepare(request)
            await response.write(body[: len(body) // 2])
            await self.closing.wait()  # never finishes: the gateway gives up first
        response = web.StreamResponse(status=args["status"], headers={"Content-Type": args["content_type"]})
        response.content_length = len(body)  # written as it is, whatever its size
        await response.prepare(request)
        await response.write(body)
        await response.write_eof()
        return response


async def _write_stream(request: web.Request, pieces: list[bytes]) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    try:
        for piece in pieces:
            await response.write(piece)
            await asyncio.sleep(0)  # pacing: each piece is read on its own
        await response.write_eof()
    except ConnectionError:
        pass  # the gateway stopped reading (it refused what it read)
    return response


@asynccontextmanager
async def streamable_emitter() -> AsyncIterator[StreamableEmitter]:
    backend = StreamableEmitter()
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_route("*", "/mcp", backend.handle)
    app.on_shutdown.append(backend.shutdown)
    async with serving(app) as base:
        backend.base = base
        yield backend


@dataclass
class HttpSseEmitter:
    base: str = ""
    streams: dict[str, asyncio.Queue[bytes | None]] = field(default_factory=dict)
    opened: int = 0

    @property
    def url(self) -> str:
        return self.base + "/sse"

    async def shutdown(self, app: web.Application) -> None:
        for queue in self.streams.values():
            queue.put_nowait(None)

    async def stream(self, request: web.Request) -> web.StreamResponse:
        self.opened += 1
        session = str(self.opened)
        queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.streams[session] = queue
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        try:
            await response.write(f"event: endpoint\ndata: /messages?session_id={session}\n\n".encode())
            while (chunk := await queue.get()) is not None:
                await response.write(chunk)
            await response.write_eof()
        except ConnectionError:
            pass
        finally:
            del self.streams[session]
        return response

    async def post(self, request: web.Request) -> web.StreamResponse:
        queue = self.streams.get(request.query.get("session_id", ""))
        if queue is None:
            return web.Response(status=404)
        message = await request.json()
        if "id" not in message or "method" not in message:
            return web.Response(status=202)
        plain = _initialize_result(message) if message["method"] == "initialize" else _plain_answer(message)
        if plain is not None:
            queue.put_nowait(as_event(json.dumps(plain).encode()))
            return web.Response(status=202)
        body, args = _emitted(message)
        queue.put_nowait(body)
        if args["close"]:
            queue.put_nowait(None)
        return web.Response(status=202)


@asynccontextmanager
async def http_sse_emitter() -> AsyncIterator[HttpSseEmitter]:
    backend = HttpSseEmitter()
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_get("/sse", backend.stream)
    app.router.add_post("/messages", backend.post)
    app.on_shutdown.append(backend.shutdown)
    async with serving(app) as base:
        backend.base = base
        yield backend


def stdio_command() -> list[str]:
    return [sys.executable, str(STDIO_EMITTER)]
