"""What every result carries (basic/index.mdx §Result Responses, §_meta; server/utilities/caching.mdx)
and the error codes the server features name (server/tools.mdx, prompts.mdx, resources.mdx,
utilities/pagination.mdx)."""

from __future__ import annotations

from typing import Any

import pytest
from mcp_types import jsonrpc

from conformance.differential import Pair
from conformance.wire import MODERN, Exchange, Observed, call, request

pytestmark = pytest.mark.interop

COMPLETE = {"status": 200, "id": "echoed", "resultType": "complete", "serverInfo": True}
CACHEABLE = {**COMPLETE, "cacheHints": "valid"}
INVALID_PARAMS = {"status": 200, "id": "echoed", "error": jsonrpc.INVALID_PARAMS}
"""A -32602 raised while serving a valid request: HTTP 400 is only required for the envelope failures
the transport lists, so the status is compared between the servers, not fixed here."""

RESULT_CASES: list[tuple[str, Exchange, dict[str, Any]]] = [
    ("server/discover", request("server/discover"), CACHEABLE),
    ("tools/list", request("tools/list"), CACHEABLE),
    ("prompts/list", request("prompts/list"), CACHEABLE),
    ("resources/list", request("resources/list"), CACHEABLE),
    ("resources/templates/list", request("resources/templates/list"), CACHEABLE),
    ("resources/read", request("resources/read", {"uri": "demo://readme"}), CACHEABLE),
    ("resources/read of a template", request("resources/read", {"uri": "demo://item/7"}), CACHEABLE),
    ("tools/call", call("add", {"a": 2, "b": 3}), COMPLETE),
    ("tools/call with a tool error", call("add", {"a": "x", "b": 3}), COMPLETE),
    ("prompts/get", request("prompts/get", {"name": "greet", "arguments": {"name": "Ada"}}), COMPLETE),
    (
        "completion/complete",
        request(
            "completion/complete",
            {"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "name", "value": "al"}},
        ),
        COMPLETE,
    ),
]


def _payload(observed: Observed) -> dict[str, Any]:
    """The part of each result both servers must agree on (the shared peer contract)."""
    result = observed.final.get("result") if isinstance(observed.final, dict) else None
    if not isinstance(result, dict):
        return {}
    if "content" in result:
        return {
            "isError": bool(result.get("isError")),
            "text": [c.get("text") for c in result["content"]][:1] if not result.get("isError") else None,
        }
    if "contents" in result:
        return {"contents": [(c.get("uri"), c.get("text")) for c in result["contents"]]}
    if "messages" in result:
        return {"messages": [m["content"].get("text") for m in result["messages"]]}
    if "completion" in result:
        return {"completion": sorted(result["completion"]["values"])}
    if "supportedVersions" in result:
        return {
            "modern": MODERN in result["supportedVersions"],
            "capabilities": sorted(k for k in ("tools", "prompts", "resources") if k in result.get("capabilities", {})),
        }
    for key in ("tools", "prompts", "resources", "resourceTemplates"):
        if key in result:
            return {key: isinstance(result[key], list)}
    return {}


@pytest.mark.parametrize(("case", "exchange", "expect"), RESULT_CASES, ids=[c[0] for c in RESULT_CASES])
async def test_result_fields(pair: Pair, case: str, exchange: Exchange, expect: dict[str, Any]) -> None:
    await pair.check(case, exchange, expect, extra=_payload)
