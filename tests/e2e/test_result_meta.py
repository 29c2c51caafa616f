"""Result shapes the 2026-07-28 spec asks of every result and of listen acknowledgments."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest
from fake_backend import SERVER_NAME, SERVER_VERSION, FakeBackend
from harness import BareClient, accept, route, running_gateway

from gateway.listen.translate import acknowledged

SERVER_INFO = {"io.modelcontextprotocol/serverInfo": {"name": SERVER_NAME, "version": SERVER_VERSION}}
Backend = tuple[FakeBackend, str]


async def test_every_result_carries_server_info_including_input_required_rounds(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    """basic/index.mdx §_meta: serverInfo SHOULD be in every result's _meta."""
    _, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url)]) as gw:
        client = BareClient(http, gw.url())
        held = (await client.call_tool("ask_city")).result
        assert held["resultType"] == "input_required"
        assert held["_meta"] == SERVER_INFO
        (key,) = held["inputRequests"]
        done = (await client.retry("ask_city", held["requestState"], {key: accept(city="Oslo")})).result
        assert done["resultType"] == "complete"
        assert done["_meta"] == SERVER_INFO
        for method in ("tools/list", "prompts/list", "resources/list", "server/discover"):
            assert (await client.request(method)).result["_meta"] == SERVER_INFO, method


CAPS: dict[str, Any] = {"tools": {"listChanged": True}, "prompts": {}, "resources": {"subscribe": False}}


@pytest.mark.parametrize(
    ("requested", "capabilities", "ack"),
    [
        (
            {"toolsListChanged": True, "promptsListChanged": True, "resourceSubscriptions": ["a://b"]},
            CAPS,
            {"toolsListChanged": True},
        ),
        ({"resourcesListChanged": True}, {"resources": {"listChanged": True}}, {"resourcesListChanged": True}),
        (
            {"resourceSubscriptions": ["a://b"]},
            {"resources": {"subscribe": True}},
            {"resourceSubscriptions": ["a://b"]},
        ),
        ({"toolsListChanged": False}, CAPS, {}),
        ({"toolsListChanged": True}, {}, {}),
        ({"toolsListChanged": True}, {"tools": {"listChanged": "yes"}}, {}),
    ],
)
def test_listen_acknowledgment_omits_what_the_backend_does_not_support(
    requested: dict[str, Any], capabilities: dict[str, Any], ack: dict[str, Any]
) -> None:
    """basic/patterns/subscriptions.mdx §Acknowledgment: unsupported types are omitted, not false or []."""
    assert acknowledged(requested, capabilities) == ack
