"""Header value codec and `Mcp-Param-*` validation (wire reference §2.2)."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from gateway.frontdoor.headers import (
    check_param_headers,
    decode_header_value,
    encode_header_value,
    param_header_map,
)


def b64(text: str) -> str:
    return "=?base64?" + base64.b64encode(text.encode("utf-8")).decode("ascii") + "?="


REGION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "count": {"type": "integer", "x-mcp-header": "Count"},
        "dry_run": {"type": "boolean", "x-mcp-header": "Dry-Run"},
        "note": {"type": "string"},
    },
}


# --- value codec -------------------------------------------------------------------------------


def test_printable_ascii_passes_verbatim() -> None:
    assert encode_header_value("get_weather") == "get_weather"
    assert encode_header_value("file:///tmp/a b.txt") == "file:///tmp/a b.txt"


@pytest.mark.parametrize(
    "value",
    ["天気", "tab\there", " leading", "trailing ", "line\nbreak", "caf\u00e9", "\x7f"],
)
def test_values_that_would_not_survive_a_header_are_base64_wrapped(value: str) -> None:
    encoded = encode_header_value(value)
    assert encoded == b64(value)
    assert decode_header_value(encoded) == value


def test_plain_value_that_looks_like_the_sentinel_is_itself_encoded() -> None:
    tricky = "=?base64?aGk=?="
    encoded = encode_header_value(tricky)
    assert encoded != tricky
    assert encoded == b64(tricky)
    assert decode_header_value(encoded) == tricky


def test_empty_string_is_plain() -> None:
    assert encode_header_value("") == ""
    assert decode_header_value("") == ""


def test_plain_values_decode_to_themselves() -> None:
    assert decode_header_value("get_weather") == "get_weather"


@pytest.mark.parametrize(
    "bad",
    [
        "=?base64?not base64!?=",  # alphabet
        "=?base64?aGk?=",  # missing padding
        "=?base64?aGl=?=",  # non-canonical trailing bits
        "=?base64?" + base64.b64encode(b"\xff\xfe").decode() + "?=",  # not UTF-8
    ],
)
def test_malformed_sentinel_decodes_to_none(bad: str) -> None:
    assert decode_header_value(bad) is None


# --- annotations -------------------------------------------------------------------------------


def test_map_lists_top_level_annotations_lowercased() -> None:
    assert param_header_map(REGION_SCHEMA) == {
        "region": ("region",),
        "count": ("count",),
        "dry-run": ("dry_run",),
    }


def test_map_follows_nested_properties_chain() -> None:
    schema = {
        "type": "object",
        "properties": {
            "target": {
                "type": "object",
                "properties": {"zone": {"type": "string", "x-mcp-header": "Zone"}},
            }
        },
    }
    assert param_header_map(schema) == {"zone": ("target", "zone")}


@pytest.mark.parametrize(
    "schema",
    [
        {"x-mcp-header": "Root", "type": "string"},
        {"properties": {"tags": {"type": "array", "items": {"type": "string", "x-mcp-header": "Tag"}}}},
        {"properties": {"a": {"anyOf": [{"type": "string", "x-mcp-header": "A"}]}}},
        {"properties": {"a": {"$ref": "#/$defs/a"}}, "$defs": {"a": {"type": "string", "x-mcp-header": "A"}}},
        {"properties": {"ratio": {"type": "number", "x-mcp-header": "Ratio"}}},
        {"properties": {"a": {"type": ["string", "null"], "x-mcp-header": "A"}}},
        {"properties": {"a": {"type": "string", "x-mcp-header": "Bad Name"}}},
        {"properties": {"a": {"type": "string", "x-mcp-header": ""}}},
        {"properties": {"a": {"type": "string", "x-mcp-header": 7}}},
        {
            "properties": {
                "a": {"type": "string", "x-mcp-header": "Dup"},
                "b": {"type": "string", "x-mcp-header": "dup"},
            }
        },
    ],
    ids=[
        "root",
        "under-items",
        "under-anyOf",
        "under-ref",
        "number-type",
        "type-list",
        "not-a-token",
        "empty",
        "not-a-string",
        "case-insensitive-duplicate",
    ],
)
def test_invalid_or_unreachable_annotations_are_ignored(schema: dict[str, Any]) -> None:
    assert param_header_map(schema) == {}


def test_missing_schema_declares_nothing() -> None:
    assert param_header_map(None) == {}
    assert check_param_headers([("Mcp-Param-Anything", "x")], {"anything": "y"}, None) is None


# --- check_param_headers -----------------------------------------------------------------------


def test_matching_headers_pass() -> None:
    headers = [("Mcp-Param-Region", "us-west1"), ("Mcp-Param-Count", "3"), ("Mcp-Param-Dry-Run", "false")]
    arguments = {"region": "us-west1", "count": 3, "dry_run": False, "note": "not mirrored"}
    assert check_param_headers(headers, arguments, REGION_SCHEMA) is None


def test_header_names_are_case_insensitive() -> None:
    assert check_param_headers([("mcp-param-region", "eu")], {"region": "eu"}, REGION_SCHEMA) is None
    assert check_param_headers([("MCP-PARAM-REGION", "eu")], {"region": "eu"}, REGION_SCHEMA) is None


def test_mismatched_value_is_reported_with_both_values() -> None:
    message = check_param_headers([("Mcp-Param-Region", "us")], {"region": "eu"}, REGION_SCHEMA)
    assert message == "Header mismatch: Mcp-Param-Region header value 'us' does not match body value 'eu'"


def test_missing_header_for_present_argument_is_a_mismatch() -> None:
    message = check_param_headers([], {"region": "eu"}, REGION_SCHEMA)
    assert message is not None
    assert "Mcp-Param-Region" in message
    assert "missing" in message


def test_header_for_absent_argument_is_a_mismatch() -> None:
    message = check_param_headers([("Mcp-Param-Region", "eu")], {}, REGION_SCHEMA)
    assert message is not None
    assert "absent" in message


def test_null_argument_counts_as_absent() -> None:
    assert check_param_headers([], {"region": None}, REGION_SCHEMA) is None
    assert check_param_headers([("Mcp-Param-Region", "eu")], {"region": None}, REGION_SCHEMA) is not None


def test_no_arguments_and_no_headers_pass() -> None:
    assert check_param_headers([], None, REGION_SCHEMA) is None


@pytest.mark.parametrize(
    ("body", "header"),
    [(42, "42"), (42, "42.0"), (42, "42.000"), (42.0, "42"), (-7, "-7"), (10**30, "1" + "0" * 30)],
)
def test_integers_compare_numerically(body: Any, header: str) -> None:
    assert check_param_headers([("Mcp-Param-Count", header)], {"count": body}, REGION_SCHEMA) is None


@pytest.mark.parametrize("header", ["42.5", "4.2e1", "+42", "forty-two", "0x2a", ""])
def test_integer_header_that_is_not_the_same_number_mismatches(header: str) -> None:
    assert check_param_headers([("Mcp-Param-Count", header)], {"count": 42}, REGION_SCHEMA) is not None


@pytest.mark.parametrize(("body", "header"), [(True, "true"), (False, "false")])
def test_booleans_are_true_or_false(body: bool, header: str) -> None:
    assert check_param_headers([("Mcp-Param-Dry-Run", header)], {"dry_run": body}, REGION_SCHEMA) is None


@pytest.mark.parametrize("header", ["True", "1", "yes", "false"])
def test_boolean_header_in_another_spelling_mismatches(header: str) -> None:
    assert check_param_headers([("Mcp-Param-Dry-Run", header)], {"dry_run": True}, REGION_SCHEMA) is not None


def test_base64_encoded_value_is_decoded_before_comparing() -> None:
    headers = [("Mcp-Param-Region", b64("Zürich"))]
    assert check_param_headers(headers, {"region": "Zürich"}, REGION_SCHEMA) is None


def test_malformed_base64_value_never_matches() -> None:
    message = check_param_headers([("Mcp-Param-Region", "=?base64?@@@?=")], {"region": "x"}, REGION_SCHEMA)
    assert message is not None
    assert "malformed" in message


def test_string_argument_is_compared_exactly() -> None:
    assert check_param_headers([("Mcp-Param-Region", "EU")], {"region": "eu"}, REGION_SCHEMA) is not None


def test_nested_property_path_is_checked() -> None:
    schema = {
        "properties": {"target": {"type": "object", "properties": {"zone": {"type": "string", "x-mcp-header": "Zone"}}}}
    }
    assert check_param_headers([("Mcp-Param-Zone", "z1")], {"target": {"zone": "z1"}}, schema) is None
    assert check_param_headers([("Mcp-Param-Zone", "z2")], {"target": {"zone": "z1"}}, schema) is not None
    assert check_param_headers([], {"target": {"zone": "z1"}}, schema) is not None
    assert check_param_headers([], {"target": "not an object"}, schema) is None


def test_annotation_under_items_is_ignored() -> None:
    schema = {"properties": {"tags": {"type": "array", "items": {"type": "string", "x-mcp-header": "Tag"}}}}
    assert check_param_headers([], {"tags": ["a"]}, schema) is None
    assert check_param_headers([("Mcp-Param-Tag", "a")], {"tags": ["a"]}, schema) is None


def test_unknown_param_headers_are_allowed() -> None:
    headers = [("Mcp-Param-Region", "eu"), ("Mcp-Param-Unknown", "x"), ("Mcp-Param-Unknown", "y")]
    assert check_param_headers(headers, {"region": "eu"}, REGION_SCHEMA) is None


def test_duplicated_declared_header_is_a_mismatch() -> None:
    headers = [("Mcp-Param-Region", "eu"), ("mcp-param-region", "eu")]
    message = check_param_headers(headers, {"region": "eu"}, REGION_SCHEMA)
    assert message is not None
    assert "more than once" in message


def test_argument_without_a_header_form_never_matches() -> None:
    message = check_param_headers([("Mcp-Param-Region", "{}")], {"region": {}}, REGION_SCHEMA)
    assert message is not None


def test_echoed_values_are_clipped_to_200_characters() -> None:
    message = check_param_headers([("Mcp-Param-Region", "h" * 5000)], {"region": "b" * 5000}, REGION_SCHEMA)
    assert message is not None
    assert "h" * 200 in message
    assert "h" * 201 not in message
    assert "b" * 201 not in message


def test_a_schema_without_annotations_never_reads_the_headers() -> None:
    class Unread:
        def __iter__(self) -> Any:
            raise AssertionError("headers read although no Mcp-Param-* header can be owed")

    assert check_param_headers(Unread(), {"region": "eu"}, {"type": "object", "properties": {"region": {}}}) is None
    assert check_param_headers(Unread(), {"region": "eu"}, None) is None


def test_headers_may_be_any_iterable_of_pairs() -> None:
    headers = {"Mcp-Param-Region": "eu"}.items()
    assert check_param_headers(headers, {"region": "eu"}, REGION_SCHEMA) is None
    assert check_param_headers(headers, {"region": "us"}, REGION_SCHEMA) is not None
