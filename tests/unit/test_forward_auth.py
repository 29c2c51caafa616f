"""The HMAC that authenticates a retry forwarded between replicas."""

from __future__ import annotations

import pytest

from gateway.replicas.auth import MAX_SKEW, ForwardSigner

OLD = b"o" * 32
NEW = b"n" * 32


def test_a_signature_verifies_for_the_same_path_and_body() -> None:
    signer = ForwardSigner([NEW])
    token = signer.sign("/mcp", b'{"a":1}', now=1000)
    assert signer.verify(token, "/mcp", b'{"a":1}', now=1000)


@pytest.mark.parametrize(("path", "body"), [("/other", b'{"a":1}'), ("/mcp", b'{"a":2}')])
def test_another_path_or_body_is_refused(path: str, body: bytes) -> None:
    signer = ForwardSigner([NEW])
    assert not signer.verify(signer.sign("/mcp", b'{"a":1}', now=1000), path, body, now=1000)


def test_an_old_or_future_signature_is_refused() -> None:
    signer = ForwardSigner([NEW])
    token = signer.sign("/mcp", b"", now=1000)
    assert signer.verify(token, "/mcp", b"", now=1000 + MAX_SKEW)
    assert not signer.verify(token, "/mcp", b"", now=1000 + MAX_SKEW + 1)
    assert not signer.verify(token, "/mcp", b"", now=1000 - MAX_SKEW - 1)


def test_rotation_a_ring_verifies_with_every_key_and_signs_with_the_first() -> None:
    token = ForwardSigner([OLD]).sign("/mcp", b"x", now=5)
    assert ForwardSigner([NEW, OLD]).verify(token, "/mcp", b"x", now=5)
    assert not ForwardSigner([NEW]).verify(token, "/mcp", b"x", now=5)


@pytest.mark.parametrize("token", ["", "v1", "v2.5.abc", "v1.x.abc", "v1.5.!!!", "v1.5", "v1.123456789012345.a"])
def test_malformed_tokens_are_refused(token: str) -> None:
    assert not ForwardSigner([NEW]).verify(token, "/mcp", b"x", now=5)


def test_the_hop_key_is_not_the_sealing_secret() -> None:
    # A token signed with the raw secret (instead of the HKDF-derived hop key) must not verify.
    import base64
    import hashlib
    import hmac

    raw = hmac.new(NEW, b"5\n/mcp\n" + hashlib.sha256(b"x").digest(), hashlib.sha256).digest()
    token = "v1.5." + base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
    assert not ForwardSigner([NEW]).verify(token, "/mcp", b"x", now=5)
