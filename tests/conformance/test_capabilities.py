"""A capability the client did not declare (basic/index.mdx §_meta: the server MUST NOT rely on it and
MUST answer -32021 MissingRequiredClientCapability with ``data.requiredCapabilities``, HTTP 400;
basic/patterns/mrtr.mdx §Server Requirements 7: never an inputRequest the client cannot serve)."""

from __future__ import annotations

from typing import Any

import pytest
from mcp_types import jsonrpc

from conformance.differential import Pair
from conformance.wire import call

pytestmark = pytest.mark.interop

CAPABILITY_CASES: list[tuple[str, str, dict[str, Any], dict[str, Any], dict[str, Any]]] = [
    ("elicitation not declared", "ask_city", {}, {"sampling": {}, "roots": {}}, {"elicitation": {"form": {}}}),
    ("sampling not declared", "summarize", {"text": "x"}, {"elicitation": {"form": {}}, "roots": {}}, {"sampling": {}}),
    ("roots not declared", "show_roots", {}, {"elicitation": {"form": {}}, "sampling": {}}, {"roots": {}}),
]


@pytest.mark.parametrize(
    ("case", "tool", "arguments", "capabilities", "required"), CAPABILITY_CASES, ids=[c[0] for c in CAPABILITY_CASES]
)
async def test_undeclared_capability_is_32021(
    pair: Pair, case: str, tool: str, arguments: dict[str, Any], capabilities: dict[str, Any], required: dict[str, Any]
) -> None:
    expect = {
        "status": 400,
        "id": "echoed",
        "error": jsonrpc.MISSING_REQUIRED_CLIENT_CAPABILITY,
        "data.requiredCapabilities": required,
    }
    await pair.check(case, call(tool, arguments, capabilities=capabilities), expect)
