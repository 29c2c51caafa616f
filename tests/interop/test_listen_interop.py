"""subscriptions/listen through the gateway: the official client's listen() against a real
mcp 1.30.0 FastMCP server whose tool list changes and whose resources update."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import anyio
import pytest
from harness import MODERN, BareClient, GatewayHandle, route, running_gateway
from mcp.client import Client
from mcp.client.subscriptions import ResourceUpdated, ToolsListChanged

from gateway import keys

pytestmark = pytest.mark.interop


@pytest.fixture
async def gateway(legacy_server: str) -> AsyncIterator[GatewayHandle]:
    async with running_gateway([route("legacy", "/mcp", legacy_server)]) as gw:
        yield gw


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def test_listen_receives_tools_list_changed_after_the_backend_adds_a_tool(
    gateway: GatewayHandle, http: aiohttp.ClientSession
) -> None:
    with anyio.fail_after(20):
        async with (
            Client(gateway.url(), mode=MODERN) as client,
            client.listen(tools_list_changed=True, prompts_list_changed=True) as subscription,
        ):
            assert subscription.honored.tools_list_changed is True
            assert not subscription.honored.prompts_list_changed  # the backend does not advertise it
            added = await BareClient(http, gateway.url()).call_tool("add_tool", {"name": "fresh_tool"})
            assert added.text == "added=fresh_tool"
            event = await subscription.__anext__()
            assert isinstance(event, ToolsListChanged)
            assert "fresh_tool" in {t.name for t in (await client.list_tools(cache_mode="bypass")).tools}


async def test_listen_receives_resource_updates_for_a_subscribed_uri(
    gateway: GatewayHandle, http: aiohttp.ClientSession
) -> None:
    caller = BareClient(http, gateway.url())
    with anyio.fail_after(20):
        async with (
            Client(gateway.url(), mode=MODERN) as client,
            client.listen(resource_subscriptions=["demo://readme"]) as subscription,
        ):
            assert list(subscription.honored.resource_subscriptions or []) == ["demo://readme"]
            assert (await caller.call_tool("touch", {"uri": "demo://readme"})).text == "notified=1"
            event = await subscription.__anext__()
            assert isinstance(event, ResourceUpdated)
            assert str(event.uri) == "demo://readme"
    # The last listener left: the gateway unsubscribed and closed its listener session.
    with anyio.fail_after(10):
        while len(gateway.app[keys.LISTEN_HUBS]):
            await anyio.sleep(0.02)
    assert (await caller.call_tool("touch", {"uri": "demo://readme"})).text == "notified=0"


async def test_listen_stream_wire_shape_and_graceful_close_on_shutdown(legacy_server: str) -> None:
    async with aiohttp.ClientSession() as http, running_gateway([route("legacy", "/mcp", legacy_server)]) as gw:
        body = {
            "jsonrpc": "2.0",
            "id": "listen-1",
            "method": "subscriptions/listen",
            "params": {
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": MODERN,
                    "io.modelcontextprotocol/clientCapabilities": {},
                },
                "notifications": {"toolsListChanged": True, "resourceSubscriptions": ["demo://readme"]},
            },
        }
        headers = {
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "MCP-Protocol-Version": MODERN,
            "Mcp-Method": "subscriptions/listen",
        }
        async with http.post(gw.url(), data=json.dumps(body), headers=headers) as resp:
            assert resp.headers["Content-Type"].startswith("text/event-stream")
            first = await _next_message(resp)
            assert first["method"] == "notifications/subscriptions/acknowledged"
            assert first["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "listen-1"
            assert first["params"]["notifications"] == {
                "toolsListChanged": True,
                "resourceSubscriptions": ["demo://readme"],
            }
            await BareClient(http, gw.url()).call_tool("add_tool", {"name": "wire_tool"})
            changed = await _next_message(resp)
            assert changed["method"] == "notifications/tools/list_changed"
            assert changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "listen-1"
            await gw.app[keys.LISTEN_HUBS].close_all()
            final = await _next_message(resp)
            # Every result carries serverInfo (basic/index.mdx §_meta), the listen stream's final one too.
            server_info = final["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]
            assert server_info["name"] == "mrtr-legacy-peer"
            assert final == {
                "jsonrpc": "2.0",
                "id": "listen-1",
                "result": {
                    "resultType": "complete",
                    "_meta": {
                        "io.modelcontextprotocol/subscriptionId": "listen-1",
                        "io.modelcontextprotocol/serverInfo": server_info,
                    },
                },
            }


async def test_listen_without_sse_accept_is_refused_with_406(
    gateway: GatewayHandle, http: aiohttp.ClientSession
) -> None:
    reply = await BareClient(http, gateway.url()).request(
        "subscriptions/listen", {"notifications": {"toolsListChanged": True}}, headers={"Accept": "application/json"}
    )
    assert reply.status == 406


async def _next_message(resp: aiohttp.ClientResponse) -> dict[str, Any]:
    with anyio.fail_after(10):
        while True:
            line = (await resp.content.readline()).decode()
            if line.startswith("data:"):
                message: dict[str, object] = json.loads(line[5:])
                return message
