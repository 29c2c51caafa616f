"""The whole benchmark in one run: ``python -m bench [--quick] [--json PATH] [--gateway-src DIR]``.

It starts, as subprocesses bound to 127.0.0.1: the handshake-era backend (mcp 1.30.0 FastMCP,
``bench/legacy_server.py``, from ``.venv-legacy``), the native 2026-07-28 server (mcp 2.3.0,
``tests/peers/native_mcpserver.py``), the bare aiohttp hop (``bench/forward_hop.py``) and the
gateway on DEFAULT route settings (one HTTP route, one stdio route running the same FastMCP server
per session). Then, in this order: the stdio route's first burst (cold), pass-through latency
(interleaved), the interactive flows (``ask_city``, ``book_table``) through the gateway, on the native
server and as the legacy backend's own inline flow directly and through the hop (interleaved), with
CPU per flow, 300 concurrent interactive flows, a 4 MiB result with the worst ``/healthz`` stall,
throughput + CPU per call at 64 concurrent and at 1 (``load``, ``load_c1``), the codec,
RSS per held call (a dedicated gateway and :mod:`bench.light_server`), and tasks (:mod:`bench.tasks`:
RSS per retained and per running task, ``tasks/get`` on the owner and through a second replica).

``--gateway-src DIR`` measures the gateway package found in DIR instead (e.g. a checkout of an
older commit), for before/after figures on one machine. The JSON report is the input of
:mod:`bench.report` (chart and README section).

``--only chaos`` (never part of the default run) runs :mod:`bench.chaos` instead: three replicas
of their own, 100 clients for 40 s (``--quick``: 30 clients, 20 s), one replica killed and
another drained under the load; it writes ``bench/results/issue26-chaos-<n>.json`` (or ``--json``
when chaos is the only section) and exits 1 when a flow was lost that should not be.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from bench import holds, large, passthrough, rounds, small, tasks
from bench.harness import (
    ROOT,
    Legacy,
    Modern,
    Processes,
    free_port,
    gateway_config,
    legacy_python,
    start_proxies,
    wait_http,
)

PROFILES: dict[str, dict[str, Any]] = {
    # latency samples, round samples, large-result runs, load seconds per path, codec iterations,
    # hold counts (light backend without and with a standalone GET stream per session)
    "full": {
        "runs": 300,
        "rounds": 150,
        "large": 10,
        "load": 5.0,
        "codec": 20000,
        "holds": [1000, 10000],
        "holds_get_stream": [1000],
        "tasks": 10000,
        "tasks_get_runs": 300,
    },
    "quick": {
        "runs": 60,
        "rounds": 40,
        "large": 1,
        "load": 2.0,
        "codec": 5000,
        "holds": [500, 2000],
        "holds_get_stream": [],
        "tasks": 1000,
        "tasks_get_runs": 60,
    },
}


def _machine() -> dict[str, Any]:
    load = os.getloadavg()
    return {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "loadavg_at_start": [round(x, 2) for x in load],
        "note": "shared 2-core development machine, other work running: figures are noisy (±15 %)",
    }


def _env(gateway_src: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT)
    if gateway_src is not None:
        env["PYTHONPATH"] = f"{gateway_src}{os.pathsep}{ROOT}"
        env["BENCH_GATEWAY_SRC"] = str(gateway_src.resolve())
    return env


def _codec(iterations: int, env: dict[str, str]) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "bench.small", str(iterations)],
        cwd=env.get("BENCH_GATEWAY_SRC", ROOT),
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout
    print("  " + out.splitlines()[0].strip())
    figures: dict[str, Any] = json.loads(out.splitlines()[-1])
    return figures


SECTIONS = ("stdio_burst", "passthrough", "two_round", "burst", "large", "load", "codec", "holds", "tasks")
OPT_IN = ("chaos",)
"""Sections only ``--only`` runs: ``chaos`` kills and restarts replicas of its own (bench/chaos.py)."""


async def run(
    profile: dict[str, Any], gateway_src: Path | None, only: frozenset[str] = frozenset(SECTIONS)
) -> dict[str, Any]:
    ports = {name: free_port() for name in ("backend", "native", "hop", "gateway")}
    backend = f"http://127.0.0.1:{ports['backend']}/mcp"
    stdio_cmd = json.dumps([legacy_python(), str(ROOT / "bench/legacy_server.py"), "--transport", "stdio"])
    routes = [
        f"{{name: http, path: /mcp, backend: {{url: '{backend}', timeout: 120}}}}",
        f"{{name: stdio, path: /stdio, backend: {{transport: stdio, command: {stdio_cmd}}}}}",
    ]
    env = _env(gateway_src)
    procs = Processes()
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as cfg:
        cfg.write(gateway_config(ports["gateway"], routes))
    report: dict[str, Any] = {"machine": _machine(), "gateway_src": str(gateway_src or ROOT), "started": time.time()}
    try:
        procs.start([legacy_python(), "bench/legacy_server.py", "--port", str(ports["backend"])])
        procs.start(
            [
                sys.executable,
                "tests/peers/native_mcpserver.py",
                "--port",
                str(ports["native"]),
                "--log-level",
                "WARNING",
            ]
        )
        hop_proc, gw_proc = start_proxies(procs, ports["hop"], backend, cfg.name, env)
        urls = {name: f"http://127.0.0.1:{port}/mcp" for name, port in ports.items()}
        for url in urls.values():
            await wait_http(url)
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
            gateway = Modern(http, urls["gateway"])
            if "stdio_burst" in only:
                print("stdio route, first burst")
                report["stdio_burst"] = await small.stdio_burst(Modern(http, urls["gateway"].replace("/mcp", "/stdio")))
            direct = await Legacy(http, backend).open()
            hop = await Legacy(http, urls["hop"]).open()
            if "passthrough" in only:
                print(f"pass-through tools/call, c=1, {profile['runs']} interleaved samples per path and size")
                report["passthrough"] = await passthrough.latency(direct, hop, gateway, profile["runs"])
            if "two_round" in only:
                print(
                    f"interactive flows (ask_city: one round; book_table: two), {profile['rounds']} interleaved"
                    " samples, default settings; then CPU per flow"
                )
                report["two_round"] = await rounds.two_round(
                    gateway,
                    Modern(http, urls["native"]),
                    profile["rounds"],
                    await Legacy(http, backend).open(),
                    await Legacy(http, urls["hop"]).open(),
                    pids={"gateway": gw_proc.pid, "legacy_hop": hop_proc.pid},
                )
            if "burst" in only:
                print("burst of interactive flows, default settings")
                report["burst"] = await rounds.burst(gateway)
            if "large" in only:
                print(f"large result, {profile['large']} runs")
                healthz = urls["gateway"].replace("/mcp", "/healthz")
                report["large"] = await large.large(direct, gateway, healthz, profile["large"])
            targets = {
                "direct": (backend, direct.body("add", {"a": 1, "b": 2}), direct.session_headers, None),
                "hop": (urls["hop"], hop.body("add", {"a": 1, "b": 2}), hop.session_headers, hop_proc.pid),
                "gateway": (
                    urls["gateway"],
                    gateway.body("add", {"a": 1, "b": 2}),
                    gateway.headers("add"),
                    gw_proc.pid,
                ),
            }
            if "load" in only:
                print(f"load: {passthrough.CONCURRENCY} concurrent, {profile['load']} s per path")
                report["load"] = await passthrough.load(targets, profile["load"])
                print(f"load: 1 connection, {profile['load']} s per path (CPU per call at c=1)")
                report["load_c1"] = await passthrough.load(targets, profile["load"], concurrency=1)
    finally:
        procs.stop()
        Path(cfg.name).unlink()
    if "codec" in only:
        print(f"requestState codec, {profile['codec']} iterations")
        report["codec"] = _codec(profile["codec"], env)
    if "holds" in only:
        print("held calls")
        report["holds"] = await holds.measure(profile["holds"], env=env)
    if "holds" in only and profile["holds_get_stream"]:
        report["holds_get_stream"] = await holds.measure(profile["holds_get_stream"], get_stream=True, env=env)
    if "tasks" in only:
        print(
            f"tasks: {profile['tasks']} retained, then {profile['tasks']} running; tasks/get on the owner and forwarded"
        )
        report["tasks"] = await tasks.measure(profile["tasks"], profile["tasks_get_runs"], env=env)
    report["seconds"] = round(time.time() - report.pop("started"), 1)
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer samples and holds (about two minutes)")
    parser.add_argument("--json", type=Path, default=None, help="default: bench/results/latest.json")
    parser.add_argument("--chart", type=Path, default=None, help="PNG path (default: the JSON path with .png)")
    parser.add_argument("--gateway-src", type=Path, default=None, help="measure the gateway package in this dir")
    parser.add_argument("--label", default="", help="a name for this run, kept in the report")
    parser.add_argument(
        "--only",
        default=",".join(SECTIONS),
        help=f"comma-separated sections to run (default all: {','.join(SECTIONS)}; also {','.join(OPT_IN)}, "
        "never run by default); a partial run draws no chart",
    )
    args = parser.parse_args()
    only = frozenset(args.only.split(","))
    if not only <= set(SECTIONS) | set(OPT_IN):
        parser.error(f"unknown section(s): {', '.join(sorted(only - set(SECTIONS) - set(OPT_IN)))}")
    failed = 0
    if "chaos" in only:
        from bench import chaos

        clients, seconds = (30, 20.0) if args.quick else (100, 40.0)
        out = args.json if only == {"chaos"} else None
        failed = (
            1 if chaos.bench(clients, seconds, out, label=args.label, gateway_src=args.gateway_src)["verdict"] else 0
        )
        only -= {"chaos"}
        if not only:
            return failed
    args.json = args.json or ROOT / "bench/results/latest.json"
    profile = PROFILES["quick" if args.quick else "full"]
    report = asyncio.run(run(profile, args.gateway_src, only))
    report["profile"] = "quick" if args.quick else "full"
    report["label"] = args.label
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2) + "\n")
    print(f"report: {args.json} ({report['seconds']} s)")
    if only != set(SECTIONS):
        return failed
    from bench import report as charts

    charts.chart(report, args.chart or args.json.with_suffix(".png"))
    return 0
