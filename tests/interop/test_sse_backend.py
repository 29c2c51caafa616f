"""The gateway in front of real HTTP+SSE (2024-11-05 transport) servers, driven by the official
mcp 2.3.0 client pinned to mode "2026-07-28".

Two backends, one flow: ``mcp==1.30.0`` FastMCP run with ``transport="sse"`` and ``mcp==2.3.0``
``MCPServer`` run with ``transport="sse"`` (over this transport every session is handshake-era,
so its resolvers turn into inline server-to-client requests). Both put every response and every
server request on the one GET stream; the gateway attributes the requests to the call holding
the session's lease and turns them into ``InputRequiredResult`` rounds for the client.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp
import anyio
import pytest
from harness import BareClient, GatewayHandle, route, running_gateway
from mcp.client import Client

from interop.flows import FLOW_TIMEOUT, ROOTS, SAMPLED_TEXT, Recorder, text_of

pytestmark = pytest.mark.interop

MODERN = "2026-07-28"


@pytest.fixture(params=["legacy-1.30.0", "mcpserver-2.3.0"])
def sse_backend(request: pytest.FixtureRequest) -> str:
    fixture = "legacy_sse_server" if request.param == "legacy-1.30.0" else "native_sse_server"
    url: str = request.getfixturevalue(fixture)
    return url


@pytest.fixture
async def gateway(sse_backend: str) -> AsyncIterator[GatewayHandle]:
    async with running_gateway([route("old", "/mcp", sse_backend, backend={"transport": "sse"})]) as gw:
        yield gw


@asynccontextmanager
async def modern_client(gateway: GatewayHandle, recorder: Recorder) -> AsyncIterator[Client]:
    async with Client(
        gateway.url(),
        mode=MODERN,
        elicitation_callback=recorder.elicit,
        sampling_callback=recorder.sample,
        list_roots_callback=recorder.roots,
    ) as client:
        assert client.protocol_version == MODERN
        yield client


async def test_lists_and_calls_through_an_sse_backend(gateway: GatewayHandle) -> None:
    recorder = Recorder()
    with anyio.fail_after(FLOW_TIMEOUT):
        async with modern_client(gateway, recorder) as client:
            tools = {tool.name for tool in (await client.list_tools()).tools}
            assert {"add", "ask_city", "summarize", "show_roots"} <= tools
            assert text_of(await client.call_tool("add", {"a": 20, "b": 22})) == "42"
    assert recorder.counts() == (0, 0, 0)


async def test_elicitation_sampling_and_roots_through_an_sse_backend(gateway: GatewayHandle) -> None:
    recorder = Recorder()
    with anyio.fail_after(FLOW_TIMEOUT):
        async with modern_client(gateway, recorder) as client:
            assert text_of(await client.call_tool("ask_city", {})) == "city=Paris"
            assert text_of(await client.call_tool("summarize", {"text": "a long text"})) == f"sampled={SAMPLED_TEXT}"
            assert text_of(await client.call_tool("show_roots", {})) == "roots=" + ",".join(ROOTS)
    assert recorder.elicitations == ["Which city?"]
    assert recorder.samplings == ["Summarize: a long text"]
    assert recorder.roots_calls == 1


async def test_dependent_questions_come_as_two_rounds(gateway: GatewayHandle) -> None:
    recorder = Recorder()
    with anyio.fail_after(FLOW_TIMEOUT):
        async with modern_client(gateway, recorder) as client:
            assert text_of(await client.call_tool("ask_two", {})) == "name=Ann;color=teal"
    assert recorder.elicitations == ["What is your name?", "Hello Ann, which color?"]


async def test_strict_discover_and_authorization_through_an_sse_backend(gateway: GatewayHandle) -> None:
    with anyio.fail_after(FLOW_TIMEOUT):
        async with aiohttp.ClientSession() as http:
            client = BareClient(http, gateway.url(), authorization="Bearer sse-1")
            discovered = (await client.request("server/discover")).result
            whoami = await client.call_tool("whoami")
    assert discovered["supportedVersions"] == [MODERN]
    assert "tools" in discovered["capabilities"]
    assert whoami.text == "Bearer sse-1"
