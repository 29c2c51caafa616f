"""Strict unpadded base64url: the binascii implementation accepts exactly what the reference
implementation (a regular expression, the standard library's decoder and a canonical re-encode)
accepts, and decodes it to the same bytes."""

from __future__ import annotations

import base64
import binascii
import itertools
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.keyset import b64url_decode_strict, b64url_nopad

_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
_REFERENCE_RE = re.compile(r"[A-Za-z0-9_-]+", re.ASCII)


def reference(text: str) -> bytes | None:
    """The previous implementation, kept as the specification of what is accepted."""
    if not _REFERENCE_RE.fullmatch(text) or len(text) % 4 == 1:
        return None
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        return None
    return raw if base64.urlsafe_b64encode(raw).decode().rstrip("=") == text else None


def decoded(text: str) -> bytes | None:
    try:
        return b64url_decode_strict(text)
    except ValueError:
        return None


@given(st.binary(max_size=200))
def test_every_encoding_decodes_back_and_matches_the_standard_library(data: bytes) -> None:
    text = b64url_nopad(data)
    assert text == base64.urlsafe_b64encode(data).decode().rstrip("=")
    assert decoded(text) == (data if data else None)


@given(st.text(alphabet=_ALPHABET + "+/= \n\t.!é\x00\u0660", max_size=12))
def test_any_string_is_accepted_exactly_when_the_reference_accepts_it(text: str) -> None:
    assert decoded(text) == reference(text)


@given(st.text(max_size=40))
def test_any_unicode_string_is_accepted_exactly_when_the_reference_accepts_it(text: str) -> None:
    assert decoded(text) == reference(text)


def test_every_short_string_over_a_small_alphabet_agrees_with_the_reference() -> None:
    for length in range(6):
        for chars in itertools.product("AQgwBz9-_+/= é", repeat=length if length < 5 else 0):
            text = "".join(chars)
            assert decoded(text) == reference(text), text


def test_every_last_character_after_two_and_three_characters_agrees_with_the_reference() -> None:
    for body in ("Q", "QU", "QUJDQ", "QUJDQU"):
        for last in _ALPHABET:
            assert decoded(body + last) == reference(body + last), body + last


@pytest.mark.parametrize(
    "text", ["", "Q", "QQ==", "QQ=", "QR", "QUJ", "QU+D", "QU/D", "QU D", "QUJD\n", "ÀUJD", "QUJDQ"]
)
def test_known_bad_spellings_are_refused(text: str) -> None:
    assert reference(text) is None
    with pytest.raises(ValueError):
        b64url_decode_strict(text)
