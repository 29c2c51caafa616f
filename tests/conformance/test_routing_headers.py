"""Routing headers (basic/transports/streamable-http.mdx §Request Metadata, §Server Validation):
``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name`` and ``Mcp-Param-*`` must be present where
required, must say what the body says (after base64 decoding), and must carry no invalid
characters; every failure is HTTP 400 with ``-32020`` HeaderMismatch."""

# ruff: noqa: E501  (one exchange per table line reads best)
from __future__ import annotations

import json

import pytest
from mcp_types import jsonrpc

from conformance.differential import Pair
from conformance.wire import Exchange, b64_sentinel, call, request

pytestmark = pytest.mark.interop

OK = {"status": 200, "body": "jsonrpc", "id": "echoed", "resultType": "complete", "serverInfo": True}
MISMATCH = {"status": 400, "id": "echoed", "error": jsonrpc.HEADER_MISMATCH}

ADD = call("add", {"a": 1, "b": 2})
REGIONAL_ARGS = {"region": "us-west1", "query": "q", "count": 3}


def regional(headers: list[tuple[str, str]], arguments: dict[str, object] | None = None) -> Exchange:
    """``regional`` (x-mcp-header Region/Count) with exactly ``headers`` as its Mcp-Param-* lines."""
    base = call("regional", arguments if arguments is not None else REGIONAL_ARGS)
    return base.with_headers(*headers)


# --- Mcp-Method and MCP-Protocol-Version ----------------------------------------------------

ROUTING_CASES: list[tuple[str, Exchange, dict[str, object]]] = [
    ("conforming tools/call", ADD, OK),
    ("header names in lower case", Exchange(ADD.body, tuple((n.lower(), v) for n, v in ADD.headers)), OK),
    ("Mcp-Method missing", ADD.with_headers(drop=["Mcp-Method"]), MISMATCH),
    ("Mcp-Method names another method", ADD.with_headers(("Mcp-Method", "tools/list")), MISMATCH),
    ("Mcp-Method differs in case", ADD.with_headers(("Mcp-Method", "Tools/Call")), MISMATCH),
    ("Mcp-Method sent twice, disagreeing", ADD.adding(("Mcp-Method", "tools/list")), MISMATCH),
    ("Mcp-Method missing on tools/list", request("tools/list").with_headers(drop=["Mcp-Method"]), MISMATCH),
    ("MCP-Protocol-Version missing", ADD.with_headers(drop=["MCP-Protocol-Version"]), MISMATCH),
    ("MCP-Protocol-Version sent twice", ADD.adding(("MCP-Protocol-Version", "2026-07-28")), MISMATCH),
    ("MCP-Protocol-Version disagrees with _meta", ADD.with_headers(("MCP-Protocol-Version", "2099-01-01")), MISMATCH),
    # --- Mcp-Name ---
    ("Mcp-Name missing on tools/call", ADD.with_headers(drop=["Mcp-Name"]), MISMATCH),
    ("Mcp-Name names another tool", ADD.with_headers(("Mcp-Name", "echo")), MISMATCH),
    ("Mcp-Name differs in case", ADD.with_headers(("Mcp-Name", "ADD")), MISMATCH),
    ("Mcp-Name empty", ADD.with_headers(("Mcp-Name", "")), MISMATCH),
    ("Mcp-Name base64-encoded", ADD.with_headers(("Mcp-Name", b64_sentinel("add"))), OK),
    ("Mcp-Name base64 of another name", ADD.with_headers(("Mcp-Name", b64_sentinel("echo"))), MISMATCH),
    ("Mcp-Name base64 payload not base64", ADD.with_headers(("Mcp-Name", "=?base64?!!!?=")), MISMATCH),
    ("Mcp-Name base64 payload not UTF-8", ADD.with_headers(("Mcp-Name", "=?base64?/w==?=")), MISMATCH),
    ("Mcp-Name sentinel in upper case is literal", ADD.with_headers(("Mcp-Name", "=?BASE64?YWRk?=")), MISMATCH),
    ("Mcp-Name with surrounding spaces matches", ADD.with_headers(("Mcp-Name", "  add  ")), OK),
    ("Mcp-Name missing on prompts/get", request("prompts/get", {"name": "greet", "arguments": {"name": "A"}}).with_headers(drop=["Mcp-Name"]), MISMATCH),
    ("Mcp-Name names another prompt", request("prompts/get", {"name": "greet", "arguments": {"name": "A"}}).with_headers(("Mcp-Name", "other")), MISMATCH),
    ("Mcp-Name missing on resources/read", request("resources/read", {"uri": "demo://readme"}).with_headers(drop=["Mcp-Name"]), MISMATCH),
    ("Mcp-Name names another resource", request("resources/read", {"uri": "demo://readme"}).with_headers(("Mcp-Name", "demo://item/1")), MISMATCH),
    ("Mcp-Name base64 resource URI", request("resources/read", {"uri": "demo://readme"}).with_headers(("Mcp-Name", b64_sentinel("demo://readme"))), OK),
    ("Mcp-Name on a method without a name is ignored", request("tools/list").with_headers(("Mcp-Name", "anything")), {"status": 200, "resultType": "complete"}),
]  # fmt: skip


@pytest.mark.parametrize(("case", "exchange", "expect"), ROUTING_CASES, ids=[c[0] for c in ROUTING_CASES])
async def test_routing_header_rule(pair: Pair, case: str, exchange: Exchange, expect: dict[str, object]) -> None:
    await pair.check(case, exchange, expect)


# --- non-ASCII names ---------------------------------------------------------------------------

UNICODE_URI = "demo://item/é"


async def test_non_ascii_uri_travels_base64_encoded(pair: Pair) -> None:
    exchange = request("resources/read", {"uri": UNICODE_URI})
    assert dict(exchange.headers)["Mcp-Name"] == b64_sentinel(UNICODE_URI)
    await pair.check("Mcp-Name non-ASCII URI, base64-encoded", exchange, {"status": 200, "resultType": "complete"})


async def test_raw_non_ascii_mcp_name_is_refused(pair: Pair) -> None:
    # The spec's characters for a header value are visible ASCII, space and tab; a raw UTF-8 value is
    # "a header value [that] contains invalid characters" (§Server Validation) and must be refused.
    exchange = request("resources/read", {"uri": UNICODE_URI}).with_headers(("Mcp-Name", UNICODE_URI)).on_socket()
    await pair.check("Mcp-Name raw non-ASCII", exchange, MISMATCH)


async def test_raw_non_ascii_tool_name_is_refused(pair: Pair) -> None:
    exchange = call("ädd", {}).with_headers(("Mcp-Name", "ädd")).on_socket()
    await pair.check("Mcp-Name raw non-ASCII tool name", exchange, MISMATCH)


async def test_control_character_in_mcp_name_is_refused(pair: Pair) -> None:
    # DEL is not a field-value character at all (RFC 9110 §5.5): the HTTP layer refuses the message
    # before any JSON-RPC is read, which RFC 9112 §2.2 allows; only the 400 is common ground.
    exchange = ADD.with_headers(("Mcp-Name", "add\x7f")).on_socket()
    await pair.check("Mcp-Name with DEL character", exchange, {"status": 400})


# --- Mcp-Param-* -------------------------------------------------------------------------------

PARAM_CASES: list[tuple[str, Exchange, dict[str, object]]] = [
    ("Mcp-Param-* all present", regional([("Mcp-Param-Region", "us-west1"), ("Mcp-Param-Count", "3")]), OK),
    ("Mcp-Param-* names in lower case", regional([("mcp-param-region", "us-west1"), ("mcp-param-count", "3")]), OK),
    ("Mcp-Param-* base64-encoded", regional([("Mcp-Param-Region", b64_sentinel("us-west1")), ("Mcp-Param-Count", "3")]), OK),
    ("Mcp-Param-* integer compared numerically", regional([("Mcp-Param-Region", "us-west1"), ("Mcp-Param-Count", "3.0")]), OK),
    ("Mcp-Param-* absent for an absent argument", regional([("Mcp-Param-Region", "us-west1")], {"region": "us-west1", "query": "q"}), OK),
    ("Mcp-Param-* header missing for a present argument", regional([("Mcp-Param-Region", "us-west1")]), MISMATCH),
    ("Mcp-Param-* value differs from the body", regional([("Mcp-Param-Region", "eu-west1"), ("Mcp-Param-Count", "3")]), MISMATCH),
    ("Mcp-Param-* integer differs from the body", regional([("Mcp-Param-Region", "us-west1"), ("Mcp-Param-Count", "4")]), MISMATCH),
    ("Mcp-Param-* malformed base64", regional([("Mcp-Param-Region", "=?base64?***?="), ("Mcp-Param-Count", "3")]), MISMATCH),
    ("Mcp-Param-* non-ASCII value base64-encoded", regional([("Mcp-Param-Region", b64_sentinel("région")), ("Mcp-Param-Count", "3")], {**REGIONAL_ARGS, "region": "région"}), OK),
    ("Mcp-Param-* raw non-ASCII value", regional([("Mcp-Param-Region", "région"), ("Mcp-Param-Count", "3")], {**REGIONAL_ARGS, "region": "région"}).on_socket(), MISMATCH),
    ("Mcp-Param-* unknown header is ignored", regional([("Mcp-Param-Region", "us-west1"), ("Mcp-Param-Count", "3"), ("Mcp-Param-Other", "x")]), OK),
]  # fmt: skip


@pytest.mark.parametrize(("case", "exchange", "expect"), PARAM_CASES, ids=[c[0] for c in PARAM_CASES])
async def test_param_header_rule(pair: Pair, case: str, exchange: Exchange, expect: dict[str, object]) -> None:
    reference, gateway = await pair.check(case, exchange, expect)
    if expect is OK:
        arguments = json.loads(exchange.body)["params"]["arguments"]
        wanted = f"region={arguments['region']};count={arguments.get('count', 0)};query={arguments['query']}"
        for observed in (reference, gateway):
            assert observed.result["content"][0]["text"] == wanted
