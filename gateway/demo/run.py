"""``mrtr-gateway demo``: the bundled legacy backend and the gateway in front of it, on loopback.

Without ``--walk`` it prints the URL and copy-paste examples and runs until Ctrl-C. With
``--walk TOOL`` it also acts as a 2026-07-28 client over raw HTTP, calling ``TOOL`` through the
gateway and printing every round (the ``InputRequiredResult``, the answers, the retry) — the
answers are typed at the terminal when stdin is a TTY, otherwise canned ones are used.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import itertools
import json
import sys
from typing import Any

import aiohttp
from aiohttp import web

from gateway.app import build_app
from gateway.config.load import parse_config
from gateway.demo.backend import start_demo_backend
from gateway.keyset import generate_secret
from gateway.observability.logging import configure_logging

MODERN = "2026-07-28"
CAPABILITIES: dict[str, Any] = {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}}
_CANNED = {"city": "Lisbon", "name": "Ada", "color": "teal"}


def _out(text: str = "") -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


async def run_demo(port: int = 8080, walk: str | None = None) -> int:
    configure_logging("info", json_logs=False)
    backend_runner, backend_url = await start_demo_backend()
    settings = parse_config(
        {
            # Loopback only, and no browser origin may call it (DNS-rebinding protection).
            "listen": {"host": "127.0.0.1", "port": port, "allowed_origins": []},
            "state": {"keys": [generate_secret()]},
            "routes": [
                {
                    "name": "demo",
                    "path": "/mcp",
                    "backend": {"url": backend_url, "timeout": 30},
                    # slow_report (about 5 s) becomes a task for a client that declares the extension
                    # once it has run 1 s; every other tool, and every other client, is served as before.
                    "tasks": {
                        "enabled": True,
                        "poll_interval_ms": 1000,
                        "tools": {"slow_report": {"mode": "after", "after_ms": 1000}},
                    },
                }
            ],
        },
        env={},
    )
    runner = web.AppRunner(build_app(settings), access_log=None, handler_cancellation=True)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        await backend_runner.cleanup()
        sys.stderr.write(
            f"mrtr-gateway demo: cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}; "
            "pick another port with --port N (0 = any free port)\n"
        )
        return 2
    bound = runner.addresses[0][1] if runner.addresses else port
    url = f"http://127.0.0.1:{bound}/mcp"
    try:
        _banner(url, backend_url)
        if walk:
            return await walk_tool(url, walk)
        _out("Press Ctrl-C to stop.")
        await asyncio.Event().wait()
        return 0
    finally:
        await runner.cleanup()
        await backend_runner.cleanup()


def _banner(url: str, backend_url: str) -> None:
    _out(f"Legacy demo backend (handshake era, streamable HTTP): {backend_url}")
    _out(f"mrtr-gateway (MCP {MODERN}):                         {url}")
    _out()
    _out("Try it with the official Python SDK. Save this as client.py:")
    _out(_indent(client_example(url)))
    _out(f"and run it with the demo's own Python, which {_has_sdk()}:")
    _out()
    _out(f"    {sys.executable} client.py")
    _out()
    _out("Or with curl (bash; python3 only picks requestState out of the JSON): ask_city asks one")
    _out("question, so the first call answers input_required and the retry carries the answer.")
    _out(_indent(curl_pair(url)))


def _indent(text: str) -> str:
    return "\n" + "\n".join(f"    {line}" if line else "" for line in text.splitlines()) + "\n"


def _has_sdk() -> str:
    """How the demo's interpreter stands with the SDK the example needs (mcp 2.3.0)."""
    if importlib.util.find_spec("mcp") is not None:
        return "has the SDK"
    return f"needs the SDK first: {sys.executable} -m pip install 'mcp==2.3.0'"


def client_example(url: str) -> str:
    """The Python example the banner prints: list the tools, then a two-question tool."""
    return f"""import anyio
from mcp.client import Client
from mcp_types import ElicitResult


async def answer(ctx, params):
    print("server asks:", params.message)
    return ElicitResult(action="accept", content={{"name": "Ada", "color": "teal"}})


async def main():
    async with Client("{url}", mode="{MODERN}", elicitation_callback=answer) as client:
        print([t.name for t in (await client.list_tools()).tools])
        print((await client.call_tool("ask_two", {{}})).content[0].text)


anyio.run(main)
"""


def curl_pair(url: str) -> str:
    """The curl pair the banner prints: one ``input_required`` round of ``ask_city`` and its retry."""
    meta = (
        f'"_meta":{{"io.modelcontextprotocol/protocolVersion":"{MODERN}",'
        '"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}}'
    )
    return f"""URL={url}
H=(-H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream'
   -H 'MCP-Protocol-Version: {MODERN}' -H 'Mcp-Method: tools/call' -H 'Mcp-Name: ask_city')
META='{meta}'

# 1. The call: resultType "input_required", the question under "elicit-1", and a requestState.
FIRST=$(curl -s "$URL" "${{H[@]}}" \\
  -d '{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"ask_city","arguments":{{}},'"$META"'}}}}')
echo "$FIRST"
STATE=$(printf '%s' "$FIRST" | python3 -c 'import json,sys; print(json.load(sys.stdin)["result"]["requestState"])')

# 2. The retry: the same call, the answer under the same key, and the requestState as it came.
curl -s "$URL" "${{H[@]}}" \\
  -d '{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"ask_city","arguments":{{}},
       "inputResponses":{{"elicit-1":{{"action":"accept","content":{{"city":"Lisbon"}}}}}},
       "requestState":"'"$STATE"'",'"$META"'}}}}'
echo
"""


def _answer(request: dict[str, Any]) -> dict[str, Any]:
    method = request.get("method")
    params = request.get("params") or {}
    if method == "elicitation/create":
        if params.get("mode") == "url":
            _out(f"    (url mode) would open: {params.get('url')}")
            return {"action": "accept"}
        content: dict[str, Any] = {}
        for field in (params.get("requestedSchema") or {}).get("properties", {}):
            value = _CANNED.get(field, "demo")
            if sys.stdin.isatty():
                typed = input(f"    {field}? [{value}] ").strip()
                value = typed or value
            content[field] = value
        return {"action": "accept", "content": content}
    if method == "sampling/createMessage":
        return {
            "role": "assistant",
            "content": {"type": "text", "text": "a short summary"},
            "model": "demo-model",
            "stopReason": "endTurn",
        }
    if method == "roots/list":
        return {"roots": [{"uri": "file:///home/demo/project", "name": "project"}]}
    return {}


async def walk_tool(url: str, tool: str, arguments: dict[str, Any] | None = None) -> int:
    """Call ``tool`` through the gateway as a bare 2026-07-28 client, printing each round."""
    ids = itertools.count(1)
    params: dict[str, Any] = {"name": tool, "arguments": arguments or {}}
    async with aiohttp.ClientSession() as http:
        for round_no in itertools.count(1):
            body = {
                "jsonrpc": "2.0",
                "id": next(ids),
                "method": "tools/call",
                "params": {
                    **params,
                    "_meta": {
                        "io.modelcontextprotocol/protocolVersion": MODERN,
                        "io.modelcontextprotocol/clientCapabilities": CAPABILITIES,
                        "io.modelcontextprotocol/clientInfo": {"name": "mrtr-demo-walk", "version": "0"},
                    },
                },
            }
            headers = {
                "Accept": "application/json, text/event-stream",
                "MCP-Protocol-Version": MODERN,
                "Mcp-Method": "tools/call",
                "Mcp-Name": tool,
            }
            _out(f"→ round {round_no}: tools/call {tool}" + (" (retry with inputResponses)" if round_no > 1 else ""))
            async with http.post(url, json=body, headers=headers) as resp:
                message = await resp.json()
            if "error" in message:
                _out(f"← error: {json.dumps(message['error'])}")
                return 1
            result = message["result"]
            if result.get("resultType") != "input_required":
                text = " ".join(c.get("text", "") for c in result.get("content", []) if c.get("type") == "text")
                _out(f"← complete: {text}")
                return 0
            _out(f"← input_required, requestState {result['requestState'][:24]}… ({len(result['requestState'])} chars)")
            answers = {}
            for key, request in result.get("inputRequests", {}).items():
                message_text = (request.get("params") or {}).get("message", "")
                _out(f"    {key}: {request['method']} {message_text}")
                answers[key] = _answer(request)
                _out(f"    answer: {json.dumps(answers[key])}")
            params = {
                "name": tool,
                "arguments": arguments or {},
                "inputResponses": answers,
                "requestState": result["requestState"],
            }
    return 1


def main() -> None:
    with contextlib.suppress(KeyboardInterrupt):
        raise SystemExit(asyncio.run(run_demo()))
