"""The error codes the server features name: an unknown tool (server/tools.mdx §Error Handling, a
protocol error shown as -32602), an invalid cursor (server/utilities/pagination.mdx §Error Handling,
SHOULD -32602), an unknown prompt or missing prompt arguments (server/prompts.mdx §Error Handling,
SHOULD -32602), an unknown resource (server/resources.mdx §Error Handling, MUST -32602). The legacy
server answers some of these with code 0; the gateway maps them."""

from __future__ import annotations

import pytest
from mcp_types import jsonrpc

from conformance.differential import Pair
from conformance.wire import Exchange, call, request

pytestmark = pytest.mark.interop

ERROR_CASES: list[tuple[str, Exchange]] = [
    ("unknown tool", call("no_such_tool", {})),
    ("invalid cursor", request("tools/list", {"cursor": "not-a-cursor"})),
    ("unknown prompt", request("prompts/get", {"name": "no_such_prompt", "arguments": {}})),
    ("prompt missing a required argument", request("prompts/get", {"name": "greet", "arguments": {}})),
    ("unknown resource", request("resources/read", {"uri": "demo://no-such-resource"})),
]


@pytest.mark.parametrize(("case", "exchange"), ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
async def test_feature_error_is_invalid_params(pair: Pair, case: str, exchange: Exchange) -> None:
    await pair.check(case, exchange, {"id": "echoed", "error": jsonrpc.INVALID_PARAMS})
