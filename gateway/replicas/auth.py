"""Authentication of the internal forwarding hop between replicas.

Replicas share the state keys, so the hop is authenticated with an HMAC under their
:attr:`~gateway.keyset.Label.REPLICA_HOP` keys (never the sealing key). The header is::

    X-Mrtr-Forwarded: v2.<unix seconds>.<nonce>.<base64url HMAC-SHA256(message)>

    message = "v2" \\n ts \\n nonce \\n METHOD \\n target \\n path \\n sha256(Authorization) sha256(body)

* ``target`` is the base URL the hop is addressed to (the owner's ``advertise_url``); the receiver
  puts its own there, so a hop captured on its way to one replica is refused by every other.
* ``sha256(Authorization)`` binds the client's credential (empty when there is none): the hop cannot
  be re-sent under another principal.
* ``nonce`` is 16 random bytes; a verifier refuses a nonce it has seen, remembering each one for the
  signature's validity window (``MAX_SKEW`` seconds either way) in a bounded memory. When that memory
  is full of live nonces, hops are refused (fail closed) until some expire.
* Decoding is strict: ASCII digits only, exactly one base64url spelling per value (no padding, no
  non-canonical trailing bits), so a token has exactly one accepted form.

The first secret's key signs, every one verifies, asked for on every hop, so a key reload rotates
the hop with every other token format. A forwarded request is never forwarded again, so a
misrouted hop cannot loop. The hop carries clients' requests and credentials: it must
run on a private network or over TLS (an ``https`` advertise URL).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from typing import Final

from gateway.bounded import MemoryFull, OnceMemory
from gateway.keyset import KeySet, Label, b64url_decode_strict, b64url_nopad

FORWARD_HEADER: Final = "X-Mrtr-Forwarded"
MAX_SKEW: Final = 30
NONCE_MEMORY: Final = 100_000
"""Nonces remembered per replica: room for more than 1,600 hops a second over the validity window."""
_TOKEN_RE: Final = re.compile(r"v2\.([0-9]{1,12})\.([A-Za-z0-9_-]{22})\.([A-Za-z0-9_-]{43})", re.ASCII)


def _unb64_strict(text: str) -> bytes | None:
    """The bytes of canonical unpadded base64url ``text``, or None for any other spelling."""
    try:
        return b64url_decode_strict(text)
    except ValueError:
        return None


def _digest(text: str | None) -> bytes:
    return hashlib.sha256((text or "").encode("utf-8", "surrogatepass")).digest()


class ForwardSigner:
    """Signs hops with the first secret; verifies with every secret and refuses a nonce seen before."""

    def __init__(self, keys: KeySet, *, nonce_memory: int = NONCE_MEMORY) -> None:
        self._keys = keys
        self._nonces: OnceMemory[str] = OnceMemory(nonce_memory)

    @staticmethod
    def _message(
        ts: str, nonce: str, method: str, target: str, path: str, credential: str | None, body: bytes
    ) -> bytes:
        head = "\n".join(("v2", ts, nonce, method.upper(), target, path, ""))
        return head.encode("utf-8", "surrogatepass") + _digest(credential) + hashlib.sha256(body).digest()

    def sign(
        self,
        *,
        method: str,
        target: str,
        path: str,
        body: bytes,
        credential: str | None,
        now: float | None = None,
    ) -> str:
        ts = str(int(time.time() if now is None else now))
        nonce = b64url_nopad(secrets.token_bytes(16))
        message = self._message(ts, nonce, method, target, path, credential, body)
        mac = hmac.new(self._keys[Label.REPLICA_HOP][0], message, hashlib.sha256).digest()
        return f"v2.{ts}.{nonce}.{b64url_nopad(mac)}"

    def check(
        self,
        token: str,
        *,
        method: str,
        target: str | None,
        path: str,
        body: bytes,
        credential: str | None,
        now: float | None = None,
    ) -> str | None:
        """None when the hop is authentic and new; otherwise the reason it is refused (for the log)."""
        if target is None:
            return "not_a_forwarding_target"  # this replica advertises no address: nobody forwards to it
        match = _TOKEN_RE.fullmatch(token)
        if match is None:
            return "malformed"
        ts_text, nonce, mac_text = match.groups()
        given = _unb64_strict(mac_text)
        if given is None or _unb64_strict(nonce) is None:
            return "malformed"
        ts = int(ts_text)
        current = time.time() if now is None else now
        if abs(current - ts) > MAX_SKEW:
            return "stale"
        message = self._message(ts_text, nonce, method, target, path, credential, body)
        keys = self._keys[Label.REPLICA_HOP]
        if not any(hmac.compare_digest(hmac.new(k, message, hashlib.sha256).digest(), given) for k in keys):
            return "bad_signature"
        try:
            if not self._nonces.first_use(nonce, ts + MAX_SKEW + 1, now=current):
                return "nonce_reused"
        except MemoryFull:
            return "nonce_memory_full"
        return None
