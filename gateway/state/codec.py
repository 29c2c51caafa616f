"""Seal and unseal ``requestState``: a boring, versioned AES-256-GCM codec with a key ring.

Why. The spec makes the echoed ``requestState`` attacker-controlled. The gateway's state names a
held legacy exchange (hold id, round, owning replica) and binds it to one request and one caller,
so it is *encrypted*, not just signed: clients cannot read hold ids, replica ids or replay
transcripts. The design follows the MCP Python SDK's ``mcp/server/request_state.py``.

Token::

    "v2." + base64url-nopad( kid[4] || nonce[12] || AES-256-GCM ciphertext+tag[16] )

    key = HKDF-SHA256(secret, no salt, info=Label.REQUEST_STATE, 32 bytes)     (gateway.keyset)
    kid = SHA-256(b"mrtr-gateway/request-state/v1/kid:" + key)[:4]; AAD = b"v2." + kid

The prefix and key id sit under the GCM tag, so a token cannot move to another version or ring
slot. The base64url is strict (one spelling per token), and a token over :data:`MAX_TOKEN_LENGTH`
characters is refused before any decoding. ``v1.`` tokens differ only in the prefix (in the AAD
too) and the plaintext.

Plaintext, version 2, what :meth:`KeyRing.seal` writes (big-endian; offsets in bytes)::

    0   u8      method: 1 tools/call, 2 prompts/get, 3 resources/read; high bit: extra is stdlib JSON
    1   u64     iat, unix seconds
    9   u64     exp, unix seconds, > iat
    17  u32     round, >= 1
    21  u16     n: byte length of the text
    23  u16 x5  where aud, target, args_digest, principal and hold_id end in the text, in code points
    33  n bytes text: aud target args_digest principal hold_id owner, UTF-8 with "surrogatepass"
    33+n ...    extra: compact JSON of a non-empty object; nothing when extra is empty

An empty principal is ``None``; the ends satisfy ``0 < a <= b < c <= d < e < len(text)``. orjson
writes ``extra`` and reads it back; what it refuses (an integer beyond 64 bits, a lone surrogate)
the standard library writes as ASCII JSON, high bit set, and reads back exactly. One set of claims
has one plaintext: an authentic plaintext that breaks a rule above, or flags an extra orjson
writes, is ``bad_claims``; seal refuses (``ValueError``) what unseal would not give back equal.

Why version 2 stays, byte for byte, rather than a new JSON version 3: every ``v2.`` token in
flight still opens and one sealed now is what the previous build sealed (given the nonce), so no
rollout, no new ``state.seal_version`` and no third layout to read for a release. One :mod:`struct`
format reads plainly, and the high bit is part of the format that a reader must honour anyway.

Version 1 (read; written with ``seal_version=1``): compact ASCII JSON of ``{"iat", "exp", "aud",
"m": method, "t": target, "a": args_digest, "p": principal, "h": hold_id, "r": round, "o": owner,
"x": extra}``, in that order, every key present, written (random nonce too) as the release before
version 2 did. That release reads only ``v1.``, so the upgrade from it takes two rollouts
(docs/operations.md): ``state.seal_version: 1``, then 2. Version 1 goes in :data:`V1_DROPPED_IN`.

Rotation. The first secret seals, every secret unseals: ship ``[old, new]`` everywhere, then
``[new, old]``, then ``[new]`` once ``old``'s tokens expired (a replica not yet given ``new``
refuses its tokens as ``unknown_key``). A key reload replaces the secrets of the gateway's one
:class:`~gateway.keyset.KeySet`; a held call keeps working because a hold keeps no key, only the
state the client echoes, which the old secret still in the ring unseals.

Nonces, version 2: a per-process counter from a random 96-bit start (:func:`next_nonce`), drawn
afresh after every fork. Random nonces bound a key to ~2**32 seals (NIST SP 800-38D); ``P``
processes sealing ``Q`` tokens collide with probability at most ``P * Q / 2**96``. A copy of a
running process (a VM snapshot resumed twice) would repeat its run: docs/SECURITY.md.

Refusals are :class:`StateError`; a client only sees :data:`WIRE_MESSAGE`. Not here, on purpose:
single use (the hold registry's job) and TTL policy (callers choose ``iat``/``exp``). Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import struct
import time
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

import orjson
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from gateway.fastjson import reject_constant
from gateway.keyset import KeySet, Label, b64url_decode_strict, b64url_nopad
from gateway.state.claims import MRTR_METHODS, Claims

MAX_TOKEN_LENGTH: Final = 16 * 1024
"""Longest token, in characters, that :meth:`KeyRing.unseal` looks at or :meth:`KeyRing.seal` mints."""
FUTURE_SKEW_SECONDS: Final = 60
SEAL_VERSIONS: Final = (1, 2)
V1_DROPPED_IN: Final = "0.3.0"
"""The release after next: it neither reads nor writes ``v1.`` (a test fails when the version reaches it)."""

TokenReason = Literal[
    "malformed", "bad_version", "unknown_key", "decrypt_failed", "bad_claims", "expired", "not_yet_valid"
]
BindingReason = Literal["audience", "method", "target", "arguments", "principal"]
StateReason = TokenReason | BindingReason
"""Why a state was refused (the token, or its binding to the retry). A closed set: safe as a metric label."""
WIRE_MESSAGE: Final = "Invalid or expired requestState"
"""The only text a client ever sees for any :class:`StateError`."""

_KID_LABEL: Final = b"mrtr-gateway/request-state/v1/kid:"
_V2: Final = struct.Struct(">BQQIH5H")
_METHOD_CODES: Final = {"tools/call": 1, "prompts/get": 2, "resources/read": 3}
_METHODS: Final = {code: method for method, code in _METHOD_CODES.items()}
_STDLIB_EXTRA: Final = 0x80
_V1_KEYS: Final = ("iat", "exp", "aud", "m", "t", "a", "p", "h", "r", "o", "x")


class StateError(Exception):
    """A refused ``requestState``: ``reason`` and ``detail`` (never token bytes) go to logs and metrics only."""

    def __init__(self, reason: StateReason, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason: StateReason = reason
        self.detail = detail


class KeyRing:
    """Seals with the first request-state key of ``keys``, unseals with every one.

    ``keys``: the gateway's shared :class:`~gateway.keyset.KeySet`, or secrets to build one from.
    ``seal_version``: what :meth:`seal` writes, 2, or 1 for the first step of the rolling upgrade.
    """

    def __init__(self, keys: KeySet | Sequence[bytes], *, seal_version: int = 2) -> None:
        # type() rather than a membership test: True == 1 would otherwise select version 1.
        if type(seal_version) is not int or seal_version not in SEAL_VERSIONS:
            raise ValueError(f"seal_version must be one of {list(SEAL_VERSIONS)}, not {seal_version!r}")
        self.keys = keys if isinstance(keys, KeySet) else KeySet(keys)
        self.seal_version = seal_version
        self._built_from: tuple[bytes, ...] = ()
        self._aeads: dict[bytes, AESGCM] = {}

    def __repr__(self) -> str:
        return f"<KeyRing keys={len(self.key_ids)} sealing_kid={self.key_ids[0]} seal_version={self.seal_version}>"

    def _ring(self) -> dict[bytes, AESGCM]:
        """Key id -> AEAD of the current keys, in ring order; rebuilt after :meth:`KeySet.replace`."""
        derived = self.keys[Label.REQUEST_STATE]
        if derived is not self._built_from:
            self._aeads = {hashlib.sha256(_KID_LABEL + key).digest()[:4]: AESGCM(key) for key in derived}
            self._built_from = derived
        return self._aeads

    @property
    def key_ids(self) -> tuple[str, ...]:
        """Hex key ids in ring order (the first seals): non-secret fingerprints for logs."""
        return tuple(kid.hex() for kid in self._ring())

    @property
    def salts(self) -> tuple[bytes, ...]:
        """The :func:`~gateway.state.claims.principal_tag` salt of each secret, in ring order."""
        return self.keys[Label.PRINCIPAL_SALT]

    @property
    def salt(self) -> bytes:
        """The sealing secret's salt; a tag sealed before a rotation matches a later one of :attr:`salts`."""
        return self.salts[0]

    def replace(self, secrets: Sequence[bytes]) -> None:
        """Use ``secrets`` from now on (so does every user of :attr:`keys`); raises, changing nothing, if bad."""
        self.keys.replace(secrets)

    def seal(self, claims: Claims) -> str:
        """The token of ``claims`` under the first key; ``ValueError`` for claims unseal would refuse."""
        if problem := _problem(claims):
            raise ValueError(f"refusing to seal invalid claims: {problem}")
        if self.seal_version == 1:
            prefix, plaintext, nonce = "v1.", _to_v1(claims), os.urandom(12)
        else:
            prefix, plaintext, nonce = "v2.", _to_v2(claims), next_nonce()
        aeads = self._ring()
        kid = next(iter(aeads))
        token = prefix + b64url_nopad(kid + nonce + aeads[kid].encrypt(nonce, plaintext, prefix.encode() + kid))
        if len(token) > MAX_TOKEN_LENGTH:
            raise ValueError(f"sealed requestState would be {len(token)} characters, over the {MAX_TOKEN_LENGTH} limit")
        return token

    def unseal(self, token: object, *, now: float | None = None) -> Claims:
        """The claims of a client-echoed token; :class:`StateError` on any doubt (``now``: tests' clock)."""
        if not isinstance(token, str) or len(token) > MAX_TOKEN_LENGTH:
            raise StateError("malformed", "not a string, or too long")
        prefix = token[:3]
        if prefix not in ("v1.", "v2."):
            if re.match(r"v[0-9]+\.", token, re.ASCII):
                raise StateError("bad_version", "token is neither version 1 nor version 2")
            raise StateError("malformed", "no version prefix")
        try:
            raw = b64url_decode_strict(token[3:])
        except ValueError as exc:
            raise StateError("malformed", str(exc)) from None
        if len(raw) < 4 + 12 + 16:
            raise StateError("malformed", "token too short")
        aead = self._ring().get(raw[:4])
        if aead is None:
            raise StateError("unknown_key", f"kid {raw[:4].hex()} is not in the ring")
        try:
            plaintext = aead.decrypt(raw[4:16], raw[16:], prefix.encode() + raw[:4])
        except InvalidTag:
            raise StateError("decrypt_failed") from None
        claims = _from_v1(plaintext) if prefix == "v1." else _from_v2(plaintext)
        current = time.time() if now is None else now
        if not current < claims.exp:  # stated positively, so that a NaN clock refuses
            raise StateError("expired")
        if not claims.iat <= current + FUTURE_SKEW_SECONDS:
            raise StateError("not_yet_valid", f"iat is {claims.iat - current:.0f} s ahead")
        return claims


def _problem(c: Claims) -> str:
    """The first rule ``c`` breaks, or "" (type() for integers: True is an int, but would come back 1)."""
    if type(c.iat) is not int or c.iat < 0:
        return "claim 'iat' must be an integer >= 0"
    if type(c.exp) is not int or c.exp <= c.iat:
        return "claim 'exp' must be an integer > iat"
    if not isinstance(c.method, str) or c.method not in MRTR_METHODS:
        return "claim 'method' must be tools/call, prompts/get or resources/read"
    if type(c.round) is not int or c.round < 1:
        return "claim 'round' must be an integer >= 1"
    if c.principal is not None and not (isinstance(c.principal, str) and c.principal):
        return "claim 'principal' must be a non-empty string or None"
    for name in ("target", "aud", "args_digest", "hold_id", "owner"):
        value = getattr(c, name)
        if not isinstance(value, str) or (not value and name != "target"):
            return f"claim {name!r} must be a {'' if name == 'target' else 'non-empty '}string"
    extra: object = c.extra  # what a JSON plaintext gave: not yet known to be an object
    return "" if isinstance(extra, Mapping) else "claim 'extra' must be an object"


def _to_v2(claims: Claims) -> bytes:
    fields = (claims.aud, claims.target, claims.args_digest, claims.principal or "", claims.hold_id)
    text = "".join((*fields, claims.owner)).encode("utf-8", "surrogatepass")
    method, extra = _METHOD_CODES[claims.method], b""
    if claims.extra:
        extra, stdlib = _extra_json(dict(claims.extra))
        method |= _STDLIB_EXTRA if stdlib else 0
    ends = itertools.accumulate(len(field) for field in fields)
    try:
        return _V2.pack(method, claims.iat, claims.exp, claims.round, len(text), *ends) + text + extra
    except struct.error as exc:  # a claim too large for its field (a text over 65,535 bytes never fits a token)
        raise ValueError(f"refusing to seal invalid claims: {exc}") from None


def _from_v2(plaintext: bytes) -> Claims:
    try:
        method, iat, exp, round_, size, a, b, c, d, e = _V2.unpack_from(plaintext)
        end = _V2.size + size
        text = plaintext[_V2.size : end].decode("utf-8", "surrogatepass")
    except (struct.error, UnicodeDecodeError):
        raise StateError("bad_claims", "version-2 plaintext does not parse") from None
    name = _METHODS.get(method & ~_STDLIB_EXTRA)
    if name is None or len(plaintext) < end or not 0 < a <= b < c <= d < e < len(text):
        raise StateError("bad_claims", "version-2 method or text out of range")
    extra = _extra_of(plaintext[end:], stdlib=bool(method & _STDLIB_EXTRA)) if len(plaintext) > end else {}
    claims = Claims(
        iat, exp, text[:a], name, text[a:b], text[b:c], text[c:d] or None, text[d:e], round_, text[e:], extra
    )
    if problem := _problem(claims):
        raise StateError("bad_claims", problem)
    return claims


def _extra_json(extra: dict[str, Any]) -> tuple[bytes, bool]:
    """Compact JSON of a non-empty ``extra``, and whether the standard library wrote it (orjson refused)."""
    try:
        try:
            encoded, stdlib = orjson.dumps(extra), False
        except TypeError:
            encoded, stdlib = json.dumps(extra, separators=(",", ":"), allow_nan=False).encode("ascii"), True
        # JSON turns a tuple into a list, an integer key into a string, and orjson a NaN into null.
        if _extra_of(encoded, stdlib=stdlib) != extra:
            raise ValueError("extra must hold JSON-native values only")
    except (TypeError, ValueError, RecursionError, StateError) as exc:
        raise ValueError(f"refusing to seal claims that do not survive JSON: {exc}") from None
    return encoded, stdlib


def _extra_of(data: bytes, *, stdlib: bool) -> dict[str, Any]:
    """The ``extra`` of a version-2 plaintext, read by the decoder that reads its writer exactly."""
    try:
        value = json.loads(data.decode("ascii"), parse_constant=reject_constant) if stdlib else orjson.loads(data)
    except (ValueError, RecursionError):  # JSONDecodeError, orjson.JSONDecodeError, UnicodeDecodeError, NaN
        raise StateError("bad_claims", "extra is not JSON") from None
    if type(value) is not dict or not value:
        raise StateError("bad_claims", "extra must be a non-empty object")
    if stdlib:
        try:
            orjson.dumps(value)
        except TypeError:
            return value
        raise StateError("bad_claims", "extra orjson writes is flagged as the standard library's")  # a 2nd spelling
    return value


def _to_v1(c: Claims) -> bytes:
    values = (c.iat, c.exp, c.aud, c.method, c.target, c.args_digest, c.principal, c.hold_id, c.round, c.owner)
    wire = dict(zip(_V1_KEYS, (*values, dict(c.extra)), strict=True))
    try:
        payload = json.dumps(wire, separators=(",", ":"), allow_nan=False).encode("ascii")
        if json.loads(payload)["x"] != wire["x"]:
            raise ValueError("extra must hold JSON-native values only")
    except (TypeError, ValueError) as exc:
        raise ValueError(f"refusing to seal claims that do not survive JSON: {exc}") from None
    return payload


def _from_v1(plaintext: bytes) -> Claims:
    try:
        wire = json.loads(plaintext.decode("utf-8"))
    except ValueError:  # UnicodeDecodeError too
        raise StateError("bad_claims", "version-1 plaintext is not JSON") from None
    if not isinstance(wire, dict) or wire.keys() != set(_V1_KEYS):
        raise StateError("bad_claims", "version-1 plaintext is not an object of exactly the claim keys")
    claims = Claims(*(wire[key] for key in _V1_KEYS))
    if problem := _problem(claims):
        raise StateError("bad_claims", problem)
    return claims


# The version-2 nonce run (module docstring): one item, so a restart replaces it in place.
_run: Final = [itertools.count(int.from_bytes(os.urandom(12), "big"))]


def next_nonce() -> bytes:
    """The next 12-byte nonce of this process's run."""
    return (next(_run[0]) % 2**96).to_bytes(12, "big")


def restart_nonces(start: int | None = None) -> None:
    """Begin a new run at a fresh random point (after a fork), or at ``start`` (tests: the wrap)."""
    _run[0] = itertools.count(int.from_bytes(os.urandom(12), "big") if start is None else start % 2**96)


os.register_at_fork(after_in_child=restart_nonces)
