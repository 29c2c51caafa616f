"""The HMAC that authenticates a retry forwarded between replicas."""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Any

import pytest

from gateway.keyset import KeySet
from gateway.replicas.auth import MAX_SKEW, ForwardSigner

OLD = b"o" * 32
NEW = b"n" * 32
OWNER = "http://10.0.0.1:8080"
HOP: dict[str, Any] = {"method": "POST", "target": OWNER, "path": "/mcp", "body": b'{"a":1}', "credential": "Bearer u"}


def test_a_signature_verifies_once_for_the_same_request() -> None:
    signer = ForwardSigner(KeySet([NEW]))
    token = signer.sign(**HOP, now=1000)
    assert signer.check(token, **HOP, now=1000) is None


def test_a_nonce_seen_before_is_refused_even_with_a_valid_mac() -> None:
    signer = ForwardSigner(KeySet([NEW]))
    token = signer.sign(**HOP, now=1000)
    assert signer.check(token, **HOP, now=1000) is None
    assert signer.check(token, **HOP, now=1001) == "nonce_reused"
    assert signer.check(signer.sign(**HOP, now=1001), **HOP, now=1001) is None, "a fresh nonce is accepted"


def test_the_nonce_memory_is_bounded_and_fails_closed() -> None:
    signer = ForwardSigner(KeySet([NEW]), nonce_memory=2)
    assert signer.check(signer.sign(**HOP, now=1000), **HOP, now=1000) is None
    assert signer.check(signer.sign(**HOP, now=1000), **HOP, now=1000) is None
    assert signer.check(signer.sign(**HOP, now=1000), **HOP, now=1000) == "nonce_memory_full"
    # Once the first nonces are past the validity window they are forgotten and room is made.
    later = 1000 + MAX_SKEW + 1
    assert signer.check(signer.sign(**HOP, now=later), **HOP, now=later) is None


@pytest.mark.parametrize(
    "changed",
    [
        {"path": "/other"},
        {"body": b'{"a":2}'},
        {"method": "PUT"},
        {"credential": "Bearer mallory"},
        {"credential": None},
        {"target": "http://10.0.0.2:8080"},
    ],
)
def test_another_method_path_body_credential_or_target_is_refused(changed: dict[str, Any]) -> None:
    signer = ForwardSigner(KeySet([NEW]))
    token = signer.sign(**HOP, now=1000)
    assert signer.check(token, **{**HOP, **changed}, now=1000) == "bad_signature"


def test_a_replica_without_an_advertised_address_accepts_no_hop() -> None:
    signer = ForwardSigner(KeySet([NEW]))
    token = signer.sign(**HOP, now=1000)
    assert signer.check(token, **{**HOP, "target": None}, now=1000) == "not_a_forwarding_target"


def test_an_old_or_future_signature_is_refused() -> None:
    signer = ForwardSigner(KeySet([NEW]))
    assert signer.check(signer.sign(**HOP, now=1000), **HOP, now=1000 + MAX_SKEW) is None
    assert signer.check(signer.sign(**HOP, now=1000), **HOP, now=1000 + MAX_SKEW + 1) is not None
    assert signer.check(signer.sign(**HOP, now=1000), **HOP, now=1000 - MAX_SKEW - 1) is not None


def test_rotation_a_ring_verifies_with_every_key_and_signs_with_the_first() -> None:
    token = ForwardSigner(KeySet([OLD])).sign(**HOP, now=5)
    assert ForwardSigner(KeySet([NEW, OLD])).check(token, **HOP, now=5) is None
    assert ForwardSigner(KeySet([NEW])).check(token, **HOP, now=5) is not None


def _with_mac_text(token: str, mac_text: str) -> str:
    return token.rsplit(".", 1)[0] + "." + mac_text


def test_mac_decoding_is_strict() -> None:
    signer = ForwardSigner(KeySet([NEW]))
    token = signer.sign(**HOP, now=5)
    mac_text = token.rsplit(".", 1)[1]
    assert signer.check(_with_mac_text(token, mac_text + "="), **HOP, now=5) == "malformed"
    # The last character of 32 bytes in base64url carries two unused bits: set them.
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    last = alphabet.index(mac_text[-1])
    twin = mac_text[:-1] + alphabet[last | 1]
    assert base64.urlsafe_b64decode(twin + "=") == base64.urlsafe_b64decode(mac_text + "="), "same bytes"
    assert signer.check(_with_mac_text(token, twin), **HOP, now=5) == "malformed"
    assert signer.check(token, **HOP, now=5) is None


@pytest.mark.parametrize(
    "token",
    [
        "",
        "v1",
        "v1.5.abc",
        "v2.5.abc",
        "v2.x.AAAAAAAAAAAAAAAAAAAAAA." + "A" * 43,
        "v2.5.!!!.abc",
        "v2.5",
        "v2.1234567890123.AAAAAAAAAAAAAAAAAAAAAA." + "A" * 43,
        "v2.\u00b2\u00b3.AAAAAAAAAAAAAAAAAAAAAA." + "A" * 43,  # superscript digits: str.isdigit() is True
        "v2.\u0661\u0662.AAAAAAAAAAAAAAAAAAAAAA." + "A" * 43,  # Arabic-Indic digits
        "v2.5.AAAAAAAAAAAAAAAAAAAAAA." + "A" * 42 + "\u00e9",
    ],
)
def test_malformed_tokens_are_refused(token: str) -> None:
    assert ForwardSigner(KeySet([NEW])).check(token, **HOP, now=5) == "malformed"


def test_the_hop_key_is_not_the_sealing_secret() -> None:
    # A token signed with the raw secret (instead of the HKDF-derived hop key) must not verify.
    signer = ForwardSigner(KeySet([NEW]))
    token = signer.sign(**HOP, now=5)
    _, ts, nonce, _ = token.split(".")
    message = "\n".join(("v2", ts, nonce, "POST", OWNER, "/mcp", "")).encode()
    message += hashlib.sha256(b"Bearer u").digest() + hashlib.sha256(HOP["body"]).digest()
    raw = hmac.new(NEW, message, hashlib.sha256).digest()
    forged = f"v2.{ts}.{nonce}." + base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
    assert signer.check(forged, **HOP, now=5) == "bad_signature"
