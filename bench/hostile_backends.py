"""Hostile backends: the gateway's memory and /healthz latency while a legacy server floods it.

Run from the repo root after `bash scripts/bootstrap.sh`:

    .venv/bin/python -m bench.hostile_backends [--seconds 10] [--json out.json]

Each scenario starts a fresh gateway (a subprocess, as deployed, default limits) in front of a
small in-process aiohttp backend that misbehaves, for at most ``--seconds``:

* ``get-endless-line``: the session's standalone GET stream sends one line that never ends;
* ``get-comment-flood``: the GET stream sends SSE comments as fast as it can;
* ``round-flood``: a ``tools/call`` answered by elicitation requests 1 ms apart, without end
  (the route's batch window is 200 ms, so every request lands inside it);
* ``held-flood``: one elicitation (the call is held for the client), then notifications as fast
  as the gateway reads them; the client retries at the end.

It samples the gateway's resident memory (``/proc/<pid>/status``, Linux) and requests
``/healthz`` back to back, and reports the bytes the backend pushed, the gateway's peak RSS, the
slowest /healthz, the GET requests the backend received and what the client got. Everything binds
127.0.0.1; every wait is bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from bench.bench import CAPS, HEADERS, MODERN, Modern, free_port, wait_http

ROOT = Path(__file__).resolve().parents[1]
ELICIT = {"message": "Which city?", "requestedSchema": {"type": "object", "properties": {"city": {"type": "string"}}}}


class Hostile:
    """A legacy streamable-HTTP server whose GET stream and ``flood``/``held`` tools misbehave."""

    def __init__(self, scenario: str) -> None:
        self.scenario = scenario
        self.sent = 0
        self.gets = 0
        self.stop = asyncio.Event()

    async def write(self, response: web.StreamResponse, data: bytes) -> None:
        await response.write(data)
        self.sent += len(data)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.method == "GET":
            self.gets += 1
            if not self.scenario.startswith("get-"):
                return web.Response(status=405)
            return await self.flood_get(request)
        if request.method == "DELETE":
            return web.Response(status=200)
        message = await request.json()
        if "id" not in message or "method" not in message:
            return web.Response(status=202)
        if message["method"] == "initialize":
            result = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "h"}}
            body = {"jsonrpc": "2.0", "id": message["id"], "result": result}
            return web.json_response(body, headers={"Mcp-Session-Id": "s1"})
        if message["method"] == "tools/list":
            return web.json_response({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": []}})
        name = message["params"]["name"]
        if name == "ok":
            ok = {"jsonrpc": "2.0", "id": message["id"], "result": {"content": []}}
            return web.json_response(ok)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        with contextlib.suppress(ConnectionError):
            if name == "flood":
                index = 0
                while not self.stop.is_set():
                    ask = {"jsonrpc": "2.0", "id": f"s{index}", "method": "elicitation/create", "params": ELICIT}
                    await self.write(response, f"event: message\ndata: {json.dumps(ask)}\n\n".encode())
                    index += 1
                    await asyncio.sleep(0.001)
            elif name == "held":
                ask = {"jsonrpc": "2.0", "id": "s1", "method": "elicitation/create", "params": ELICIT}
                await self.write(response, f"event: message\ndata: {json.dumps(ask)}\n\n".encode())
                await asyncio.sleep(0.5)
                note = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": "x" * 1000}}
                frame = f"event: message\ndata: {json.dumps(note)}\n\n".encode() * 10
                while not self.stop.is_set():
                    await self.write(response, frame)
        return response

    async def flood_get(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        chunk = b"x" * 65536 if self.scenario == "get-endless-line" else b": flood\n\n" * 6000
        with contextlib.suppress(ConnectionError):
            if self.scenario == "get-endless-line":
                await self.write(response, b"data: ")
            while not self.stop.is_set():
                await self.write(response, chunk)
        return response


def spawn_gateway(config: str) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "gateway", "serve", "--config", config]
    return subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def sample(pid: int, healthz: str, stop: asyncio.Event, out: dict[str, float]) -> None:
    async with aiohttp.ClientSession() as http:
        while not stop.is_set():
            out["rss_peak_mib"] = max(out.get("rss_peak_mib", 0.0), rss_mib(pid))
            started = time.perf_counter()
            async with http.get(healthz, timeout=aiohttp.ClientTimeout(total=60)) as resp:
                await resp.read()
            out["healthz_worst_ms"] = max(out.get("healthz_worst_ms", 0.0), (time.perf_counter() - started) * 1000)
            await asyncio.sleep(0.02)


async def run_scenario(scenario: str, seconds: float) -> dict[str, Any]:
    hostile = Hostile(scenario)
    app = web.Application()
    app.router.add_route("*", "/mcp", hostile.handle)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    backend_url = f"http://127.0.0.1:{runner.addresses[0][1]}/mcp"
    port = free_port()
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as cfg:
        cfg.write(
            f"listen: {{host: 127.0.0.1, port: {port}}}\n"
            "state: {keys: ['bench-key-0123456789abcdef0123456789abcdef']}\n"
            "logging: {level: error}\n"
            f"routes: [{{name: h, path: /mcp, backend: {{url: '{backend_url}', timeout: {seconds}}}, "
            "holds: {batch_window: 0.2}}]\n"
        )
    proc = spawn_gateway(cfg.name)
    figures: dict[str, Any] = {"scenario": scenario}
    stop = asyncio.Event()
    try:
        gateway = f"http://127.0.0.1:{port}/mcp"
        await wait_http(gateway)
        figures["rss_start_mib"] = round(rss_mib(proc.pid), 1)
        sampler = asyncio.create_task(sample(proc.pid, f"http://127.0.0.1:{port}/healthz", stop, figures))
        async with aiohttp.ClientSession() as http:
            modern = Modern(http, gateway)
            outcome = await bounded(seconds, lambda: drive(modern, scenario, seconds))
        figures["client_got"] = outcome
        stop.set()
        hostile.stop.set()
        await asyncio.wait_for(sampler, 60)
    finally:
        stop.set()
        hostile.stop.set()
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            figures["stop"] = "did not stop within 10 s of SIGTERM; killed"
            proc.kill()
            proc.wait(timeout=10)
        await runner.cleanup()
        os.unlink(cfg.name)
    figures.update(backend_sent_mib=round(hostile.sent / 1024 / 1024, 1), backend_gets=hostile.gets)
    figures["rss_peak_mib"] = round(figures.get("rss_peak_mib", 0.0), 1)
    figures["healthz_worst_ms"] = round(figures.get("healthz_worst_ms", 0.0), 1)
    return figures


async def bounded(seconds: float, fn: Callable[[], Awaitable[str]]) -> str:
    try:
        async with asyncio.timeout(seconds + 5):
            return await fn()
    except TimeoutError:
        return f"nothing within {seconds + 5:g}s"


async def drive(modern: Modern, scenario: str, seconds: float) -> str:
    if scenario.startswith("get-"):
        await modern.call("ok", {})
        await asyncio.sleep(seconds)  # the GET stream floods in the background meanwhile
        await modern.call("ok", {})
        return "calls answered"
    if scenario == "round-flood":
        return describe(await call_raw(modern, "flood"))
    first = await call_raw(modern, "held")
    if first.get("result", {}).get("resultType") != "input_required":
        return describe(first)
    await asyncio.sleep(seconds)  # held while the backend floods
    (key,) = first["result"]["inputRequests"]
    retry = {"inputResponses": {key: {"action": "accept", "content": {"city": "Paris"}}}}
    retry["requestState"] = first["result"]["requestState"]
    return describe(await call_raw(modern, "held", retry))


async def call_raw(modern: Modern, name: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """One tools/call; the whole JSON-RPC answer (result or error)."""
    modern.ids += 1
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": CAPS}
    params = {"name": name, "arguments": {}, "_meta": meta, **(extra or {})}
    body = {"jsonrpc": "2.0", "id": modern.ids, "method": "tools/call", "params": params}
    headers = {**HEADERS, "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": name}
    async with modern.http.post(modern.url, json=body, headers=headers) as resp:
        raw = await resp.read()
    if resp.content_type == "text/event-stream":
        data = [line[5:].strip() for line in raw.decode().splitlines() if line.startswith("data:")]
        answer: dict[str, Any] = json.loads(data[-1])
        return answer
    whole: dict[str, Any] = json.loads(raw)
    return whole


def describe(reply: dict[str, Any]) -> str:
    result = reply.get("result")
    if isinstance(result, dict):
        if result.get("resultType") == "input_required":
            return f"input_required with {len(result.get('inputRequests', {}))} requests"
        return str(result.get("resultType", "result"))
    error = reply.get("error") or {}
    data = error.get("data") or {}
    return f"error {error.get('code')} {data.get('reason', '')} {data.get('cause', '')}".strip()


async def main(seconds: float, out: Path | None) -> int:
    report = []
    for scenario in ("get-endless-line", "get-comment-flood", "round-flood", "held-flood"):
        figures = await run_scenario(scenario, seconds)
        report.append(figures)
        print(json.dumps(figures))
    if out is not None:
        out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    raise SystemExit(asyncio.run(main(args.seconds, args.json)))
