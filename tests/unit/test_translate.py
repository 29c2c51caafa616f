"""Pure translation between eras: capabilities per revision, results, errors, input requests."""

from __future__ import annotations

import pytest
from mcp_types.jsonrpc import INVALID_PARAMS, URL_ELICITATION_REQUIRED

from gateway.translate import capabilities as caps
from gateway.translate import inputs, results

FULL = {
    "elicitation": {"form": {}, "url": {}},
    "sampling": {"tools": {}, "context": {}},
    "roots": {"listChanged": True},
    "extensions": {"io.modelcontextprotocol/tasks": {}},
    "experimental": {"x": {}},
}


def test_normalize_keeps_only_what_a_legacy_backend_can_use() -> None:
    assert caps.normalize(FULL) == {
        "elicitation": {"form": {}, "url": {}},
        "sampling": {"context": {}, "tools": {}},
        "roots": {},
    }


def test_bare_elicitation_means_form_mode() -> None:
    assert caps.normalize({"elicitation": {}}) == {"elicitation": {"form": {}}}


def test_empty_capabilities_normalize_to_nothing() -> None:
    assert caps.normalize({}) == {}


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("2024-11-05", {"sampling": {}, "roots": {}}),
        ("2025-03-26", {"sampling": {}, "roots": {}}),
        ("2025-06-18", {"elicitation": {}, "sampling": {}, "roots": {}}),
        (
            "2025-11-25",
            {"elicitation": {"form": {}, "url": {}}, "sampling": {"context": {}, "tools": {}}, "roots": {}},
        ),
    ],
)
def test_capabilities_map_to_each_handshake_revision(version: str, expected: dict[str, object]) -> None:
    assert caps.to_legacy(caps.normalize(FULL), version) == expected


def test_roots_list_changed_and_tasks_are_never_declared_upstream() -> None:
    for version in ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"):
        legacy = caps.to_legacy(caps.normalize(FULL), version)
        assert "tasks" not in legacy
        assert legacy["roots"] == {}


def test_pool_cache_key_is_independent_of_key_order() -> None:
    a = caps.normalize({"sampling": {}, "elicitation": {"url": {}, "form": {}}})
    b = caps.normalize({"elicitation": {"form": {}, "url": {}}, "sampling": {}})
    assert caps.cache_key(a) == caps.cache_key(b)


def test_allows_reports_the_missing_capability() -> None:
    form_only = caps.normalize({"elicitation": {}})
    assert caps.allows(form_only, "elicitation/create", {"mode": "form"}) is None
    assert caps.allows(form_only, "elicitation/create", {}) is None
    assert caps.allows(form_only, "elicitation/create", {"mode": "url"}) == {"elicitation": {"url": {}}}
    assert caps.allows(form_only, "sampling/createMessage", {}) == {"sampling": {}}
    assert caps.allows(form_only, "roots/list", {}) == {"roots": {}}
    plain_sampling = caps.normalize({"sampling": {}})
    assert caps.allows(plain_sampling, "sampling/createMessage", {"tools": [{"name": "t"}]}) == {
        "sampling": {"tools": {}}
    }


def test_allows_names_the_elicitation_mode_that_is_missing() -> None:
    """requiredCapabilities names exactly what was needed, as the reference server does."""
    nothing = caps.normalize({})
    assert caps.allows(nothing, "elicitation/create", {}) == {"elicitation": {"form": {}}}
    assert caps.allows(nothing, "elicitation/create", {"mode": "url"}) == {"elicitation": {"url": {}}}
    assert caps.allows(nothing, "sampling/createMessage", {"toolChoice": {"mode": "auto"}}) == {
        "sampling": {"tools": {}}
    }
    url_only = caps.normalize({"elicitation": {"url": {}}})
    assert caps.allows(url_only, "elicitation/create", {"mode": "form"}) == {"elicitation": {"form": {}}}
    # Nothing a client could be asked: refused upstream, never a -32021.
    assert caps.allows(url_only, "elicitation/create", {"mode": "telepathy"}) == {}
    assert caps.allows(url_only, "tasks/get", {}) == {}


def test_complete_result_adds_result_type_cache_hints_and_server_info() -> None:
    out = results.complete_result(
        "tools/list", {"tools": []}, ttl_ms=5000, cache_scope="public", server_info={"name": "s", "version": "1"}
    )
    assert out == {
        "tools": [],
        "resultType": "complete",
        "ttlMs": 5000,
        "cacheScope": "public",
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "s", "version": "1"}},
    }


def test_non_cacheable_results_get_no_cache_hints() -> None:
    out = results.complete_result("tools/call", {"content": []}, ttl_ms=5000, cache_scope="public", server_info=None)
    assert out == {"content": [], "resultType": "complete"}


def test_retry_results_are_marked_uncacheable() -> None:
    out = results.complete_result(
        "resources/read", {"contents": []}, ttl_ms=5000, cache_scope="public", server_info=None, cacheable=False
    )
    assert (out["ttlMs"], out["cacheScope"]) == (0, "private")


def test_pagination_cursor_passes_through_untouched() -> None:
    out = results.complete_result(
        "tools/list", {"tools": [], "nextCursor": "opaque=="}, ttl_ms=0, cache_scope="private", server_info=None
    )
    assert out["nextCursor"] == "opaque=="


def test_discover_is_built_from_initialize_without_tasks() -> None:
    init = {
        "protocolVersion": "2025-11-25",
        "capabilities": {"tools": {"listChanged": True}, "tasks": {"list": {}}, "logging": {}},
        "serverInfo": {"name": "legacy", "version": "9"},
        "instructions": "be nice",
    }
    out = results.discover_result(init, ttl_ms=0, cache_scope="private")
    assert out == {
        "resultType": "complete",
        "supportedVersions": ["2026-07-28"],
        "capabilities": {"tools": {"listChanged": True}, "logging": {}},
        "instructions": "be nice",
        "ttlMs": 0,
        "cacheScope": "private",
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "legacy", "version": "9"}},
    }


def test_legacy_resource_not_found_becomes_invalid_params() -> None:
    assert results.modern_error({"code": -32002, "message": "Resource not found", "data": {"uri": "x"}}) == {
        "code": INVALID_PARAMS,
        "message": "Resource not found",
        "data": {"uri": "x"},
    }


def test_legacy_params_drop_the_modern_envelope_but_keep_progress_token() -> None:
    params = {
        "name": "t",
        "arguments": {"a": 1},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "progressToken": 7},
        "inputResponses": {},
        "requestState": "x",
    }
    assert results.legacy_params(params) == {"name": "t", "arguments": {"a": 1}, "_meta": {"progressToken": 7}}


def test_input_request_strips_legacy_only_fields() -> None:
    entry, elicitation_id = inputs.input_request(
        "elicitation/create",
        {"mode": "url", "message": "m", "url": "https://x", "elicitationId": "e1", "_meta": {"a": 1}},
    )
    assert entry == {"method": "elicitation/create", "params": {"mode": "url", "message": "m", "url": "https://x"}}
    assert elicitation_id == "e1"
    entry, _ = inputs.input_request("sampling/createMessage", {"messages": [], "maxTokens": 5, "task": {"ttl": 1}})
    assert entry == {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 5}}
    assert inputs.input_request("roots/list", {}) == ({"method": "roots/list"}, None)


@pytest.mark.parametrize(
    ("method", "response"),
    [
        ("elicitation/create", {"action": "maybe"}),
        ("elicitation/create", {"action": "accept", "content": "text"}),
        ("sampling/createMessage", {"role": "assistant"}),
        ("roots/list", {"roots": "file:///"}),
        ("roots/list", ["not", "an", "object"]),
    ],
)
def test_malformed_input_responses_are_refused(method: str, response: object) -> None:
    with pytest.raises(inputs.MalformedInputResponse):
        inputs.check_response(method, response)


@pytest.mark.parametrize(
    ("method", "response"),
    [
        ("elicitation/create", {"action": "accept", "content": {"city": "Paris"}}),
        ("elicitation/create", {"action": "decline"}),
        ("sampling/createMessage", {"role": "assistant", "content": {"type": "text", "text": "x"}, "model": "m"}),
        ("roots/list", {"roots": [{"uri": "file:///tmp"}]}),
    ],
)
def test_well_formed_input_responses_pass(method: str, response: dict[str, object]) -> None:
    assert inputs.check_response(method, response) == response


def test_url_elicitations_are_read_from_a_legacy_32042_error() -> None:
    error = {
        "code": URL_ELICITATION_REQUIRED,
        "message": "URL elicitation required",
        "data": {"elicitations": [{"mode": "url", "elicitationId": "e", "url": "https://x", "message": "m"}, 5]},
    }
    assert inputs.url_elicitations(error) == [{"mode": "url", "elicitationId": "e", "url": "https://x", "message": "m"}]
    assert inputs.url_elicitations({"code": URL_ELICITATION_REQUIRED}) == []
