"""Adaptive input rounds against a real legacy server, on DEFAULT route settings.

A round is sent as soon as the backend has gone quiet (a short silence, then a ``ping`` round trip
that brings nothing new), not after a fixed window. The guarantee that must survive: requests the
server sends together share one round. mcp 1.30.0 FastMCP's ``ask_and_sample`` sends an elicitation
and a sampling request with ``asyncio.gather``; the client's callbacks rendezvous, so the flow only
completes if both arrive in the same round (two ``tools/call`` POSTs in all).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import anyio
import pytest
from harness import GatewayHandle, route, running_gateway
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from gateway import keys
from interop.flows import FLOW_TIMEOUT, SAMPLED_TEXT, Recorder, WireLog, text_of

pytestmark = pytest.mark.interop

MODERN = "2026-07-28"
FLOWS = 5


@pytest.fixture
async def gateway(legacy_server: str) -> AsyncIterator[GatewayHandle]:
    async with running_gateway([route("legacy", "/mcp", legacy_server)]) as gw:  # default holds settings
        yield gw


async def test_requests_sent_together_share_one_round_on_default_settings(gateway: GatewayHandle) -> None:
    for _ in range(FLOWS):
        recorder = Recorder(rendezvous=True)
        wire = WireLog()
        with anyio.fail_after(FLOW_TIMEOUT):
            async with (
                wire.client() as http_client,
                Client(
                    streamable_http_client(gateway.url(), http_client=http_client),
                    mode=MODERN,
                    elicitation_callback=recorder.elicit,
                    sampling_callback=recorder.sample,
                    list_roots_callback=recorder.roots,
                ) as client,
            ):
                text = text_of(await client.call_tool("ask_and_sample", {}))
        assert text == f"city=Paris;sampled={SAMPLED_TEXT}"
        assert recorder.counts() == (1, 1, 0)
        assert wire.count("tools/call") == 2, "one round carried both requests"
    assert len(gateway.app[keys.HOLDS]) == 0


async def test_interactive_flows_reuse_backend_connections(
    gateway: GatewayHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each flow POSTs the call, a ``ping`` (the round's fence) and the answer. The call's stream
    is still being read to its end when the call is answered; cancelling that read closed its
    connection, so every flow opened a new TCP connection to the backend. Counted in process (the
    client here speaks httpx, so every aiohttp connection is the gateway's)."""
    opened = 0
    create = aiohttp.TCPConnector._create_connection

    async def counting(self: aiohttp.TCPConnector, *args: Any, **kwargs: Any) -> Any:
        nonlocal opened
        opened += 1
        return await create(self, *args, **kwargs)

    monkeypatch.setattr(aiohttp.TCPConnector, "_create_connection", counting)
    flows = 20
    for _ in range(flows):
        recorder = Recorder()
        with anyio.fail_after(FLOW_TIMEOUT):
            async with Client(
                streamable_http_client(gateway.url()), mode=MODERN, elicitation_callback=recorder.elicit
            ) as client:
                assert text_of(await client.call_tool("ask_city", {})) == "city=Paris"
    # The first flows open the session's connections (initialize, GET stream, call, ping, answer);
    # after that the pool has what it needs. One connection per flow or more is the bug.
    assert opened < flows // 2, f"{opened} backend connections for {flows} flows"
