"""The pair under test: the reference server (mcp 2.3.0 ``MCPServer``, ``tests/peers/native_mcpserver.py``)
and a gateway in front of the legacy peer (mcp 1.30.0 FastMCP, ``tests/peers/legacy_fastmcp.py``),
both with the same tools. The peers are the session-wide subprocess fixtures of ``tests/conftest.py``;
each test gets a fresh in-process gateway (cheap: one backend session is opened on first use)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest
from harness import route, running_gateway

from conformance.differential import Pair, Target

pytestmark = pytest.mark.interop


@pytest.fixture
async def pair(native_server: str, legacy_server: str) -> AsyncIterator[Pair]:
    routes = [
        route("legacy", "/mcp", legacy_server, holds={"batch_window": 0.05}),
        route("other", "/other", legacy_server),
    ]
    async with running_gateway(routes) as gw, aiohttp.ClientSession() as http:
        yield Pair(
            reference=Target("reference", native_server, http),
            gateway=Target("gateway", gw.url("/mcp"), http, other_url=gw.url("/other")),
        )
