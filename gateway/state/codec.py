"""Seal and unseal ``requestState``: a boring, versioned AES-256-GCM codec with a key ring.

Why it exists. The client echoes ``requestState`` verbatim, and the spec says to treat the echo as
attacker-controlled: anything that steers authorization or finds server-side resources must be
integrity-protected and refused when verification fails. The gateway's state names a held legacy
exchange (hold id, round, owning replica) and binds it to one request and one caller, so it is
*encrypted*, not just signed: clients cannot read hold ids, replica ids or replay transcripts.
The design follows the MCP Python SDK's ``mcp/server/request_state.py`` with gateway-specific
labels and claims.

Token format (version 2, what :meth:`KeyRing.seal` mints by default)::

    "v2." + base64url-nopad( kid[4] || nonce[12] || AES-256-GCM ciphertext+tag[16] )

    key = HKDF-SHA256(secret, salt=None, info=b"mrtr-gateway/request-state/v1/aes-256-gcm", 32 bytes)
    kid = SHA-256(b"mrtr-gateway/request-state/v1/kid:" + key)[:4]
    AAD = b"v2." + kid; nonce: this process's counter from a random start (gateway.state.nonces)

Version 1 differs only in the prefix (``"v1."``, also in the AAD) and in the plaintext (JSON, below);
its nonce is ``os.urandom(12)``, as that release drew it (readers take any 12 bytes).
Both versions share the key and key id: the version is not a new *use* of the secret (both carry
the same claims for the same purpose), the prefix under the tag already keeps a token of one
version from being read as the other, and operators see the same key ids in logs across the
upgrade. The prefix and key id sit under the GCM tag, so a token cannot be moved to another format
version or ring slot. The key id is a non-secret fingerprint for an O(1) ring lookup. The base64url
is strict (urlsafe alphabet only, no padding, no whitespace, canonical trailing bits) so one state
has exactly one spelling, and tokens are capped at :data:`MAX_TOKEN_LENGTH` characters, checked
before any decoding work.

Plaintext, version 2: a fixed binary layout, because a token is sealed and opened on every round of
every held call and JSON was most of the cost (big-endian; offsets in bytes)::

    0   u8      method: 1 tools/call, 2 prompts/get, 3 resources/read
    1   u64     iat, unix seconds
    9   u64     exp, unix seconds, > iat
    17  u32     round, >= 1
    21  u16     n: byte length of the text
    23  u16 x5  where aud, target, args_digest, principal and hold_id end in the text, in code points
    33  n bytes text: aud + target + args_digest + principal + hold_id + owner, UTF-8 ("surrogatepass",
                so a lone surrogate in a client's tool name seals like any other character);
                owner is the rest of the text
    33+n ...    extra: a compact JSON object, or nothing when extra is empty

The method byte's high bit (0x80) says which JSON ``extra`` is: clear, UTF-8 JSON as orjson writes
it (read back with orjson); set, the standard library's ASCII JSON, for the values orjson refuses
(an integer beyond 64 bits, a lone surrogate), read back with the standard library, which reads
those exactly where orjson would not.

``principal`` is non-empty or absent, so an empty one means ``None``; ``extra`` likewise: no bytes
means ``{}``, and an explicit ``{}`` (which seal never writes) is refused. The ends must satisfy
the one chain ``0 < a <= b < c <= d < e < len(text)``,
which at once proves that every field lies inside the text and that aud, args_digest, hold_id and
owner are non-empty. An authentic plaintext that breaks any rule (unknown method, ``exp <= iat``,
round 0, ends out of order, a text shorter than ``n`` or not UTF-8, an extra that is not a
non-empty JSON object) is ``bad_claims``. Unsigned fields make a negative ``iat`` unrepresentable;
a claim that does not fit its field (a round of 2**32, a text over 65,535 bytes, which could never
fit in a token anyway) is refused at seal time.

Plaintext, version 1 (always unsealed; minted only by a ring built with ``seal_version=1``):
compact JSON of the claims, documented and written in :mod:`gateway.state.plaintext_v1`.

Seal checks what unseal checks, so a state that seals always unseals to equal claims, and a bug
surfaces at mint time rather than on the client's retry. It checks only what a value of the
declared types could still get wrong (``True`` is an ``int`` to the type checker, an empty string
is a ``str``, a round may be 0); a value of the wrong type altogether fails while it is encoded,
and ``extra`` is decoded once more and compared, since JSON silently turns a tuple into a list and
an integer key into a string.

Rolling upgrade from version 1. This release unseals both versions, so a call held on an old
replica, or whose last round an old replica sealed, goes on when its retry reaches a new replica
(the old format is decoded by the same strict rules it always was, under the same keys). The
release before reads only ``v1.`` and refuses a ``v2.`` token as ``bad_version``, so the upgrade
takes two steps (``state.seal_version``, docs/operations.md): roll this release out with
``KeyRing(secrets, seal_version=1)``, which seals ``v1.`` exactly as that release did, so that
every replica, old or new, reads every token; once no old replica remains, roll out the default
(version 2). Version 1 support can go once no ``v1.`` token can still be valid (``state.ttl``
after the last replica sealing version 1 stopped).

Rotation. ``KeyRing([first, *others])``: the first secret seals, every secret unseals. To rotate,
roll out ``[new, old]`` and drop ``old`` once every token it sealed has expired. A replica that has
not yet been given ``new`` refuses tokens ``new`` sealed (``unknown_key``), so in a multi-replica
rollout first ship ``[old, new]`` everywhere, then ``[new, old]``, then ``[new]``.
:meth:`KeyRing.replace` swaps the secrets of a running ring in one step (no await, so no request
sees half a ring): a gateway re-reading its key file rotates without a restart, and held calls
keep working because a hold keeps no key, only the state the client echoes, which the old secret
still in the ring unseals.

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

import binascii
import hashlib
import os
import re
import secrets as _secrets
import struct
import time
from collections.abc import Sequence
from typing import Any, Final, cast

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from gateway.state.bindings import check_bindings
from gateway.state.claims import MRTR_METHODS, Claims, trusted_claims
from gateway.state.encoding import CANONICAL_LAST as _CANONICAL_LAST
from gateway.state.encoding import PADDING as _PADDING
from gateway.state.encoding import STD_TO_URL as _STD_TO_URL
from gateway.state.encoding import URL_TO_STD as _URL_TO_STD
from gateway.state.encoding import derive_key
from gateway.state.extra import extra_json as _extra_json
from gateway.state.extra import extra_of as _extra_of
from gateway.state.nonces import next_nonce as _next_nonce
from gateway.state.plaintext_v1 import from_v1 as _from_v1
from gateway.state.plaintext_v1 import to_v1 as _to_v1
from gateway.state.refusal import WIRE_MESSAGE, StateError, StateReason

__all__ = [
    "FUTURE_SKEW_SECONDS",
    "MAX_TOKEN_LENGTH",
    "MIN_SECRET_BYTES",
    "MRTR_METHODS",
    "SEAL_VERSIONS",
    "WIRE_MESSAGE",
    "KeyRing",
    "StateError",
    "StateReason",
    "check_bindings",
    "generate_secret",
]

MAX_TOKEN_LENGTH: Final = 16 * 1024
"""Longest token, in characters, that :meth:`KeyRing.unseal` will look at or :meth:`KeyRing.seal` mint."""

MIN_SECRET_BYTES: Final = 32
FUTURE_SKEW_SECONDS: Final = 60
SEAL_VERSIONS: Final = (1, 2)
"""Token versions :meth:`KeyRing.seal` can mint (``seal_version``); :meth:`KeyRing.unseal` reads both."""

_V1: Final = "v1."
_V2: Final = "v2."
_AAD_V1: Final = b"v1."
_AAD_V2: Final = b"v2."
_KEY_INFO: Final = b"mrtr-gateway/request-state/v1/aes-256-gcm"
_KID_LABEL: Final = b"mrtr-gateway/request-state/v1/kid:"
_SALT_INFO: Final = b"mrtr-gateway/request-state/v1/principal-salt"
_KID_LEN: Final = 4
_NONCE_LEN: Final = 12
_TAG_LEN: Final = 16
_HEADER_LEN: Final = _KID_LEN + _NONCE_LEN
_OTHER_VERSION_RE: Final = re.compile(r"v[0-9]+\.", re.ASCII)


# Version 2 plaintext (see the module docstring): method, iat, exp, round, text bytes, and where
# aud, target, args_digest, principal and hold_id end in the text (owner is the rest).
_V2_FIXED: Final = struct.Struct(">BQQIHHHHHH")
_V2_FIXED_LEN: Final = _V2_FIXED.size
_v2_pack: Final = _V2_FIXED.pack
_v2_unpack: Final = _V2_FIXED.unpack_from
_V2_METHOD_CODES: Final = {"tools/call": 1, "prompts/get": 2, "resources/read": 3}
_V2_STANDARD_EXTRA: Final = 0x80
"""Method-byte flag: ``extra`` is the standard library's ASCII JSON (orjson refused it)."""
_V2_METHODS: Final = {
    **{code: name for name, code in _V2_METHOD_CODES.items()},
    **{code | _V2_STANDARD_EXTRA: name for name, code in _V2_METHOD_CODES.items()},
}
assert frozenset(_V2_METHOD_CODES) == MRTR_METHODS
_V2_METHOD_NAMES: Final = tuple(_V2_METHODS.get(byte) for byte in range(256))  # by method byte
_urandom: Final = os.urandom
_a2b: Final = binascii.a2b_base64
_b2a: Final = binascii.b2a_base64
_clock: Final = time.time


class KeyRing:
    """AES-256-GCM keys derived from operator secrets; the first seals, every one unseals.

    ``seal_version`` is the token version :meth:`seal` mints: 2 (the default), or 1 for the first
    step of a rolling upgrade from the release that read only version 1. :meth:`unseal` reads both.
    """

    __slots__ = ("_aeads", "_open_v1", "_open_v2", "_salts", "_seal", "_seal_kid", "_seal_v1")

    def __init__(self, secrets: Sequence[bytes], *, seal_version: int = 2) -> None:
        # type() rather than a membership test: True == 1 would otherwise select version 1.
        if type(seal_version) is not int or seal_version not in SEAL_VERSIONS:
            raise ValueError(f"seal_version must be one of {list(SEAL_VERSIONS)}, not {seal_version!r}")
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
        # One AESGCM object per key, built here and never per call.
        self._aeads: dict[bytes, AESGCM] = {}
        for index, secret in enumerate(material):
            key = derive_key(secret, _KEY_INFO)
            kid = hashlib.sha256(_KID_LABEL + key).digest()[:_KID_LEN]
            if kid in self._aeads:
                raise ValueError(f"request-state secret #{index} repeats an earlier secret; remove the duplicate")
            self._aeads[kid] = AESGCM(key)
        self._seal_kid = next(iter(self._aeads))
        # Looked up once: seal's encrypt, AAD, prefix and key id; per version, kid -> (decrypt, AAD).
        self._seal_v1 = seal_version == 1
        aad, prefix = (_AAD_V1, _V1) if self._seal_v1 else (_AAD_V2, _V2)
        self._seal = (self._aeads[self._seal_kid].encrypt, aad + self._seal_kid, prefix, self._seal_kid)
        self._open_v1 = {kid: (aead.decrypt, _AAD_V1 + kid) for kid, aead in self._aeads.items()}
        self._open_v2 = {kid: (aead.decrypt, _AAD_V2 + kid) for kid, aead in self._aeads.items()}
        self._salts = tuple(derive_key(secret, _SALT_INFO) for secret in material)

    def __repr__(self) -> str:
        return f"<KeyRing keys={len(self._aeads)} sealing_kid={self._seal_kid.hex()} seal_version={self.seal_version}>"

    @property
    def seal_version(self) -> int:
        """The token version :meth:`seal` mints (1 or 2)."""
        return 1 if self._seal_v1 else 2

    @property
    def key_ids(self) -> tuple[str, ...]:
        """Hex key ids in ring order (the first seals): non-secret fingerprints for logs."""
        return tuple(kid.hex() for kid in self._aeads)

    def replace(self, secrets: Sequence[bytes]) -> None:
        """Use ``secrets`` from now on, validated exactly as the constructor does.

        Raises like the constructor and then leaves the ring unchanged. Tokens sealed before keep
        unsealing as long as their secret is still in ``secrets``. The seal version stays.
        """
        fresh = KeyRing(secrets, seal_version=self.seal_version)
        for name in self.__slots__:
            setattr(self, name, getattr(fresh, name))

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
        """Encrypt ``claims`` into a ``v2.`` token (``v1.`` with ``seal_version=1``) under the first secret.

        Raises ``ValueError`` for claims that would not unseal to equal claims (a bad type or
        value, an ``extra`` that is not JSON-native) or whose token would exceed
        :data:`MAX_TOKEN_LENGTH`: those are gateway bugs, caught at mint time.
        """
        encrypt, aad, prefix, kid = self._seal
        if self._seal_v1:
            plaintext = _to_v1(claims)
            nonce = _urandom(_NONCE_LEN)  # exactly as the release that sealed only version 1
        else:
            iat, exp, rnd, principal = claims.iat, claims.exp, claims.round, claims.principal
            aud, target, digest, hold = claims.aud, claims.target, claims.args_digest, claims.hold_id
            try:
                method = _V2_METHOD_CODES[claims.method]
                tag = "" if principal is None else principal
                # Anything but a str fails here, so the strings need no type check of their own.
                text = "".join((aud, target, digest, tag, hold, claims.owner))
                a = len(aud)
                b = a + len(target)
                c = b + len(digest)
                d = c + len(tag)
                e = d + len(hold)
                # The checks unseal applies (the same chain of ends), on what is about to be sealed.
                # type() rather than isinstance() for integers: True is an int to the type checker,
                # and would come back as 1.
                if not (
                    type(iat) is int
                    and type(exp) is int
                    and type(rnd) is int
                    and 0 <= iat < exp
                    and rnd >= 1
                    and 0 < a <= b < c <= d < e < len(text)
                    and (principal is None or principal)
                ):
                    raise ValueError("out of range")
                body = text.encode("utf-8", "surrogatepass")
                plaintext = _v2_pack(method, iat, exp, rnd, len(body), a, b, c, d, e) + body
            except (KeyError, TypeError, AttributeError, ValueError, struct.error) as exc:
                raise ValueError(f"refusing to seal invalid claims: {_invalid(claims) or exc}") from None
            if claims.extra:
                encoded, standard = _extra_json(claims.extra)
                plaintext = (
                    plaintext + encoded
                    if not standard
                    else bytes((method | _V2_STANDARD_EXTRA,)) + plaintext[1:] + encoded
                )
            nonce = _next_nonce()  # a counter from a random start: gateway.state.nonces says why
        raw = kid + nonce + encrypt(nonce, plaintext, aad)  # then b64url_nopad, inline
        token = prefix + _b2a(raw).translate(_STD_TO_URL).rstrip(b"=\n").decode("ascii")
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
        length = len(token)
        if length > MAX_TOKEN_LENGTH:
            raise StateError("malformed", f"token is {length} characters, over {MAX_TOKEN_LENGTH}")
        prefix = token[:3]
        if prefix == _V2:
            openers = self._open_v2
        elif prefix == _V1:
            openers = self._open_v1
        elif _OTHER_VERSION_RE.match(token):
            raise StateError("bad_version", "token is neither version 1 nor version 2")
        else:
            raise StateError("malformed", "no version prefix")
        # b64url_decode_strict, inline (gateway.state.encoding explains each step), on the whole
        # token (the translate keeps the prefix as it is), sliced after: bytes slice cheaper than str.
        rest = (length + 1) & 3  # the body's length mod 4
        try:
            raw = _a2b(token.encode("ascii").translate(_URL_TO_STD)[3:] + _PADDING[rest], strict_mode=True)
        except (binascii.Error, ValueError):  # UnicodeEncodeError is a ValueError
            raise StateError("malformed", "not unpadded base64url") from None
        if rest and token[-1] not in _CANONICAL_LAST[rest]:
            raise StateError("malformed", "non-canonical base64url")
        if len(raw) < _HEADER_LEN + _TAG_LEN:
            raise StateError("malformed", "token too short")
        opener = openers.get(raw[:_KID_LEN])
        if opener is None:
            raise StateError("unknown_key", f"kid {raw[:_KID_LEN].hex()} is not in the ring")
        decrypt, aad = opener
        try:
            payload = decrypt(raw[_KID_LEN:_HEADER_LEN], raw[_HEADER_LEN:], aad)
        except InvalidTag:
            raise StateError("decrypt_failed") from None
        if openers is self._open_v1:
            claims = _from_v1(payload)
            _check_time(claims.iat, claims.exp, _clock() if now is None else now)
            return claims
        # The version-2 plaintext (module docstring), read and checked in one place.
        try:
            method, iat, exp, rnd, size, a, b, c, d, e = _v2_unpack(payload)
            end = _V2_FIXED_LEN + size
            text = payload[_V2_FIXED_LEN:end].decode("utf-8", "surrogatepass")
        except (struct.error, UnicodeDecodeError):
            raise StateError("bad_claims", "version-2 plaintext does not parse") from None
        n = len(payload)
        # One chain of ends proves every length fits, and aud, args_digest, hold_id, owner non-empty.
        name = _V2_METHOD_NAMES[method]  # an unsigned byte, so always an index
        if not (name and iat < exp and rnd >= 1 and 0 < a <= b < c <= d < e < len(text) and n >= end):
            raise StateError("bad_claims", "version-2 claims out of range")
        extra: dict[str, Any] = {} if n == end else _extra_of(payload[end:], method & _V2_STANDARD_EXTRA)
        current = _clock() if now is None else now
        # Accept-conditions are stated positively so that a NaN clock refuses rather than accepts.
        if not (current < exp and iat <= current + FUTURE_SKEW_SECONDS):
            _check_time(iat, exp, current)
        return trusted_claims(
            iat,
            exp,
            text[:a],
            name,
            text[a:b],
            text[b:c],
            text[c:d] or None,
            text[d:e],
            rnd,
            text[e:],
            extra,
        )


def _check_time(iat: int, exp: int, current: float) -> None:
    """Refuse a token outside its validity window at ``current`` (``expired``, then ``not_yet_valid``)."""
    # Accept-conditions are stated positively so that a NaN clock refuses rather than accepts.
    if not current < exp:
        raise StateError("expired")
    if not iat <= current + FUTURE_SKEW_SECONDS:
        raise StateError("not_yet_valid", f"iat is {iat - current:.0f} s ahead")


def _invalid(claims: Claims) -> str:
    """Which claim :func:`_to_v2` refuses, for the error message (never on the fast path)."""
    checks = (
        ("iat", type(claims.iat) is int and claims.iat >= 0, "an integer >= 0"),
        ("exp", type(claims.exp) is int and claims.exp > claims.iat, "an integer > iat"),
        ("method", claims.method in _V2_METHOD_CODES if isinstance(claims.method, str) else False, "an MRTR method"),
        ("round", type(claims.round) is int and claims.round >= 1, "an integer >= 1"),
        ("principal", claims.principal is None or (isinstance(claims.principal, str) and claims.principal), ""),
    )
    for name, ok, what in checks:
        if not ok:
            return f"claim {name!r} must be {what or 'a non-empty string or None'}"
    for name in ("aud", "target", "args_digest", "hold_id", "owner"):
        value = getattr(claims, name)
        if not isinstance(value, str) or (not value and name != "target"):
            return f"claim {name!r} must be a {'' if name == 'target' else 'non-empty '}string"
    return ""


def generate_secret() -> str:
    """A new secret for ``state.keys``: 32 random bytes as unpadded base64url (43 characters).

    The configured string itself (UTF-8 encoded) is the secret; it is never base64-decoded, and
    HKDF turns its 256 bits of entropy into the AES key.
    """
    return _secrets.token_urlsafe(32)
