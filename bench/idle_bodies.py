"""Idle request bodies: what connections that announce a body and never send it cost the gateway.

Run from the repo root after `bash scripts/bootstrap.sh`:

    .venv/bin/python -m bench.idle_bodies [--connections 2000] [--body-timeout 5] [--json out.json]

It starts a gateway subprocess (as deployed, with the open-file limit a container commonly has,
1,024) in front of a backend that is never reached, then opens ``--connections`` TCP connections
that each send a ``POST`` with headers and ``Content-Length: 1000`` and no body. It reports the
gateway's open file descriptors (``/proc/<pid>/fd``, Linux) and the latency of a ``/healthz`` on a
fresh connection, once the attack is open and again after the body timeout has passed, plus how
many attacking connections the gateway had closed by then.

``--gateway-root`` and ``--python`` point at another checkout and interpreter (for a before/after
run against an older commit); ``--body-timeout 0`` leaves ``listen.body_timeout`` out of the
config, for code that has no such option. Everything binds 127.0.0.1; every wait is bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from bench.bench import free_port, wait_http

ROOT = Path(__file__).resolve().parents[1]
GATEWAY_FD_LIMIT = 1024


def fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def spawn_gateway(python: str, root: Path, config: str) -> subprocess.Popen[bytes]:
    def limit_fds() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (GATEWAY_FD_LIMIT, GATEWAY_FD_LIMIT))

    return subprocess.Popen(
        [python, "-m", "gateway", "serve", "--config", config],
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=limit_fds,  # noqa: PLW1509 - the child is a plain Python process
    )


async def healthz_ms(url: str) -> float | str:
    start = time.perf_counter()
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as http,
            http.get(url) as response,
        ):
            await response.read()
            if response.status != 200:
                return f"HTTP {response.status}"
    except (aiohttp.ClientError, TimeoutError) as exc:
        return f"failed: {type(exc).__name__}"
    return round((time.perf_counter() - start) * 1000, 1)


async def open_idle(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 5)
    except (OSError, TimeoutError):
        return None
    writer.write(
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Accept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n"
    )
    with contextlib.suppress(OSError):
        await writer.drain()
    return reader, writer


async def closed_by_server(reader: asyncio.StreamReader) -> bool:
    try:
        await asyncio.wait_for(reader.read(65536), 0.01)
    except TimeoutError:
        return False
    except OSError:
        return True
    return reader.at_eof()


async def run(args: argparse.Namespace) -> dict[str, Any]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, args.connections + 512)), hard))
    port = free_port()
    listen = f"{{host: 127.0.0.1, port: {port}"
    if args.body_timeout:
        listen += f", body_timeout: {args.body_timeout}"
    listen += "}"
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as cfg:
        cfg.write(
            f"listen: {listen}\n"
            "state: {keys: ['bench-key-0123456789abcdef0123456789abcdef']}\n"
            "logging: {level: error}\n"
            "routes: [{name: idle, path: /mcp, backend: {url: 'http://127.0.0.1:9/mcp'}}]\n"
        )

    proc = spawn_gateway(args.python, args.gateway_root, cfg.name)
    healthz = f"http://127.0.0.1:{port}/healthz"
    figures: dict[str, Any] = {"connections": args.connections, "body_timeout": args.body_timeout or None}
    conns: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    try:
        await wait_http(healthz)
        figures["fds_idle"] = fds(proc.pid)
        opened = await asyncio.gather(*(open_idle(port) for _ in range(args.connections)))
        conns = [c for c in opened if c is not None]
        figures["attack_connections_opened"] = len(conns)
        await asyncio.sleep(2)
        figures["fds_under_attack"] = fds(proc.pid)
        figures["healthz_under_attack_ms"] = await healthz_ms(healthz)
        wait = (args.body_timeout or 30) + 3
        await asyncio.sleep(wait)
        figures["seconds_later"] = wait + 2
        figures["fds_later"] = fds(proc.pid)
        figures["healthz_later_ms"] = await healthz_ms(healthz)
        closed = await asyncio.gather(*(closed_by_server(reader) for reader, _ in conns))
        figures["attack_connections_closed_by_gateway"] = sum(closed)
    finally:
        for _, writer in conns:
            writer.close()
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        os.unlink(cfg.name)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--connections", type=int, default=2000)
    parser.add_argument("--body-timeout", type=float, default=5.0)
    parser.add_argument("--gateway-root", type=Path, default=ROOT)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    figures = asyncio.run(run(args))
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
