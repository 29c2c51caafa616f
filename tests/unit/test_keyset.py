"""One :class:`KeySet` for every token format the gateway mints.

Each use's keys are derived exactly as they were before there was one set (the goldens below were
minted by the commit before it: a requestState, a cursor, an old client's session id and a hop
signature, which must still open, and which the same inputs must still mint byte for byte), no two
uses share a key, and one :meth:`KeySet.replace` rotates every format at once.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from state_oracle import NEW, NOW, OLD, make_claims

from gateway.frontdoor.legacy_ids import LegacySessionIds
from gateway.keyset import KeySet, Label
from gateway.replicas.auth import ForwardSigner
from gateway.state import codec
from gateway.state.codec import KeyRing, StateError
from gateway.translate.cursors import Cursors, InvalidCursor

START = 12345
"""The nonce run the requestState goldens were sealed from (``restart_nonces(START)``)."""
GOLDEN_V2 = (
    "v2.mkn-OwAAAAAAAAAAAAAwOeXaax8Nwa8iEq-C3h096ImqDFpii8oxsTsEn-fvsPmsEqc6VOIGVkmp97jF2KbslWXZM_lyPB0CzJsypFkF09k"
    "nZIpiIuo13H9HI9fKkt-UJOO_usmwaNqSxeOPHUt7Qy-uxHvfuwtYNXMqyx1RP0-ANkWYM04o2zngOuBRIFVAR2QXGXVhOHZH1jZNJmJC6JlHf"
    "o7Jcg98MmsyxfyMgKILEef01q-YEl5xteD6OhqXhb2jdvgP8eyghUuhJgqM5TI26ny1-nZX-XYwQSq3"
)
"""``KeyRing([OLD]).seal(make_claims())``."""
STDLIB_EXTRA = {"big": 2**64, "s": "\udc80", "t": "é"}
GOLDEN_V2_STDLIB_EXTRA = (
    "v2.9ON0ygAAAAAAAAAAAAAwOeF53vLhhysXKVTzmTJgmrKhrlk_LNHCGG9_S9OFCDWFIBdpEaHxo7Zk4AHrE314qM-CMhF6nV-uWNRUpiRn26g"
    "5kcTmRT343QKHhNgJSOvZkuUIpAoV9L4cExi4iyWbDuW1DBj1spy1ut85STLkVOTDNQZkswSXFSXNSWG9I1MgxUiNYNfwpPWawldthUkKoarD"
    "XwGdKrZlsJtkT9kHfCiwdA"
)
"""``KeyRing([NEW, OLD]).seal(make_claims(extra=STDLIB_EXTRA, principal=None))``: the high bit set."""
GOLDEN_CURSOR = "c1.AiHiqTKzl_M2f71aOtJKPHBhZ2UtMiDimIM"
"""``Cursors([NEW, OLD]).wrap("demo", "tools/list", "page-2 ☃")``."""
GOLDEN_SESSION_ID = (
    "s1.AAECAwQFBgcICQoLmVm6D-Nt_eFfOaEC7yRwarVVXtgrIYpbQzcUWA_5aBAi9lLfMTesuQbgB0dOXDfoMRr-h6-SP9W5QXF"
    "Ce07E5VqCzlnqYS52"
)
"""``LegacySessionIds([NEW, OLD]).open("r", "backend-1", "Bearer a")`` with the nonce ``bytes(range(12))``."""
GOLDEN_HOP = "v2.1800000000.AAECAwQFBgcICQoLDA0ODw.It2Z8hKtpn0OZBFe7stUqMsTJvQGChA2FSi7QAUkwEs"
"""``ForwardSigner([NEW, OLD]).sign(**HOP, now=NOW)`` with the nonce ``bytes(range(16))``."""
HOP: dict[str, Any] = {
    "method": "POST",
    "target": "http://10.0.0.1:8080",
    "path": "/mcp",
    "body": b'{"a":1}',
    "credential": "Bearer u",
}

LABELS = {
    Label.REQUEST_STATE: b"mrtr-gateway/request-state/v1/aes-256-gcm",
    Label.PRINCIPAL_SALT: b"mrtr-gateway/request-state/v1/principal-salt",
    Label.LEGACY_SESSION: b"mrtr-gateway/legacy-session/v1/aes-256-gcm",
    Label.CURSOR: b"mrtr-gateway/cursor/v1/hmac-sha256",
    Label.REPLICA_HOP: b"mrtr-gateway/replica-forward/v2/hmac-sha256",
    Label.TASK_ID: b"mrtr-gateway/task-id/v1/aes-256-gcm",
}
"""Every label ever shipped, as shipped: changing one would change its keys and orphan its tokens."""


@pytest.fixture(autouse=True)
def fresh_nonce_run() -> Iterator[None]:
    yield
    codec.restart_nonces()


@pytest.fixture
def counting_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """``os.urandom`` and ``secrets.token_bytes`` return ``bytes(range(n))``, as when the goldens were made."""
    monkeypatch.setattr(os, "urandom", lambda n: bytes(range(n)))
    monkeypatch.setattr(secrets, "token_bytes", lambda n: bytes(range(n)))


def test_every_shipped_label_is_unchanged_and_each_key_is_hkdf_of_each_secret_under_it() -> None:
    keys = KeySet([NEW, OLD])
    for label, info in LABELS.items():
        assert label.value == info
        expected = tuple(HKDF(algorithm=SHA256(), length=32, salt=None, info=info).derive(s) for s in (NEW, OLD))
        assert keys[label] == expected


def test_no_two_uses_share_a_key() -> None:
    keys = KeySet([OLD])
    derived = [keys[label][0] for label in Label]
    assert len(set(derived)) == len(derived) == len(set(Label))
    assert OLD not in derived


def test_a_v2_state_sealed_before_opens_and_is_sealed_again_byte_for_byte() -> None:
    claims = make_claims()
    assert KeyRing([OLD]).unseal(GOLDEN_V2, now=NOW) == claims
    codec.restart_nonces(START)
    assert KeyRing([OLD]).seal(claims) == GOLDEN_V2


def test_a_v2_state_with_a_standard_library_extra_too() -> None:
    claims = make_claims(extra=STDLIB_EXTRA, principal=None)
    assert KeyRing([OLD, NEW]).unseal(GOLDEN_V2_STDLIB_EXTRA, now=NOW) == claims
    codec.restart_nonces(START)
    assert KeyRing([NEW, OLD]).seal(claims) == GOLDEN_V2_STDLIB_EXTRA
    assert KeyRing([NEW, OLD]).salt.hex() == "08f16c01c39c4941bad4247219a3270fe2093a7b6be7c51cad5a808454f44113"
    assert KeyRing([NEW, OLD]).key_ids == ("f4e374ca", "9a49fe3b")


@pytest.mark.usefixtures("counting_bytes")
def test_a_cursor_a_session_id_and_a_hop_signed_before_open_and_are_minted_again_byte_for_byte() -> None:
    keys = KeySet([NEW, OLD])
    assert Cursors(keys).wrap("demo", "tools/list", "page-2 ☃") == GOLDEN_CURSOR
    assert Cursors(KeySet([OLD, NEW])).unwrap("demo", "tools/list", GOLDEN_CURSOR) == "page-2 ☃"
    assert LegacySessionIds(keys).open("r", "backend-1", "Bearer a") == GOLDEN_SESSION_ID
    assert LegacySessionIds(KeySet([OLD, NEW])).backend_id(GOLDEN_SESSION_ID, "r", "Bearer a") == "backend-1"
    assert ForwardSigner(keys).sign(**HOP, now=NOW) == GOLDEN_HOP
    assert ForwardSigner(KeySet([OLD, NEW])).check(GOLDEN_HOP, **HOP, now=NOW) is None


def test_one_replace_rotates_every_token_format_at_once() -> None:
    """The key reload's recipe on one KeySet: every format seals with the new first secret and
    still opens what the old one sealed; dropping the old secret refuses all of it."""
    keys = KeySet([OLD])
    ring, cursors, session_ids, signer = KeyRing(keys), Cursors(keys), LegacySessionIds(keys), ForwardSigner(keys)
    old = (
        ring.seal(make_claims()),
        cursors.wrap("demo", "tools/list", "p"),
        session_ids.open("r", "b", None),
        signer.sign(**HOP, now=NOW),
    )
    keys.replace([NEW, OLD])
    new_only = KeySet([NEW])
    assert KeyRing(new_only).unseal(ring.seal(make_claims()), now=NOW) == make_claims()
    assert Cursors(new_only).unwrap("demo", "tools/list", cursors.wrap("demo", "tools/list", "p")) == "p"
    assert LegacySessionIds(new_only).backend_id(session_ids.open("r", "b", None), "r", None) == "b"
    assert ForwardSigner(new_only).check(signer.sign(**HOP, now=NOW), **HOP, now=NOW) is None
    assert ring.salt == KeyRing(new_only).salt
    assert ring.unseal(old[0], now=NOW) == make_claims()
    assert cursors.unwrap("demo", "tools/list", old[1]) == "p"
    assert session_ids.backend_id(old[2], "r", None) == "b"
    assert signer.check(old[3], **HOP, now=NOW) is None

    keys.replace([NEW])
    with pytest.raises(StateError, match="unknown_key"):
        ring.unseal(old[0], now=NOW)
    with pytest.raises(InvalidCursor):
        cursors.unwrap("demo", "tools/list", old[1])
    assert session_ids.backend_id(old[2], "r", None) is None
    assert ForwardSigner(keys).check(old[3], **HOP, now=NOW) == "bad_signature"


@pytest.mark.parametrize(
    ("secrets_", "error"),
    [
        ([b"short"], ValueError),
        ([OLD, OLD], ValueError),
        ([], ValueError),
        ([OLD.decode()], TypeError),
        (OLD, TypeError),
    ],
)
def test_a_refused_replace_changes_nothing(secrets_: object, error: type[Exception]) -> None:
    keys = KeySet([OLD])
    before = {label: keys[label] for label in Label}
    with pytest.raises(error):
        keys.replace(secrets_)  # type: ignore[arg-type]
    assert {label: keys[label] for label in Label} == before
    assert KeyRing(keys).unseal(KeyRing([OLD]).seal(make_claims()), now=NOW) == make_claims()
