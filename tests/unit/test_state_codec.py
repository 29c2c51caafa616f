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
from dataclasses import replace
from types import MappingProxyType
from typing import Any

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from gateway.state import (
    MAX_TOKEN_LENGTH,
    WIRE_MESSAGE,
    Claims,
    KeyRing,
    StateError,
    args_digest,
    check_bindings,
    generate_secret,
    principal_tag,
)

NOW = 1_800_000_000
OLD = b"old-secret-old-secret-old-secret-0"
NEW = b"new-secret-new-secret-new-secret-1"
OTHER = b"other-secret-other-secret-other-2"


def make_claims(**overrides: Any) -> Claims:
    base = Claims(
        iat=NOW,
        exp=NOW + 600,
        aud="weather",
        method="tools/call",
        target="get_forecast",
        args_digest=args_digest({"city": "Paris", "days": 3}),
        principal=principal_tag("Bearer abc", KeyRing([OLD]).salt),
        hold_id="hold-7f3a",
        round=2,
        owner="gateway-0",
        extra={"urlElicitations": ["e-1", "e-2"], "transcript": [{"k": "v", "n": 1.5, "ok": True}]},
    )
    return replace(base, **overrides)


def b64u(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def b64u_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def reason_of(ring: KeyRing, token: object, now: float = NOW) -> str:
    with pytest.raises(StateError) as info:
        ring.unseal(token, now=now)
    return info.value.reason


def seal_raw_payload(secret: bytes, payload: bytes) -> str:
    """Build a token by hand from the documented format, so tests can feed authentic bad claims."""
    key = HKDF(algorithm=SHA256(), length=32, salt=None, info=b"mrtr-gateway/request-state/v1/aes-256-gcm").derive(
        secret
    )
    kid = hashlib.sha256(b"mrtr-gateway/request-state/v1/kid:" + key).digest()[:4]
    nonce = os.urandom(12)
    return "v1." + b64u(kid + nonce + AESGCM(key).encrypt(nonce, payload, b"v1." + kid))


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


def test_token_has_v1_prefix_and_strict_base64url_body() -> None:
    token = KeyRing([OLD]).seal(make_claims())
    assert token.startswith("v1.")
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
    token = KeyRing([OLD]).seal(make_claims())
    raw = b64u_decode(token[3:])
    key = HKDF(algorithm=SHA256(), length=32, salt=None, info=b"mrtr-gateway/request-state/v1/aes-256-gcm").derive(OLD)
    kid = hashlib.sha256(b"mrtr-gateway/request-state/v1/kid:" + key).digest()[:4]
    assert raw[:4] == kid
    plaintext = AESGCM(key).decrypt(raw[4:16], raw[16:], b"v1." + kid)
    wire = json.loads(plaintext)
    assert set(wire) == {"iat", "exp", "aud", "m", "t", "a", "p", "h", "r", "o", "x"}
    assert wire["m"] == "tools/call"
    assert wire["h"] == "hold-7f3a"
    assert b" " not in plaintext


# --- tampering and strict parsing -------------------------------------------------------------


def test_flipping_any_byte_of_the_sealed_blob_is_refused() -> None:
    ring = KeyRing([OLD])
    raw = b64u_decode(ring.seal(make_claims())[3:])
    for position in range(len(raw)):
        tampered = bytearray(raw)
        tampered[position] ^= 0x01
        with pytest.raises(StateError) as info:
            ring.unseal("v1." + b64u(bytes(tampered)), now=NOW)
        expected = "unknown_key" if position < 4 else "decrypt_failed"
        assert info.value.reason == expected, position


def test_truncated_or_extended_blob_is_refused() -> None:
    ring = KeyRing([OLD])
    raw = b64u_decode(ring.seal(make_claims())[3:])
    assert reason_of(ring, "v1." + b64u(raw[:-1])) == "decrypt_failed"
    assert reason_of(ring, "v1." + b64u(raw + b"\x00")) == "decrypt_failed"
    assert reason_of(ring, "v1." + b64u(raw[:31])) == "malformed"
    assert reason_of(ring, "v1.") == "malformed"


@pytest.mark.parametrize("prefix", ["v2.", "V1.", "w1.", "v1_", "v1-", "1.", ".v1.", "v11."])
def test_flipped_prefix_is_refused(prefix: str) -> None:
    ring = KeyRing([OLD])
    token = ring.seal(make_claims())
    with pytest.raises(StateError):
        ring.unseal(prefix + token[3:], now=NOW)


@pytest.mark.parametrize("prefix", ["v0.", "v2.", "v10.", "v01."])
def test_other_version_prefix_is_bad_version(prefix: str) -> None:
    ring = KeyRing([OLD])
    token = ring.seal(make_claims())
    assert reason_of(ring, prefix + token[3:]) == "bad_version"


@pytest.mark.parametrize("token", ["", "hello", "V1.abcd", "v1", "eyJhbGciOiJub25lIn0.e30."])
def test_token_without_version_prefix_is_malformed(token: str) -> None:
    assert reason_of(KeyRing([OLD]), token) == "malformed"


def test_padded_token_is_malformed() -> None:
    ring = KeyRing([OLD])
    token = ring.seal(make_claims())
    padded = token + "=" * (-len(token[3:]) % 4 or 4)
    assert reason_of(ring, padded) == "malformed"
    assert reason_of(ring, token + "==") == "malformed"


@pytest.mark.parametrize("bad", ["+", "/", "!", "*", ".", "é", "\u0660", "\x00"])
def test_non_urlsafe_character_is_malformed(bad: str) -> None:
    ring = KeyRing([OLD])
    token = ring.seal(make_claims())
    middle = len(token) // 2
    assert reason_of(ring, token[:middle] + bad + token[middle + 1 :]) == "malformed"


@pytest.mark.parametrize("where", ["leading", "trailing", "newline", "inner", "tab"])
def test_whitespace_anywhere_is_malformed(where: str) -> None:
    ring = KeyRing([OLD])
    token = ring.seal(make_claims())
    middle = len(token) // 2
    variants = {
        "leading": " " + token,
        "trailing": token + "\n",
        "newline": token[:middle] + "\n" + token[middle:],
        "inner": token[:middle] + " " + token[middle:],
        "tab": token[:3] + "\t" + token[3:],
    }
    assert reason_of(ring, variants[where]) == "malformed"


def test_non_canonical_trailing_bits_are_malformed() -> None:
    ring = KeyRing([OLD])
    token = ring.seal(make_claims())
    body = token[3:]
    assert len(body) % 4 in (2, 3), "the sealed blob length leaves unused trailing bits"
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    last = alphabet.index(body[-1])
    sloppy = body[:-1] + alphabet[last | 1]
    assert b64u_decode(sloppy) == b64u_decode(body)
    assert reason_of(ring, "v1." + sloppy) == "malformed"


def test_impossible_base64_length_is_malformed() -> None:
    ring = KeyRing([OLD])
    token = ring.seal(make_claims())
    body = token[3:]
    cut = body[: len(body) - (len(body) - 1) % 4]
    assert len(cut) % 4 == 1
    assert reason_of(ring, "v1." + cut) == "malformed"


@pytest.mark.parametrize("token", [None, 42, 1.5, b"v1.abc", ["v1.abc"], {"v": 1}, True])
def test_non_string_token_is_malformed(token: object) -> None:
    assert reason_of(KeyRing([OLD]), token) == "malformed"


def test_oversized_token_is_malformed() -> None:
    ring = KeyRing([OLD])
    assert reason_of(ring, "v1." + "A" * MAX_TOKEN_LENGTH) == "malformed"
    assert reason_of(ring, "v2." + "A" * MAX_TOKEN_LENGTH) == "malformed"


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


def test_kid_is_bound_into_the_associated_data() -> None:
    """Re-labelling a token with another ring key's id does not let it decrypt under that key."""
    ring = KeyRing([NEW, OLD])
    raw = b64u_decode(KeyRing([OLD]).seal(make_claims())[3:])
    new_kid = b64u_decode(KeyRing([NEW]).seal(make_claims())[3:])[:4]
    assert reason_of(ring, "v1." + b64u(new_kid + raw[4:])) == "decrypt_failed"


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
    [
        {"round": 0},
        {"iat": True},
        {"exp": NOW},
        {"method": "tools/list"},
        {"hold_id": ""},
        {"owner": ""},
        {"principal": ""},
        {"extra": {"t": (1, 2)}},
        {"extra": {"s": {1, 2}}},
        {"extra": {1: "int key"}},
        {"extra": {"n": math.nan}},
    ],
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
