"""Seal and unseal ``requestState``: a boring, versioned AES-256-GCM codec with a key ring.

Why it exists. The client echoes ``requestState`` verbatim, and the spec says to treat the echo as
attacker-controlled: anything that steers authorization or finds server-side resources must be
integrity-protected and refused when verification fails. The gateway's state names a held legacy
exchange (hold id, round, owning replica) and binds it to one request and one caller, so it is
*encrypted*, not just signed: clients cannot read hold ids, replica ids or replay transcripts.
The design follows the MCP Python SDK's ``mcp/server/request_state.py`` with gateway-specific
labels and claims.

Token format (version 1)::

    "v1." + base64url-nopad( kid[4] || nonce[12] || AES-256-GCM ciphertext+tag[16] )

    key = HKDF-SHA256(secret, salt=None, info=b"mrtr-gateway/request-state/v1/aes-256-gcm", 32 bytes)
    kid = SHA-256(b"mrtr-gateway/request-state/v1/kid:" + key)[:4]
    AAD = b"v1." + kid

The prefix and key id sit under the GCM tag, so a token cannot be moved to another format
version or ring slot. The key id is a non-secret fingerprint for an O(1) ring lookup. The base64url
is strict (urlsafe alphabet only, no padding, no whitespace, canonical trailing bits) so one state
has exactly one spelling, and tokens are capped at :data:`MAX_TOKEN_LENGTH` characters.

Rotation. ``KeyRing([first, *others])``: the first secret seals, every secret unseals. To rotate,
roll out ``[new, old]`` and drop ``old`` once every token it sealed has expired. A replica that has
not yet been given ``new`` refuses tokens ``new`` sealed (``unknown_key``), so in a multi-replica
rollout first ship ``[old, new]`` everywhere, then ``[new, old]``, then ``[new]``.
:meth:`KeyRing.replace` swaps the secrets of a running ring in one step (no await, so no request
sees half a ring): a gateway re-reading its key file rotates without a restart, and held calls
keep working because a hold keeps no key, only the state the client echoes, which the old secret
still in the ring unseals.

Plaintext: compact ASCII JSON of the claims with short keys. Every key is always present.

=====  ======================  ===========================================
key    :class:`Claims` field   JSON type
=====  ======================  ===========================================
iat    ``iat``                 integer >= 0, unix seconds
exp    ``exp``                 integer > iat, unix seconds
aud    ``aud``                 non-empty string (route name)
m      ``method``              one of :data:`MRTR_METHODS`
t      ``target``              string (tool/prompt name or resource URI)
a      ``args_digest``         non-empty string
p      ``principal``           non-empty string, or null
h      ``hold_id``             non-empty string
r      ``round``               integer >= 1
o      ``owner``               non-empty string (replica id)
x      ``extra``               object
=====  ======================  ===========================================

Anything else in a decrypted payload (a missing or unknown key, a wrong type) is ``bad_claims``.
:meth:`KeyRing.seal` runs the same check on what it is about to seal, so a state that seals always
unseals to equal claims, and a bug surfaces at mint time rather than on the client's retry.

Errors. Every refusal is a :class:`StateError` whose ``reason`` is one of a fixed set (a metric
label and a log field). The client only ever sees :data:`WIRE_MESSAGE`; mapping to the JSON-RPC
``-32602`` error happens at the front door, not here.

Not here, on purpose:

* **Single use.** A sealed token is a bearer value that stays valid until ``exp``; refusing a
  replayed or stale round is the hold registry's job (it knows which round is current).
* **TTL policy.** Callers choose ``iat``/``exp``; the codec only enforces them (with
  :data:`FUTURE_SKEW_SECONDS` of tolerance for clocks of other replicas).

This module is pure: ``cryptography`` plus stdlib, no I/O, no aiohttp.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets as _secrets
import time
from collections.abc import Sequence
from typing import Any, Final, Literal, cast

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from gateway.state.claims import Claims
from gateway.state.encoding import b64url_decode_strict, b64url_nopad, derive_key

__all__ = [
    "FUTURE_SKEW_SECONDS",
    "MAX_TOKEN_LENGTH",
    "MIN_SECRET_BYTES",
    "MRTR_METHODS",
    "WIRE_MESSAGE",
    "KeyRing",
    "StateError",
    "StateReason",
    "check_bindings",
    "generate_secret",
]

StateReason = Literal[
    "malformed",
    "bad_version",
    "unknown_key",
    "decrypt_failed",
    "bad_claims",
    "expired",
    "not_yet_valid",
    "audience",
    "method",
    "target",
    "arguments",
    "principal",
]
"""Why a state was refused. A closed set, so it is safe as a metric label."""

WIRE_MESSAGE: Final = "Invalid or expired requestState"
"""The only text a client ever sees for any :class:`StateError`."""

MAX_TOKEN_LENGTH: Final = 16 * 1024
"""Longest token, in characters, that :meth:`KeyRing.unseal` will look at or :meth:`KeyRing.seal` mint."""

MIN_SECRET_BYTES: Final = 32
FUTURE_SKEW_SECONDS: Final = 60
MRTR_METHODS: Final = frozenset({"tools/call", "prompts/get", "resources/read"})
"""The only methods whose results carry ``requestState``."""

_PREFIX: Final = "v1."
_AAD_PREFIX: Final = b"v1."
_KEY_INFO: Final = b"mrtr-gateway/request-state/v1/aes-256-gcm"
_KID_LABEL: Final = b"mrtr-gateway/request-state/v1/kid:"
_SALT_INFO: Final = b"mrtr-gateway/request-state/v1/principal-salt"
_KID_LEN: Final = 4
_NONCE_LEN: Final = 12
_TAG_LEN: Final = 16
_OTHER_VERSION_RE: Final = re.compile(r"v[0-9]+\.", re.ASCII)
_WIRE_KEYS: Final = frozenset({"iat", "exp", "aud", "m", "t", "a", "p", "h", "r", "o", "x"})
_ENCODE: Final = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode
_DECODE: Final = json.JSONDecoder().decode


class StateError(Exception):
    """A ``requestState`` was refused.

    ``reason`` is for logs and metrics; ``detail`` (possibly empty) is extra log-only context and
    never contains token bytes or secrets. Neither goes to the client: answer with
    :data:`WIRE_MESSAGE`.
    """

    reason: StateReason
    detail: str

    def __init__(self, reason: StateReason, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


def _b64url_decode_strict(text: str) -> bytes:
    """:func:`~gateway.state.encoding.b64url_decode_strict`, failing as a malformed token."""
    try:
        return b64url_decode_strict(text)
    except ValueError as exc:
        raise StateError("malformed", str(exc)) from None


class KeyRing:
    """AES-256-GCM keys derived from operator secrets; the first seals, every one unseals."""

    __slots__ = ("_aeads", "_salts", "_seal_kid")

    def __init__(self, secrets: Sequence[bytes]) -> None:
        if isinstance(cast("object", secrets), str | bytes | bytearray):
            raise TypeError("KeyRing takes a sequence of secrets, e.g. KeyRing([secret]), not one secret")
        material: list[bytes] = []
        for index, secret in enumerate(cast("Sequence[object]", secrets)):
            if not isinstance(secret, bytes | bytearray):
                # Never coerce: bytes(32) would silently build an all-zero secret.
                raise TypeError(
                    f"request-state secret #{index} is a {type(secret).__name__}; pass bytes "
                    "(encode configured strings as UTF-8)"
                )
            material.append(bytes(secret))
        if not material:
            raise ValueError("at least one request-state secret is required; generate one with `mrtr-gateway gen-key`")
        for index, secret in enumerate(material):
            if len(secret) < MIN_SECRET_BYTES:
                raise ValueError(
                    f"request-state secret #{index} is {len(secret)} bytes; each secret must be at least "
                    f"{MIN_SECRET_BYTES} bytes. Generate one with `mrtr-gateway gen-key`."
                )
        self._aeads: dict[bytes, AESGCM] = {}
        for index, secret in enumerate(material):
            key = derive_key(secret, _KEY_INFO)
            kid = hashlib.sha256(_KID_LABEL + key).digest()[:_KID_LEN]
            if kid in self._aeads:
                raise ValueError(f"request-state secret #{index} repeats an earlier secret; remove the duplicate")
            self._aeads[kid] = AESGCM(key)
        self._seal_kid = next(iter(self._aeads))
        self._salts = tuple(derive_key(secret, _SALT_INFO) for secret in material)

    def __repr__(self) -> str:
        return f"<KeyRing keys={len(self._aeads)} sealing_kid={self._seal_kid.hex()}>"

    @property
    def key_ids(self) -> tuple[str, ...]:
        """Hex key ids in ring order (the first seals): non-secret fingerprints for logs."""
        return tuple(kid.hex() for kid in self._aeads)

    def replace(self, secrets: Sequence[bytes]) -> None:
        """Use ``secrets`` from now on, validated exactly as the constructor does.

        Raises like the constructor and then leaves the ring unchanged. Tokens sealed before keep
        unsealing as long as their secret is still in ``secrets``.
        """
        fresh = KeyRing(secrets)
        self._aeads, self._salts, self._seal_kid = fresh._aeads, fresh._salts, fresh._seal_kid

    @property
    def salt(self) -> bytes:
        """Salt for :func:`~gateway.state.claims.principal_tag`, derived from the sealing secret.

        Stable across restarts for the same first secret. It changes when a new secret is put
        first, so principal-bound tokens minted before that rotation carry tags made with an
        earlier entry of :attr:`salts`.
        """
        return self._salts[0]

    @property
    def salts(self) -> tuple[bytes, ...]:
        """One principal salt per secret, in ring order (``salts[0] == salt``).

        During a rotation a caller can accept a principal tag computed under any of these, so
        callers mid-flow keep working when the sealing secret changes.
        """
        return self._salts

    def seal(self, claims: Claims) -> str:
        """Encrypt ``claims`` into a ``v1.`` token under the first secret.

        Raises ``ValueError`` for claims that would not unseal to equal claims (a bad type or
        value, an ``extra`` that is not JSON-native) or whose token would exceed
        :data:`MAX_TOKEN_LENGTH`: those are gateway bugs, caught at mint time.
        """
        wire = _to_wire(claims)
        try:
            # The same checks unseal applies, on what is about to be sealed ...
            checked = _from_wire(wire)
            payload = _ENCODE(wire).encode("ascii")
            # ... and, when there is an ``extra``, proof that it survives JSON unchanged (a tuple,
            # a non-str key or a set would not). Without one, every claim is a str, an int or
            # None that the checks above have pinned down, and JSON carries those as they are.
            if claims.extra and _from_wire(_DECODE(payload.decode("ascii"))) != checked:
                raise ValueError("extra must hold only JSON-native values (dict with str keys, list, ...)")
        except StateError as exc:
            raise ValueError(f"refusing to seal invalid claims: {exc.detail}") from exc
        except (TypeError, ValueError) as exc:
            raise ValueError(f"refusing to seal claims that do not survive JSON: {exc}") from exc
        nonce = os.urandom(_NONCE_LEN)
        sealed = self._aeads[self._seal_kid].encrypt(nonce, payload, _AAD_PREFIX + self._seal_kid)
        token = _PREFIX + b64url_nopad(self._seal_kid + nonce + sealed)
        if len(token) > MAX_TOKEN_LENGTH:
            raise ValueError(
                f"sealed requestState would be {len(token)} characters, over the {MAX_TOKEN_LENGTH} limit; "
                "keep extra small"
            )
        return token

    def unseal(self, token: object, *, now: float | None = None) -> Claims:
        """Verify and decrypt a client-echoed token; raise :class:`StateError` on any doubt.

        ``now`` (unix seconds) defaults to the wall clock; tests inject it.
        """
        if not isinstance(token, str):
            raise StateError("malformed", f"token is a {type(token).__name__}, not a string")
        if len(token) > MAX_TOKEN_LENGTH:
            raise StateError("malformed", f"token is {len(token)} characters, over {MAX_TOKEN_LENGTH}")
        if not token.startswith(_PREFIX):
            if _OTHER_VERSION_RE.match(token):
                raise StateError("bad_version", "token is not version 1")
            raise StateError("malformed", "no version prefix")
        raw = _b64url_decode_strict(token[len(_PREFIX) :])
        if len(raw) < _KID_LEN + _NONCE_LEN + _TAG_LEN:
            raise StateError("malformed", "token too short")
        kid = raw[:_KID_LEN]
        nonce = raw[_KID_LEN : _KID_LEN + _NONCE_LEN]
        sealed = raw[_KID_LEN + _NONCE_LEN :]
        aead = self._aeads.get(kid)
        if aead is None:
            raise StateError("unknown_key", f"kid {kid.hex()} is not in the ring")
        try:
            payload = aead.decrypt(nonce, sealed, _AAD_PREFIX + kid)
        except InvalidTag:
            raise StateError("decrypt_failed") from None
        try:
            decoded: object = _DECODE(payload.decode("utf-8"))
        except ValueError:  # includes UnicodeDecodeError
            raise StateError("bad_claims", "payload is not JSON") from None
        claims = _from_wire(decoded)
        current = time.time() if now is None else now
        # Accept-conditions are stated positively so that a NaN clock refuses rather than accepts.
        if not current < claims.exp:
            raise StateError("expired")
        if not claims.iat <= current + FUTURE_SKEW_SECONDS:
            raise StateError("not_yet_valid", f"iat is {claims.iat - current:.0f} s ahead")
        return claims


def _to_wire(claims: Claims) -> dict[str, Any]:
    return {
        "iat": claims.iat,
        "exp": claims.exp,
        "aud": claims.aud,
        "m": claims.method,
        "t": claims.target,
        "a": claims.args_digest,
        "p": claims.principal,
        "h": claims.hold_id,
        "r": claims.round,
        "o": claims.owner,
        "x": dict(claims.extra),
    }


def _from_wire(decoded: object) -> Claims:
    if not isinstance(decoded, dict):
        raise StateError("bad_claims", "payload is not a JSON object")
    wire = cast("dict[str, object]", decoded)
    if wire.keys() != _WIRE_KEYS:
        missing, unexpected = sorted(_WIRE_KEYS - wire.keys()), sorted(wire.keys() - _WIRE_KEYS)
        raise StateError("bad_claims", f"claim keys: missing {missing}, unexpected {unexpected}")
    iat, exp, rnd = wire["iat"], wire["exp"], wire["r"]
    aud, method, target, digest, hold, owner = wire["aud"], wire["m"], wire["t"], wire["a"], wire["h"], wire["o"]
    principal, extra = wire["p"], wire["x"]
    # One pass over the common case; on any doubt, the checks below in their fixed order say why.
    # type() rather than isinstance() for integers: JSON true/false must not pass as 1/0.
    if not (
        type(iat) is int
        and iat >= 0
        and type(exp) is int
        and exp > iat
        and type(rnd) is int
        and rnd >= 1
        and isinstance(aud, str)
        and aud
        and isinstance(method, str)
        and method in MRTR_METHODS
        and isinstance(target, str)
        and isinstance(digest, str)
        and digest
        and isinstance(hold, str)
        and hold
        and isinstance(owner, str)
        and owner
        and (principal is None or (isinstance(principal, str) and principal))
        and isinstance(extra, dict)
    ):
        _explain(wire)
    # Field order of Claims; every value was checked just above (mypy cannot follow the and-chain).
    return Claims(iat, exp, aud, method, target, digest, principal, hold, rnd, owner, extra)  # type: ignore[arg-type]


def _explain(wire: dict[str, object]) -> None:
    """Raise the :class:`StateError` naming the first claim that is wrong (fixed order)."""
    iat = _int(wire, "iat", minimum=0)
    _int(wire, "exp", minimum=iat + 1)
    method = _str(wire, "m", nonempty=True)
    if method not in MRTR_METHODS:
        raise StateError("bad_claims", f"claim 'm' is not one of {sorted(MRTR_METHODS)}")
    principal = wire["p"]
    if principal is not None and not (isinstance(principal, str) and principal):
        raise StateError("bad_claims", "claim 'p' must be a non-empty string or null")
    if not isinstance(wire["x"], dict):
        raise StateError("bad_claims", "claim 'x' must be an object")
    _str(wire, "aud", nonempty=True)
    _str(wire, "t", nonempty=False)
    _str(wire, "a", nonempty=True)
    _str(wire, "h", nonempty=True)
    _int(wire, "r", minimum=1)
    _str(wire, "o", nonempty=True)
    raise AssertionError("unreachable: the fast check and the explanation disagree")  # pragma: no cover


def _int(wire: dict[str, object], key: str, *, minimum: int) -> int:
    value = wire[key]
    # type() rather than isinstance(): JSON true/false must not pass as 1/0.
    if type(value) is not int or value < minimum:
        raise StateError("bad_claims", f"claim {key!r} must be an integer >= {minimum}")
    return value


def _str(wire: dict[str, object], key: str, *, nonempty: bool) -> str:
    value = wire[key]
    if not isinstance(value, str) or (nonempty and not value):
        raise StateError("bad_claims", f"claim {key!r} must be a {'non-empty ' if nonempty else ''}string")
    return value


def _same(sealed: str, actual: str) -> bool:
    # compare_digest refuses non-ASCII str, and names and URIs may be non-ASCII: compare bytes.
    return hmac.compare_digest(sealed.encode("utf-8", "surrogatepass"), actual.encode("utf-8", "surrogatepass"))


def check_bindings(
    claims: Claims,
    *,
    aud: str,
    method: str,
    target: str,
    args_digest: str,
    principal: str | None,
) -> None:
    """Refuse ``claims`` unless they were minted for this very request and caller.

    Checks in a fixed order and raises :class:`StateError` with the reason of the first mismatch:
    ``audience``, ``method``, ``target``, ``arguments``, ``principal``. ``principal`` is the
    :func:`~gateway.state.claims.principal_tag` of the retry's credential; a sealed ``None`` only
    matches ``None`` and vice versa, so adding or dropping a credential between rounds is refused.
    """
    checks: tuple[tuple[StateReason, str, str], ...] = (
        ("audience", claims.aud, aud),
        ("method", claims.method, method),
        ("target", claims.target, target),
        ("arguments", claims.args_digest, args_digest),
    )
    for reason, sealed, actual in checks:
        if not _same(sealed, actual):
            raise StateError(reason)
    if claims.principal is None or principal is None:
        if claims.principal is not None or principal is not None:
            raise StateError("principal", "credential presence changed")
    elif not _same(claims.principal, principal):
        raise StateError("principal")


def generate_secret() -> str:
    """A new secret for ``state.keys``: 32 random bytes as unpadded base64url (43 characters).

    The configured string itself (UTF-8 encoded) is the secret; it is never base64-decoded, and
    HKDF turns its 256 bits of entropy into the AES key.
    """
    return _secrets.token_urlsafe(32)
