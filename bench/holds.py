"""Resident memory per held call: a gateway holding 1,000 then 10,000 calls open at once.

A dedicated gateway (subprocess) fronts :mod:`bench.light_server`. Each held call is a
``tools/call ask`` whose backend asked an elicitation: the gateway answers InputRequiredResult and
keeps the backend session leased and its POST stream open until the client retries (it never does
here). RSS is read from ``/proc/<pid>/status`` after the gateway has served 100 warm-up calls
(first-use allocations, imports), again once 1,000 and 10,000 calls are held; per hold is the
growth divided by the count. The light server offers no standalone GET stream (the protocol
allows 405), so a hold costs one backend connection; ``get_stream=True`` measures the FastMCP-like
case with two (limited to fewer holds: every hold then takes two file descriptors on each side).

``python -m bench.holds --legacy [--counts 1000]`` holds the calls against a real handshake-era
server instead (mcp 1.30.0 FastMCP, ``bench/legacy_server.py``'s ``ask_city``; it keeps a standalone
GET stream per session, so a hold takes two backend connections), as issue 28 measures it.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from bench.harness import Modern, Processes, free_port, gateway_config, legacy_python, rss_kib, wait_http

CONCURRENCY = 64


async def _hold(modern: Modern, count: int, tool: str = "ask") -> int:
    """Start ``count`` calls that the gateway holds; returns how many were held."""
    held = 0
    queue = iter(range(count))

    async def worker() -> None:
        nonlocal held
        for _ in queue:
            result = await modern.call(tool, {})
            held += result.get("resultType") == "input_required"

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return held


async def _settled_rss(pid: int) -> int:
    await asyncio.sleep(1.0)  # let closed connections and finished tasks be collected
    return rss_kib(pid)


async def measure(
    counts: list[int], *, get_stream: bool = False, env: dict[str, str] | None = None, legacy: bool = False
) -> dict[str, Any]:
    backend_port, gateway_port = free_port(), free_port()
    procs = Processes()
    top = max(counts) + 200
    route = f"{{name: holds, path: /mcp, backend: {{url: 'http://127.0.0.1:{backend_port}/mcp', max_sessions: {top}}}}}"
    extra = f"limits: {{max_holds: {top}, max_holds_anonymous: {top}}}\n"
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as cfg:
        cfg.write(gateway_config(gateway_port, [route], extra))
    tool = "ask_city" if legacy else "ask"
    if legacy:
        procs.start([legacy_python(), "bench/legacy_server.py", "--port", str(backend_port)])
    else:
        argv = [sys.executable, "-m", "bench.light_server", "--port", str(backend_port)]
        procs.start([*argv, "--get-stream"] if get_stream else argv)
    gateway = procs.start([sys.executable, "-m", "gateway", "serve", "--config", cfg.name], env, log=True)
    backend = "mcp 1.30.0" if legacy else "light"
    out: dict[str, Any] = {"get_stream": get_stream or legacy, "backend": backend, "holds": {}}
    try:
        url = f"http://127.0.0.1:{gateway_port}/mcp"
        await wait_http(url)
        await wait_http(f"http://127.0.0.1:{backend_port}/mcp")
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=CONCURRENCY)) as http:
            modern = Modern(http, url)
            for _ in range(100):  # warm-up: first-use allocations, then the calls finish
                first = await modern.call(tool, {})
                answers = {k: {"action": "accept", "content": {"city": "Paris"}} for k in first["inputRequests"]}
                await modern.call(tool, {}, {"inputResponses": answers, "requestState": first["requestState"]})
            base = await _settled_rss(gateway.pid)
            out["baseline_rss_kib"] = base
            held = 0
            for count in sorted(counts):
                started = time.perf_counter()
                held += await _hold(modern, count - held, tool)
                rss = await _settled_rss(gateway.pid)
                per = (rss - base) / max(held, 1)
                out["holds"][str(count)] = {
                    "held": held,
                    "rss_kib": rss,
                    "kib_per_hold": round(per, 1),
                    "seconds": round(time.perf_counter() - started, 1),
                }
                print(f"  {held:>6} holds{' (GET streams)' if get_stream else ''}: RSS {rss} KiB, {per:.1f} KiB/hold")
    finally:
        procs.stop()
        Path(cfg.name).unlink()
    return out


def main() -> None:
    import argparse
    import json
    import os

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--legacy", action="store_true", help="hold against mcp 1.30.0 FastMCP")
    parser.add_argument("--counts", type=int, nargs="+", default=[1000])
    parser.add_argument("--gateway-src", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    env = dict(os.environ)
    if args.gateway_src is not None:
        env["PYTHONPATH"] = f"{args.gateway_src}{os.pathsep}{Path(__file__).resolve().parents[1]}"
        env["BENCH_GATEWAY_SRC"] = str(args.gateway_src.resolve())
    report = asyncio.run(measure(args.counts, env=env, legacy=args.legacy))
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
