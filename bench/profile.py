"""Where the CPU of a pass-through ``tools/call`` goes, in the gateway and in the bare hop.

``python -m bench.profile [--seconds 10] [--concurrency 16] [--size 5] [--gateway-src DIR] [--json PATH]
[--keep-stacks DIR]`` (the collapsed stacks, for a flame graph or a closer look)

It starts the bench's handshake-era backend (mcp 1.30.0 FastMCP), the bare aiohttp hop
(:mod:`bench.forward_hop`) and the gateway on default settings, as :mod:`bench.suite` does. Then,
for the hop and for the gateway in turn, it drives ``--concurrency`` connections of the same
``tools/call`` (``size``, an argument of ``--size`` bytes) with ``wrk`` for ``--seconds`` after the load
section's uncounted warm-up, while ``py-spy`` (the bench extra) samples the proxy process without stopping it
(``--nonblocking``). It reports, per process:

* CPU per request (user + system CPU time over the requests served, as the load section does);
* the samples' **self** time by component (the innermost frame's module: aiohttp's server, its
  client, asyncio, JSON, pydantic, each gateway package, ...), in percent and in µs of CPU per
  request (share x CPU per request);
* the gateway's **inclusive** time per gateway function (every sample whose stack passes through
  it), the 25 largest.

The difference of the two component tables, in µs per request, is what the gateway spends beyond
the hop: what stands between its CPU figure and the hop's. A sampling profiler reads Python frames
only; time in C extensions is charged to the Python function that called them. The machine is
shared and noisy: compare shares and µs within one run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp

from bench.harness import (
    ROOT,
    Legacy,
    Modern,
    Processes,
    cpu_seconds,
    free_port,
    gateway_config,
    legacy_python,
    start_proxies,
    wait_http,
)
from bench.passthrough import warm_up, wrk
from bench.suite import _env

_FRAME = re.compile(r"^(?P<func>.*) \((?P<path>[^():]*)(?::\d+)?\)$")

# Innermost-frame path fragment -> component, first match wins (order matters: specific first).
_COMPONENTS: tuple[tuple[str, str], ...] = (
    ("/gateway/frontdoor/", "gateway.frontdoor"),
    ("/gateway/legacy/", "gateway.legacy"),
    ("/gateway/calls/", "gateway.calls"),
    ("/gateway/holds/", "gateway.holds"),
    ("/gateway/state/", "gateway.state"),
    ("/gateway/translate/", "gateway.translate"),
    ("/gateway/observability/", "gateway.observability"),
    ("/gateway/auth/", "gateway.auth"),
    ("/gateway/", "gateway (other)"),
    ("/bench/forward_hop.py", "hop's own code"),
    ("/aiohttp/web_protocol.py", "aiohttp server"),
    ("/aiohttp/web_", "aiohttp server"),
    ("/aiohttp/http_parser.py", "aiohttp HTTP parsing"),
    ("/aiohttp/http_writer.py", "aiohttp HTTP writing"),
    ("/aiohttp/client", "aiohttp client"),
    ("/aiohttp/connector.py", "aiohttp client"),
    ("/aiohttp/streams.py", "aiohttp streams"),
    ("/aiohttp/", "aiohttp (other)"),
    ("/multidict/", "multidict/yarl"),
    ("/yarl/", "multidict/yarl"),
    ("/asyncio/selector_events.py", "asyncio transports"),
    ("/asyncio/", "asyncio"),
    ("/selectors.py", "selectors (epoll)"),
    ("/json/", "json"),
    ("orjson", "json"),
    ("/pydantic", "pydantic"),
    ("/mcp_types/", "mcp-types"),
    ("/structlog/", "structlog"),
    ("/prometheus_client/", "prometheus_client"),
    ("/logging/", "logging"),
    ("/typing.py", "typing"),
    ("/enum.py", "enum"),
    ("/re/", "re"),
)


def component(path: str) -> str:
    for fragment, name in _COMPONENTS:
        if fragment in path:
            return name
    return "other"


def _frames(stack: str) -> list[tuple[str, str]]:
    """``func (path:line);...`` (outermost first) → [(func, path)]."""
    out = []
    for frame in stack.split(";"):
        match = _FRAME.match(frame)
        # py-spy shortens paths to the import root ("aiohttp/web.py"): a leading "/" lets a
        # fragment match at the start as anywhere else.
        out.append((match["func"], "/" + match["path"]) if match else (frame, ""))
    return out


def analyse(raw: str, cpu_us_per_request: float) -> dict[str, Any]:
    """Shares of py-spy's collapsed stacks (``raw`` format) by component and by gateway function."""
    by_component: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = _frames(stack)
        total += count
        by_component[component(frames[-1][1])] += count
        seen: set[str] = set()
        for func, path in frames:
            index = path.find("/gateway/")
            if index >= 0:
                name = f"{path[index + 1 :].removesuffix('.py').replace('/', '.')}:{func}"
                if name not in seen:
                    seen.add(name)
                    inclusive[name] += count
    if not total:
        return {"samples": 0}

    def row(count: int) -> dict[str, float]:
        share = count / total
        return {"percent": round(100 * share, 1), "us_per_request": round(share * cpu_us_per_request, 1)}

    return {
        "samples": total,
        "self_by_component": {name: row(n) for name, n in by_component.most_common()},
        "inclusive_gateway_functions": {name: row(n) for name, n in inclusive.most_common(25)},
    }


def _py_spy() -> str:
    found = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(found).exists():
        raise SystemExit("bench.profile needs py-spy: pip install -e '.[bench]'")
    return found


async def _profile_one(
    name: str,
    target: tuple[str, dict[str, Any], dict[str, str], int],
    seconds: float,
    concurrency: int,
    keep: Path | None,
) -> dict[str, Any]:
    url, body, headers, pid = target
    await warm_up(url, body, headers, concurrency)
    with tempfile.NamedTemporaryFile(suffix=".txt", delete=False) as out:
        raw_path = Path(out.name)
    argv = [_py_spy(), "record", "--nonblocking", "-r", "250", "-d", str(int(seconds) + 1), "--format", "raw"]
    spy = subprocess.Popen(  # noqa: ASYNC220 - started once per run, before the measured load
        [*argv, "-o", str(raw_path), "--pid", str(pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        await asyncio.sleep(0.5)  # the profiler attached
        cpu_before, started = cpu_seconds(pid), time.perf_counter()
        done, bad = await asyncio.to_thread(wrk, url, body, headers, seconds, concurrency)
        if bad:
            raise RuntimeError(f"{name}: {bad} calls failed or timed out under load")
        elapsed, cpu = time.perf_counter() - started, cpu_seconds(pid) - cpu_before
        await asyncio.to_thread(spy.wait, seconds + 30)
        raw = raw_path.read_text()
        if keep is not None:
            (keep / f"{name}.collapsed.txt").write_text(raw)
    finally:
        if spy.poll() is None:
            spy.kill()
        raw_path.unlink(missing_ok=True)
    cpu_us = cpu * 1e6 / max(done, 1)
    figures: dict[str, Any] = {
        "requests": done,
        "rps": round(done / elapsed, 1),
        "cpu_us_per_request": round(cpu_us, 1),
    }
    figures.update(analyse(raw, cpu_us))
    print(f"\n{name}: {figures['rps']} req/s, CPU {figures['cpu_us_per_request']} µs per request")
    for comp, row in list(figures.get("self_by_component", {}).items())[:14]:
        print(f"  {row['percent']:5.1f} %  {row['us_per_request']:7.1f} µs  {comp}")
    return figures


def difference(hop: dict[str, Any], gateway: dict[str, Any]) -> dict[str, float]:
    """µs per request the gateway spends beyond the hop, by component (largest first)."""
    names = set(hop.get("self_by_component", {})) | set(gateway.get("self_by_component", {}))

    def us(side: dict[str, Any], name: str) -> float:
        return float(side.get("self_by_component", {}).get(name, {}).get("us_per_request", 0.0))

    rows = {name: round(us(gateway, name) - us(hop, name), 1) for name in names}
    return dict(sorted(rows.items(), key=lambda item: -item[1]))


async def run(
    seconds: float, concurrency: int, size: int, gateway_src: Path | None, keep: Path | None = None
) -> dict[str, Any]:
    ports = {name: free_port() for name in ("backend", "hop", "gateway")}
    backend = f"http://127.0.0.1:{ports['backend']}/mcp"
    env = _env(gateway_src)
    procs = Processes()
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as cfg:
        route = f"{{name: http, path: /mcp, backend: {{url: '{backend}', timeout: 120}}}}"
        cfg.write(gateway_config(ports["gateway"], [route]))
    report: dict[str, Any] = {
        "concurrency": concurrency,
        "seconds": seconds,
        "argument_bytes": size,
        "gateway_src": str(gateway_src or ROOT),
        "loadavg_at_start": [round(x, 2) for x in os.getloadavg()],
    }
    try:
        procs.start([legacy_python(), "bench/legacy_server.py", "--port", str(ports["backend"])])
        hop_proc, gw_proc = start_proxies(procs, ports["hop"], backend, cfg.name, env)
        urls = {name: f"http://127.0.0.1:{port}/mcp" for name, port in ports.items()}
        for url in urls.values():
            await wait_http(url)
        arguments = {"text": "x" * size}
        async with aiohttp.ClientSession() as http:
            hop = await Legacy(http, urls["hop"]).open()
            gateway = Modern(http, urls["gateway"])
            targets = {
                "hop": (urls["hop"], hop.body("size", arguments), hop.session_headers, hop_proc.pid),
                "gateway": (urls["gateway"], gateway.body("size", arguments), gateway.headers("size"), gw_proc.pid),
            }
            for name, target in targets.items():
                report[name] = await _profile_one(name, target, seconds, concurrency, keep)
    finally:
        procs.stop()
        Path(cfg.name).unlink()
    report["gateway_minus_hop_us"] = difference(report["hop"], report["gateway"])
    report["cpu_ratio"] = round(report["gateway"]["cpu_us_per_request"] / report["hop"]["cpu_us_per_request"], 2)
    print(f"\nCPU per request, gateway / hop: {report['cpu_ratio']}; the gateway beyond the hop, µs per request:")
    for name, extra in list(report["gateway_minus_hop_us"].items())[:14]:
        print(f"  {extra:+8.1f} µs  {name}")
    print("\ngateway functions, inclusive:")
    for name, row in list(report["gateway"].get("inclusive_gateway_functions", {}).items())[:25]:
        print(f"  {row['percent']:5.1f} %  {row['us_per_request']:7.1f} µs  {name}")
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--size", type=int, default=5, help="bytes of the tool's argument")
    parser.add_argument("--gateway-src", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--keep-stacks", type=Path, default=None, help="directory for the collapsed stacks")
    args = parser.parse_args()
    report = asyncio.run(run(args.seconds, args.concurrency, args.size, args.gateway_src, args.keep_stacks))
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
        print(f"report: {args.json}")


if __name__ == "__main__":
    main()
