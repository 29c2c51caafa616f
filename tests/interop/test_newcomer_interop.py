"""A first request at the endpoint without the 2026-07-28 headers, against real mcp 1.30.0 servers.

A newcomer's curl without ``MCP-Protocol-Version`` (and without ``_meta``) looks like a
session-era message without a session. A stateful FastMCP refuses it for a missing session id,
which tells the newcomer nothing: the gateway names the header instead. A stateless FastMCP
serves it, and then its answer is relayed as it is.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import aiohttp
import pytest
from harness import route, running_gateway
from mcp_types.jsonrpc import INVALID_REQUEST

from gateway.frontdoor.legacy_passthrough import MISSING_VERSION_MESSAGE

pytestmark = pytest.mark.interop

HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
TOOLS_LIST = {"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {}}


async def test_a_stateful_backend_refusal_becomes_the_missing_header_answer(legacy_server: str) -> None:
    async with running_gateway([route("legacy", "/mcp", legacy_server)]) as gw, aiohttp.ClientSession() as http:
        async with http.post(gw.url(), data=json.dumps(TOOLS_LIST), headers=HEADERS) as resp:
            direct_status = resp.status
            body = await resp.json()
        async with http.post(legacy_server, data=json.dumps(TOOLS_LIST), headers=HEADERS) as resp:
            backend_says = (resp.status, (await resp.json())["error"]["message"])
    assert backend_says[0] == 400, backend_says
    assert "session" in backend_says[1].lower(), backend_says
    assert direct_status == 400
    assert body == {"jsonrpc": "2.0", "id": 7, "error": {"code": INVALID_REQUEST, "message": MISSING_VERSION_MESSAGE}}


async def test_a_stateless_backend_still_serves_a_sessionless_request(
    start_legacy_server: Callable[..., str],
) -> None:
    url = start_legacy_server(stateless=True, json_response=True)
    async with (
        running_gateway([route("legacy", "/mcp", url)]) as gw,
        aiohttp.ClientSession() as http,
        http.post(gw.url(), data=json.dumps(TOOLS_LIST), headers=HEADERS) as resp,
    ):
        assert resp.status == 200, await resp.text()
        body = await resp.json()
    assert body["id"] == 7
    assert {tool["name"] for tool in body["result"]["tools"]} >= {"add"}
