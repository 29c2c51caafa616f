"""mrtr-gateway benchmark: direct vs gateway vs a bare forwarding hop, and MRTR rounds vs native.

Run from the repo root after `bash scripts/bootstrap.sh`:

    .venv/bin/python -m bench.bench [--runs 300] [--rounds-runs 150] [--json bench/results/latest.json]

In one run, on one machine, it starts a real legacy server (mcp 1.30.0 FastMCP, its own
virtualenv), the gateway in front of it (in a subprocess, as deployed), a bare aiohttp forwarding
hop in front of it (the floor), and a native mcp 2.3.0 MRTR server. It then measures, with raw
HTTP clients so no SDK overhead is counted:

1. a no-input `tools/call add`: legacy client → backend (direct), legacy client → hop → backend
   (floor), modern client → gateway → backend;
2. one input round (`ask_city`): legacy inline elicitation direct, the same through the hop,
   MRTR through the gateway, and MRTR against the native 2026-07-28 server.

It reports median, p90 and p99 latency per path and the ratios. Requests are sequential (latency,
not throughput), every loop is bounded by --runs, and everything binds 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from bench.forward_hop import forward_app
from bench.harness import CAPS, HEADERS, MODERN, free_port, wait_http
from gateway.legacy.session import FinalResponse, ServerRequest
from gateway.legacy.streamable_http import StreamableHttpSession

ROOT = Path(__file__).resolve().parents[1]


def spawn(argv: list[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


class Modern:
    """A raw 2026-07-28 client."""

    def __init__(self, http: aiohttp.ClientSession, url: str) -> None:
        self.http, self.url, self.ids = http, url, 0

    async def call(self, name: str, arguments: dict[str, Any], extra: dict[str, Any] | None = None) -> dict[str, Any]:
        self.ids += 1
        params = {
            "name": name,
            "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": CAPS,
            },
            **(extra or {}),
        }
        body = {"jsonrpc": "2.0", "id": self.ids, "method": "tools/call", "params": params}
        headers = {**HEADERS, "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": name}
        async with self.http.post(self.url, json=body, headers=headers) as resp:
            if resp.content_type == "text/event-stream":
                text = await resp.text()
                data = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
                message = json.loads(data[-1])
            else:
                message = await resp.json()
        result: dict[str, Any] = message["result"]
        return result

    async def round_trip(self) -> None:
        first = await self.call("ask_city", {})
        assert first["resultType"] == "input_required", first
        answers = {k: {"action": "accept", "content": {"city": "Paris"}} for k in first["inputRequests"]}
        done = await self.call("ask_city", {}, {"inputResponses": answers, "requestState": first["requestState"]})
        assert done["content"][0]["text"] == "city=Paris", done


async def legacy_session(http: aiohttp.ClientSession, url: str) -> StreamableHttpSession:
    session = StreamableHttpSession(
        http, url, capabilities={"elicitation": {}}, headers={}, timeout=30, connect_timeout=5
    )
    await session.open()
    return session


async def legacy_call(session: StreamableHttpSession, name: str, arguments: dict[str, Any]) -> str:
    exchange = await session.start("tools/call", {"name": name, "arguments": arguments}, {})
    while True:
        event = await exchange.next(30)
        if isinstance(event, ServerRequest):
            await session.respond(event.id, result={"action": "accept", "content": {"city": "Paris"}})
        elif isinstance(event, FinalResponse):
            assert event.result is not None
            text: str = event.result["content"][0]["text"]
            return text


async def measure(label: str, runs: int, fn: Callable[[], Awaitable[Any]]) -> dict[str, Any]:
    for _ in range(min(20, runs)):  # warm-up: connections, sessions, caches
        await fn()
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        await fn()
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    stats = {
        "label": label,
        "runs": runs,
        "median_ms": round(statistics.median(samples), 3),
        "p90_ms": round(samples[int(runs * 0.9) - 1], 3),
        "p99_ms": round(samples[max(int(runs * 0.99) - 1, 0)], 3),
        "mean_ms": round(statistics.fmean(samples), 3),
    }
    print(
        f"  {label:<48} median {stats['median_ms']:8.3f} ms   p90 {stats['p90_ms']:8.3f}   p99 {stats['p99_ms']:8.3f}"
    )
    return stats


async def main(runs: int, rounds_runs: int, out: Path | None, batch_window: float) -> int:
    legacy_python = os.environ.get("MRTR_LEGACY_PYTHON", str(ROOT / ".venv-legacy/bin/python"))
    backend_port, gateway_port, native_port = free_port(), free_port(), free_port()
    backend_url = f"http://127.0.0.1:{backend_port}/mcp"
    procs = [
        spawn([legacy_python, "tests/peers/legacy_fastmcp.py", "--port", str(backend_port), "--log-level", "WARNING"]),
        spawn(
            [sys.executable, "tests/peers/native_mcpserver.py", "--port", str(native_port), "--log-level", "WARNING"]
        ),
    ]
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as cfg:
        cfg.write(
            f"listen: {{host: 127.0.0.1, port: {gateway_port}}}\n"
            "state: {keys: ['bench-key-0123456789abcdef0123456789abcdef']}\n"
            "logging: {level: warning}\n"
            f"routes: [{{name: bench, path: /mcp, backend: {{url: '{backend_url}'}}, "
            f"holds: {{batch_window: {batch_window}}}}}]\n"
        )
    procs.append(spawn([str(ROOT / ".venv/bin/mrtr-gateway"), "serve", "--config", cfg.name]))
    hop_runner = web.AppRunner(forward_app(backend_url), access_log=None)
    await hop_runner.setup()
    hop_site = web.TCPSite(hop_runner, "127.0.0.1", 0)
    await hop_site.start()
    hop_url = f"http://127.0.0.1:{hop_runner.addresses[0][1]}/mcp"
    gateway_url = f"http://127.0.0.1:{gateway_port}/mcp"
    native_url = f"http://127.0.0.1:{native_port}/mcp"
    try:
        for url in (backend_url, gateway_url, native_url):
            await wait_http(url)
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
            direct = await legacy_session(http, backend_url)
            via_hop = await legacy_session(http, hop_url)
            modern_gw = Modern(http, gateway_url)
            modern_native = Modern(http, native_url)
            print(f"no-input tools/call add, {runs} sequential runs each")
            add = {"a": 2, "b": 3}
            call = [
                await measure("direct: legacy client -> backend", runs, lambda: legacy_call(direct, "add", add)),
                await measure(
                    "floor: legacy client -> aiohttp hop -> backend", runs, lambda: legacy_call(via_hop, "add", add)
                ),
                await measure(
                    "gateway: 2026-07-28 client -> gateway -> backend", runs, lambda: modern_gw.call("add", add)
                ),
            ]
            print(f"one input round (ask_city, elicitation), {rounds_runs} sequential runs each")
            rounds = [
                await measure(
                    "direct: legacy inline elicitation", rounds_runs, lambda: legacy_call(direct, "ask_city", {})
                ),
                await measure(
                    "floor: legacy inline elicitation via hop",
                    rounds_runs,
                    lambda: legacy_call(via_hop, "ask_city", {}),
                ),
                await measure("gateway: MRTR (2 POSTs) -> legacy backend", rounds_runs, modern_gw.round_trip),
                await measure("native: MRTR (2 POSTs) -> mcp 2.3.0 server", rounds_runs, modern_native.round_trip),
            ]
            await direct.close()
            await via_hop.close()
    finally:
        await hop_runner.cleanup()
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=10)
        os.unlink(cfg.name)

    def ratio(a: dict[str, Any], b: dict[str, Any]) -> float:
        return round(a["median_ms"] / b["median_ms"], 2)

    ratios = {
        "call_gateway_over_direct": ratio(call[2], call[0]),
        "call_gateway_over_floor": ratio(call[2], call[1]),
        "call_floor_over_direct": ratio(call[1], call[0]),
        "round_gateway_over_native": ratio(rounds[2], rounds[3]),
        "round_gateway_over_direct_inline": ratio(rounds[2], rounds[0]),
        "round_gateway_over_floor_inline": ratio(rounds[2], rounds[1]),
    }
    print("ratios of medians:")
    for name, value in ratios.items():
        print(f"  {name:<40} {value:6.2f}x")
    report = {
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()},
        "call": call,
        "round": rounds,
        "ratios": ratios,
        "gateway_batch_window_s": batch_window,
    }
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=2) + "\n")
        print(f"written to {out}")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--rounds-runs", type=int, default=150)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--batch-window", type=float, default=0.01, help="the gateway route's holds.batch_window")
    args = parser.parse_args()
    raise SystemExit(asyncio.run(main(args.runs, args.rounds_runs, args.json, args.batch_window)))
