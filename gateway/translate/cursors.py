"""Pagination cursors the gateway hands out, so an invalid one is recognised (pure functions).

server/utilities/pagination.mdx §Error Handling: "Invalid cursors SHOULD result in an error with
code -32602". A legacy server may not check (FastMCP 1.x ignores a cursor it does not know and
answers the first page), so the gateway checks for it: every ``nextCursor`` it relays is the
backend's cursor wrapped with a MAC bound to the route and the list method, and a cursor the
client sends must open, or the request is refused with -32602 before it reaches the backend.

Format: ``c1.`` + base64url(HMAC-SHA256(key, route "\\n" method "\\n" cursor)[:16] ‖ cursor).
Keys are derived from the requestState secrets (HKDF, their own label, so this key is neither the
sealing key nor the forwarding key); the first signs, every one verifies, so a rotation keeps
cursors valid across replicas exactly as it keeps requestState valid. Cursors are not secret
(the backend's own cursor is readable inside), only authentic.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from collections.abc import Sequence
from typing import Final

from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

PREFIX: Final = "c1."
MAX_LENGTH: Final = 8192
_TAG: Final = 16
_INFO: Final = b"mrtr-gateway/cursor/v1/hmac-sha256"
_B64URL: Final = re.compile(r"[A-Za-z0-9_-]*")


class InvalidCursor(ValueError):
    """The cursor was not issued by this gateway for this route and method."""


class Cursors:
    def __init__(self, secrets: Sequence[bytes]) -> None:
        self._keys: tuple[bytes, ...] = ()
        self.rekey(secrets)

    def rekey(self, secrets: Sequence[bytes]) -> None:
        """Sign with the first of ``secrets`` from now on, and open with any of them (key reload)."""
        if not secrets:
            raise ValueError("at least one secret is needed to sign cursors")
        self._keys = tuple(HKDF(algorithm=SHA256(), length=32, salt=None, info=_INFO).derive(s) for s in secrets)

    @staticmethod
    def _tag(key: bytes, route: str, method: str, cursor: bytes) -> bytes:
        return hmac.new(key, f"{route}\n{method}\n".encode() + cursor, hashlib.sha256).digest()[:_TAG]

    def wrap(self, route: str, method: str, cursor: str) -> str:
        raw = cursor.encode()
        blob = self._tag(self._keys[0], route, method, raw) + raw
        return PREFIX + base64.urlsafe_b64encode(blob).rstrip(b"=").decode()

    def unwrap(self, route: str, method: str, token: str) -> str:
        """The backend's cursor inside ``token``; :class:`InvalidCursor` when it does not open."""
        if not token.startswith(PREFIX) or len(token) > MAX_LENGTH:
            raise InvalidCursor("not a gateway cursor")
        body = token[len(PREFIX) :]
        if not _B64URL.fullmatch(body) or len(body) % 4 == 1:
            raise InvalidCursor("not base64url")
        try:
            blob = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        except (binascii.Error, ValueError):
            raise InvalidCursor("not base64url") from None
        tag, raw = blob[:_TAG], blob[_TAG:]
        if len(tag) != _TAG or not any(hmac.compare_digest(self._tag(k, route, method, raw), tag) for k in self._keys):
            raise InvalidCursor("bad tag")
        try:
            return raw.decode()
        except UnicodeDecodeError:
            raise InvalidCursor("not UTF-8") from None
