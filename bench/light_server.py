"""A light handshake-era streamable HTTP server for the holds benchmark (aiohttp, no SDK).

Ten thousand FastMCP sessions would measure FastMCP, not the gateway: this server keeps each
session in a few hundred bytes. ``initialize`` answers JSON with a session id; ``tools/call ask``
answers on an SSE stream with one ``elicitation/create`` and keeps the stream open until the
client's answer arrives (a POST with that request's id), then sends the result and ends it;
``tools/call work`` answers on an SSE stream that stays open and silent until the client goes away
(a task that keeps running), ``tools/call done`` answers at once with a short result. With
``--get-stream`` it also keeps a standalone GET stream per session (as FastMCP does); without, GET
is 405, which the protocol allows, so a held call costs the gateway one backend connection.

    python -m bench.light_server --port 8123 [--get-stream]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
from typing import Any

from aiohttp import web

ELICIT = {"message": "Which city?", "requestedSchema": {"type": "object", "properties": {"city": {"type": "string"}}}}
_NO_ARGS = {"type": "object", "properties": {}}
TOOLS = [
    {"name": "ask", "description": "One elicitation.", "inputSchema": _NO_ARGS},
    {"name": "work", "description": "Runs until the client goes away.", "inputSchema": _NO_ARGS},
    {"name": "done", "description": "Answers at once.", "inputSchema": _NO_ARGS},
]
DONE_TEXT = "report=ready;rows=42"
"""What ``done`` answers: a short tool result, the size of a typical status line."""


def build(get_stream: bool) -> web.Application:
    ids = itertools.count(1)
    waiting: dict[str, asyncio.Future[Any]] = {}

    def sse(message: dict[str, Any]) -> bytes:
        return b"event: message\ndata: " + json.dumps(message).encode() + b"\n\n"

    async def post(request: web.Request) -> web.StreamResponse:
        message = await request.json()
        method = message.get("method")
        if method == "initialize":
            result = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "light", "version": "0"},
            }
            body = {"jsonrpc": "2.0", "id": message["id"], "result": result}
            return web.json_response(body, headers={"Mcp-Session-Id": f"s{next(ids)}"})
        if "id" not in message or (method is None and "result" in message):
            future = waiting.pop(str(message.get("id")), None)
            if future is not None and not future.done():
                future.set_result(message.get("result"))
            return web.Response(status=202)
        if method == "tools/list":
            return web.json_response({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": TOOLS}})
        if method != "tools/call":
            return web.json_response({"jsonrpc": "2.0", "id": message["id"], "result": {}})
        name = (message.get("params") or {}).get("name")
        if name == "done":
            result = {"content": [{"type": "text", "text": DONE_TEXT}]}
            return web.json_response({"jsonrpc": "2.0", "id": message["id"], "result": result})
        if name == "work":
            return await running_call(request)
        return await held_call(request, message)

    async def running_call(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await asyncio.Event().wait()  # until the client goes away (the handler is cancelled)
        return response

    async def held_call(request: web.Request, message: dict[str, Any]) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        asked = f"e{next(ids)}"
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        waiting[asked] = future
        await response.write(sse({"jsonrpc": "2.0", "id": asked, "method": "elicitation/create", "params": ELICIT}))
        try:
            answer = await future
        finally:
            waiting.pop(asked, None)
        city = (answer or {}).get("content", {}).get("city", "?")
        result = {"content": [{"type": "text", "text": f"city={city}"}]}
        await response.write(sse({"jsonrpc": "2.0", "id": message["id"], "result": result}))
        await response.write_eof()
        return response

    async def get(request: web.Request) -> web.StreamResponse:
        if not get_stream:
            return web.Response(status=405)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await asyncio.Event().wait()  # until the client goes away (the handler is cancelled)
        return response

    async def delete(request: web.Request) -> web.Response:
        return web.Response(status=200)

    app = web.Application(client_max_size=1024 * 1024)
    app.router.add_post("/mcp", post)
    app.router.add_get("/mcp", get)
    app.router.add_delete("/mcp", delete)
    return app


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--get-stream", action="store_true")
    args = parser.parse_args()
    web.run_app(build(args.get_stream), host="127.0.0.1", port=args.port, access_log=None, print=None)


if __name__ == "__main__":
    main()
