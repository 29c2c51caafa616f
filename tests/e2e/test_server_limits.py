"""Bounds a client meets before any handler runs: header size and count, concurrent connections
(issue 8 item 4)."""

from __future__ import annotations

import asyncio
import re
import signal
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import cast

import aiohttp
import pytest
from aiohttp import web
from harness import TEST_KEY, BareClient, route, running_gateway, start_serve

from gateway.app import build_app
from gateway.config.load import parse_config
from gateway.demo.backend import DemoBackend
from gateway.server import listen

Backend = tuple[DemoBackend, str]


async def test_header_count_and_size_are_bounded_by_the_config(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with running_gateway(
        [route("demo", "/mcp", url)], listen={"max_headers": 20, "max_header_bytes": 2048}
    ) as gw:
        client = BareClient(http, gw.url())
        assert (await client.request("tools/list", headers={f"X-Pad-{i}": "x" for i in range(8)})).status == 200
        many = {f"X-Pad-{i}": "x" for i in range(30)}
        async with http.post(gw.url(), headers=many, data=b"{}") as resp:
            assert resp.status == 400
        async with http.post(gw.url(), headers={"X-Big": "x" * 3000}, data=b"{}") as resp:
            assert resp.status == 400
        assert (await client.request("tools/list", headers={"X-Fits": "x" * 1500})).status == 200


@asynccontextmanager
async def capped_gateway(url: str, max_connections: int) -> AsyncIterator[tuple[web.AppRunner, int]]:
    data = {"state": {"keys": [TEST_KEY]}, "replica_id": "capped", "routes": [route("demo", "/mcp", url)]}
    runner = web.AppRunner(build_app(parse_config(data, env={})), access_log=None, shutdown_timeout=5)
    await runner.setup()
    server = await listen(runner, "127.0.0.1", 0, max_connections)
    try:
        yield runner, cast(asyncio.Server, server).sockets[0].getsockname()[1]
    finally:
        server.close()
        await runner.cleanup()


async def _first_line(port: int, request: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        async with asyncio.timeout(10):
            return await reader.readline()
    finally:
        writer.close()


async def test_connections_past_the_cap_get_503_and_a_freed_place_serves_again(fake_backend: Backend) -> None:
    """Slow clients that never finish their headers cannot take every file descriptor."""
    _, url = fake_backend
    async with capped_gateway(url, max_connections=3) as (runner, port):
        slow = [await asyncio.open_connection("127.0.0.1", port) for _ in range(3)]
        for _, writer in slow:
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # and never the blank line
            await writer.drain()
        assert runner.server is not None
        async with asyncio.timeout(10):
            while len(runner.server.connections) < 3:
                await asyncio.sleep(0.01)
        healthz = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        assert (await _first_line(port, healthz)).startswith(b"HTTP/1.1 503")
        slow[0][1].close()
        async with asyncio.timeout(10):
            while len(runner.server.connections) >= 3:
                await asyncio.sleep(0.01)
        assert (await _first_line(port, healthz)).startswith(b"HTTP/1.1 200")
        for _, writer in slow[1:]:
            writer.close()


@pytest.mark.parametrize("option", [{"max_headers": 8}, {"max_header_bytes": 100}, {"max_connections": 0}])
def test_server_limits_have_sane_lower_bounds(option: dict[str, int]) -> None:
    from gateway.config import ConfigError

    data = {"state": {"keys": [TEST_KEY]}, "routes": [route("demo", "/mcp", "http://127.0.0.1:1/mcp")]}
    with pytest.raises(ConfigError):
        parse_config({**data, "listen": option}, env={})


async def test_serve_runs_capped_and_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    """``mrtr-gateway serve`` as an operator runs it: the connection cap applies, SIGTERM exits 0."""
    port = _free_port()
    config = tmp_path / "gateway.yaml"
    config.write_text(
        f"state:\n  keys: [{TEST_KEY}]\nlisten:\n  host: 127.0.0.1\n  port: {port}\n  max_connections: 1\n"
        "routes:\n  - name: main\n    path: /mcp\n    backend:\n      url: http://127.0.0.1:9/mcp\n",
        encoding="utf-8",
    )
    proc = await start_serve(config)
    try:
        async with asyncio.timeout(30):
            while True:
                try:
                    reader, writer = await asyncio.open_connection("127.0.0.1", port)
                    break
                except OSError:
                    await asyncio.sleep(0.05)
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")  # keep-alive: holds the only place
            assert (await reader.readline()).startswith(b"HTTP/1.1 200")
            healthz = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            assert (await _first_line(port, healthz)).startswith(b"HTTP/1.1 503")
            writer.close()
            metrics = b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            while True:  # the freed place is usable once the gateway has seen the close
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(metrics)
                try:
                    answer = await reader.read()
                except ConnectionError:  # refused and closed while we were still writing
                    answer = b""
                writer.close()
                if answer.startswith(b"HTTP/1.1 200"):
                    break
                await asyncio.sleep(0.05)
            refused = re.search(rb'mrtr_gateway_rejections_total\{reason="max_connections"\} (\d+)', answer)
            assert refused is not None, answer
            assert int(refused.group(1)) >= 1
            proc.send_signal(signal.SIGTERM)
            assert await proc.wait() == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
