"""Version-1 requestState plaintexts: always read, written only when ``state.seal_version`` is 1.

The release before version 2 sealed ``"v1."`` tokens whose plaintext is compact ASCII JSON of the
claims with short keys, every key always present. :mod:`gateway.state.codec` decrypts them exactly
as it decrypts version 2 (same key, key id and AAD rule, with ``b"v1."`` in the AAD) and hands the
plaintext here (:func:`from_v1`).

:func:`to_v1` writes that plaintext again, byte for byte as that release did (the standard
library's encoder, ``separators=(",", ":")``, ASCII escapes, keys in the order below), so that a
replica of that release can read what this one seals. That is the first step of a rolling
upgrade from it (docs/operations.md): while any old replica may still receive a retry, every
replica seals version 1, which both releases read.

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

Anything else in a decrypted version-1 payload (a missing or unknown key, a wrong type) is
``bad_claims``.

Pure: stdlib only.
"""

from __future__ import annotations

import json
from typing import Final, cast

from gateway.state.claims import MRTR_METHODS, Claims, trusted_claims
from gateway.state.refusal import StateError

__all__ = ["from_v1", "to_v1"]

_WIRE_KEYS: Final = frozenset({"iat", "exp", "aud", "m", "t", "a", "p", "h", "r", "o", "x"})
_DECODE: Final = json.JSONDecoder().decode
# The encoder the version-1 release sealed with; ensure_ascii (the default) keeps the plaintext ASCII.
_ENCODE: Final = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode


def to_v1(claims: Claims) -> bytes:
    """The version-1 plaintext of ``claims``, as the release that minted ``v1.`` tokens wrote it.

    Checks what :func:`from_v1` checks, so what seals unseals to equal claims; and, when there is
    an ``extra``, that it survives JSON unchanged (a tuple, a non-str key or a set would not).
    Raises ``ValueError`` otherwise, with that release's messages.
    """
    wire = {
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
    try:
        checked = _from_wire(wire)
        payload = _ENCODE(wire).encode("ascii")
        # Without an extra, every claim is a str, an int or None that the checks above pinned
        # down, and JSON carries those as they are.
        if claims.extra and _from_wire(_DECODE(payload.decode("ascii"))) != checked:
            raise ValueError("extra must hold only JSON-native values (dict with str keys, list, ...)")
    except StateError as exc:
        raise ValueError(f"refusing to seal invalid claims: {exc.detail}") from exc
    except (TypeError, ValueError) as exc:
        raise ValueError(f"refusing to seal claims that do not survive JSON: {exc}") from exc
    return payload


def from_v1(payload: bytes) -> Claims:
    """Claims from an authentic version-1 plaintext (JSON); ``bad_claims`` for any rule it breaks."""
    try:
        decoded: object = _DECODE(payload.decode("utf-8"))
    except ValueError:  # includes UnicodeDecodeError
        raise StateError("bad_claims", "payload is not JSON") from None
    return _from_wire(decoded)


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
    return trusted_claims(iat, exp, aud, method, target, digest, principal, hold, rnd, owner, extra)  # type: ignore[arg-type]


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
