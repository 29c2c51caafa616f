"""Revision negotiation and capability mapping with the fake legacy server."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest
from harness import BareClient, accept, route, running_gateway

from gateway.demo.backend import DEMO_BACKEND_KEY, start_demo_backend

ALL: dict[str, Any] = {"elicitation": {"form": {}, "url": {}}, "sampling": {"tools": {}}, "roots": {}}


@pytest.mark.parametrize(
    ("pinned", "declared"),
    [
        ("2024-11-05", {"sampling": {}, "roots": {}}),
        ("2025-03-26", {"sampling": {}, "roots": {}}),
        ("2025-06-18", {"elicitation": {}, "sampling": {}, "roots": {}}),
        ("2025-11-25", {"elicitation": {"form": {}, "url": {}}, "sampling": {"tools": {}}, "roots": {}}),
    ],
)
async def test_a_pinned_revision_is_offered_with_its_capability_shape(pinned: str, declared: dict[str, Any]) -> None:
    runner, url = await start_demo_backend()
    backend = runner.app[DEMO_BACKEND_KEY]
    try:
        async with (
            aiohttp.ClientSession() as http,
            running_gateway([route("demo", "/mcp", url, backend={"protocol_version": pinned})]) as gw,
        ):
            client = BareClient(http, gw.url(), capabilities=ALL)
            assert (await client.call_tool("add", {"a": 1, "b": 2})).text == "3"
            (session,) = backend.sessions.values()
            assert session.protocol_version == pinned
            assert session.client_capabilities == declared
            city = await client.call_tool("ask_city")
            if "elicitation" in declared:
                result = city.result
                (key,) = result["inputRequests"]
                done = await client.retry("ask_city", result["requestState"], {key: accept(city="Rome")})
                assert done.text == "city=Rome"
            else:  # the backend was never told the client can elicit, so it does not ask
                assert city.result["isError"] is True
    finally:
        await runner.cleanup()


@pytest.mark.parametrize("only", ["2024-11-05", "2025-03-26", "2025-06-18"])
async def test_whatever_revision_the_backend_picks_is_accepted(only: str) -> None:
    runner, url = await start_demo_backend(versions=[only])
    try:
        async with aiohttp.ClientSession() as http, running_gateway([route("demo", "/mcp", url)]) as gw:
            client = BareClient(http, gw.url())
            assert (await client.call_tool("add", {"a": 2, "b": 2})).text == "4"
            discovered = (await client.request("server/discover")).result
            assert discovered["supportedVersions"] == ["2026-07-28"]
    finally:
        await runner.cleanup()
