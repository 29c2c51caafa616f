"""Bounds a client meets before any handler runs: header size and count, concurrent connections
(issue 8 item 4)."""

from __future__ import annotations

import asyncio
import json
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
from fake_backend import FakeBackend
from harness import TEST_KEY, BareClient, route, running_gateway, start_serve
from waiting import eventually

from gateway.app import build_app
from gateway.config.load import parse_config
from gateway.server import listen

Backend = tuple[FakeBackend, str]


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
async def capped_gateway(
    url: str, max_connections: int, reuse_idle_after: float = 3600.0
) -> AsyncIterator[tuple[web.AppRunner, int]]:
    data = {"state": {"keys": [TEST_KEY]}, "replica_id": "capped", "routes": [route("demo", "/mcp", url)]}
    runner = web.AppRunner(build_app(parse_config(data, env={})), access_log=None, shutdown_timeout=5)
    await runner.setup()
    server = await listen(runner, "127.0.0.1", 0, max_connections, reuse_idle_after=reuse_idle_after)
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
    """Slow clients that never finish their headers cannot take every file descriptor (here they
    are never old enough to be closed for a new connection)."""
    _, url = fake_backend
    async with capped_gateway(url, max_connections=3) as (runner, port):
        slow = [await asyncio.open_connection("127.0.0.1", port) for _ in range(3)]
        for _, writer in slow:
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # and never the blank line
            await writer.drain()
        assert runner.server is not None
        server = runner.server
        await eventually(lambda: len(server.connections) == 3, what="the gateway holds the three slow connections")
        healthz = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        assert (await _first_line(port, healthz)).startswith(b"HTTP/1.1 503")
        slow[0][1].close()
        await eventually(lambda: len(server.connections) < 3, what="the gateway saw the close")
        assert (await _first_line(port, healthz)).startswith(b"HTTP/1.1 200")
        for _, writer in slow[1:]:
            writer.close()


HEALTHZ_KEEP_ALIVE = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
HEALTHZ_CLOSE = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"


async def _response(reader: asyncio.StreamReader) -> tuple[str, dict[str, str], bytes]:
    """One HTTP/1.1 response with a Content-Length: (status line, lower-cased headers, body)."""
    async with asyncio.timeout(10):
        lines = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        fields = (line.partition(":") for line in lines[1:] if line)
        headers = {name.lower(): value.strip() for name, _, value in fields}
        return lines[0], headers, await reader.readexactly(int(headers.get("content-length", "0")))


async def _until_no_connections(runner: web.AppRunner) -> None:
    server = runner.server
    assert server is not None
    await eventually(lambda: not server.connections, what="every connection closed")


async def test_at_the_cap_an_idle_keep_alive_connection_is_closed_to_admit_a_new_one(fake_backend: Backend) -> None:
    """As nginx does: the connection idle longest makes room; the others keep being served."""
    _, url = fake_backend
    async with capped_gateway(url, max_connections=3, reuse_idle_after=0.0) as (runner, port):
        for _ in range(20):
            idle = [await asyncio.open_connection("127.0.0.1", port) for _ in range(3)]
            for reader, writer in idle:
                writer.write(HEALTHZ_KEEP_ALIVE)
                assert (await _response(reader))[0] == "HTTP/1.1 200 OK"
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(HEALTHZ_CLOSE)
            assert (await _response(reader))[0] == "HTTP/1.1 200 OK"
            writer.close()
            async with asyncio.timeout(10):
                assert await idle[0][0].read() == b""  # closed by the gateway, cleanly
            for reader, writer in idle[1:]:  # still open, still served
                writer.write(HEALTHZ_KEEP_ALIVE)
                assert (await _response(reader))[0] == "HTTP/1.1 200 OK"
            for _, writer in idle:
                writer.close()
            await _until_no_connections(runner)


async def test_a_client_refused_at_the_cap_reads_a_503_with_retry_after_never_a_reset(tmp_path: Path) -> None:
    """Every place taken by a request in flight (bodies announced, not yet sent): a new client gets
    its 503 (Retry-After, JSON-RPC ``overloaded``) and a clean close, however its request arrives.

    A gateway process of its own: in one event loop with the client the race cannot happen. Before
    issue 20 a refused connection was written its 503 and closed without its request being read,
    and the kernel answered the unread request with a reset that reached the client first."""
    port = _free_port()
    config = _capped_config(tmp_path, port, max_connections=2, extra="logging:\n  level: warning\n")
    body = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}'
    head = (
        b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nMCP-Protocol-Version: 2026-07-28\r\n"
        b"Mcp-Method: tools/list\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n"
    )
    proc = await start_serve(config)
    busy: list[asyncio.StreamWriter] = []
    try:
        reader, writer = await _connect_once_listening(port)
        writer.write(HEALTHZ_CLOSE)
        assert (await _response(reader))[0] == "HTTP/1.1 200 OK"
        writer.close()
        while len(busy) < 2:  # a request each, its body never sent: in flight until body_timeout
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(head % 1000)
            busy.append(writer)
        await eventually(  # the gateway has taken them: both places are in use
            lambda: _is_refused(port), what="a new connection refused at the cap", timeout=30, interval=0.05
        )
        large = b" " * 200_000 + body
        for attempt in range(24):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            if attempt % 3 == 0:  # head and body in one write, as clients usually send them
                writer.write(head % len(body) + body)
            elif attempt % 3 == 1:  # the head, then the body once the 503 may have come
                writer.write(head % len(body))
                await asyncio.sleep(0.01)  # deliberate: the body arrives apart from the head
                writer.write(body)
            else:  # a body larger than the socket buffers: read and dropped after the 503
                writer.write(head % len(large) + large)
            status, headers, raw = await _response(reader)
            assert status == "HTTP/1.1 503 Service Unavailable", (attempt, status)
            assert (headers["retry-after"], headers["connection"]) == ("1", "close"), headers
            error = json.loads(raw)["error"]
            assert (error["code"], error["data"]["reason"], error["data"]["cause"]) == (
                -32603,
                "overloaded",
                "max_connections",
            ), error
            async with asyncio.timeout(10):
                assert await reader.read() == b""  # then a clean close: FIN, no reset
            writer.close()
    finally:
        for writer in busy:
            writer.close()
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_two_hundred_two_round_calls_through_a_lowered_cap_lose_nothing() -> None:
    """The load of issue 20, smaller: 200 clients at once, distinct credentials, each a two-round
    call, through a cap of 50 connections (every other setting default). Clients honour the 503's
    Retry-After; none may get no answer or a reset, and no hold may be left behind
    (``python -m bench.connection_cap`` runs the 1,000-client version)."""
    from bench.connection_cap import run

    out = await run(200, "max_connections: 50", fresh=False)
    assert out["refused_at_cap"] > 0, out  # the cap was reached
    assert (out["lost"], out["other"], out["completed"]) == (0, {}, 200), out
    assert out["holds_after"] == 0, out


@pytest.mark.parametrize("option", [{"max_headers": 8}, {"max_header_bytes": 100}, {"max_connections": 0}])
def test_server_limits_have_sane_lower_bounds(option: dict[str, int]) -> None:
    from gateway.config.load import ConfigError

    data = {"state": {"keys": [TEST_KEY]}, "routes": [route("demo", "/mcp", "http://127.0.0.1:1/mcp")]}
    with pytest.raises(ConfigError):
        parse_config({**data, "listen": option}, env={})


async def test_serve_runs_capped_and_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    """``mrtr-gateway serve`` as an operator runs it: the connection cap applies, SIGTERM exits 0."""
    port = _free_port()
    config = _capped_config(tmp_path, port, max_connections=1)
    proc = await start_serve(config)
    try:
        reader, writer = await _connect_once_listening(port)
        async with asyncio.timeout(30):
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")  # keep-alive: holds the only place
            assert (await reader.readline()).startswith(b"HTTP/1.1 200")
            healthz = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            assert (await _first_line(port, healthz)).startswith(b"HTTP/1.1 503")
            writer.close()
            metrics = b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"

            async def metrics_answer() -> bytes | None:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(metrics)
                try:
                    answer = await reader.read()
                except ConnectionError:  # refused and closed while we were still writing
                    answer = b""
                writer.close()
                return answer if answer.startswith(b"HTTP/1.1 200") else None

            # the freed place is usable once the gateway has seen the close
            answer = await eventually(metrics_answer, what="/metrics served once a place is free", interval=0.05)
            refused = re.search(rb'mrtr_gateway_rejections_total\{reason="max_connections"\} (\d+)', answer)
            assert refused is not None, answer
            assert int(refused.group(1)) >= 1
            proc.send_signal(signal.SIGTERM)
            assert await proc.wait() == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def _capped_config(tmp_path: Path, port: int, max_connections: int, extra: str = "") -> Path:
    """A ``serve`` config on ``port`` with ``max_connections``; its one route's backend never answers."""
    config = tmp_path / "gateway.yaml"
    config.write_text(
        f"state:\n  keys: [{TEST_KEY}]\nlisten:\n  host: 127.0.0.1\n  port: {port}\n"
        f"  max_connections: {max_connections}\n{extra}"
        "routes:\n  - name: main\n    path: /mcp\n    backend:\n      url: http://127.0.0.1:9/mcp\n",
        encoding="utf-8",
    )
    return config


async def _connect_once_listening(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection to a ``serve`` process that is starting: refused until it listens."""
    connection: tuple[asyncio.StreamReader, asyncio.StreamWriter] = await eventually(
        lambda: asyncio.open_connection("127.0.0.1", port),
        what=f"the gateway listens on {port}",
        timeout=30,
        interval=0.05,
        ignoring=(OSError,),
    )
    return connection


async def _is_refused(port: int) -> bool:
    return (await _first_line(port, HEALTHZ_CLOSE)).startswith(b"HTTP/1.1 503")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
