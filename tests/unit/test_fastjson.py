"""The hot-path JSON codec encodes the same values the standard library does and decodes strictly."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway import fastjson

_scalars = (
    st.none()
    | st.booleans()
    # integers far outside 64 bits: orjson refuses them, the fallback must keep them exact
    | st.integers(min_value=-(2**200), max_value=2**200)
    | st.floats(allow_nan=False, allow_infinity=False)
    # any code point, lone surrogates included
    | st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF))
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5),
    max_leaves=40,
)


@given(_values)
def test_dumps_encodes_the_value_the_standard_library_would(value: Any) -> None:
    encoded = fastjson.dumps(value)
    assert isinstance(encoded, bytes)
    # the same value as the standard library's own spelling, and valid UTF-8 JSON
    assert json.loads(encoded.decode("utf-8")) == json.loads(json.dumps(value))


@given(_values)
def test_loads_reads_back_what_dumps_wrote(value: Any) -> None:
    assert fastjson.loads(fastjson.dumps(value)) == json.loads(json.dumps(value))


def test_dumps_is_compact_and_keeps_non_ascii() -> None:
    assert fastjson.dumps({"a": [1, "é"], "b": None}) == '{"a":[1,"é"],"b":null}'.encode()


def test_integers_outside_64_bits_stay_exact_both_ways() -> None:
    big = 123456789012345678901234567890
    expected = b'{"n":123456789012345678901234567890,"m":-18446744073709551616}'
    assert fastjson.dumps({"n": big, "m": -(2**64)}) == expected
    assert fastjson.loads(b'{"n":123456789012345678901234567890}') == {"n": big}


def test_non_string_keys_and_lone_surrogates_fall_back() -> None:
    assert fastjson.dumps({1: 2}) == b'{"1":2}'
    assert fastjson.dumps(["\ud800"]) == b'["\\ud800"]'
    assert fastjson.loads(b'["\\ud800"]') == ["\ud800"]


def test_a_non_finite_float_is_never_written_as_a_non_json_token() -> None:
    for value in (math.nan, math.inf, -math.inf):
        encoded = fastjson.dumps({"x": value})
        assert b"NaN" not in encoded
        assert b"Infinity" not in encoded
        json.loads(encoded, parse_constant=fastjson.reject_constant)


@pytest.mark.parametrize("document", [b'{"a":NaN}', b"[Infinity]", b"[-Infinity]", b"\xff", b"{", b""])
def test_loads_refuses_what_is_not_json(document: bytes) -> None:
    with pytest.raises(ValueError):
        fastjson.loads(document)


def test_a_large_document_round_trips() -> None:
    value = {"content": [{"type": "text", "text": "x" * (4 << 20)}], "n": list(range(50_000))}
    assert fastjson.loads(fastjson.dumps(value)) == value
