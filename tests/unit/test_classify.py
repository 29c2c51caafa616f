"""The front-door ladder: one test per rejection rung, then what it accepts (wire reference §2)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from mcp_types.jsonrpc import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
)

from gateway.frontdoor.classify import (
    Accepted,
    LegacyHandshake,
    NotificationAccepted,
    Outcome,
    Rejection,
    classify,
)

VERSION = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
}
LIMIT = 64 * 1024

# The request of wire reference §2.3, byte for byte.
SPEC_EXAMPLE_HEADERS = [
    ("Content-Type", "application/json"),
    ("Accept", "application/json, text/event-stream"),
    ("MCP-Protocol-Version", "2026-07-28"),
    ("Mcp-Method", "tools/call"),
    ("Mcp-Name", "get_weather"),
]
SPEC_EXAMPLE_BODY = b"""{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{
  "name":"get_weather","arguments":{"location":"Seattle, WA"},
  "_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",
           "io.modelcontextprotocol/clientInfo":{"name":"ExampleClient","version":"1.0.0"},
           "io.modelcontextprotocol/clientCapabilities":{}}}}"""


def message(method: str = "tools/call", params: Any = None, **fields: Any) -> dict[str, Any]:
    """A JSON-RPC request; tools/call gets a valid name and envelope unless told otherwise."""
    if params is None:
        params = {"_meta": dict(META)}
        if method == "tools/call":
            params["name"] = "get_weather"
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    body.update(fields)
    return body


def headers_for(body: Any, **overrides: str | None) -> list[tuple[str, str]]:
    """The headers a conforming client sends for `body`; an override of None drops that header."""
    headers: dict[str, str | None] = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": VERSION,
    }
    if isinstance(body, dict) and isinstance(body.get("method"), str):
        headers["Mcp-Method"] = body["method"]
        params = body.get("params")
        key = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}.get(body["method"])
        if key and isinstance(params, dict) and isinstance(params.get(key), str):
            value = params[key]
            headers["Mcp-Name"] = value if value.isascii() else "=?base64?" + b64(value) + "?="
    for name, value in overrides.items():
        headers[name.replace("_", "-")] = value
    return [(name, value) for name, value in headers.items() if value is not None]


def b64(text: str) -> str:
    return base64.b64encode(text.encode("utf-8")).decode("ascii")


def run(body: Any, headers: list[tuple[str, str]] | None = None, *, method: str = "POST") -> Outcome:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return classify(method, headers_for(body) if headers is None else headers, raw, max_body_bytes=LIMIT)


def rejected(outcome: Outcome, code: int | None, status: int, reason: str) -> Rejection:
    assert isinstance(outcome, Rejection), outcome
    assert (outcome.code, outcome.http_status, outcome.reason) == (code, status, reason)
    return outcome


def accepted(outcome: Outcome) -> Accepted:
    assert isinstance(outcome, Accepted), outcome
    return outcome


# --- 1-4: the HTTP layer -----------------------------------------------------------------------


@pytest.mark.parametrize("http_method", ["GET", "DELETE", "PUT", "post"])
def test_non_post_is_405_with_allow_header(http_method: str) -> None:
    outcome = rejected(run(message(), method=http_method), None, 405, "method_not_allowed")
    assert outcome.headers == {"Allow": "POST"}


@pytest.mark.parametrize(
    "accept",
    [
        None,
        "text/event-stream",
        "text/html",
        "application/json;q=0, text/event-stream",
        "*/*, application/json;q=0",
    ],
)
def test_accept_without_json_is_406(accept: str | None) -> None:
    body = message()
    rejected(run(body, headers_for(body, Accept=accept)), None, 406, "not_acceptable")


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/jsonx", "multipart/form-data"])
def test_content_type_other_than_json_is_415(content_type: str | None) -> None:
    body = message()
    rejected(run(body, headers_for(body, Content_Type=content_type)), None, 415, "unsupported_media_type")


def test_content_type_parameters_are_allowed() -> None:
    body = message()
    accepted(run(body, headers_for(body, Content_Type="Application/JSON; charset=utf-8")))


def test_body_over_the_limit_is_413() -> None:
    body = message(params={"_meta": META, "name": "x" * LIMIT})
    rejected(run(body), None, 413, "body_too_large")


# --- 5-6: JSON-RPC framing ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        b"{not json",
        b"",
        b'\xff\xfe{"jsonrpc":"2.0"}',
        b'{"jsonrpc":"2.0","id":NaN}',
        b"[" * 20_000 + b"]" * 20_000,
    ],
    ids=["syntax", "empty", "not-utf8", "nan", "too-deep"],
)
def test_unparseable_body_is_parse_error(raw: bytes) -> None:
    outcome = rejected(run(raw, headers_for(message())), PARSE_ERROR, 400, "bad_json")
    assert outcome.id is None
    assert outcome.message == "Parse error"


def test_batch_is_invalid_request() -> None:
    outcome = rejected(run([message()], headers_for(message())), INVALID_REQUEST, 400, "batch")
    assert outcome.message == "Invalid Request"


@pytest.mark.parametrize("value", ["a string", 5, None])
def test_non_object_body_is_invalid_request(value: Any) -> None:
    rejected(run(json.dumps(value).encode(), headers_for(message())), INVALID_REQUEST, 400, "not_object")


@pytest.mark.parametrize("field", ["result", "error"])
def test_posted_response_is_invalid_request(field: str) -> None:
    body = {"jsonrpc": "2.0", "id": 7, field: {}}
    outcome = rejected(run(body, headers_for(message())), INVALID_REQUEST, 400, "posted_response")
    assert outcome.id == 7


@pytest.mark.parametrize("jsonrpc", ["1.0", None, 2.0])
def test_wrong_jsonrpc_version_is_invalid_request(jsonrpc: Any) -> None:
    body = message(jsonrpc=jsonrpc)
    outcome = rejected(run(body), INVALID_REQUEST, 400, "bad_jsonrpc")
    assert outcome.id == 1


def test_missing_jsonrpc_member_is_invalid_request() -> None:
    body = message()
    del body["jsonrpc"]
    rejected(run(body), INVALID_REQUEST, 400, "bad_jsonrpc")


@pytest.mark.parametrize("method", [5, None, ["tools/call"]])
def test_non_string_method_is_invalid_request(method: Any) -> None:
    body = message()
    body["method"] = method
    rejected(run(body, headers_for(message())), INVALID_REQUEST, 400, "bad_method")


@pytest.mark.parametrize("request_id", [True, None, 1.5, {"a": 1}, [1]])
def test_invalid_id_is_invalid_request_without_id(request_id: Any) -> None:
    outcome = rejected(run(message(id=request_id)), INVALID_REQUEST, 400, "bad_id")
    assert outcome.id is None


@pytest.mark.parametrize("params", [[1, 2], "x", None, 3])
def test_non_object_params_is_invalid_request(params: Any) -> None:
    body = message()
    body["params"] = params
    outcome = rejected(run(body, headers_for(message())), INVALID_REQUEST, 400, "bad_params")
    assert outcome.id == 1


# --- 7: handshake era --------------------------------------------------------------------------


def test_initialize_is_a_legacy_handshake() -> None:
    body = message("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}})
    outcome = run(body, headers_for(body, MCP_Protocol_Version=None))
    assert isinstance(outcome, LegacyHandshake)
    assert outcome.message == body


def test_initialize_with_a_handshake_era_header_is_a_legacy_handshake() -> None:
    body = message("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}})
    assert isinstance(run(body, headers_for(body, MCP_Protocol_Version="2025-11-25")), LegacyHandshake)


INITIALIZE_PARAMS = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}


def test_initialize_saying_2026_07_28_in_header_and_envelope_is_method_not_found() -> None:
    # versioning.mdx §Backward Compatibility: a request carrying modern `_meta` is served as 2026-07-28,
    # where initialize does not exist (streamable-http.mdx §Protocol Version Header: 404, -32601).
    body = message("initialize", {**INITIALIZE_PARAMS, "_meta": dict(META)})
    outcome = rejected(run(body), METHOD_NOT_FOUND, 404, "method_not_found")
    assert outcome.id == 1


def test_initialize_under_a_2026_07_28_header_without_envelope_is_invalid_params() -> None:
    # The header says 2026-07-28, so the envelope rung applies before the method rung (as on the reference).
    body = message("initialize", dict(INITIALIZE_PARAMS))
    rejected(run(body), INVALID_PARAMS, 400, "missing_meta")


def test_initialize_with_a_2026_07_28_envelope_but_no_header_is_a_header_mismatch() -> None:
    body = message("initialize", {**INITIALIZE_PARAMS, "_meta": dict(META)})
    rejected(
        run(body, headers_for(body, MCP_Protocol_Version=None)),
        HEADER_MISMATCH,
        400,
        "header_mismatch.mcp-protocol-version",
    )


@pytest.mark.parametrize("method", ["initialize", "tools/list"])
def test_handshake_era_header_with_a_2026_07_28_envelope_is_a_header_mismatch(method: str) -> None:
    # streamable-http.mdx §Protocol Version Header: the header MUST match the envelope's version.
    params = {**INITIALIZE_PARAMS, "_meta": dict(META)} if method == "initialize" else {"_meta": dict(META)}
    body = message(method, params)
    rejected(
        run(body, headers_for(body, MCP_Protocol_Version="2025-11-25")),
        HEADER_MISMATCH,
        400,
        "header_mismatch.mcp-protocol-version",
    )


def test_an_envelope_version_of_another_era_does_not_make_initialize_modern() -> None:
    meta = {**META, "io.modelcontextprotocol/protocolVersion": "2025-11-25"}
    body = message("initialize", {**INITIALIZE_PARAMS, "_meta": meta})
    assert isinstance(run(body, headers_for(body, MCP_Protocol_Version=None)), LegacyHandshake)


def test_missing_version_header_is_a_legacy_handshake() -> None:
    body = message("tools/list", {})
    assert isinstance(run(body, headers_for(body, MCP_Protocol_Version=None)), LegacyHandshake)


def test_legacy_notification_without_header_is_a_legacy_handshake() -> None:
    body = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert isinstance(run(body, headers_for(body, MCP_Protocol_Version=None)), LegacyHandshake)


@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"])
def test_handshake_version_header_is_a_legacy_handshake(version: str) -> None:
    body = message("tools/list", {})
    assert isinstance(run(body, headers_for(body, MCP_Protocol_Version=version)), LegacyHandshake)


def test_modern_envelope_without_version_header_is_a_header_mismatch() -> None:
    body = message()
    outcome = rejected(
        run(body, headers_for(body, MCP_Protocol_Version=None)),
        HEADER_MISMATCH,
        400,
        "header_mismatch.mcp-protocol-version",
    )
    assert outcome.id == 1


# --- 8: notifications --------------------------------------------------------------------------


def test_notification_at_a_modern_version_is_accepted() -> None:
    body = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}}
    assert run(body) == NotificationAccepted("notifications/cancelled")


def test_notification_at_an_unknown_version_is_unsupported() -> None:
    body = {"jsonrpc": "2.0", "method": "notifications/cancelled"}
    outcome = rejected(
        run(body, headers_for(body, MCP_Protocol_Version="1900-01-01")),
        UNSUPPORTED_PROTOCOL_VERSION,
        400,
        "unsupported_version",
    )
    assert outcome.id is None
    assert outcome.data == {"supported": ["2026-07-28"], "requested": "1900-01-01"}


def test_notification_with_modern_envelope_but_no_header_is_unsupported() -> None:
    body = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"_meta": META}}
    outcome = rejected(
        run(body, headers_for(body, MCP_Protocol_Version=None)),
        UNSUPPORTED_PROTOCOL_VERSION,
        400,
        "unsupported_version",
    )
    assert outcome.data == {"supported": ["2026-07-28"], "requested": ""}


# --- 9: duplicated routing headers -------------------------------------------------------------


@pytest.mark.parametrize("header", ["MCP-Protocol-Version", "Mcp-Method", "Mcp-Name"])
def test_duplicated_routing_header_is_a_header_mismatch(header: str) -> None:
    body = message()
    headers = headers_for(body)
    headers.append((header.upper(), dict(headers)[header]))
    outcome = rejected(run(body, headers), HEADER_MISMATCH, 400, f"header_mismatch.duplicate.{header.lower()}")
    assert outcome.id == 1


# --- 10: the envelope --------------------------------------------------------------------------


def test_missing_meta_is_invalid_params() -> None:
    outcome = rejected(run(message(params={"name": "get_weather"})), INVALID_PARAMS, 400, "missing_meta")
    assert outcome.message.startswith("Invalid params: missing required _meta key")


@pytest.mark.parametrize(
    "missing", ["io.modelcontextprotocol/protocolVersion", "io.modelcontextprotocol/clientCapabilities"]
)
def test_missing_envelope_key_is_invalid_params_naming_it(missing: str) -> None:
    meta = {key: value for key, value in META.items() if key != missing}
    outcome = rejected(run(message(params={"name": "get_weather", "_meta": meta})), INVALID_PARAMS, 400, "missing_meta")
    assert missing in outcome.message


def test_non_object_meta_is_invalid_params() -> None:
    rejected(run(message(params={"name": "get_weather", "_meta": "x"})), INVALID_PARAMS, 400, "missing_meta")


def test_non_object_capabilities_is_invalid_params() -> None:
    meta = {**META, "io.modelcontextprotocol/clientCapabilities": ["sampling"]}
    rejected(run(message(params={"name": "get_weather", "_meta": meta})), INVALID_PARAMS, 400, "bad_capabilities")


# --- 11: headers against the body --------------------------------------------------------------


def test_version_header_differing_from_envelope_is_a_header_mismatch() -> None:
    body = message()
    outcome = rejected(
        run(body, headers_for(body, MCP_Protocol_Version="1900-01-01")),
        HEADER_MISMATCH,
        400,
        "header_mismatch.mcp-protocol-version",
    )
    assert outcome.message == (
        "Header mismatch: MCP-Protocol-Version header value '1900-01-01' does not match body value '2026-07-28'"
    )


def test_non_string_envelope_version_is_told_the_header_disagrees() -> None:
    meta = {**META, "io.modelcontextprotocol/protocolVersion": 20260728}
    body = message(params={"name": "get_weather", "_meta": meta})
    rejected(run(body), HEADER_MISMATCH, 400, "header_mismatch.mcp-protocol-version")


def test_method_header_differing_from_body_is_a_header_mismatch() -> None:
    body = message()
    rejected(run(body, headers_for(body, Mcp_Method="tools/list")), HEADER_MISMATCH, 400, "header_mismatch.mcp-method")


def test_missing_method_header_is_a_header_mismatch() -> None:
    body = message()
    outcome = rejected(
        run(body, headers_for(body, Mcp_Method=None)), HEADER_MISMATCH, 400, "header_mismatch.mcp-method"
    )
    assert "Mcp-Method" in outcome.message


def test_name_header_differing_from_body_is_a_header_mismatch() -> None:
    body = message(params={"name": "bar", "_meta": META})
    outcome = rejected(run(body, headers_for(body, Mcp_Name="foo")), HEADER_MISMATCH, 400, "header_mismatch.mcp-name")
    assert outcome.message == "Header mismatch: Mcp-Name header value 'foo' does not match body value 'bar'"
    assert outcome.id == 1


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("tools/call", {"name": "get_weather"}),
        ("prompts/get", {"name": "greeting"}),
        ("resources/read", {"uri": "file:///a.txt"}),
    ],
)
def test_missing_name_header_is_a_header_mismatch(method: str, params: dict[str, Any]) -> None:
    body = message(method, {**params, "_meta": META})
    rejected(run(body, headers_for(body, Mcp_Name=None)), HEADER_MISMATCH, 400, "header_mismatch.mcp-name")


def test_resource_uri_is_compared_with_name_header() -> None:
    body = message("resources/read", {"uri": "file:///a.txt", "_meta": META})
    rejected(run(body, headers_for(body, Mcp_Name="file:///b.txt")), HEADER_MISMATCH, 400, "header_mismatch.mcp-name")


def test_malformed_base64_name_header_is_a_header_mismatch() -> None:
    body = message()
    outcome = rejected(
        run(body, headers_for(body, Mcp_Name="=?base64?###?=")), HEADER_MISMATCH, 400, "header_mismatch.mcp-name"
    )
    assert "malformed" in outcome.message


def test_name_header_with_body_name_absent_is_a_header_mismatch() -> None:
    body = message(params={"_meta": META})
    rejected(run(body, headers_for(body, Mcp_Name="get_weather")), HEADER_MISMATCH, 400, "header_mismatch.mcp-name")


def test_mismatch_message_never_echoes_more_than_200_characters() -> None:
    body = message(params={"name": "b" * 3000, "_meta": META})
    outcome = rejected(
        run(body, headers_for(body, Mcp_Name="h" * 3000)), HEADER_MISMATCH, 400, "header_mismatch.mcp-name"
    )
    assert "h" * 200 in outcome.message
    assert "h" * 201 not in outcome.message
    assert "b" * 201 not in outcome.message


def test_header_mismatch_wins_over_unsupported_version() -> None:
    meta = {**META, "io.modelcontextprotocol/protocolVersion": "1900-01-01"}
    body = message(params={"name": "get_weather", "_meta": meta})
    headers = headers_for(body, MCP_Protocol_Version="1900-01-01", Mcp_Name="other")
    rejected(run(body, headers), HEADER_MISMATCH, 400, "header_mismatch.mcp-name")


# --- 12: version -------------------------------------------------------------------------------


def test_unknown_version_is_unsupported_with_supported_list() -> None:
    meta = {**META, "io.modelcontextprotocol/protocolVersion": "1900-01-01"}
    body = message(params={"name": "get_weather", "_meta": meta})
    outcome = rejected(
        run(body, headers_for(body, MCP_Protocol_Version="1900-01-01")),
        UNSUPPORTED_PROTOCOL_VERSION,
        400,
        "unsupported_version",
    )
    assert outcome.message == "Unsupported protocol version"
    assert outcome.data == {"supported": ["2026-07-28"], "requested": "1900-01-01"}
    assert outcome.id == 1


# --- 13: method --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "method", ["ping", "logging/setLevel", "resources/subscribe", "tasks/result", "tasks/list", "no/such"]
)
def test_method_outside_2026_client_requests_is_404(method: str) -> None:
    outcome = rejected(run(message(method)), METHOD_NOT_FOUND, 404, "method_not_found")
    assert outcome.message == "Method not found"
    assert outcome.id == 1


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
def test_tasks_methods_pass_the_ladder_with_their_task_id_unchecked(method: str) -> None:
    body = message(method, {"taskId": "gate-test", "_meta": dict(META)})
    assert accepted(run(body, headers_for(body, Mcp_Name="gate-test"))).method == method
    assert accepted(run(body)).method == method, "a missing Mcp-Name is accepted (docs/conformance.md A1)"
    assert accepted(run(message(method, {"_meta": dict(META)}))).params == {"_meta": META}


def test_a_tasks_mcp_name_that_is_not_the_task_id_is_a_header_mismatch() -> None:
    body = message("tasks/get", {"taskId": "t1.abc", "_meta": dict(META)})
    rejected(run(body, headers_for(body, Mcp_Name="t1.other")), HEADER_MISMATCH, 400, "header_mismatch.mcp-name")


# --- 14: optional envelope keys ----------------------------------------------------------------


@pytest.mark.parametrize("level", ["verbose", "DEBUG", None, 3])
def test_unknown_log_level_is_invalid_params(level: Any) -> None:
    meta = {**META, "io.modelcontextprotocol/logLevel": level}
    rejected(run(message(params={"name": "get_weather", "_meta": meta})), INVALID_PARAMS, 400, "bad_log_level")


@pytest.mark.parametrize("token", [1.5, True, None, {"t": 1}])
def test_progress_token_not_string_or_integer_is_invalid_params(token: Any) -> None:
    meta = {**META, "progressToken": token}
    rejected(run(message(params={"name": "get_weather", "_meta": meta})), INVALID_PARAMS, 400, "bad_progress_token")


# --- 15: params shape --------------------------------------------------------------------------


@pytest.mark.parametrize("responses", [["a"], "x", None, {"a": "accept"}, {"a": [1]}])
def test_malformed_input_responses_is_invalid_params(responses: Any) -> None:
    body = message(params={"name": "get_weather", "_meta": META, "inputResponses": responses})
    rejected(run(body), INVALID_PARAMS, 400, "bad_input_responses")


@pytest.mark.parametrize("state", [5, {"s": 1}, ["s"], True])
def test_non_string_request_state_is_invalid_params(state: Any) -> None:
    body = message(params={"name": "get_weather", "_meta": META, "requestState": state})
    rejected(run(body), INVALID_PARAMS, 400, "bad_request_state")


def test_params_failing_the_method_schema_are_invalid_params_with_short_reason() -> None:
    body = message(params={"name": "get_weather", "_meta": META, "arguments": ["x" * 10_000]})
    outcome = rejected(run(body), INVALID_PARAMS, 400, "invalid_params")
    assert outcome.message == "Invalid params"
    assert isinstance(outcome.data, dict)
    reason = outcome.data["reason"]
    assert reason.startswith("arguments:")
    assert len(reason) <= 203
    assert "xxxx" not in reason


def test_input_response_values_are_left_to_the_hold_that_knows_each_keys_kind() -> None:
    # Unknown keys must be ignored (SEP-2322), so a value's shape is judged only against the
    # request its key answers, after the state is unsealed - not by the classifier.
    body = message(params={"name": "get_weather", "_meta": META, "inputResponses": {"k": {"bogus": 1}}})
    assert isinstance(run(body), Accepted)


def test_list_cursor_of_wrong_type_is_invalid_params() -> None:
    rejected(run(message("tools/list", {"_meta": META, "cursor": 5})), INVALID_PARAMS, 400, "invalid_params")


def test_malformed_client_info_is_invalid_params() -> None:
    meta = {**META, "io.modelcontextprotocol/clientInfo": "ExampleClient"}
    rejected(run(message(params={"name": "get_weather", "_meta": meta})), INVALID_PARAMS, 400, "invalid_params")


# --- acceptance --------------------------------------------------------------------------------


def test_spec_example_request_is_accepted() -> None:
    outcome = accepted(classify("POST", SPEC_EXAMPLE_HEADERS, SPEC_EXAMPLE_BODY, max_body_bytes=LIMIT))
    assert outcome.id == 1
    assert outcome.method == "tools/call"
    assert outcome.params["name"] == "get_weather"
    assert outcome.params["arguments"] == {"location": "Seattle, WA"}
    assert outcome.protocol_version == "2026-07-28"
    assert outcome.client_capabilities == {}
    assert outcome.client_info == {"name": "ExampleClient", "version": "1.0.0"}
    assert outcome.log_level is None
    assert outcome.progress_token is None
    assert outcome.wants_sse is True


def test_non_ascii_tool_name_travels_base64_encoded() -> None:
    body = message(params={"name": "天気", "_meta": META})
    headers = headers_for(body)
    assert ("Mcp-Name", "=?base64?" + b64("天気") + "?=") in headers
    assert accepted(run(body, headers)).params["name"] == "天気"


def test_tool_name_that_looks_like_a_sentinel_must_be_encoded() -> None:
    name = "=?base64?Zm9v?="
    body = message(params={"name": name, "_meta": META})
    rejected(run(body, headers_for(body, Mcp_Name=name)), HEADER_MISMATCH, 400, "header_mismatch.mcp-name")
    accepted(run(body, headers_for(body, Mcp_Name="=?base64?" + b64(name) + "?=")))


def test_header_names_are_case_insensitive() -> None:
    body = message()
    lower = [(name.lower(), value) for name, value in headers_for(body)]
    upper = [(name.upper(), value) for name, value in headers_for(body)]
    accepted(run(body, lower))
    accepted(run(body, upper))


def test_json_only_accept_is_served_without_sse() -> None:
    body = message()
    assert accepted(run(body, headers_for(body, Accept="application/json"))).wants_sse is False


@pytest.mark.parametrize("accept", ["*/*", "application/*, text/*", "application/json, text/*;q=0.5"])
def test_wildcard_accept_allows_json_and_sse(accept: str) -> None:
    body = message()
    assert accepted(run(body, headers_for(body, Accept=accept))).wants_sse is True


def test_sse_refused_by_zero_quality_is_not_wanted() -> None:
    body = message()
    outcome = accepted(run(body, headers_for(body, Accept="application/json, text/event-stream;q=0")))
    assert outcome.wants_sse is False


def test_accept_split_over_several_lines_is_combined() -> None:
    body = message()
    headers = [*headers_for(body, Accept="text/event-stream"), ("Accept", "application/json")]
    assert accepted(run(body, headers)).wants_sse is True


def test_retry_with_input_responses_and_request_state_is_accepted() -> None:
    params = {
        "name": "get_weather",
        "arguments": {"location": "New York"},
        "_meta": {**META, "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}, "sampling": {}}},
        "inputResponses": {
            "github_login": {"action": "accept", "content": {"name": "octocat"}},
            "capital_of_france": {
                "role": "assistant",
                "content": {"type": "text", "text": "The capital of France is Paris."},
                "model": "claude-3-sonnet-20240307",
                "stopReason": "endTurn",
            },
        },
        "requestState": "eyJsb2NhdGlvbiI6Ik5ldyBZb3JrIn0",
    }
    outcome = accepted(run(message(id=2, params=params)))
    assert outcome.params["requestState"] == "eyJsb2NhdGlvbiI6Ik5ldyBZb3JrIn0"
    assert outcome.client_capabilities == {"elicitation": {}, "sampling": {}}


def test_null_request_state_counts_as_absent() -> None:
    accepted(run(message(params={"name": "get_weather", "_meta": META, "requestState": None})))


def test_log_level_and_progress_token_are_unpacked() -> None:
    meta = {**META, "io.modelcontextprotocol/logLevel": "warning", "progressToken": "p-1"}
    outcome = accepted(run(message(params={"name": "get_weather", "_meta": meta})))
    assert outcome.log_level == "warning"
    assert outcome.progress_token == "p-1"


def test_string_id_and_integer_progress_token_are_kept() -> None:
    meta = {**META, "progressToken": 9}
    outcome = accepted(run(message(id="req-1", params={"name": "get_weather", "_meta": meta})))
    assert outcome.id == "req-1"
    assert outcome.progress_token == 9


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("server/discover", {}),
        ("tools/list", {"cursor": "c1"}),
        ("prompts/get", {"name": "greeting", "arguments": {"who": "you"}}),
        ("resources/read", {"uri": "file:///a.txt"}),
        ("resources/templates/list", {}),
    ],
)
def test_other_2026_requests_are_accepted(method: str, params: dict[str, Any]) -> None:
    outcome = accepted(run(message(method, {**params, "_meta": META})))
    assert outcome.method == method


def test_body_exactly_at_the_limit_is_read() -> None:
    raw = json.dumps(message()).encode()
    outcome = classify("POST", headers_for(message()), raw, max_body_bytes=len(raw))
    accepted(outcome)
