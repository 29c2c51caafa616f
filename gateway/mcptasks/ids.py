"""Task ids: ``t1.`` sealed references to a task, stored nowhere but in the owner's table.

A task id is ``t1.`` + base64url(nonce(12) ‖ AES-256-GCM(claims)), with ``task|<route name>`` as the
associated data, under the state keys' :attr:`~gateway.keyset.Label.TASK_ID` keys: its own HKDF
label, so a requestState, an ``s1.`` session id or a ``c1.`` cursor never opens as a task id or the
reverse. The first key seals, every key opens: a key reload rotates task ids with every other token
format, and an id sealed before a rotation opens until its ``not_after`` as long as its key is kept
(docs/operations.md: keep a retired key for the longest ``tasks.ttl`` + ``tasks.retention``).

The claims (compact JSON, about 120 bytes) are what any replica needs to decide about an id without
asking anyone: ``r`` 16 random bytes (unguessable, and the key of the owner's table), ``o``/``u``/``b``
the owner replica's id, advertised URL and boot id (a restarted owner has another boot), ``p`` the
caller's principal tag (or null: anonymous), ``c`` createdAt and ``x`` not_after (Unix ms; not_after
= createdAt + ttl + retention), ``k`` the kind (``g``: made by the gateway).

An id that does not open is refused with one :class:`TaskIdRejected` whose ``reason`` is for logs
and metrics only: the client always hears the same -32602 (:class:`gateway.errors.TaskNotFound`).
A task id is a bearer token: logs carry its digest
(:func:`gateway.observability.requests.task_digest`), never the id.

Pure: stdlib and ``cryptography`` only.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Final

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from gateway.keyset import KeySet, Label, b64url_decode_strict, b64url_nopad

__all__ = ["REFUSAL_REASONS", "TaskClaims", "TaskIdRejected", "TaskIds"]

_NONCE: Final = 12
_TAG: Final = 16
_RANDOM: Final = 16

REFUSAL_REASONS: Final = ("malformed", "bad_tag", "wrong_principal", "expired")
"""Why :meth:`TaskIds.open` refuses an id: not a ``t1.`` id of sane length and encoding; no key
opens it for this route (tampered, sealed for another route, or by a key no longer held); sealed
for another caller; past its ``not_after``."""


class TaskIdRejected(Exception):
    """A task id that does not open here; ``reason`` is one of :data:`REFUSAL_REASONS`."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class TaskClaims:
    """What a sealed task id says."""

    key: str
    """The 16 random bytes, base64url: the key of the owner's table."""
    owner: str
    """The owner replica's id."""
    owner_url: str | None
    """Where other replicas reach the owner (``replicas.advertise_url``), if it has an address."""
    boot: str
    """The owner's boot id: a restarted owner has another one."""
    principal: str | None
    """The caller's principal tag (:func:`gateway.state.claims.principal_tag`); None: anonymous."""
    created_ms: int
    not_after_ms: int
    kind: str = "g"

    @classmethod
    def new(
        cls,
        *,
        owner: str,
        owner_url: str | None,
        boot: str,
        principal: str | None,
        created_ms: int,
        not_after_ms: int,
    ) -> TaskClaims:
        """Claims for a new task, with a fresh random key."""
        return cls(b64url_nopad(os.urandom(_RANDOM)), owner, owner_url, boot, principal, created_ms, not_after_ms)

    def to_wire(self) -> dict[str, Any]:
        return {
            "v": 1,
            "r": self.key,
            "o": self.owner,
            "u": self.owner_url,
            "b": self.boot,
            "p": self.principal,
            "c": self.created_ms,
            "x": self.not_after_ms,
            "k": self.kind,
        }

    @classmethod
    def from_wire(cls, data: object) -> TaskClaims:
        """Claims from their sealed JSON; ``ValueError`` for anything not written by :meth:`to_wire`."""
        if not isinstance(data, dict) or data.get("v") != 1:
            raise ValueError("not task claims")
        strings = [data.get(name) for name in ("r", "o", "b", "k")]
        optional = [data.get(name) for name in ("u", "p")]
        times = [data.get(name) for name in ("c", "x")]
        if not all(isinstance(s, str) for s in strings) or not all(o is None or isinstance(o, str) for o in optional):
            raise ValueError("not task claims")
        if not all(isinstance(t, int) and not isinstance(t, bool) for t in times):
            raise ValueError("not task claims")
        key, owner, boot, kind = (str(s) for s in strings)
        return cls(key, owner, optional[0], boot, optional[1], int(times[0] or 0), int(times[1] or 0), kind)


class TaskIds:
    """Seal a task's claims into the id its client sees, and open it again (route, caller, expiry)."""

    PREFIX: Final = "t1."
    MAX_LENGTH: Final = 1024

    def __init__(self, keys: KeySet) -> None:
        self._keys = keys

    def seal(self, route: str, claims: TaskClaims) -> str:
        """The task id of ``claims`` on ``route`` (sealed with the first key)."""
        nonce = os.urandom(_NONCE)
        plain = json.dumps(claims.to_wire(), separators=(",", ":")).encode()
        sealed = AESGCM(self._keys[Label.TASK_ID][0]).encrypt(nonce, plain, _associated(route))
        return self.PREFIX + b64url_nopad(nonce + sealed)

    def open(self, task_id: object, *, route: str, principal: str | None, now_ms: int) -> TaskClaims:
        """The claims of ``task_id`` if it was sealed for ``route`` and ``principal`` and has not
        passed its ``not_after``; else :class:`TaskIdRejected`."""
        if not isinstance(task_id, str) or not task_id.startswith(self.PREFIX) or len(task_id) > self.MAX_LENGTH:
            raise TaskIdRejected("malformed")
        try:
            raw = b64url_decode_strict(task_id[len(self.PREFIX) :])
        except ValueError:
            raise TaskIdRejected("malformed") from None
        if len(raw) < _NONCE + _TAG:
            raise TaskIdRejected("malformed")
        claims = self._unseal(raw, route)
        if claims.principal != principal:
            raise TaskIdRejected("wrong_principal")
        if now_ms >= claims.not_after_ms:
            raise TaskIdRejected("expired")
        return claims

    def _unseal(self, raw: bytes, route: str) -> TaskClaims:
        for key in self._keys[Label.TASK_ID]:
            try:
                plain = AESGCM(key).decrypt(raw[:_NONCE], raw[_NONCE:], _associated(route))
            except InvalidTag:
                continue
            try:
                return TaskClaims.from_wire(json.loads(plain))
            except ValueError:  # sealed by us, so never; refused all the same
                raise TaskIdRejected("malformed") from None
        raise TaskIdRejected("bad_tag")


def _associated(route: str) -> bytes:
    return b"task|" + route.encode("utf-8", "surrogatepass")
