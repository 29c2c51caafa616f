"""Sizes nobody chose: MiB-sized tool arguments and results through the gateway, driven by the
official mcp 2.3.0 client (mode "2026-07-28") against a real mcp 1.30.0 FastMCP server, and a stdio
server that prints banners and debug lines on stdout.

While a multi-MiB result crosses the gateway, /healthz must keep answering: the bound asserted is
generous (it only rules out a stalled event loop; the client runs in a loop of its own, so its work
is not counted as the gateway's); the measured figures come from ``bench/large_results.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp
import anyio
import pytest
from harness import GatewayHandle, route, running_gateway, stdio_route
from mcp.client import Client
from peers.runner import PEERS_DIR, REPO_ROOT, legacy_python

from interop.flows import FLOW_TIMEOUT, text_of

pytestmark = pytest.mark.interop

MODERN = "2026-07-28"
MIB = 1024 * 1024
HEALTHZ_BOUND = 1.0


@asynccontextmanager
async def official_client(gateway: GatewayHandle) -> AsyncIterator[Client]:
    async with Client(gateway.url(), mode=MODERN) as client:
        assert client.protocol_version == MODERN
        yield client


@asynccontextmanager
async def healthz_probe(gateway: GatewayHandle) -> AsyncIterator[list[float]]:
    """Requests /healthz back to back while the block runs; yields the latencies (seconds)."""
    samples: list[float] = []
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    async def probe(http: aiohttp.ClientSession) -> None:
        while not stop.is_set():
            started = loop.time()
            async with http.get(gateway.url("/healthz")) as resp:
                await resp.read()
            samples.append(loop.time() - started)
            await asyncio.sleep(0.01)  # pacing, not waiting for anything

    async with aiohttp.ClientSession() as http:
        task = asyncio.create_task(probe(http))
        try:
            yield samples
        finally:
            stop.set()
            await asyncio.wait_for(task, FLOW_TIMEOUT)


@pytest.mark.parametrize("size", [1 * MIB, 3 * MIB], ids=["1MiB", "3MiB"])
async def test_mib_sized_arguments_through_the_official_client(legacy_server: str, size: int) -> None:
    text = "0123456789abcdef" * (size // 16)
    async with running_gateway([route("legacy", "/mcp", legacy_server)]) as gateway:
        with anyio.fail_after(FLOW_TIMEOUT * 2):
            async with official_client(gateway) as client:
                assert text_of(await client.call_tool("echo", {"text": text})) == text


def _echo_in_own_loop(gateway: GatewayHandle, text: str) -> str:
    """The official client's call, run in a thread with an event loop of its own: encoding 3 MiB and
    validating 6 MiB is the client's work, and in the gateway's loop it would be measured as a stall
    of the gateway (the GIL still hands the gateway's thread a turn every few milliseconds)."""

    async def echo() -> str:
        with anyio.fail_after(FLOW_TIMEOUT * 3):
            async with official_client(gateway) as client:
                return text_of(await client.call_tool("echo", {"text": text}))

    return asyncio.run(echo())


async def test_a_multi_mib_result_does_not_stall_healthz(legacy_server: str) -> None:
    # FastMCP refuses bodies over 4 MiB, so the argument stays under that; its result carries the
    # text twice (content and structuredContent): a 6 MiB result, one SSE event.
    text = "abcdefghijklmnop" * (3 * MIB // 16)
    gateway_route = route("legacy", "/mcp", legacy_server, backend={"timeout": 60})
    async with running_gateway([gateway_route]) as gateway:
        async with healthz_probe(gateway) as latencies:
            echoed = await asyncio.to_thread(_echo_in_own_loop, gateway, text)
        assert echoed == text
    assert latencies, "the probe never ran"
    assert max(latencies) < HEALTHZ_BOUND


async def test_a_stdio_server_that_prints_banners_and_debug_lines() -> None:
    command = [legacy_python(), str(PEERS_DIR / "noisy_stdio.py")]
    noisy = stdio_route("noisy", "/mcp", command, backend={"cwd": str(REPO_ROOT), "timeout": 60})
    async with running_gateway([noisy]) as gateway:
        with anyio.fail_after(FLOW_TIMEOUT * 2):
            async with official_client(gateway) as client:
                assert "chatty" in {tool.name for tool in (await client.list_tools()).tools}
                assert text_of(await client.call_tool("chatty", {"text": "hi"})) == "chatty=hi"
                assert text_of(await client.call_tool("add", {"a": 1, "b": 2})) == "3"
