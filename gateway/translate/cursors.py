"""Pagination cursors the gateway hands out, so an invalid one is recognised (pure functions).

server/utilities/pagination.mdx §Error Handling: "Invalid cursors SHOULD result in an error with
code -32602". A legacy server may not check (FastMCP 1.x ignores a cursor it does not know and
answers the first page), so the gateway checks for it: every ``nextCursor`` it relays is the
backend's cursor wrapped with a MAC bound to the route and the list method, and a cursor the
client sends must open, or the request is refused with -32602 before it reaches the backend.

Format: ``c1.`` + base64url(HMAC-SHA256(key, route "\\n" method "\\n" cursor)[:16] ‖ cursor), in the
one strict spelling of :mod:`gateway.keyset`. The keys are the state keys'
:attr:`~gateway.keyset.Label.CURSOR` keys (neither the sealing key nor the forwarding key), asked
for on every use: the first signs, every one verifies, so a key reload rotates cursors with every
other token format. Cursors are not secret (the backend's own cursor is readable inside), only
authentic.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Final

from gateway.keyset import KeySet, Label, b64url_decode_strict, b64url_nopad

PREFIX: Final = "c1."
MAX_LENGTH: Final = 8192
_TAG: Final = 16


class InvalidCursor(ValueError):
    """The cursor was not issued by this gateway for this route and method."""


class Cursors:
    def __init__(self, keys: KeySet) -> None:
        self._keys = keys

    @staticmethod
    def _tag(key: bytes, route: str, method: str, cursor: bytes) -> bytes:
        return hmac.new(key, f"{route}\n{method}\n".encode() + cursor, hashlib.sha256).digest()[:_TAG]

    def wrap(self, route: str, method: str, cursor: str) -> str:
        raw = cursor.encode()
        return PREFIX + b64url_nopad(self._tag(self._keys[Label.CURSOR][0], route, method, raw) + raw)

    def unwrap(self, route: str, method: str, token: str) -> str:
        """The backend's cursor inside ``token``; :class:`InvalidCursor` when it does not open."""
        if not token.startswith(PREFIX) or len(token) > MAX_LENGTH:
            raise InvalidCursor("not a gateway cursor")
        try:
            blob = b64url_decode_strict(token[len(PREFIX) :])
        except ValueError:
            raise InvalidCursor("not base64url") from None
        tag, raw = blob[:_TAG], blob[_TAG:]
        keys = self._keys[Label.CURSOR]
        if len(tag) != _TAG or not any(hmac.compare_digest(self._tag(k, route, method, raw), tag) for k in keys):
            raise InvalidCursor("bad tag")
        try:
            return raw.decode()
        except UnicodeDecodeError:
            raise InvalidCursor("not UTF-8") from None
