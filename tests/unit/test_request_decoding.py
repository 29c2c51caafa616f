"""A request body decodes to exactly what the standard library decodes, whichever parser ran.

:func:`gateway.frontdoor.parsing.decode_nested` parses with orjson and falls back to the standard
library (:func:`gateway.fastjson.loads`) wherever the two could differ: the value (types
included), the nesting verdict and the error must be the standard library's for every body.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway import fastjson
from gateway.frontdoor.parsing import decode_nested, nesting_exceeds

LIMIT = 6

_scalars = (
    st.none()
    | st.booleans()
    # beyond 64 bits orjson reads an integer as a float: the fallback must keep it exact
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False)
    # any code point, lone surrogates included (escaped on the wire: orjson refuses them)
    | st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=12)
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=30,
)


def same(a: Any, b: Any) -> bool:
    """Equal, and of the same type all the way down (1 == 1.0 == True is not enough)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b) or (a != a and b != b)  # NaN is never equal to itself


Outcome = tuple[str, Any, bool]
"""``("value", decoded, too deep)`` or ``("error", exception class, False)``."""


def standard(body: bytes) -> Outcome:
    try:
        decoded = fastjson.loads(body)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        return ("error", type(exc), False)
    return ("value", decoded, nesting_exceeds(decoded, LIMIT))


def ours(body: bytes) -> Outcome:
    try:
        decoded, too_deep = decode_nested(body, LIMIT)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        return ("error", type(exc), False)
    return ("value", decoded, too_deep)


def assert_alike(body: bytes) -> None:
    expected, got = standard(body), ours(body)
    assert expected[0] == got[0], (body, expected, got)
    if expected[0] == "error":
        assert issubclass(got[1], (UnicodeDecodeError, ValueError, RecursionError))
        # the same class of refusal: a UTF-8 error stays one, a JSON error stays one
        assert issubclass(got[1], UnicodeDecodeError) == issubclass(expected[1], UnicodeDecodeError)
        return
    assert same(expected[1], got[1]), (body, expected, got)
    assert expected[2] == got[2], body


@given(_values)
@settings(max_examples=400)
def test_any_document_decodes_as_the_standard_library_decodes_it(value: Any) -> None:
    assert_alike(json.dumps(value).encode())
    assert_alike(json.dumps({"jsonrpc": "2.0", "id": 1, "params": {"arguments": value}}).encode())


@given(st.binary(max_size=40))
def test_any_bytes_decode_or_fail_as_the_standard_library_does(body: bytes) -> None:
    assert_alike(body)


@pytest.mark.parametrize(
    "body",
    [
        b'{"id":123456789012345678901234567890,"x":1}',  # orjson would make the id a float
        b'{"id":-9223372036854775809}',
        b'{"id":18446744073709551616}',
        b"[18446744073709551615, -9223372036854775808]",  # the 64-bit edges orjson keeps exact
        b'{"a":1.5,"b":[2]}',
        b'["\\ud800"]',  # a lone surrogate escape: orjson refuses, the standard library accepts
        b'{"\\udfff":1}',
        b"1e400",  # orjson refuses, the standard library reads inf
        b"NaN",
        b"[1,]",
        b'"\xed\xa0\x80"',  # not UTF-8
        b"\xef\xbb\xbf{}",  # a byte order mark
        b'{"a":1,"b":2,"a":3}',  # a repeated key: the last value, in the first place
        b"[" * 7 + b"]" * 7,  # too deep for the limit
        b'{"id":123456789012345678901234567890,"d":' + b"[" * 7 + b"]" * 7 + b"}",  # too deep, exact id
        b"[" * 6 + b"1.5" + b"]" * 6,
        b"[" * 3000 + b"]" * 3000,  # deeper than either parser follows
        b'{"arguments":{"text":"' + b"x" * 70000 + b'"}}',
    ],
)
def test_the_bodies_where_the_parsers_differ_decode_as_the_standard_library_decodes_them(body: bytes) -> None:
    assert_alike(body)


def test_a_too_deep_body_keeps_its_exact_id() -> None:
    body = b'{"id":123456789012345678901234567890,"d":' + b"[" * 7 + b"]" * 7 + b"}"
    decoded, too_deep = decode_nested(body, LIMIT)
    assert too_deep
    assert decoded["id"] == 123456789012345678901234567890
    assert type(decoded["id"]) is int
