"""Pass-through ``tools/call``: latency at c=1 (interleaved) and throughput + CPU at 64 concurrent.

Latency: for every sample, each size (5 B, 64 KiB, 1 MiB of argument) is sent once on each path -
direct (handshake-era client → FastMCP), hop (same client → bare aiohttp hop → FastMCP), gateway
(2026-07-28 client → gateway → FastMCP) - in a rotating order, so drift on a noisy machine hits
every path alike. The overhead ratio is ``(gateway - direct) / (hop - direct)`` of the medians: the
gateway's own cost in units of the cheapest possible Python hop.

Load: 64 connections (then 1) for a fixed time, after one uncounted second per path, with ``wrk`` (Debian
package) when it is installed, else an aiohttp load generator of the bench's own (the report says
which). CPU per request is the proxy process's user+system CPU time over the run divided by the
requests it served.
"""

from __future__ import annotations

import asyncio
import itertools
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


_ID_MARK = 987654321
"""The body's JSON-RPC id while it is a template: every call gets an id of its own."""


def _body_template(body: dict[str, Any]) -> tuple[str, str]:
    """The body's JSON split around its id. A handshake-era server routes answers by id within a
    session, so concurrent calls that repeat one id lose answers (and hang until a timeout)."""
    prefix, _, suffix = json.dumps({**body, "id": _ID_MARK}).partition(str(_ID_MARK))
    return prefix, suffix


def _wrk_script(body: dict[str, Any], headers: dict[str, str]) -> str:
    prefix, suffix = _body_template(body)
    lines = [
        'wrk.method = "POST"',
        f"local prefix, suffix = {json.dumps(prefix)}, {json.dumps(suffix)}",
        "local threads, counter = 0, 0",
        # setup runs in the main state, once per thread: each thread counts in its own range
        "function setup(thread) thread:set('base', threads * 1000000000); threads = threads + 1 end",
        "function init(args) counter = base or 0 end",
        "function request() counter = counter + 1; return wrk.format(nil, nil, nil, prefix .. counter .. suffix) end",
    ]
    lines += [f"wrk.headers[{json.dumps(k)}] = {json.dumps(v)}" for k, v in headers.items()]
    return "\n".join(lines) + "\n"


def wrk(
    url: str, body: dict[str, Any], headers: dict[str, str], seconds: float, concurrency: int = CONCURRENCY
) -> tuple[int, int]:
    """(requests completed, non-2xx or timed out) from one wrk run, every call with its own id."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(_wrk_script(body, headers))
    try:
        out = subprocess.run(
            # a generous timeout: wrk gives up on a call after 2 s by default, and a call given up
            # is one the gateway must cancel upstream (its backend session is then not reused)
            [
                "wrk",
                f"-t{min(2, concurrency)}",
                f"-c{concurrency}",
                f"-d{max(int(seconds), 1)}s",
                "--timeout",
                "30s",
                "-s",
                script.name,
                url,
            ],
            capture_output=True,
            text=True,
            timeout=seconds + 60,
            check=True,
        ).stdout
    finally:
        Path(script.name).unlink()
    done = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    timeouts = re.search(r"Socket errors:.*timeout (\d+)", out)
    return done, (int(bad.group(1)) if bad else 0) + (int(timeouts.group(1)) if timeouts else 0)


async def _aiohttp_load(
    url: str, body: dict[str, Any], headers: dict[str, str], seconds: float, concurrency: int = CONCURRENCY
) -> tuple[int, int]:
    done = bad = 0
    end = time.monotonic() + seconds
    prefix, suffix = _body_template(body)
    ids = itertools.count(1)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:

        async def worker() -> None:
            nonlocal done, bad
            while time.monotonic() < end:
                payload = f"{prefix}{next(ids)}{suffix}".encode()
                async with http.post(url, data=payload, headers=headers) as resp:
                    await resp.read()
                    done += 1
                    bad += resp.status != 200

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return done, bad


async def warm_up(url: str, body: dict[str, Any], headers: dict[str, str], concurrency: int = CONCURRENCY) -> None:
    """:data:`WARMUP_SECONDS` of calls on ``concurrency`` connections, each ending its last call."""
    done, bad = await _aiohttp_load(url, body, headers, WARMUP_SECONDS, concurrency)
    if bad or not done:
        raise RuntimeError(f"{url}: warm-up answered {bad} of {done} calls with an error")


async def load(
    targets: dict[str, tuple[str, dict[str, Any], dict[str, str], int | None]],
    seconds: float,
    concurrency: int = CONCURRENCY,
) -> dict[str, Any]:
    """``targets``: path → (url, body, headers, pid of the proxy process or None). At
    ``concurrency`` 1 it is CPU per call of one client calling back to back (the c=1 figure beside
    the 64-connection one)."""
    tool = "wrk" if shutil.which("wrk") else "aiohttp"
    out: dict[str, Any] = {"generator": tool, "concurrency": concurrency, "seconds": seconds}
    for path, (url, body, headers, pid) in targets.items():
        # Warm-up, not counted: the gateway's pool opens backend sessions as concurrency grows (the
        # hop forwards one client session), and a steady state is what CPU per request describes.
        # It is the bench's own generator, whose connections each finish their last call: wrk
        # stops by closing its connections with calls in flight, and a call whose client went away
        # costs the gateway its backend session (cancelled upstream and never reused, since the
        # backend may still send for it), so a wrk warm-up made the measured run reopen them all.
        await warm_up(url, body, headers, concurrency)
        cpu_before = cpu_seconds(pid) if pid else 0.0
        started = time.perf_counter()
        if tool == "wrk":
            done, bad = await asyncio.to_thread(wrk, url, body, headers, seconds, concurrency)
        else:
            done, bad = await _aiohttp_load(url, body, headers, seconds, concurrency)
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
