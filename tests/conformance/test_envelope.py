"""The HTTP and JSON-RPC envelope: HTTP methods, Accept and Content-Type, JSON parsing, one message
per POST (no batches, no posted responses), notifications, the per-request ``_meta`` keys and the
protocol version (basic/index.mdx §Messages, §_meta; basic/transports/streamable-http.mdx §Sending
Messages, §Protocol Version Header; basic/versioning.mdx)."""

from __future__ import annotations

import json
from collections.abc import Mapping

import pytest
from mcp_types import jsonrpc

from conformance.differential import Pair
from conformance.wire import (
    CLIENT_CAPABILITIES,
    CLIENT_INFO,
    LOG_LEVEL,
    MODERN,
    PROTOCOL_VERSION,
    Exchange,
    call,
    envelope,
    headers_for,
    raw_post,
    request,
)

pytestmark = pytest.mark.interop

OK = {"status": 200, "body": "jsonrpc", "id": "echoed", "resultType": "complete", "serverInfo": True}
INVALID_PARAMS = {"status": 400, "id": "echoed", "error": jsonrpc.INVALID_PARAMS}
INVALID_REQUEST = {"status": 400, "error": jsonrpc.INVALID_REQUEST}
PARSE_ERROR = {"status": 400, "error": jsonrpc.PARSE_ERROR}
UNSUPPORTED = {"status": 400, "id": "echoed", "error": jsonrpc.UNSUPPORTED_PROTOCOL_VERSION, "data.supported": [MODERN]}

ADD = call("add", {"a": 1, "b": 2})
LIST = request("tools/list")


def _body(message: object) -> bytes:
    return json.dumps(message).encode()


# --- HTTP method, Accept, Content-Type --------------------------------------------------------

HTTP_CASES: list[tuple[str, Exchange, Mapping[str, object]]] = [
    ("GET on the endpoint", Exchange(b"", (("Accept", "text/event-stream"),), "GET"), {"status": 405}),
    (
        "DELETE on the endpoint",
        Exchange(b"", (("Accept", "application/json, text/event-stream"),), "DELETE"),
        {"status": 405},
    ),
    ("PUT on the endpoint", ADD.with_method("PUT"), {"status": 405}),
    ("Accept missing", ADD.with_headers(drop=["Accept"]), {"status": 406}),
    ("Accept text/event-stream only", ADD.with_headers(("Accept", "text/event-stream")), {"status": 406}),
    ("Accept application/json only", ADD.with_headers(("Accept", "application/json")), OK),
    ("Accept */*", ADD.with_headers(("Accept", "*/*")), OK),
    (
        "Accept with parameters and spaces",
        ADD.with_headers(("Accept", "application/json;q=0.9 , text/event-stream;q=0.8")),
        OK,
    ),
    ("Accept text/html only", ADD.with_headers(("Accept", "text/html")), {"status": 406}),
    ("Content-Type missing", ADD.with_headers(drop=["Content-Type"]), {"status": 415}),
    ("Content-Type text/plain", ADD.with_headers(("Content-Type", "text/plain")), {"status": 415}),
    ("Content-Type with charset", ADD.with_headers(("Content-Type", "application/json; charset=utf-8")), OK),
    ("Content-Type in upper case", ADD.with_headers(("Content-Type", "Application/JSON")), OK),
]


@pytest.mark.parametrize(("case", "exchange", "expect"), HTTP_CASES, ids=[c[0] for c in HTTP_CASES])
async def test_http_layer_rule(pair: Pair, case: str, exchange: Exchange, expect: Mapping[str, object]) -> None:
    await pair.check(case, exchange, dict(expect))


async def test_method_not_allowed_names_post_in_allow(pair: Pair) -> None:
    # RFC 9110 §15.5.6: a 405 MUST carry Allow. Only the gateway answers 405 (see the differences table).
    get = Exchange(b"", (("Accept", "text/event-stream"),), "GET")
    answer = await pair.gateway.send(get)
    assert answer.status == 405
    assert answer.headers.get("Allow") == "POST"


# --- JSON-RPC framing ------------------------------------------------------------------------

ADD_MESSAGE = envelope("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}})

FRAMING_CASES: list[tuple[str, Exchange, Mapping[str, object]]] = [
    ("body is not JSON", ADD.with_body(b"{not json"), PARSE_ERROR),
    ("body is empty", ADD.with_body(b""), PARSE_ERROR),
    ("body is not UTF-8", ADD.with_body(b'{"jsonrpc": "2.0", "id": 1, "method": "\xff"}'), PARSE_ERROR),
    (
        "body contains NaN",
        ADD.with_body(
            _body(envelope("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}})).replace(
                b'"b": 2', b'"b": NaN'
            )
        ),
        PARSE_ERROR,
    ),
    ("body is a JSON number", ADD.with_body(b"42"), INVALID_REQUEST),
    ("batch of two requests", ADD.with_body(_body([ADD_MESSAGE, {**ADD_MESSAGE, "id": 2}])), INVALID_REQUEST),
    ("empty batch", ADD.with_body(b"[]"), INVALID_REQUEST),
    (
        "posted JSON-RPC result response",
        raw_post({"jsonrpc": "2.0", "id": 7, "result": {}}, headers_for(ADD_MESSAGE)),
        INVALID_REQUEST,
    ),
    (
        "posted JSON-RPC error response",
        raw_post({"jsonrpc": "2.0", "id": 7, "error": {"code": -1, "message": "x"}}, headers_for(ADD_MESSAGE)),
        INVALID_REQUEST,
    ),
    ("jsonrpc member is 1.0", raw_post({**ADD_MESSAGE, "jsonrpc": "1.0"}), INVALID_REQUEST),
    ("id is null", raw_post({**ADD_MESSAGE, "id": None}), INVALID_REQUEST),
    ("id is an object", raw_post({**ADD_MESSAGE, "id": {"x": 1}}), INVALID_REQUEST),
    ("id is a string", raw_post({**ADD_MESSAGE, "id": "req-1"}), OK),
    ("id is zero", raw_post({**ADD_MESSAGE, "id": 0}), OK),
    ("id is a fraction", raw_post({**ADD_MESSAGE, "id": 1.5}), INVALID_REQUEST),
    ("id is a boolean", raw_post({**ADD_MESSAGE, "id": True}), INVALID_REQUEST),
    ("method is not a string", raw_post({**ADD_MESSAGE, "method": 5}, headers_for(ADD_MESSAGE)), INVALID_REQUEST),
    (
        "tools/call arguments is an array",
        raw_post(envelope("tools/call", {"name": "add", "arguments": [1]})),
        {"status": 400, "id": "echoed", "error": jsonrpc.INVALID_PARAMS},
    ),
    (
        "tools/call without a name",
        request("tools/call", {"arguments": {}}).with_headers(("Mcp-Name", "add")),
        {"status": 400, "id": "echoed"},
    ),
    (
        "initialize with modern headers",
        request(
            "initialize",
            {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}},
        ),
        {"status": 404, "id": "echoed", "error": jsonrpc.METHOD_NOT_FOUND},
    ),
    (
        "initialize with a handshake-era header and a 2026-07-28 envelope",
        request(
            "initialize",
            {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}},
        ).with_headers(("MCP-Protocol-Version", "2025-11-25")),
        {"status": 400, "id": "echoed", "error": jsonrpc.HEADER_MISMATCH},
    ),
    (
        "tools/list with a handshake-era header and a 2026-07-28 envelope",
        request("tools/list").with_headers(("MCP-Protocol-Version", "2025-11-25")),
        {"status": 400, "id": "echoed", "error": jsonrpc.HEADER_MISMATCH},
    ),
    ("params is an array", raw_post({**ADD_MESSAGE, "params": [1, 2]}), INVALID_REQUEST),
    ("method unknown", request("no/such/method"), {"status": 404, "id": "echoed", "error": jsonrpc.METHOD_NOT_FOUND}),
    ("ping was removed", request("ping"), {"status": 404, "id": "echoed", "error": jsonrpc.METHOD_NOT_FOUND}),
    (
        "logging/setLevel was removed",
        request("logging/setLevel", {"level": "info"}),
        {"status": 404, "id": "echoed", "error": jsonrpc.METHOD_NOT_FOUND},
    ),
]


@pytest.mark.parametrize(("case", "exchange", "expect"), FRAMING_CASES, ids=[c[0] for c in FRAMING_CASES])
async def test_framing_rule(pair: Pair, case: str, exchange: Exchange, expect: Mapping[str, object]) -> None:
    await pair.check(case, exchange, dict(expect))


# --- notifications ---------------------------------------------------------------------------


def notification(method: str, version: str = MODERN) -> Exchange:
    message = {"jsonrpc": "2.0", "method": method, "params": {"_meta": {PROTOCOL_VERSION: version}}}
    lines = [("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream")]
    lines += [("MCP-Protocol-Version", version), ("Mcp-Method", method)]
    return Exchange(_body(message), tuple(lines))


NOTIFICATION_CASES: list[tuple[str, Exchange, Mapping[str, object]]] = [
    ("notification accepted", notification("notifications/cancelled"), {"status": 202, "emptyBody": True}),
    ("unknown notification accepted", notification("notifications/whatever"), {"status": 202, "emptyBody": True}),
    ("notification at an unsupported version", notification("notifications/cancelled", "2099-01-01"), {"status": 400}),
]


@pytest.mark.parametrize(("case", "exchange", "expect"), NOTIFICATION_CASES, ids=[c[0] for c in NOTIFICATION_CASES])
async def test_notification_rule(pair: Pair, case: str, exchange: Exchange, expect: Mapping[str, object]) -> None:
    await pair.check(case, exchange, dict(expect))


# --- _meta and the protocol version ----------------------------------------------------------


def with_version(version: object) -> Exchange:
    exchange = call("add", {"a": 1, "b": 2}, meta={PROTOCOL_VERSION: version})
    return exchange.with_headers(("MCP-Protocol-Version", str(version)))


META_CASES: list[tuple[str, Exchange, Mapping[str, object]]] = [
    (
        "_meta missing",
        raw_post({**ADD_MESSAGE, "params": {"name": "add", "arguments": {"a": 1, "b": 2}}}),
        INVALID_PARAMS,
    ),
    ("_meta protocolVersion missing", call("add", {"a": 1, "b": 2}, drop_meta=[PROTOCOL_VERSION]), INVALID_PARAMS),
    (
        "_meta clientCapabilities missing",
        call("add", {"a": 1, "b": 2}, drop_meta=[CLIENT_CAPABILITIES]),
        INVALID_PARAMS,
    ),
    (
        "_meta clientCapabilities not an object",
        call("add", {"a": 1, "b": 2}, meta={CLIENT_CAPABILITIES: "all"}),
        INVALID_PARAMS,
    ),
    ("_meta clientInfo omitted", call("add", {"a": 1, "b": 2}, drop_meta=[CLIENT_INFO]), OK),
    ("_meta clientCapabilities empty", call("add", {"a": 1, "b": 2}, capabilities={}), OK),
    ("_meta unknown vendor key ignored", call("add", {"a": 1, "b": 2}, meta={"com.example/trace": {"x": 1}}), OK),
    (
        "_meta traceparent ignored",
        call("add", {"a": 1, "b": 2}, meta={"traceparent": "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"}),
        OK,
    ),
    ("_meta logLevel valid", call("add", {"a": 1, "b": 2}, meta={LOG_LEVEL: "debug"}), OK),
    ("_meta logLevel unknown", call("add", {"a": 1, "b": 2}, meta={LOG_LEVEL: "loud"}), INVALID_PARAMS),
    (
        "_meta progressToken is an object",
        call("add", {"a": 1, "b": 2}, meta={"progressToken": {"x": 1}}),
        INVALID_PARAMS,
    ),
    (
        "_meta protocolVersion is a number",
        call("add", {"a": 1, "b": 2}, meta={PROTOCOL_VERSION: 20260728}),
        {"status": 400, "id": "echoed", "error": jsonrpc.HEADER_MISMATCH},
    ),
    (
        "inputResponses and requestState on tools/list are ignored",
        request("tools/list", {"inputResponses": {"k": {}}, "requestState": "s"}),
        OK,
    ),
    ("protocol version unsupported", with_version("2099-01-01"), UNSUPPORTED),
    ("protocol version malformed", with_version("not-a-date"), UNSUPPORTED),
    ("protocol version 2026-07-28", with_version(MODERN), OK),
]


@pytest.mark.parametrize(("case", "exchange", "expect"), META_CASES, ids=[c[0] for c in META_CASES])
async def test_meta_rule(pair: Pair, case: str, exchange: Exchange, expect: Mapping[str, object]) -> None:
    await pair.check(case, exchange, dict(expect))


async def test_unsupported_version_names_the_requested_version(pair: Pair) -> None:
    reference, gateway = await pair.check(
        "protocol version unsupported (data)", with_version("2099-01-01"), UNSUPPORTED
    )
    for observed in (reference, gateway):
        assert observed.error["data"]["requested"] == "2099-01-01"


async def test_session_headers_of_older_revisions_are_ignored(pair: Pair) -> None:
    exchange = ADD.with_headers(("Mcp-Session-Id", "abc123"), ("Last-Event-ID", "5"))
    reference, gateway = await pair.check("Mcp-Session-Id and Last-Event-ID ignored", exchange, OK)
    for observed in (reference, gateway):
        assert "mcp-session-id" not in {name.lower() for name in observed.headers}
