"""Pass-through ``tools/call``: latency at c=1 (interleaved) and throughput + CPU at 64 concurrent.

Latency: for every sample, each size (5 B, 64 KiB, 1 MiB of argument) is sent once on each path -
direct (handshake-era client → FastMCP), hop (same client → bare aiohttp hop → FastMCP), gateway
(2026-07-28 client → gateway → FastMCP) - in a rotating order, so drift on a noisy machine hits
every path alike. The overhead ratio is ``(gateway - direct) / (hop - direct)`` of the medians: the
gateway's own cost in units of the cheapest possible Python hop.

Load: 64 connections for a fixed time, after one uncounted second per path, with ``wrk`` (Debian
package) when it is installed, else an aiohttp load generator of the bench's own (the report says
which). CPU per request is the proxy process's user+system CPU time over the run divided by the
requests it served.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp

from bench.harness import Legacy, Modern, cpu_seconds, summary

SIZES = {"5 B": 5, "64 KiB": 64 * 1024, "1 MiB": 1024 * 1024}
CONCURRENCY = 64
WARMUP_SECONDS = 1.0


async def latency(
    direct: Legacy, hop: Legacy, gateway: Modern, runs: int, warmup: int = 20
) -> dict[str, dict[str, Any]]:
    """Per size: each path's summary and the overhead ratio."""
    paths: dict[str, Callable[[dict[str, Any]], Awaitable[Any]]] = {
        "direct": lambda args: direct.call("size", args),
        "hop": lambda args: hop.call("size", args),
        "gateway": lambda args: gateway.call("size", args),
    }
    names = list(paths)
    samples: dict[tuple[str, str], list[float]] = {(s, p): [] for s in SIZES for p in names}
    arguments = {label: {"text": "x" * n} for label, n in SIZES.items()}
    for i in range(warmup + runs):
        for label in SIZES:
            order = names[i % 3 :] + names[: i % 3]
            for path in order:
                started = time.perf_counter()
                result = await paths[path](arguments[label])
                elapsed = (time.perf_counter() - started) * 1000
                assert not result.get("isError"), result
                if i >= warmup:
                    samples[(label, path)].append(elapsed)
    out: dict[str, dict[str, Any]] = {}
    for label in SIZES:
        stats: dict[str, Any] = {p: summary(samples[(label, p)]) for p in names}
        d, h, g = (stats[p]["median_ms"] for p in names)
        stats["overhead_ratio"] = round((g - d) / (h - d), 2) if h > d else None
        out[label] = stats
        print(
            f"  {label:>7}: direct {d:7.2f} ms  hop {h:7.2f} ms  gateway {g:7.2f} ms"
            f"  (p99 {stats['direct']['p99_ms']:.2f} / {stats['hop']['p99_ms']:.2f} / {stats['gateway']['p99_ms']:.2f})"
            f"  overhead ratio {stats['overhead_ratio']}"
        )
    return out


def _wrk_script(body: dict[str, Any], headers: dict[str, str]) -> str:
    lines = ['wrk.method = "POST"', f"wrk.body = {json.dumps(json.dumps(body))}"]
    lines += [f"wrk.headers[{json.dumps(k)}] = {json.dumps(v)}" for k, v in headers.items()]
    return "\n".join(lines) + "\n"


def _wrk(url: str, body: dict[str, Any], headers: dict[str, str], seconds: float) -> tuple[int, int]:
    """(requests completed, non-2xx) from one wrk run."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(_wrk_script(body, headers))
    try:
        out = subprocess.run(
            ["wrk", "-t2", f"-c{CONCURRENCY}", f"-d{max(int(seconds), 1)}s", "-s", script.name, url],
            capture_output=True,
            text=True,
            timeout=seconds + 60,
            check=True,
        ).stdout
    finally:
        Path(script.name).unlink()
    done = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return done, int(bad.group(1)) if bad else 0


async def _aiohttp_load(url: str, body: dict[str, Any], headers: dict[str, str], seconds: float) -> tuple[int, int]:
    done = bad = 0
    end = time.monotonic() + seconds
    payload = json.dumps(body).encode()
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:

        async def worker() -> None:
            nonlocal done, bad
            while time.monotonic() < end:
                async with http.post(url, data=payload, headers=headers) as resp:
                    await resp.read()
                    done += 1
                    bad += resp.status != 200

        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return done, bad


async def load(
    targets: dict[str, tuple[str, dict[str, Any], dict[str, str], int | None]], seconds: float
) -> dict[str, Any]:
    """``targets``: path → (url, body, headers, pid of the proxy process or None)."""
    tool = "wrk" if shutil.which("wrk") else "aiohttp"
    out: dict[str, Any] = {"generator": tool, "concurrency": CONCURRENCY, "seconds": seconds}
    for path, (url, body, headers, pid) in targets.items():
        # Warm-up, not counted: the gateway's pool opens backend sessions as concurrency grows (the
        # hop forwards one client session), and a steady state is what CPU per request describes.
        if tool == "wrk":
            await asyncio.to_thread(_wrk, url, body, headers, WARMUP_SECONDS)
        else:
            await _aiohttp_load(url, body, headers, WARMUP_SECONDS)
        cpu_before = cpu_seconds(pid) if pid else 0.0
        started = time.perf_counter()
        if tool == "wrk":
            done, bad = await asyncio.to_thread(_wrk, url, body, headers, seconds)
        else:
            done, bad = await _aiohttp_load(url, body, headers, seconds)
        elapsed = time.perf_counter() - started
        figures: dict[str, Any] = {"requests": done, "non_2xx": bad, "rps": round(done / elapsed, 1)}
        if pid:
            figures["cpu_ms_per_request"] = round((cpu_seconds(pid) - cpu_before) * 1000 / max(done, 1), 3)
        out[path] = figures
        print(
            f"  {path:>8}: {figures['rps']:8.1f} req/s  non-2xx {bad}  CPU/request {figures.get('cpu_ms_per_request')}"
        )
    if out.get("hop", {}).get("cpu_ms_per_request") and out.get("gateway", {}).get("cpu_ms_per_request"):
        out["cpu_ratio"] = round(out["gateway"]["cpu_ms_per_request"] / out["hop"]["cpu_ms_per_request"], 2)
    return out
