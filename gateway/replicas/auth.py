"""Authentication of the internal forwarding hop between replicas.

Replicas share the requestState key ring, so the hop is authenticated with an HMAC keyed from the
same secrets (HKDF, its own label, so the hop key is never the sealing key): ``v1.<unix
seconds>.<base64url HMAC-SHA256(ts "\\n" path "\\n" sha256(body))>``. The first secret signs, every
secret verifies (rotation), and a signature is valid for ``MAX_SKEW`` seconds either way. A
forwarded request is never forwarded again, so a misrouted hop cannot loop.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from collections.abc import Sequence
from typing import Final

from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

FORWARD_HEADER: Final = "X-Mrtr-Forwarded"
MAX_SKEW: Final = 30
_INFO: Final = b"mrtr-gateway/replica-forward/v1/hmac-sha256"


def _derive(secret: bytes) -> bytes:
    return HKDF(algorithm=SHA256(), length=32, salt=None, info=_INFO).derive(secret)


class ForwardSigner:
    def __init__(self, secrets: Sequence[bytes]) -> None:
        if not secrets:
            raise ValueError("at least one secret is needed to sign forwarded requests")
        self._keys = tuple(_derive(s) for s in secrets)

    @staticmethod
    def _message(ts: int, path: str, body: bytes) -> bytes:
        return f"{ts}\n{path}\n".encode() + hashlib.sha256(body).digest()

    def sign(self, path: str, body: bytes, now: float | None = None) -> str:
        ts = int(time.time() if now is None else now)
        mac = hmac.new(self._keys[0], self._message(ts, path, body), hashlib.sha256).digest()
        return f"v1.{ts}.{base64.urlsafe_b64encode(mac).rstrip(b'=').decode()}"

    def verify(self, token: str, path: str, body: bytes, now: float | None = None) -> bool:
        parts = token.split(".")
        if len(parts) != 3 or parts[0] != "v1" or not parts[1].isdigit() or len(parts[1]) > 12:
            return False
        ts = int(parts[1])
        if abs((time.time() if now is None else now) - ts) > MAX_SKEW:
            return False
        try:
            given = base64.urlsafe_b64decode(parts[2] + "=" * (-len(parts[2]) % 4))
        except ValueError:
            return False
        message = self._message(ts, path, body)
        return any(hmac.compare_digest(hmac.new(key, message, hashlib.sha256).digest(), given) for key in self._keys)
