"""Large results: latency through the gateway vs direct, and how long ``/healthz`` waits meanwhile.

Run from the repo root after `bash scripts/bootstrap.sh`:

    .venv/bin/python -m bench.large_results [--sizes 1048576 4194304] [--runs 5] [--json out.json]

It starts a legacy server (mcp 1.30.0 FastMCP, ``bench/large_result_server.py``, whose ``blob``
tool returns as many characters as asked) and the gateway in front of it, in subprocesses, as
deployed. For each size it measures, sequentially, with raw HTTP clients:

1. direct: a legacy client's ``tools/call blob`` to the backend (the SSE answer read whole and
   decoded once);
2. gateway: the same call as a 2026-07-28 request through the gateway, while a probe requests
   ``/healthz`` back to back and records the slowest answer (a stalled event loop shows here:
   Kubernetes' liveness probe would see the same).

The gateway under test is the one importable from this interpreter (``PYTHONPATH`` may point at
another checkout to measure it instead). Everything binds 127.0.0.1; every wait is bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from bench.bench import HEADERS, Modern, free_port, wait_http

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = aiohttp.ClientTimeout(total=120)


def spawn(argv: list[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=os.environ)


async def direct_session(http: aiohttp.ClientSession, url: str) -> dict[str, str]:
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "0"},
        },
    }
    async with http.post(url, json=init, headers=HEADERS) as resp:
        await resp.read()
        headers = {**HEADERS, "Mcp-Session-Id": resp.headers["Mcp-Session-Id"], "MCP-Protocol-Version": "2025-06-18"}
    async with http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers) as resp:
        await resp.read()
    return headers


async def direct_call(http: aiohttp.ClientSession, url: str, headers: dict[str, str], size: int) -> int:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "blob", "arguments": {"size": size}}}
    async with http.post(url, json=body, headers=headers, timeout=TIMEOUT) as resp:
        raw = await resp.read()
    data = [line[5:] for line in raw.split(b"\n") if line.startswith(b"data:")]
    message = json.loads(data[-1])
    return len(message["result"]["content"][0]["text"])


async def probe(http: aiohttp.ClientSession, url: str, stop: asyncio.Event, worst: list[float]) -> None:
    while not stop.is_set():
        started = time.perf_counter()
        async with http.get(url, timeout=TIMEOUT) as resp:
            await resp.read()
        worst.append((time.perf_counter() - started) * 1000)
        await asyncio.sleep(0.005)


async def gateway_call(http: aiohttp.ClientSession, modern: Modern, healthz: str, size: int) -> tuple[float, float]:
    stop = asyncio.Event()
    samples: list[float] = []
    prober = asyncio.create_task(probe(http, healthz, stop, samples))
    started = time.perf_counter()
    result = await modern.call("blob", {"size": size})
    elapsed = (time.perf_counter() - started) * 1000
    stop.set()
    await asyncio.wait_for(prober, 120)
    assert len(result["content"][0]["text"]) == size
    return elapsed, max(samples, default=0.0)


async def main(sizes: list[int], runs: int, out: Path | None) -> int:
    legacy_python = os.environ.get("MRTR_LEGACY_PYTHON", str(ROOT / ".venv-legacy/bin/python"))
    backend_port, gateway_port = free_port(), free_port()
    backend_url = f"http://127.0.0.1:{backend_port}/mcp"
    procs = [spawn([legacy_python, "bench/large_result_server.py", "--port", str(backend_port)])]
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as cfg:
        cfg.write(
            f"listen: {{host: 127.0.0.1, port: {gateway_port}}}\n"
            "state: {keys: ['bench-key-0123456789abcdef0123456789abcdef']}\n"
            "logging: {level: warning}\n"
            f"routes: [{{name: bench, path: /mcp, backend: {{url: '{backend_url}', timeout: 120}}}}]\n"
        )
    procs.append(spawn([sys.executable, "-m", "gateway", "serve", "--config", cfg.name]))
    gateway_url = f"http://127.0.0.1:{gateway_port}/mcp"
    report: dict[str, Any] = {"runs": runs, "sizes": {}}
    try:
        for url in (backend_url, gateway_url):
            await wait_http(url)
        async with aiohttp.ClientSession() as http:
            headers = await direct_session(http, backend_url)
            modern = Modern(http, gateway_url)
            healthz = f"http://127.0.0.1:{gateway_port}/healthz"
            await modern.call("blob", {"size": 10})  # warm-up: session, connections
            for size in sizes:
                direct = []
                for _ in range(runs):
                    started = time.perf_counter()
                    assert await direct_call(http, backend_url, headers, size) == size
                    direct.append((time.perf_counter() - started) * 1000)
                through, worst = [], []
                for _ in range(runs):
                    elapsed, slowest = await gateway_call(http, modern, healthz, size)
                    through.append(elapsed)
                    worst.append(slowest)
                figures = {
                    "direct_median_ms": round(statistics.median(direct), 1),
                    "gateway_median_ms": round(statistics.median(through), 1),
                    "healthz_worst_ms": round(max(worst), 1),
                }
                report["sizes"][str(size)] = figures
                print(
                    f"{size:>9} chars: direct {figures['direct_median_ms']:8.1f} ms   gateway "
                    f"{figures['gateway_median_ms']:8.1f} ms   /healthz worst {figures['healthz_worst_ms']:8.1f} ms"
                )
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=10)
        os.unlink(cfg.name)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024 * 1024, 4 * 1024 * 1024])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    raise SystemExit(asyncio.run(main(args.sizes, args.runs, args.json)))
