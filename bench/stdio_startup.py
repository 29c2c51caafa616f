"""Start-up of many stdio routes (issue 20 item 2): ``python -m bench.stdio_startup [--routes 40]``.

A gateway is started with ``--routes`` stdio routes of a small Python stdio server (mcp 1.30.0
FastMCP, ``bench/legacy_server.py --transport stdio`` in the legacy virtualenv), every backend
setting at its default (``prewarm: 2``, ``max_opening: 1``, ``limits.max_process_starts``: the CPU
count). From the gateway's first ``/healthz`` answer, ``bench/healthz_probe.py`` (a process of its
own) asks ``/healthz`` back to back while this process polls ``/readyz``; the moment it is ready, one
``tools/call add`` goes to the last route (the one started last). Probing continues ``--settle``
seconds more, while the routes' second spares start. Printed as one JSON object:

* ``healthz_until_ready`` / ``healthz_after_ready`` / ``healthz_all``: ``/healthz`` latency before and
  after ``/readyz`` said ready, and over the whole run (a gateway that says ready at once has its
  start-up storm after it);
* ``ready_after_s``: from the first ``/healthz`` answer to ``/readyz`` ready;
* ``first_call_ms``: the call made at that moment, on the last route;
* ``peak_children`` and ``peak_load1``: the gateway's child processes and the 1-minute load average.

``BENCH_GATEWAY_SRC=/path/to/checkout`` runs another checkout's gateway (the "before" figures).
Only loopback is used; every wait is bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from bench.harness import ROOT, STATE_KEY, TIMEOUT, Modern, Processes, free_port, legacy_python

BOUND = 180.0


def config(port: int, routes: int) -> dict[str, Any]:
    server = [legacy_python(), str(ROOT / "bench" / "legacy_server.py"), "--transport", "stdio"]
    return {
        "state": {"keys": [STATE_KEY]},
        "listen": {"host": "127.0.0.1", "port": port},
        "logging": {"level": "warning", "json": True},
        "routes": [
            {"name": f"r{i:02d}", "path": f"/r{i:02d}", "backend": {"transport": "stdio", "command": server}}
            for i in range(routes)
        ],
    }


def children(pid: int) -> int:
    """Processes whose parent is ``pid`` (Linux /proc)."""
    count = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        count += fields[1] == str(pid)
    return count


def percentiles(samples: list[float]) -> dict[str, float]:
    if not samples:
        return {"n": 0}
    ordered = sorted(samples)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(len(ordered) * q))], 1)

    return {"n": len(ordered), "p50_ms": at(0.5), "p95_ms": at(0.95), "p99_ms": at(0.99), "max_ms": ordered[-1]}


async def read_probe(stdout: asyncio.StreamReader, samples: list[tuple[float, float]]) -> None:
    while line := await stdout.readline():
        parts = line.split()
        if len(parts) == 2:
            samples.append((float(parts[0]), float(parts[1])))


async def run(routes: int, settle: float) -> dict[str, Any]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = dict(os.environ)
    if src := env.get("BENCH_GATEWAY_SRC"):
        env["PYTHONPATH"] = src
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "gateway.yaml"
        path.write_text(json.dumps(config(port, routes)), encoding="utf-8")
        procs = Processes()
        gateway = procs.start([sys.executable, "-m", "gateway", "serve", "--config", str(path)], env, log=True)
        probe = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bench.healthz_probe",
            f"{base}/healthz",
            cwd=str(ROOT),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert probe.stdin is not None
        assert probe.stdout is not None
        samples: list[tuple[float, float]] = []
        reader = asyncio.create_task(read_probe(probe.stdout, samples))
        peak_children, peak_load = 0, 0.0
        try:
            async with asyncio.timeout(BOUND), aiohttp.ClientSession(timeout=TIMEOUT) as http:
                while True:  # the gateway listens
                    try:
                        async with http.get(f"{base}/healthz") as resp:
                            if resp.status == 200:
                                break
                    except aiohttp.ClientConnectionError:
                        await asyncio.sleep(0.01)
                listening = time.monotonic()
                probe.stdin.write(b"run\n")
                body: dict[str, Any] = {}
                while True:
                    peak_children = max(peak_children, children(gateway.pid))
                    peak_load = max(peak_load, os.getloadavg()[0])
                    async with http.get(f"{base}/readyz") as resp:
                        if resp.status == 200:
                            body = await resp.json()
                            break
                    await asyncio.sleep(0.05)
                ready = time.monotonic()
                started = time.monotonic()
                await Modern(http, f"{base}/r{routes - 1:02d}").call("add", {"a": 1, "b": 2})
                first_call = (time.monotonic() - started) * 1000
                end = time.monotonic() + settle
                while time.monotonic() < end:
                    peak_children = max(peak_children, children(gateway.pid))
                    peak_load = max(peak_load, os.getloadavg()[0])
                    await asyncio.sleep(0.25)
        finally:
            probe.stdin.close()
            async with asyncio.timeout(10):
                await probe.wait()
            reader.cancel()
            procs.stop()
    return {
        "routes": routes,
        "gateway_src": env.get("BENCH_GATEWAY_SRC", str(ROOT)),
        "cpus": os.cpu_count(),
        "ready_after_s": round(ready - listening, 2),
        "readyz_routes_reported": len(body.get("routes", {})),
        "first_call_ms": round(first_call, 1),
        "healthz_until_ready": percentiles([ms for at, ms in samples if at < ready]),
        "healthz_after_ready": percentiles([ms for at, ms in samples if at >= ready]),
        "healthz_all": percentiles([ms for _, ms in samples]),
        "peak_children": peak_children,
        "peak_load1": round(peak_load, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--routes", type=int, default=40)
    parser.add_argument("--settle", type=float, default=15.0, help="seconds probed after /readyz is ready")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(run(args.routes, args.settle)), indent=2))


if __name__ == "__main__":
    main()
