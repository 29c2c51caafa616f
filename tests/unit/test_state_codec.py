"""The requestState codec: round trips, tamper resistance, strict parsing, rotation, bindings.

No test sleeps: every time-dependent check injects ``now``. Errors are asserted by their
machine-readable ``reason``, never by message text.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import struct
from dataclasses import FrozenInstanceError, replace
from types import MappingProxyType
from typing import Any

import orjson
import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from state_oracle import NEW, NOW, OLD, UNSEALABLE, make_claims, v1_plaintext

from gateway.keyset import generate_secret
from gateway.state.boundary import check_bindings
from gateway.state.claims import Claims, args_digest, principal_tag
from gateway.state.codec import MAX_TOKEN_LENGTH, WIRE_MESSAGE, KeyRing, StateError

OTHER = b"other-secret-other-secret-other-2"


def b64u(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def b64u_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def reason_of(ring: KeyRing, token: object, now: float = NOW) -> str:
    with pytest.raises(StateError) as info:
        ring.unseal(token, now=now)
    return info.value.reason


def outcome(ring: KeyRing, token: str) -> Claims | str:
    """The claims a token unseals to, or the reason it is refused."""
    try:
        return ring.unseal(token, now=NOW)
    except StateError as exc:
        return exc.reason


def seal_raw_payload(secret: bytes, payload: bytes, prefix: str = "v1.") -> str:
    """Build a token by hand from the documented format, so tests can feed authentic bad claims."""
    key = HKDF(algorithm=SHA256(), length=32, salt=None, info=b"mrtr-gateway/request-state/v1/aes-256-gcm").derive(
        secret
    )
    kid = hashlib.sha256(b"mrtr-gateway/request-state/v1/kid:" + key).digest()[:4]
    nonce = os.urandom(12)
    return prefix + b64u(kid + nonce + AESGCM(key).encrypt(nonce, payload, prefix.encode() + kid))


def open_raw_payload(secret: bytes, token: str) -> bytes:
    """The plaintext of a token, decrypted by hand from the documented format."""
    key = HKDF(algorithm=SHA256(), length=32, salt=None, info=b"mrtr-gateway/request-state/v1/aes-256-gcm").derive(
        secret
    )
    raw = b64u_decode(token[3:])
    return AESGCM(key).decrypt(raw[4:16], raw[16:], token[:3].encode() + raw[:4])


V2_METHODS = {"tools/call": 1, "prompts/get": 2, "resources/read": 3}


def v2_plaintext(claims: Claims) -> bytes:
    """The documented version-2 plaintext of ``claims``, built independently of the codec."""
    fields = [claims.aud, claims.target, claims.args_digest, claims.principal or "", claims.hold_id]
    ends, at = [], 0
    for value in fields:
        at += len(value)
        ends.append(at)
    text = ("".join(fields) + claims.owner).encode("utf-8", "surrogatepass")
    fixed = struct.pack(">BQQIH5H", V2_METHODS[claims.method], claims.iat, claims.exp, claims.round, len(text), *ends)
    if not claims.extra:
        return fixed + text
    try:
        return fixed + text + orjson.dumps(dict(claims.extra))
    except TypeError:  # what orjson refuses: the standard library's ASCII JSON, flagged in the method byte
        standard = json.dumps(dict(claims.extra), separators=(",", ":")).encode()
        return bytes((fixed[0] | 0x80,)) + fixed[1:] + text + standard


@pytest.fixture(params=["v2", "v1"])
def any_version_token(request: pytest.FixtureRequest) -> str:
    """A valid token of ``make_claims()`` under OLD: minted by the codec (v2) or as the previous
    release minted it (v1, built from the documented format). Tamper tests run on both."""
    if request.param == "v2":
        return KeyRing([OLD]).seal(make_claims())
    return seal_raw_payload(OLD, v1_plaintext(make_claims()))


# --- round trip -----------------------------------------------------------------------------


def test_sealed_claims_unseal_to_equal_claims() -> None:
    ring = KeyRing([OLD])
    claims = make_claims()
    assert ring.unseal(ring.seal(claims), now=NOW) == claims


def test_every_claim_survives_the_round_trip_including_extra() -> None:
    ring = KeyRing([OLD])
    claims = Claims(
        iat=NOW - 5,
        exp=NOW + 1,
        aud="route.ü-1",
        method="resources/read",
        target="file:///tmp/naïve résumé.txt",
        args_digest=args_digest(None),
        principal=None,
        hold_id="h\u2603",
        round=7,
        owner="pod-10.0.0.7",
        extra={"nested": {"list": [1, 2.5, None, False, "ß"]}, "empty": {}},
    )
    back = ring.unseal(ring.seal(claims), now=NOW)
    assert back.iat == NOW - 5
    assert back.exp == NOW + 1
    assert back.aud == "route.ü-1"
    assert back.method == "resources/read"
    assert back.target == "file:///tmp/naïve résumé.txt"
    assert back.args_digest == args_digest({})
    assert back.principal is None
    assert back.hold_id == "h\u2603"
    assert back.round == 7
    assert back.owner == "pod-10.0.0.7"
    assert back.extra == {"nested": {"list": [1, 2.5, None, False, "ß"]}, "empty": {}}
    assert back == claims


def test_claims_default_to_empty_extra_and_round_trip() -> None:
    ring = KeyRing([OLD])
    claims = Claims(
        iat=NOW,
        exp=NOW + 60,
        aud="r",
        method="prompts/get",
        target="greet",
        args_digest=args_digest({}),
        principal=None,
        hold_id="h",
        round=1,
        owner="o",
    )
    assert claims.extra == {}
    assert ring.unseal(ring.seal(claims), now=NOW) == claims


def test_token_has_v2_prefix_and_strict_base64url_body() -> None:
    # The codec mints version 2 (a binary plaintext, not JSON); the body uses the strict base64url
    # alphabet.
    token = KeyRing([OLD]).seal(make_claims())
    assert token.startswith("v2.")
    body = token[3:]
    assert "=" not in body
    assert set(body) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def test_token_does_not_reveal_the_claims() -> None:
    token = KeyRing([OLD]).seal(make_claims(target="very-secret-tool", hold_id="hold-id-visible?"))
    raw = b64u_decode(token[3:])
    for needle in (b"very-secret-tool", b"hold-id-visible?", b"gateway-0", b"weather"):
        assert needle not in raw
    assert "very-secret-tool" not in token


def test_sealing_the_same_claims_twice_gives_different_tokens() -> None:
    ring = KeyRing([OLD])
    claims = make_claims()
    assert ring.seal(claims) != ring.seal(claims)


def test_token_layout_matches_the_documented_format() -> None:
    # The documented layout is version 2; the key, key id and AAD rules are those of version 1.
    claims = make_claims()
    token = KeyRing([OLD]).seal(claims)
    raw = b64u_decode(token[3:])
    key = HKDF(algorithm=SHA256(), length=32, salt=None, info=b"mrtr-gateway/request-state/v1/aes-256-gcm").derive(OLD)
    kid = hashlib.sha256(b"mrtr-gateway/request-state/v1/kid:" + key).digest()[:4]
    assert raw[:4] == kid
    plaintext = AESGCM(key).decrypt(raw[4:16], raw[16:], b"v2." + kid)
    assert plaintext == v2_plaintext(claims)
    method, iat, exp, round_, size, *ends = struct.unpack_from(">BQQIH5H", plaintext)
    assert (method, iat, exp, round_) == (1, NOW, NOW + 600, 2)
    text = plaintext[33 : 33 + size].decode()
    assert text[ends[3] : ends[4]] == "hold-7f3a"
    assert text[ends[4] :] == "gateway-0"
    assert json.loads(plaintext[33 + size :]) == claims.extra
    assert b" " not in plaintext[33 + size :]


# --- tampering and strict parsing -------------------------------------------------------------


def test_flipping_any_byte_of_the_sealed_blob_is_refused(any_version_token: str) -> None:
    ring = KeyRing([OLD])
    prefix, raw = any_version_token[:3], b64u_decode(any_version_token[3:])
    assert ring.unseal(any_version_token, now=NOW) == make_claims()
    for position in range(len(raw)):
        for bit in (0x01, 0x80):
            tampered = bytearray(raw)
            tampered[position] ^= bit
            with pytest.raises(StateError) as info:
                ring.unseal(prefix + b64u(bytes(tampered)), now=NOW)
            expected = "unknown_key" if position < 4 else "decrypt_failed"
            assert info.value.reason == expected, position


def test_truncated_or_extended_blob_is_refused(any_version_token: str) -> None:
    ring = KeyRing([OLD])
    prefix, raw = any_version_token[:3], b64u_decode(any_version_token[3:])
    for cut in range(32, len(raw)):
        assert reason_of(ring, prefix + b64u(raw[:cut])) == "decrypt_failed", cut
    for cut in range(1, 32):
        assert reason_of(ring, prefix + b64u(raw[:cut])) == "malformed", cut
    for extension in (b"\x00", b"\x00" * 16, os.urandom(1), raw[-16:]):
        assert reason_of(ring, prefix + b64u(raw + extension)) == "decrypt_failed"
    assert reason_of(ring, prefix) == "malformed"


def test_a_token_moved_to_the_other_version_is_refused() -> None:
    """The version prefix is under the tag: a v2 body read as v1 (or the reverse) never decrypts."""
    ring = KeyRing([OLD])
    v2 = ring.seal(make_claims())
    v1 = seal_raw_payload(OLD, v1_plaintext(make_claims()))
    assert reason_of(ring, "v1." + v2[3:]) == "decrypt_failed"
    assert reason_of(ring, "v2." + v1[3:]) == "decrypt_failed"


@pytest.mark.parametrize("prefix", ["v1.", "V2.", "w2.", "v2_", "v2-", "2.", ".v2.", "v22.", "v3."])
def test_flipped_prefix_is_refused(prefix: str) -> None:
    ring = KeyRing([OLD])
    token = ring.seal(make_claims())
    with pytest.raises(StateError):
        ring.unseal(prefix + token[3:], now=NOW)


@pytest.mark.parametrize("prefix", ["v0.", "v3.", "v10.", "v01.", "v02.", "v9."])
def test_other_version_prefix_is_bad_version(prefix: str) -> None:
    # "v2." left this list when version 2 became the format the codec mints (issue 10).
    ring = KeyRing([OLD])
    token = ring.seal(make_claims())
    assert reason_of(ring, prefix + token[3:]) == "bad_version"


@pytest.mark.parametrize("token", ["", "hello", "V1.abcd", "v1", "eyJhbGciOiJub25lIn0.e30."])
def test_token_without_version_prefix_is_malformed(token: str) -> None:
    assert reason_of(KeyRing([OLD]), token) == "malformed"


def test_padded_token_is_malformed(any_version_token: str) -> None:
    ring = KeyRing([OLD])
    token = any_version_token
    padded = token + "=" * (-len(token[3:]) % 4 or 4)
    assert reason_of(ring, padded) == "malformed"
    assert reason_of(ring, token + "==") == "malformed"


@pytest.mark.parametrize("bad", ["+", "/", "!", "*", ".", "é", "\u0660", "\x00"])
def test_non_urlsafe_character_is_malformed(bad: str, any_version_token: str) -> None:
    ring = KeyRing([OLD])
    token = any_version_token
    middle = len(token) // 2
    assert reason_of(ring, token[:middle] + bad + token[middle + 1 :]) == "malformed"


@pytest.mark.parametrize("where", ["leading", "trailing", "newline", "inner", "tab"])
def test_whitespace_anywhere_is_malformed(where: str, any_version_token: str) -> None:
    ring = KeyRing([OLD])
    token = any_version_token
    middle = len(token) // 2
    variants = {
        "leading": " " + token,
        "trailing": token + "\n",
        "newline": token[:middle] + "\n" + token[middle:],
        "inner": token[:middle] + " " + token[middle:],
        "tab": token[:3] + "\t" + token[3:],
    }
    assert reason_of(ring, variants[where]) == "malformed"


@pytest.mark.parametrize("version", ["v2", "v1"])
def test_non_canonical_trailing_bits_are_malformed(version: str) -> None:
    ring = KeyRing([OLD])
    remainders = set()
    for hold_id in ("h", "hh", "hhh"):  # three blob lengths: every remainder mod 3
        claims = make_claims(hold_id=hold_id)
        token = ring.seal(claims) if version == "v2" else seal_raw_payload(OLD, v1_plaintext(claims))
        body = token[3:]
        if len(body) % 4 == 0:
            continue
        remainders.add(len(body) % 4)
        assert len(body) % 4 in (2, 3), "the sealed blob length leaves unused trailing bits"
        alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
        last = alphabet.index(body[-1])
        for sloppy_bits in range(1, 16 if len(body) % 4 == 2 else 4):
            sloppy = body[:-1] + alphabet[last | sloppy_bits]
            assert b64u_decode(sloppy) == b64u_decode(body)
            assert reason_of(ring, token[:3] + sloppy) == "malformed"
        assert ring.unseal(token, now=NOW) == claims
    assert remainders == {2, 3}


def test_impossible_base64_length_is_malformed(any_version_token: str) -> None:
    ring = KeyRing([OLD])
    token = any_version_token
    body = token[3:]
    cut = body[: len(body) - (len(body) - 1) % 4]
    assert len(cut) % 4 == 1
    assert reason_of(ring, token[:3] + cut) == "malformed"


@pytest.mark.parametrize("token", [None, 42, 1.5, b"v1.abc", ["v1.abc"], {"v": 1}, True])
def test_non_string_token_is_malformed(token: object) -> None:
    assert reason_of(KeyRing([OLD]), token) == "malformed"


def test_oversized_token_is_malformed() -> None:
    ring = KeyRing([OLD])
    assert reason_of(ring, "v1." + "A" * MAX_TOKEN_LENGTH) == "malformed"
    assert reason_of(ring, "v2." + "A" * MAX_TOKEN_LENGTH) == "malformed"
    assert reason_of(ring, "v3." + "A" * MAX_TOKEN_LENGTH) == "malformed"


def test_the_length_cap_is_checked_before_any_decoding(monkeypatch: pytest.MonkeyPatch) -> None:
    """An oversized token costs a len() and nothing else: no base64, no AES, and so no parsing (a
    plaintext exists only after both)."""
    import binascii

    def forbidden(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("decoding work on an oversized token")

    ring = KeyRing([OLD])
    token = ring.seal(make_claims(extra={"blob": "a" * 10_000}))
    monkeypatch.setattr(binascii, "a2b_base64", forbidden)
    monkeypatch.setattr(AESGCM, "decrypt", forbidden)
    for version in ("v1.", "v2."):
        assert reason_of(ring, version + token[3:] + "A" * (MAX_TOKEN_LENGTH - len(token) + 1)) == "malformed"


# --- keys and rotation ------------------------------------------------------------------------


def test_token_from_an_unrelated_ring_is_unknown_key() -> None:
    token = KeyRing([OTHER]).seal(make_claims())
    assert reason_of(KeyRing([OLD]), token) == "unknown_key"


def test_ring_listing_the_old_secret_unseals_tokens_it_sealed() -> None:
    claims = make_claims()
    token = KeyRing([OLD]).seal(claims)
    assert KeyRing([NEW, OLD]).unseal(token, now=NOW) == claims


def test_ring_without_the_old_secret_refuses_its_tokens_as_unknown_key() -> None:
    token = KeyRing([OLD]).seal(make_claims())
    assert reason_of(KeyRing([NEW]), token) == "unknown_key"


def test_first_secret_of_the_ring_seals() -> None:
    claims = make_claims()
    token = KeyRing([NEW, OLD]).seal(claims)
    assert KeyRing([NEW]).unseal(token, now=NOW) == claims
    assert reason_of(KeyRing([OLD]), token) == "unknown_key"


def test_kid_is_bound_into_the_associated_data(any_version_token: str) -> None:
    """Re-labelling a token with another ring key's id does not let it decrypt under that key."""
    ring = KeyRing([NEW, OLD])
    raw = b64u_decode(any_version_token[3:])
    new_kid = b64u_decode(KeyRing([NEW]).seal(make_claims())[3:])[:4]
    assert reason_of(ring, any_version_token[:3] + b64u(new_kid + raw[4:])) == "decrypt_failed"
    assert ring.unseal(any_version_token, now=NOW) == make_claims()


def test_short_secret_is_refused_with_an_actionable_message() -> None:
    with pytest.raises(ValueError, match="32 bytes") as info:
        KeyRing([b"x" * 31])
    assert "mrtr-gateway gen-key" in str(info.value)
    with pytest.raises(ValueError, match="secret #1"):
        KeyRing([OLD, b"short"])


def test_empty_ring_is_refused_with_an_actionable_message() -> None:
    with pytest.raises(ValueError, match="mrtr-gateway gen-key"):
        KeyRing([])


def test_secret_of_exactly_32_bytes_is_accepted() -> None:
    ring = KeyRing([b"k" * 32])
    assert ring.unseal(ring.seal(make_claims()), now=NOW) == make_claims()


@pytest.mark.parametrize("secrets", [[OLD.decode()], [32], OLD, OLD.decode()])
def test_non_bytes_secrets_are_a_type_error(secrets: Any) -> None:
    with pytest.raises(TypeError):
        KeyRing(secrets)


def test_duplicate_secret_is_refused() -> None:
    with pytest.raises(ValueError, match="duplicate"):
        KeyRing([OLD, NEW, OLD])


def test_ring_repr_does_not_reveal_secrets() -> None:
    text = repr(KeyRing([OLD, NEW]))
    assert "old-secret" not in text
    assert "new-secret" not in text


def test_generated_secret_is_32_random_bytes_in_base64url_and_usable() -> None:
    secret = generate_secret()
    assert len(secret) == 43
    assert len(b64u_decode(secret)) == 32
    assert b64u(b64u_decode(secret)) == secret
    ring = KeyRing([secret.encode()])
    assert ring.unseal(ring.seal(make_claims()), now=NOW) == make_claims()
    assert generate_secret() != secret


# --- time -------------------------------------------------------------------------------------


def test_token_is_valid_until_just_before_exp() -> None:
    ring = KeyRing([OLD])
    token = ring.seal(make_claims(exp=NOW + 10))
    assert ring.unseal(token, now=NOW + 9.999).exp == NOW + 10


def test_token_at_or_after_exp_is_expired() -> None:
    ring = KeyRing([OLD])
    token = ring.seal(make_claims(exp=NOW + 10))
    assert reason_of(ring, token, now=NOW + 10) == "expired"
    assert reason_of(ring, token, now=NOW + 10_000) == "expired"


def test_nan_clock_fails_closed() -> None:
    ring = KeyRing([OLD])
    assert reason_of(ring, ring.seal(make_claims()), now=math.nan) == "expired"


def test_iat_within_60_seconds_of_future_skew_is_accepted() -> None:
    ring = KeyRing([OLD])
    token = ring.seal(make_claims(iat=NOW + 60, exp=NOW + 600))
    assert ring.unseal(token, now=NOW).iat == NOW + 60


def test_iat_beyond_60_seconds_in_the_future_is_not_yet_valid() -> None:
    ring = KeyRing([OLD])
    token = ring.seal(make_claims(iat=NOW + 61, exp=NOW + 600))
    assert reason_of(ring, token) == "not_yet_valid"


def test_unseal_defaults_to_the_wall_clock() -> None:
    ring = KeyRing([OLD])
    stale = ring.seal(make_claims(iat=1_000, exp=2_000))
    with pytest.raises(StateError) as info:
        ring.unseal(stale)
    assert info.value.reason == "expired"


# --- claim shape ------------------------------------------------------------------------------


def _good_wire() -> dict[str, Any]:
    return {
        "iat": NOW,
        "exp": NOW + 60,
        "aud": "r",
        "m": "tools/call",
        "t": "x",
        "a": "d",
        "p": None,
        "h": "h",
        "r": 1,
        "o": "o",
        "x": {},
    }


def test_hand_built_token_with_good_claims_unseals() -> None:
    token = seal_raw_payload(OLD, json.dumps(_good_wire()).encode())
    assert KeyRing([OLD]).unseal(token, now=NOW).hold_id == "h"


@pytest.mark.parametrize(
    "mutation",
    [
        {"iat": True},
        {"iat": 1.5},
        {"iat": "1"},
        {"iat": -1},
        {"exp": NOW},
        {"exp": None},
        {"aud": ""},
        {"aud": 1},
        {"m": "tools/list"},
        {"t": None},
        {"a": ""},
        {"p": ""},
        {"p": 5},
        {"h": ""},
        {"r": 0},
        {"r": False},
        {"o": []},
        {"x": []},
        {"x": None},
        {"extra_key": 1},
    ],
)
def test_authentic_payload_with_bad_claim_shape_is_bad_claims(mutation: dict[str, Any]) -> None:
    token = seal_raw_payload(OLD, json.dumps({**_good_wire(), **mutation}).encode())
    assert reason_of(KeyRing([OLD]), token) == "bad_claims"


@pytest.mark.parametrize("missing", ["iat", "exp", "aud", "m", "t", "a", "p", "h", "r", "o", "x"])
def test_authentic_payload_missing_a_claim_is_bad_claims(missing: str) -> None:
    wire = _good_wire()
    del wire[missing]
    assert reason_of(KeyRing([OLD]), seal_raw_payload(OLD, json.dumps(wire).encode())) == "bad_claims"


@pytest.mark.parametrize("payload", [b"", b"not json", b"[1,2]", b"null", b"\xff\xfe"])
def test_authentic_payload_that_is_not_a_claims_object_is_bad_claims(payload: bytes) -> None:
    assert reason_of(KeyRing([OLD]), seal_raw_payload(OLD, payload)) == "bad_claims"


@pytest.mark.parametrize(
    "overrides",
    UNSEALABLE,
)
def test_seal_refuses_claims_that_would_not_unseal_equal(overrides: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="refusing to seal"):
        KeyRing([OLD]).seal(make_claims(**overrides))


def test_seal_refuses_a_token_over_the_length_limit() -> None:
    with pytest.raises(ValueError, match="limit"):
        KeyRing([OLD]).seal(make_claims(extra={"blob": "a" * MAX_TOKEN_LENGTH}))


def test_seal_accepts_any_mapping_as_extra() -> None:
    ring = KeyRing([OLD])
    back = ring.unseal(ring.seal(make_claims(extra=MappingProxyType({"k": [1]}))), now=NOW)
    assert back.extra == {"k": [1]}


# --- version 2 plaintext ---------------------------------------------------------------------


def test_hand_built_v2_token_with_good_claims_unseals() -> None:
    claims = make_claims(principal=None, extra={})
    assert KeyRing([OLD]).unseal(seal_raw_payload(OLD, v2_plaintext(claims), "v2."), now=NOW) == claims


def _v2(
    method: int = 1,
    iat: int = NOW,
    exp: int = NOW + 60,
    round_: int = 1,
    size: int | None = None,
    ends: tuple[int, int, int, int, int] = (1, 2, 3, 3, 4),
    text: bytes = b"atdho",
    extra: bytes = b"",
) -> bytes:
    """A version-2 plaintext from raw field values (good ones by default: aud a, target t, digest d,
    no principal, hold h, owner o)."""
    fixed = struct.pack(">BQQIH5H", method, iat, exp, round_, len(text) if size is None else size, *ends)
    return fixed + text + extra


def test_the_raw_v2_builder_makes_a_good_plaintext() -> None:
    claims = KeyRing([OLD]).unseal(seal_raw_payload(OLD, _v2(), "v2."), now=NOW)
    assert (claims.aud, claims.target, claims.args_digest, claims.principal) == ("a", "t", "d", None)
    assert (claims.hold_id, claims.owner, claims.round, claims.extra) == ("h", "o", 1, {})
    with_principal = KeyRing([OLD]).unseal(
        seal_raw_payload(OLD, _v2(ends=(1, 2, 3, 4, 5), text=b"atdpho"), "v2."), now=NOW
    )
    assert with_principal.principal == "p"


@pytest.mark.parametrize(
    "payload",
    [
        _v2(method=0),
        _v2(method=4),
        _v2(method=255),
        _v2(exp=NOW),
        _v2(exp=NOW - 1),
        _v2(round_=0),
        _v2(ends=(0, 2, 3, 3, 4)),  # empty aud
        _v2(ends=(1, 2, 2, 2, 3)),  # empty args_digest
        _v2(ends=(1, 2, 3, 3, 3)),  # empty hold_id
        _v2(ends=(1, 2, 3, 3, 5)),  # empty owner
        _v2(ends=(1, 2, 3, 3, 6)),  # hold_id past the end of the text
        _v2(ends=(2, 1, 3, 3, 4)),  # ends out of order
        _v2(ends=(1, 2, 3, 2, 4)),  # principal ends before it starts
        _v2(size=6),  # text longer than the plaintext
        _v2(size=4),  # owner cut off (the last byte reads as extra)
        _v2(text=b"atdh\xff"),  # not UTF-8
        _v2(text=b"atdh\xc3"),  # a cut UTF-8 sequence
        _v2(extra=b"{}"),  # an explicit empty extra: a second spelling of no extra
        _v2(extra=b"[1]"),
        _v2(extra=b"null"),
        _v2(extra=b"not json"),
        _v2(extra=b'{"k":1'),
        _v2(extra=b"\x00"),
        _v2(method=0x81, extra='{"k":"é"}'.encode()),  # the standard library's extra is ASCII JSON
        _v2(extra=b'{"k":"\xff"}'),  # orjson's extra is UTF-8
        _v2(extra=b'{"k":NaN}'),
        _v2(method=0x81, extra=b'{"k":NaN}'),
        _v2(method=0x81, extra=b'{"k":1}'),  # flagged, but orjson writes it: a second spelling
        _v2(method=0x80),
        _v2(method=0x84),
        _v2(method=0x41),
        _v2()[:32],  # shorter than the fixed part
        b"",
    ],
)
def test_authentic_v2_plaintext_breaking_a_rule_is_bad_claims(payload: bytes) -> None:
    assert reason_of(KeyRing([OLD]), seal_raw_payload(OLD, payload, "v2.")) == "bad_claims"


def test_v1_json_plaintext_under_a_v2_prefix_is_bad_claims() -> None:
    assert reason_of(KeyRing([OLD]), seal_raw_payload(OLD, v1_plaintext(make_claims()), "v2.")) == "bad_claims"


def test_v2_plaintext_under_a_v1_prefix_is_bad_claims() -> None:
    assert reason_of(KeyRing([OLD]), seal_raw_payload(OLD, v2_plaintext(make_claims()), "v1.")) == "bad_claims"


def test_every_single_byte_change_of_an_authentic_v2_plaintext_is_refused_or_changes_the_claims() -> None:
    """Even a key holder's bit flip never crashes the parser or comes back as the same claims."""
    ring = KeyRing([OLD])
    claims = make_claims()
    plaintext = v2_plaintext(claims)
    for position in range(len(plaintext)):
        for bit in (0x01, 0x80):
            mutated = bytearray(plaintext)
            mutated[position] ^= bit
            back = outcome(ring, seal_raw_payload(OLD, bytes(mutated), "v2."))
            assert back in {"bad_claims", "expired", "not_yet_valid"} if isinstance(back, str) else back != claims


def test_every_truncation_and_extension_of_an_authentic_v2_plaintext_is_refused_or_changes_the_claims() -> None:
    ring = KeyRing([OLD])
    claims = make_claims()
    plaintext = v2_plaintext(claims)
    for cut in range(len(plaintext)):
        back = outcome(ring, seal_raw_payload(OLD, plaintext[:cut], "v2."))
        assert back == "bad_claims" if isinstance(back, str) else back != claims
    for extension in (b"\x00", b"{}", b"}", b'{"k":1}', b"\xff"):
        assert reason_of(ring, seal_raw_payload(OLD, plaintext + extension, "v2.")) == "bad_claims"


@pytest.mark.parametrize(
    "overrides",
    [
        {"iat": -1},
        {"iat": 2**64},
        {"exp": 2**64},
        {"round": 2**32},
        {"round": 1.0},
        {"exp": NOW + 0.5},
        {"method": ["tools/call"]},
        {"aud": None},
        {"aud": b"route"},
        {"target": 5},
        {"args_digest": ""},
        {"owner": None},
        {"principal": b"tag"},
        {"target": "t" * 70_000},
        {"extra": {"t": [(1, 2)]}},
        {"extra": {"f": float("inf")}},
    ],
)
def test_seal_refuses_claims_that_do_not_fit_the_v2_layout(overrides: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="refusing to seal"):
        KeyRing([OLD]).seal(make_claims(**overrides))


@pytest.mark.parametrize(
    "overrides",
    [
        {"target": ""},
        {"target": "a\x00b"},
        {"aud": "\x00", "hold_id": "\x00\x00", "owner": "\x00"},
        {"target": "lone \udc80 surrogate", "hold_id": "pair \ud83d\ude00 of surrogates"},
        {"target": "astral 😀 and ☃", "owner": "ü"},
        {"principal": None, "extra": {}},
        {"iat": 0, "exp": 2**64 - 1, "round": 2**32 - 1},
        {"target": "t" * 10_000},
        {"extra": {"": None, "\udc80": "\ud800"}},
    ],
)
def test_edge_claims_round_trip_through_v2(overrides: dict[str, Any]) -> None:
    ring = KeyRing([OLD])
    claims = make_claims(**overrides)
    token = ring.seal(claims)
    assert token.startswith("v2.")
    assert ring.unseal(token, now=NOW) == claims
    assert open_raw_payload(OLD, token) == v2_plaintext(claims)


@pytest.mark.parametrize(
    ("extra", "standard"),
    [
        ({"boot": "b00t", "until": NOW + 900}, False),
        ({"owner_url": "http://10.0.0.7:8080/mcp", "log": [{"k": "v", "n": 1.5, "ok": True, "z": None}]}, False),
        ({"text": "naïve ☃ 😀", "big": 2**63 - 1, "neg": -(2**63), "u": 2**64 - 1}, False),
        ({"big": 2**64}, True),
        ({"huge": -(10**30), "f": 1e300}, True),
        ({"lone": "\udc80"}, True),
        ({"\ud800": ["nested", {"deep": "\udfff"}]}, True),
        ({"deep": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}, False),
    ],
)
def test_extra_round_trips_exactly_through_either_json(extra: dict[str, Any], standard: bool) -> None:
    """orjson writes extra; what it refuses the standard library writes, flagged, and each is read
    back by the decoder that reads it exactly (no big integer turns into a float)."""
    ring = KeyRing([OLD])
    claims = make_claims(extra=extra)
    token = ring.seal(claims)
    back = ring.unseal(token, now=NOW)
    assert back == claims
    assert json.dumps(back.extra, sort_keys=True) == json.dumps(extra, sort_keys=True)
    plaintext = open_raw_payload(OLD, token)
    assert plaintext == v2_plaintext(claims)
    assert bool(plaintext[0] & 0x80) is standard


def test_v2_tokens_are_shorter_than_v1_tokens_of_the_same_claims() -> None:
    claims = make_claims()
    assert len(KeyRing([OLD]).seal(claims)) < len(seal_raw_payload(OLD, v1_plaintext(claims)))


# --- rolling upgrade from version 1 --------------------------------------------------------------

# Sealed by the previous release (the v1-only codec) with OLD: what a replica not yet upgraded
# hands to a client in the middle of a rolling upgrade.
GOLDEN_V1_TOKEN = (
    "v1.mkn-OwAdFyeTUeoDaPoB6EPuxdxR-ipANMYR9zsZeyco-GM0nz1EpNqieswFL586CaSd7y7MxGkZsXD0FdTkgsE74hC_5lpwWGWXaV7wWa7K"
    "w5Ajbwm5TyQfbZBLXV-sASemnsGnRdc7aBfXSKIOn0fOaonlJjvQ69KmzuMewHSDHQ9WMPALOxOnJ6gvl9VPl1fzcCFiYEqPWqRdvSzc6aWwoSZg"
    "ev_QKFquq3n4Gh8E9oscSVZSD7nFKIZaYQsY6BY7DLmvV9NQAz8gpbjxnUPR-bKiX9kqPv_PrljwDcAMLUs7AROxqzVD0UbJF2C0RrC1ErUGkBD7"
    "xrw7_Zn1-NJxCNs8m2LuSd8UeKSPt3QmEg"
)
GOLDEN_V1_CLAIMS = Claims(
    iat=1_800_000_000,
    exp=1_800_000_600,
    aud="weather",
    method="tools/call",
    target="get_forecast ☃",
    args_digest="q2-7w3q2-7w3q2-7w3q2w",
    principal="tag-abcdef",
    hold_id="hold-7f3a",
    round=2,
    owner="gateway-0",
    extra={"boot": "b00t", "until": 1_800_000_900, "log": [{"k": "v", "n": 1.5}]},
)


def test_a_token_the_previous_release_sealed_unseals_to_equal_claims() -> None:
    """An old replica seals (v1), a new one unseals: a call held across the upgrade goes on."""
    assert KeyRing([OLD]).unseal(GOLDEN_V1_TOKEN, now=NOW) == GOLDEN_V1_CLAIMS
    assert KeyRing([NEW, OLD]).unseal(GOLDEN_V1_TOKEN, now=NOW) == GOLDEN_V1_CLAIMS


def test_the_next_round_of_a_call_held_across_the_upgrade_is_sealed_as_v2() -> None:
    ring = KeyRing([OLD])
    claims = ring.unseal(GOLDEN_V1_TOKEN, now=NOW)
    following = ring.seal(replace(claims, round=claims.round + 1))
    assert following.startswith("v2.")
    assert ring.unseal(following, now=NOW) == replace(GOLDEN_V1_CLAIMS, round=3)


def test_v1_tokens_keep_every_check_they_had() -> None:
    ring = KeyRing([OLD])
    assert reason_of(ring, GOLDEN_V1_TOKEN, now=NOW + 600) == "expired"
    assert reason_of(ring, GOLDEN_V1_TOKEN, now=NOW - 61) == "not_yet_valid"
    assert reason_of(KeyRing([NEW]), GOLDEN_V1_TOKEN) == "unknown_key"
    claims = ring.unseal(GOLDEN_V1_TOKEN, now=NOW)
    with pytest.raises(StateError) as info:
        check_bindings(claims, **{**_matching(claims), "target": "get_forecast"})
    assert info.value.reason == "target"


def test_v1_tokens_of_any_claims_unseal_equal() -> None:
    ring = KeyRing([OLD])
    for claims in (make_claims(), make_claims(principal=None, extra={}), make_claims(target="lone \udc80")):
        assert ring.unseal(seal_raw_payload(OLD, v1_plaintext(claims)), now=NOW) == claims


# --- the claims object --------------------------------------------------------------------------


def test_unsealed_claims_are_a_frozen_claims_dataclass_like_constructed_ones() -> None:
    ring = KeyRing([OLD])
    for token in (ring.seal(make_claims()), seal_raw_payload(OLD, v1_plaintext(make_claims()))):
        back = ring.unseal(token, now=NOW)
        assert type(back) is Claims
        assert back == make_claims()
        assert repr(back) == repr(make_claims())
        assert not hasattr(back, "__dict__")
        with pytest.raises(FrozenInstanceError):
            back.round = 3  # type: ignore[misc]
        assert replace(back, round=3).round == 3


def test_constructed_claims_are_frozen_too() -> None:
    claims = make_claims()
    with pytest.raises(FrozenInstanceError):
        claims.hold_id = "other"  # type: ignore[misc]
    assert not hasattr(claims, "__dict__")


# --- bindings ---------------------------------------------------------------------------------


def _matching(claims: Claims) -> dict[str, Any]:
    return {
        "aud": claims.aud,
        "method": claims.method,
        "target": claims.target,
        "args_digest": claims.args_digest,
        "principal": claims.principal,
    }


def test_bindings_of_the_minting_request_pass() -> None:
    claims = make_claims(target="naïve-tool ☃")
    check_bindings(claims, **_matching(claims))


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("aud", "other-route", "audience"),
        ("method", "prompts/get", "method"),
        ("target", "get_forecast2", "target"),
        ("target", "gét_forecast", "target"),
        ("args_digest", args_digest({"city": "Paris", "days": 4}), "arguments"),
        ("principal", principal_tag("Bearer other", KeyRing([OLD]).salt), "principal"),
    ],
)
def test_each_binding_mismatch_reports_its_reason(field: str, value: str, reason: str) -> None:
    claims = make_claims()
    with pytest.raises(StateError) as info:
        check_bindings(claims, **{**_matching(claims), field: value})
    assert info.value.reason == reason


def test_first_mismatch_in_order_is_reported() -> None:
    claims = make_claims()
    wrong = {"aud": "x", "method": "x", "target": "x", "args_digest": "x", "principal": "x"}
    with pytest.raises(StateError) as info:
        check_bindings(claims, **wrong)
    assert info.value.reason == "audience"


def test_state_sealed_without_principal_refuses_a_caller_with_one() -> None:
    claims = make_claims(principal=None)
    with pytest.raises(StateError) as info:
        check_bindings(claims, **{**_matching(claims), "principal": principal_tag("tok", b"s" * 32)})
    assert info.value.reason == "principal"


def test_state_sealed_with_principal_refuses_a_caller_without_one() -> None:
    claims = make_claims()
    assert claims.principal is not None
    with pytest.raises(StateError) as info:
        check_bindings(claims, **{**_matching(claims), "principal": None})
    assert info.value.reason == "principal"


def test_state_sealed_without_principal_accepts_a_caller_without_one() -> None:
    claims = make_claims(principal=None)
    check_bindings(claims, **{**_matching(claims), "principal": None})


# --- digests ----------------------------------------------------------------------------------


def test_args_digest_ignores_dict_key_order() -> None:
    first = {"b": 1, "a": {"y": [1, 2], "x": "é"}}
    second = {"a": {"x": "é", "y": [1, 2]}, "b": 1}
    assert args_digest(first) == args_digest(second)


def test_args_digest_differs_for_different_values() -> None:
    assert args_digest({"a": 1}) != args_digest({"a": 2})
    assert args_digest({"a": 1}) != args_digest({"a": "1"})
    assert args_digest({"a": [1, 2]}) != args_digest({"a": [2, 1]})
    assert args_digest({"a": 1}) != args_digest({"b": 1})


def test_args_digest_of_none_equals_empty_arguments() -> None:
    assert args_digest(None) == args_digest({})


def test_args_digest_is_16_bytes_of_sha256_over_canonical_json() -> None:
    arguments = {"z": "ü", "a": 1}
    canonical = '{"a":1,"z":"ü"}'.encode()
    expected = b64u(hashlib.sha256(canonical).digest()[:16])
    assert args_digest(arguments) == expected
    assert len(expected) == 22


def test_args_digest_tolerates_lone_surrogates() -> None:
    assert args_digest({"s": "\udc80"}) != args_digest({"s": "\udc81"})


def test_principal_tag_is_none_without_a_credential() -> None:
    assert principal_tag(None, b"s" * 32) is None
    assert principal_tag("", b"s" * 32) is None


def test_principal_tag_differs_per_salt_and_per_credential() -> None:
    tag = principal_tag("Bearer abc", b"a" * 32)
    assert tag is not None
    assert len(tag) == 22
    assert tag == principal_tag("Bearer abc", b"a" * 32)
    assert tag != principal_tag("Bearer abc", b"b" * 32)
    assert tag != principal_tag("Bearer abd", b"a" * 32)


def test_ring_salt_is_stable_for_the_same_first_secret() -> None:
    assert KeyRing([OLD]).salt == KeyRing([OLD, NEW]).salt
    assert KeyRing([OLD]).salt != KeyRing([NEW, OLD]).salt
    assert len(KeyRing([OLD]).salt) == 32


def test_ring_salt_is_not_the_sealing_key_material() -> None:
    key = HKDF(algorithm=SHA256(), length=32, salt=None, info=b"mrtr-gateway/request-state/v1/aes-256-gcm").derive(OLD)
    assert KeyRing([OLD]).salt != key
    assert KeyRing([OLD]).salt != OLD


def test_ring_lists_one_salt_per_secret_so_rotation_can_accept_old_tags() -> None:
    old_ring, new_ring = KeyRing([OLD]), KeyRing([NEW, OLD])
    assert new_ring.salts == (new_ring.salt, old_ring.salt)
    claims = make_claims(principal=principal_tag("Bearer abc", old_ring.salt))
    back = new_ring.unseal(old_ring.seal(claims), now=NOW)
    tags = [principal_tag("Bearer abc", salt) for salt in new_ring.salts]
    assert back.principal in tags


# --- errors -----------------------------------------------------------------------------------


def test_wire_message_is_fixed_and_reasons_stay_out_of_it() -> None:
    assert WIRE_MESSAGE == "Invalid or expired requestState"
    error = StateError("decrypt_failed")
    assert error.reason == "decrypt_failed"
    assert WIRE_MESSAGE not in str(error)
