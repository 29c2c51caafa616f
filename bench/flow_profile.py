"""Where the gateway's CPU of an interactive flow goes: ``python -m bench.flow_profile [--gateway-src DIR]
[--seconds 8] [--flow book_table] [--json PATH]``.

It starts the bench's handshake-era backend (mcp 1.30.0 FastMCP, ``bench/legacy_server.py``) and the
gateway on default settings (the package in ``--gateway-src``, for before/after on one machine), runs
``--flow`` (:data:`bench.rounds.FLOWS`) sequentially for ``--seconds`` while ``py-spy`` samples the
gateway, and prints the flows' pace, the gateway's CPU per flow (user + system time / flows) and
the gateway functions' inclusive time per flow (:func:`bench.profile.analyse`). The machine is
shared and noisy: compare two runs made one after the other.
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

from bench import profile
from bench.harness import ROOT, Modern, Processes, cpu_seconds, free_port, gateway_config, legacy_python, wait_http
from bench.rounds import FLOWS


async def run(gateway_src: Path | None, seconds: float, flow: str) -> dict[str, Any]:
    ports = {name: free_port() for name in ("backend", "gateway")}
    backend = f"http://127.0.0.1:{ports['backend']}/mcp"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if gateway_src is not None:
        env.update(PYTHONPATH=f"{gateway_src}{os.pathsep}{ROOT}", BENCH_GATEWAY_SRC=str(gateway_src.resolve()))
    procs = Processes()
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as cfg:
        cfg.write(gateway_config(ports["gateway"], [f"{{name: http, path: /mcp, backend: {{url: '{backend}'}}}}"]))
    raw = Path(tempfile.mkstemp(suffix=".txt")[1])
    spec = FLOWS[flow]
    try:
        procs.start([legacy_python(), "bench/legacy_server.py", "--port", str(ports["backend"])])
        gateway = procs.start([sys.executable, "-m", "gateway", "serve", "--config", cfg.name], env, log=True)
        url = f"http://127.0.0.1:{ports['gateway']}/mcp"
        await wait_http(url)
        async with aiohttp.ClientSession() as http:
            client = Modern(http, url)
            for _ in range(20):  # warm-up: first-use allocations, a tool's first fenced rounds
                await client.round_trip(spec["legacy"], spec["expect"], spec.get("rounds", 1))
            argv = [profile._py_spy(), "record", "--nonblocking", "-r", "250", "-d", str(int(seconds) + 1)]
            spy = subprocess.Popen(  # noqa: ASYNC220 - started once, before the measured flows
                [*argv, "--format", "raw", "-o", str(raw), "--pid", str(gateway.pid)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            await asyncio.sleep(0.5)  # the profiler attached
            cpu_before, started, flows = cpu_seconds(gateway.pid), time.perf_counter(), 0
            while time.perf_counter() - started < seconds:
                await client.round_trip(spec["legacy"], spec["expect"], spec.get("rounds", 1))
                flows += 1
            elapsed, cpu = time.perf_counter() - started, cpu_seconds(gateway.pid) - cpu_before
            await asyncio.to_thread(spy.wait, seconds + 30)
        report: dict[str, Any] = {
            "flow": flow,
            "gateway_src": str(gateway_src or ROOT),
            "flows": flows,
            "ms_per_flow": round(elapsed * 1000 / flows, 2),
            "cpu_us_per_flow": round(cpu * 1e6 / flows, 1),
        }
        report.update(profile.analyse(raw.read_text(), cpu * 1e6 / flows))
        return report
    finally:
        procs.stop()
        raw.unlink(missing_ok=True)
        Path(cfg.name).unlink()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gateway-src", type=Path, default=None)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--flow", choices=sorted(FLOWS), default="book_table")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    report = asyncio.run(run(args.gateway_src, args.seconds, args.flow))
    print(
        f"{report['gateway_src']}: {report['flows']} {args.flow} flows, {report['ms_per_flow']} ms each, "
        f"gateway CPU {report['cpu_us_per_flow']} µs per flow; gateway functions, inclusive:"
    )
    for name, row in list(report.get("inclusive_gateway_functions", {}).items())[:20]:
        print(f"  {row['percent']:5.1f} %  {row['us_per_request']:7.1f} µs  {name}")
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
