"""The front door's per-request memos answer exactly what the work they stand in for answers."""

from __future__ import annotations

import json
from typing import Any
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.frontdoor import headers as header_checks
from gateway.frontdoor.parsing import ACCEPT_MEMO_CHARS, _accepts, accepts
from gateway.translate import capabilities as caps

_media = st.sampled_from(
    ["application/json", "text/event-stream", "*/*", "application/*", "text/*", "text/html", "APPLICATION/JSON"]
)
_param = st.sampled_from(["", ";q=0", ";q=1", ";q=0.5", ";Q=0", ";q=x", "; charset=utf-8"])
_line = st.lists(st.tuples(_media, _param).map("".join), max_size=4).map(", ".join)


@settings(max_examples=300, deadline=None)
@given(st.lists(_line, max_size=3))
def test_a_remembered_accept_verdict_is_the_parsed_one(lines: list[str]) -> None:
    assert accepts(lines) == _accepts(lines)
    assert accepts(lines) == _accepts(lines)  # asked again: from the memo when short enough


def test_a_long_accept_header_is_parsed_every_time_and_never_stored() -> None:
    long_line = "application/json, " + "text/plain, " * (ACCEPT_MEMO_CHARS // 10)
    with mock.patch("gateway.frontdoor.parsing._accepts_remembered") as remembered:
        assert accepts([long_line]) == (True, False)
    remembered.assert_not_called()


_caps: st.SearchStrategy[dict[str, Any]] = st.dictionaries(
    st.sampled_from(["elicitation", "sampling", "roots", "tasks", "x"]),
    st.one_of(
        st.none(),
        st.integers(),
        st.dictionaries(
            st.sampled_from(["form", "url", "context", "tools", "y"]),
            st.one_of(st.none(), st.just({}), st.just({"a": 1}), st.integers(), st.just([])),
            max_size=3,
        ),
    ),
    max_size=5,
)


def _reference_normalize(modern: Any) -> dict[str, Any]:
    """The normalization as first written: comprehensions and ABC checks throughout."""
    from collections.abc import Mapping

    out: dict[str, Any] = {}
    elicitation = modern.get("elicitation")
    if isinstance(elicitation, Mapping):
        modes: dict[str, Any] = {m: {} for m in ("form", "url") if isinstance(elicitation.get(m), Mapping)}
        out["elicitation"] = modes or {"form": {}}
    sampling = modern.get("sampling")
    if isinstance(sampling, Mapping):
        out["sampling"] = {k: {} for k in ("context", "tools") if isinstance(sampling.get(k), Mapping)}
    if isinstance(modern.get("roots"), Mapping):
        out["roots"] = {}
    return out


@settings(max_examples=300, deadline=None)
@given(_caps)
def test_normalized_capabilities_and_their_pool_key_are_unchanged(modern: dict[str, Any]) -> None:
    normalized = caps.normalize(modern)
    assert normalized == _reference_normalize(modern)
    assert caps.cache_key(normalized) == json.dumps(normalized, sort_keys=True, separators=(",", ":"))


def _schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"region": {"type": "string", "x-mcp-header": "Region"}, "n": {"type": "integer"}},
    }


def test_a_schemas_annotations_are_walked_once_per_schema_object() -> None:
    schema = _schema()
    with mock.patch.object(header_checks, "_annotations", wraps=header_checks._annotations) as walk:
        first = header_checks.annotations_of(schema)
        again = header_checks.annotations_of(schema)
    assert first == again == (("Region", ("region",), "string"),)
    assert walk.call_count == 1
    other = _schema()
    other["properties"]["region"]["x-mcp-header"] = "Zone"
    assert header_checks.annotations_of(other) == (("Zone", ("region",), "string"),)


def test_the_annotation_memo_is_bounded() -> None:
    schemas = [_schema() for _ in range(header_checks.ANNOTATION_MEMO_ENTRIES * 2)]
    for schema in schemas:
        header_checks.annotations_of(schema)
    assert len(header_checks._ANNOTATION_MEMO) <= header_checks.ANNOTATION_MEMO_ENTRIES


def test_headers_are_checked_against_the_remembered_annotations() -> None:
    schema = _schema()
    headers = [("Mcp-Param-Region", "eu")]
    assert header_checks.check_param_headers(headers, {"region": "eu"}, schema) is None
    problem = header_checks.check_param_headers(headers, {"region": "us"}, schema)
    assert problem is not None
    assert "does not match" in problem
