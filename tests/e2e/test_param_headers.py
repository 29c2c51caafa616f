"""Mcp-Param-* headers are validated against the backend tool's x-mcp-header annotations."""

from __future__ import annotations

import aiohttp
import pytest
from fake_backend import FakeBackend
from harness import BareClient, route, running_gateway
from mcp_types.jsonrpc import HEADER_MISMATCH

from gateway.frontdoor.headers import encode_header_value

Backend = tuple[FakeBackend, str]


@pytest.mark.parametrize(
    ("headers", "accepted"),
    [
        ({"Mcp-Param-Region": "Paris", "Mcp-Param-Days": "3"}, True),
        ({"Mcp-Param-Region": "Paris", "Mcp-Param-Days": "3.0"}, True),
        ({"Mcp-Param-Region": "Lyon", "Mcp-Param-Days": "3"}, False),
        ({"Mcp-Param-Days": "3"}, False),
        ({"Mcp-Param-Region": "Paris", "Mcp-Param-Days": "3", "Mcp-Param-Unknown": "x"}, True),
    ],
)
async def test_param_headers_must_match_annotated_arguments(
    fake_backend: Backend, http: aiohttp.ClientSession, headers: dict[str, str], accepted: bool
) -> None:
    _, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url)]) as gw:
        reply = await BareClient(http, gw.url()).call_tool("weather", {"region": "Paris", "days": 3}, headers=headers)
    if accepted:
        assert reply.text == "weather in Paris for 3 days"
    else:
        assert (reply.status, reply.error["code"]) == (400, HEADER_MISMATCH)


async def test_non_ascii_param_values_are_base64_encoded(fake_backend: Backend, http: aiohttp.ClientSession) -> None:
    _, url = fake_backend
    headers = {"Mcp-Param-Region": encode_header_value("Zürich"), "Mcp-Param-Days": "1"}
    async with running_gateway([route("demo", "/mcp", url)]) as gw:
        reply = await BareClient(http, gw.url()).call_tool("weather", {"region": "Zürich", "days": 1}, headers=headers)
    assert reply.text == "weather in Zürich for 1 days"


async def test_official_client_sends_param_headers_the_gateway_accepts(fake_backend: Backend) -> None:
    from mcp.client import Client

    _, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url)]) as gw, Client(gw.url(), mode="2026-07-28") as client:
        await client.list_tools()
        result = await client.call_tool("weather", {"region": "Paris", "days": 2})
    assert result.content[0].text == "weather in Paris for 2 days"  # type: ignore[union-attr]
