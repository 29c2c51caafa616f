"""Session ids for old clients: sealed references to backend sessions, stored nowhere.

An old (handshake-era) client passed through to a streamable-HTTP backend gets its own backend
session, but never the backend's id. The id it gets is ``s1.`` + base64url(nonce ‖ AES-256-GCM(backend
session id, credential digest)), with the route name in the associated data, under the state keys'
:attr:`~gateway.keyset.Label.LEGACY_SESSION` keys: the first seals, every one opens, and a key
reload rotates them with every other token format. Nothing is stored, so any replica serves any
session and nothing expires here (the backend's own 404 ends a session and the client
re-initializes); an id only opens on its route, for the credential that opened it.

It lives beside :mod:`gateway.frontdoor.legacy_passthrough`, its one user: it is not requestState.
Pure: no aiohttp, no I/O.
"""

from __future__ import annotations

import json
import os
from typing import Final

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from gateway.keyset import KeySet, Label, b64url_decode_strict, b64url_nopad
from gateway.state.claims import credential_digest

_NONCE: Final = 12
_TAG: Final = 16


class LegacySessionIds:
    """Seal a backend session id into the id an old client sees, and open it again."""

    PREFIX: Final = "s1."
    MAX_LENGTH: Final = 2048

    def __init__(self, keys: KeySet) -> None:
        self._keys = keys

    def open(self, route: str, backend_id: str, credential: str | None) -> str:
        """The id to give the client for ``backend_id`` on ``route``."""
        nonce = os.urandom(_NONCE)
        plain = json.dumps({"b": backend_id, "p": credential_digest(credential)}, separators=(",", ":")).encode()
        sealed = AESGCM(self._keys[Label.LEGACY_SESSION][0]).encrypt(nonce, plain, b"s1|" + route.encode())
        return self.PREFIX + b64url_nopad(nonce + sealed)

    def backend_id(self, gateway_id: str, route: str, credential: str | None) -> str | None:
        """The backend session behind ``gateway_id`` for this route and credential, or None."""
        if not gateway_id.startswith(self.PREFIX) or len(gateway_id) > self.MAX_LENGTH:
            return None
        try:
            raw = b64url_decode_strict(gateway_id[len(self.PREFIX) :])
        except ValueError:  # a client's typo is a 404, never a 500
            return None
        if len(raw) < _NONCE + _TAG:
            return None
        for key in self._keys[Label.LEGACY_SESSION]:
            try:
                plain = AESGCM(key).decrypt(raw[:_NONCE], raw[_NONCE:], b"s1|" + route.encode())
            except InvalidTag:
                continue
            claims = json.loads(plain)
            if not isinstance(claims, dict) or claims.get("p") != credential_digest(credential):
                return None
            backend_id = claims.get("b")
            return backend_id if isinstance(backend_id, str) else None
        return None
