"""Revision negotiation and capability mapping with the fake legacy server."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest
from fake_backend import FAKE_BACKEND_KEY, start_fake_backend
from harness import BareClient, accept, route, running_gateway

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
    runner, url = await start_fake_backend()
    backend = runner.app[FAKE_BACKEND_KEY]
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
    runner, url = await start_fake_backend(versions=[only])
    try:
        async with aiohttp.ClientSession() as http, running_gateway([route("demo", "/mcp", url)]) as gw:
            client = BareClient(http, gw.url())
            assert (await client.call_tool("add", {"a": 2, "b": 2})).text == "4"
            discovered = (await client.request("server/discover")).result
            assert discovered["supportedVersions"] == ["2026-07-28"]
    finally:
        await runner.cleanup()


MODERN_META: dict[str, Any] = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
INITIALIZE_PARAMS: dict[str, Any] = {
    "protocolVersion": "2025-11-25",
    "capabilities": {},
    "clientInfo": {"name": "raw", "version": "0"},
}


@pytest.mark.parametrize(
    ("header", "meta", "status", "code"),
    [
        # streamable-http.mdx §Protocol Version Header: a method the revision lacks is 404 + -32601.
        ("2026-07-28", True, 404, -32601),
        # The header says 2026-07-28, so the envelope is required first (basic/index.mdx §_meta).
        ("2026-07-28", False, 400, -32602),
        # The envelope says 2026-07-28 but the required header is missing (§Server Validation).
        (None, True, 400, -32020),
        # The header contradicts the envelope (§Protocol Version Header: HeaderMismatch).
        ("2025-11-25", True, 400, -32020),
    ],
    ids=["header and envelope", "header only", "envelope only", "handshake-era header, 2026-07-28 envelope"],
)
async def test_an_initialize_that_says_2026_07_28_hears_a_modern_error_not_the_backend(
    header: str | None, meta: bool, status: int, code: int
) -> None:
    """Issue 17: a request is legacy only when nothing in it says 2026-07-28; the backend is never asked."""
    runner, url = await start_fake_backend()
    backend = runner.app[FAKE_BACKEND_KEY]
    params = {**INITIALIZE_PARAMS, **({"_meta": MODERN_META} if meta else {})}
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    headers |= {"Mcp-Method": "initialize"} | ({"MCP-Protocol-Version": header} if header else {})
    try:
        async with aiohttp.ClientSession() as http, running_gateway([route("demo", "/mcp", url)]) as gw:
            body = {"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": params}
            async with http.post(gw.url(), json=body, headers=headers) as resp:
                assert resp.status == status
                assert resp.content_type == "application/json"
                assert "Mcp-Session-Id" not in resp.headers
                answer = await resp.json()
        assert answer["id"] == 7
        assert answer["error"]["code"] == code
        assert backend.initialize_count == 0, "the legacy server never saw the request"
    finally:
        await runner.cleanup()


async def test_a_genuine_legacy_initialize_still_passes_through() -> None:
    runner, url = await start_fake_backend()
    backend = runner.app[FAKE_BACKEND_KEY]
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    try:
        async with aiohttp.ClientSession() as http, running_gateway([route("demo", "/mcp", url)]) as gw:
            body = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INITIALIZE_PARAMS}
            async with http.post(gw.url(), json=body, headers=headers) as resp:
                assert resp.status == 200
                assert resp.headers["Mcp-Session-Id"]
                text = await resp.text()
        assert '"protocolVersion":"2025-11-25"' in text.replace(" ", "")
        assert backend.initialize_count == 1
    finally:
        await runner.cleanup()
