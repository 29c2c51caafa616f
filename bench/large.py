"""Large results and the event loop: a 4 MiB ``blob`` result direct vs through the gateway, and the
slowest ``/healthz`` answer while the gateway carries it (a stalled loop shows there first: the
liveness probe would see the same). ``/healthz`` is asked back to back every 5 ms."""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

import aiohttp

from bench.harness import TIMEOUT, Legacy, Modern

SIZE = 4 * 1024 * 1024


async def _probe(http: aiohttp.ClientSession, url: str, stop: asyncio.Event, samples: list[float]) -> None:
    while not stop.is_set():
        started = time.perf_counter()
        async with http.get(url, timeout=TIMEOUT) as resp:
            await resp.read()
        samples.append((time.perf_counter() - started) * 1000)
        await asyncio.sleep(0.005)


async def large(direct: Legacy, gateway: Modern, healthz: str, runs: int) -> dict[str, Any]:
    direct_ms: list[float] = []
    gateway_ms: list[float] = []
    worst = 0.0
    async with aiohttp.ClientSession() as probe_http:
        for _ in range(runs):
            started = time.perf_counter()
            result = await direct.call("blob", {"size": SIZE})
            direct_ms.append((time.perf_counter() - started) * 1000)
            assert len(result["content"][0]["text"]) == SIZE
            stop = asyncio.Event()
            samples: list[float] = []
            prober = asyncio.create_task(_probe(probe_http, healthz, stop, samples))
            started = time.perf_counter()
            result = await gateway.call("blob", {"size": SIZE})
            gateway_ms.append((time.perf_counter() - started) * 1000)
            stop.set()
            await asyncio.wait_for(prober, 120)
            assert len(result["content"][0]["text"]) == SIZE
            worst = max(worst, *samples, 0.0)
    d, g = statistics.median(direct_ms), statistics.median(gateway_ms)
    out = {
        "bytes": SIZE,
        "runs": runs,
        "direct_median_ms": round(d, 1),
        "gateway_median_ms": round(g, 1),
        "ratio": round(g / d, 2),
        "healthz_worst_ms": round(worst, 1),
    }
    print(f"  4 MiB: direct {d:.1f} ms  gateway {g:.1f} ms  ratio {out['ratio']}  /healthz worst {worst:.1f} ms")
    return out
