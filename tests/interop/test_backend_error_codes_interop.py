"""Backend errors through the gateway get the codes the 2026-07-28 spec asks for (issue 7 item 5).

mcp 1.30.0 FastMCP answers an unknown resource or prompt, and a prompt called without a required
argument, with JSON-RPC code ``0``, and an unknown tool with an ``isError`` result. The spec asks for
-32602 in each case (server/resources.mdx, server/prompts.mdx, server/tools.mdx §Error Handling).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest
from harness import BareClient, route, running_gateway
from mcp_types.jsonrpc import INVALID_PARAMS

pytestmark = pytest.mark.interop


@pytest.fixture
async def client(legacy_server: str) -> AsyncIterator[BareClient]:
    async with aiohttp.ClientSession() as http, running_gateway([route("legacy", "/mcp", legacy_server)]) as gw:
        yield BareClient(http, gw.url())


@pytest.mark.parametrize(
    ("method", "params", "message"),
    [
        ("resources/read", {"uri": "demo://missing"}, "Unknown resource: demo://missing"),
        ("prompts/get", {"name": "nope", "arguments": {}}, "Unknown prompt: nope"),
        ("prompts/get", {"name": "greet", "arguments": {}}, "Missing required arguments"),
        ("tools/call", {"name": "nope", "arguments": {}}, "Unknown tool: nope"),
    ],
)
async def test_unknown_names_and_missing_prompt_arguments_are_invalid_params(
    client: BareClient, method: str, params: dict[str, object], message: str
) -> None:
    reply = await client.request(method, params)
    assert (reply.status, reply.error["code"]) == (400, INVALID_PARAMS), reply.body
    assert message in reply.error["message"]


async def test_known_names_still_work_and_tool_errors_stay_tool_results(client: BareClient) -> None:
    assert (await client.request("resources/read", {"uri": "demo://item/7"})).result["contents"][0]["text"] == "item 7"
    greeting = (await client.request("prompts/get", {"name": "greet", "arguments": {"name": "Ada"}})).result
    assert "Ada" in str(greeting["messages"])
    # A known tool whose input fails validation is a tool execution error, not a protocol error.
    failed = (await client.call_tool("add", {"a": "x", "b": 2})).result
    assert failed["isError"] is True
