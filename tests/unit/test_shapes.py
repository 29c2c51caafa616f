"""The params-shape fast lane against the schema's model it stands in for.

The lane may only ever say "certainly valid"; so on any shape, random or hostile, whenever it says
so the model must accept, and the front door's verdict (accepted, or the refusal with its message)
must be the one the model alone gives.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp_types.methods import CLIENT_REQUESTS, validate_client_request
from pydantic import ValidationError

from gateway.frontdoor import classify as ladder
from gateway.frontdoor.shapes import ENVELOPE_KEY_BYTES, EnvelopeVerdicts, _envelope_model, shape_is_known_valid

VERSION = "2026-07-28"
PV = "io.modelcontextprotocol/protocolVersion"
CC = "io.modelcontextprotocol/clientCapabilities"
CI = "io.modelcontextprotocol/clientInfo"
LL = "io.modelcontextprotocol/logLevel"
ENVELOPE = {PV: VERSION, CC: {"elicitation": {"form": {}}, "sampling": {}, "roots": {}}}

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=6),
    st.sampled_from(["\ud800", "form", "url", "debug", "2026-07-28", ""]),
)
_json = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.text(max_size=4) | st.sampled_from(["form", "x"]), inner, max_size=3),
    ),
    max_leaves=8,
)
# Keys the models know, by alias and by field name, and a few they do not.
_cap_keys = st.sampled_from(["elicitation", "sampling", "roots", "experimental", "extensions", "tasks", "x"])
_sub_keys = st.sampled_from(["form", "url", "context", "tools", "listChanged", "y"])
_capability = st.one_of(_json, st.dictionaries(_sub_keys, _json, max_size=3))
_capabilities = st.one_of(_json, st.dictionaries(_cap_keys, _capability, max_size=4))
_info = st.one_of(
    _json,
    st.fixed_dictionaries(
        {"name": st.text(max_size=3) | _scalars, "version": st.text(max_size=3) | _scalars},
        optional={"title": _json, "icons": _json, "websiteUrl": _json, "extra": _json},
    ),
)
_meta_values = {
    PV: st.sampled_from([VERSION, "2025-06-18"]) | _scalars,
    CC: _capabilities,
    CI: _info,
    LL: st.sampled_from(["debug", "warning", "nope"]) | _scalars,
    "progressToken": _scalars,
    "com.example/x": _json,
    "io_modelcontextprotocol_client_capabilities": _json,
}
_meta = st.one_of(
    _json,
    st.fixed_dictionaries({}, optional=_meta_values),
    st.fixed_dictionaries(
        {PV: _meta_values[PV], CC: _capabilities},
        optional={k: v for k, v in _meta_values.items() if k not in (PV, CC)},
    ),
)
_shape = st.fixed_dictionaries(
    {},
    optional={
        "_meta": _meta,
        "name": st.text(max_size=5) | _json,
        "arguments": st.one_of(st.none(), st.dictionaries(st.text(max_size=4), _json, max_size=3), _json),
        "requestState": st.none() | st.text(max_size=5) | _json,
        "request_state": _json,
        "meta": _json,
        "task": _json,
        "uri": _json,
    },
)

# Shapes near a valid call: each part mostly well formed, now and then hostile.
_valid_sub = st.dictionaries(_sub_keys, st.dictionaries(st.text(max_size=3), _json, max_size=2), max_size=2)
_near_capabilities = st.dictionaries(_cap_keys, _valid_sub, max_size=4)
_near_meta = st.fixed_dictionaries(
    {PV: st.just(VERSION) | _meta_values[PV], CC: _near_capabilities},
    optional={
        CI: st.one_of(st.just({"name": "c", "version": "1"}), _info),
        LL: st.one_of(st.sampled_from(["debug", "warning"]), st.sampled_from(["info"]), _meta_values[LL]),
        "progressToken": st.one_of(st.integers(), st.text(max_size=3), st.integers(), _scalars),
        "com.example/x": _json,
    },
)
_near_shape = st.fixed_dictionaries(
    {"_meta": _near_meta, "name": st.text(max_size=5)},
    optional={
        "arguments": st.one_of(st.dictionaries(st.text(max_size=4), _json, max_size=3), _json),
        "requestState": st.none() | st.text(max_size=5) | _json,
        "request_state": _json,
        "meta": _json,
        "uri": _json,
    },
)
_shapes = st.one_of(_shape, _near_shape, _near_shape)


def model_accepts(method: str, shape: dict[str, Any]) -> bool:
    try:
        validate_client_request(method, VERSION, shape)
    except ValidationError:
        return False
    return True


@settings(max_examples=600, deadline=None)
@given(_shapes)
def test_the_lane_says_valid_only_where_the_model_accepts(shape: dict[str, Any]) -> None:
    if shape_is_known_valid("tools/call", VERSION, shape):
        assert model_accepts("tools/call", shape)


@settings(max_examples=300, deadline=None)
@given(_shapes, st.sampled_from(["tools/call", "prompts/get", "resources/read", "tools/list"]))
def test_the_ladder_gives_the_models_verdict_and_message(shape: dict[str, Any], method: str) -> None:
    ours = ladder._params_shape(method, shape, VERSION, 1)
    try:
        validate_client_request(method, VERSION, {k: v for k, v in shape.items() if k != "inputResponses"})
    except ValidationError:
        assert ours is not None
        assert ours.reason in {"invalid_params", "bad_input_responses", "bad_request_state"}
        return
    # The model accepts: only the multi-round-trip rungs that run before it could refuse.
    assert ours is None or ours.reason in {"bad_input_responses", "bad_request_state"}


def test_the_common_call_takes_the_lane_and_is_valid() -> None:
    shape = {"_meta": dict(ENVELOPE), "name": "add", "arguments": {"a": 1, "b": 2}}
    assert shape_is_known_valid("tools/call", VERSION, shape)
    assert model_accepts("tools/call", shape)
    retry = {**shape, "requestState": "v1.abc"}
    assert shape_is_known_valid("tools/call", VERSION, retry)


@pytest.mark.parametrize(
    "shape",
    [
        {"_meta": dict(ENVELOPE), "name": 5},
        {"_meta": dict(ENVELOPE), "name": "t", "arguments": [1]},
        {"_meta": dict(ENVELOPE), "name": "t", "requestState": 7},
        {"_meta": {**ENVELOPE, CC: {"elicitation": "yes"}}, "name": "t"},
        {"_meta": {**ENVELOPE, CI: {"name": "c"}}, "name": "t"},
        {"_meta": {**ENVELOPE, LL: "loud"}, "name": "t"},
        {"_meta": {**ENVELOPE, "progressToken": 1.5}, "name": "t"},
        {"_meta": {PV: VERSION}, "name": "t"},
        {"name": "t"},
    ],
)
def test_an_invalid_shape_is_left_to_the_model_which_refuses_it(shape: dict[str, Any]) -> None:
    assert not shape_is_known_valid("tools/call", VERSION, shape)
    assert not model_accepts("tools/call", shape)
    refusal = ladder._params_shape("tools/call", shape, VERSION, 1)
    assert refusal is not None
    assert refusal.reason in {"invalid_params", "bad_request_state"}


def test_a_refused_envelope_is_refused_again_after_an_accepted_one_with_the_same_keys() -> None:
    good = {"_meta": {**ENVELOPE, CI: {"name": "c", "version": "1"}}, "name": "t"}
    bad = {"_meta": {**ENVELOPE, CI: {"name": "c", "version": 1}}, "name": "t"}
    assert shape_is_known_valid("tools/call", VERSION, good)
    assert not shape_is_known_valid("tools/call", VERSION, bad)
    assert ladder._params_shape("tools/call", bad, VERSION, 1) is not None


def test_numbers_of_one_value_but_two_spellings_are_told_apart() -> None:
    """``1`` and ``1.0`` and ``true`` encode differently, so one's verdict never answers for another."""
    model = _envelope_model(VERSION)
    assert model is not None
    verdicts = EnvelopeVerdicts(model)
    assert verdicts.accepts({**ENVELOPE, "progressToken": 1})
    assert verdicts.accepts({**ENVELOPE, "progressToken": 1.0}) == model_accepts(
        "tools/call", {"_meta": {**ENVELOPE, "progressToken": 1.0}, "name": "t"}
    )
    assert not verdicts.accepts({**ENVELOPE, "progressToken": 1.5})
    assert not verdicts.accepts({**ENVELOPE, "progressToken": True}) or model_accepts(
        "tools/call", {"_meta": {**ENVELOPE, "progressToken": True}, "name": "t"}
    )


def test_what_cannot_be_encoded_canonically_goes_to_the_model() -> None:
    model = _envelope_model(VERSION)
    assert model is not None
    verdicts = EnvelopeVerdicts(model)
    assert not verdicts.accepts({**ENVELOPE, "com.example/n": 2**80})
    assert not verdicts.accepts({**ENVELOPE, "com.example/s": "\ud800"})
    assert not verdicts.accepts([ENVELOPE])


def test_the_memory_of_envelopes_is_bounded_in_count_and_size() -> None:
    model = _envelope_model(VERSION)
    assert model is not None
    verdicts = EnvelopeVerdicts(model, limit=4)
    for i in range(10):
        assert verdicts.accepts({**ENVELOPE, "com.example/i": i})
    assert len(verdicts._accepted) == 4
    huge = {**ENVELOPE, "com.example/pad": "x" * ENVELOPE_KEY_BYTES}
    assert verdicts.accepts(huge)
    assert all(len(key) <= ENVELOPE_KEY_BYTES for key in verdicts._accepted)


def test_only_the_methods_it_knows_take_the_lane() -> None:
    shape = {"_meta": dict(ENVELOPE), "name": "p"}
    assert not shape_is_known_valid("prompts/get", VERSION, shape)
    assert not shape_is_known_valid("tools/call", "1999-01-01", shape)
    assert ("tools/call", VERSION) in CLIENT_REQUESTS
