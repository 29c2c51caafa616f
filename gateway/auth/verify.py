"""Bearer JWT verification with PyJWT: the principal is (issuer, subject), or a refusal reason.

PyJWT does the cryptography and the registered-claim checks (signature, ``exp``, ``nbf``, ``iss``,
``aud``, with ``leeway`` seconds of skew). This module decides only what PyJWT is asked:

1. The token's header is read unverified for two values, ``alg`` and ``kid``. ``alg`` must be in the
   route's allow-list, which can only hold asymmetric algorithms (the config model has no ``none``
   and no ``HS*``).
2. Candidate keys: those whose ``kid`` matches (every key when the token names none), filtered to
   the ones whose family fits ``alg`` (:func:`gateway.auth.verification_keys.compatible`). PyJWT is then called
   with exactly that one algorithm, so the header can never pick a weaker one.
3. ``exp``, ``iss``, ``aud`` and ``sub`` are required; ``sub`` must be a non-empty string.

Every refusal is a :class:`Refused` with a reason from :data:`REASONS` (a bounded metric label); the
client only ever sees the fixed 401 of :mod:`gateway.auth.gate`.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Final

import jwt

from gateway.auth.verification_keys import VerificationKey, compatible
from gateway.config.model import JwtConfig

REASONS: Final = frozenset(
    {"missing", "malformed", "algorithm", "unknown_key", "signature", "expired", "not_yet_valid", "issuer",
     "audience", "claims"}
)  # fmt: skip

KeySource = Callable[[str | None], Awaitable[Sequence[VerificationKey]]]
"""Keys that may carry a ``kid`` (a JWKS cache, or a static list)."""


@dataclass(frozen=True, slots=True)
class Refused(Exception):
    """A verdict: raised inside this module, returned from :meth:`JwtVerifier.verify`."""

    reason: str


def principal_of(issuer: str, subject: str) -> str:
    """The principal string every principal-keyed structure uses: unambiguous for any (iss, sub)."""
    return "jwt:" + json.dumps([issuer, subject], ensure_ascii=False, separators=(",", ":"))


def static_source(keys: Sequence[VerificationKey]) -> KeySource:
    async def lookup(kid: str | None) -> Sequence[VerificationKey]:
        return [k for k in keys if kid is None or k.kid is None or k.kid == kid]

    return lookup


@dataclass(frozen=True, slots=True)
class Verified:
    principal: str
    expires: float
    """The token's ``exp`` (Unix time): what is derived from it (a backend token, a listen stream) ends then."""


class JwtVerifier:
    def __init__(self, config: JwtConfig, keys: KeySource) -> None:
        self._config = config
        self._keys = keys

    async def verify(self, token: str) -> Verified | Refused:
        """The principal (and expiry) of a valid token, or why it is not one."""
        try:
            return await self._verify(token)
        except Refused as refused:
            return refused

    async def _verify(self, token: str) -> Verified:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise Refused("malformed") from None
        alg, kid = header.get("alg"), header.get("kid")
        if not isinstance(alg, str) or alg not in self._config.algorithms:
            raise Refused("algorithm")
        if kid is not None and not isinstance(kid, str):
            raise Refused("malformed")
        candidates = [k for k in await self._keys(kid) if compatible(alg, k.key)]
        if not candidates:
            raise Refused("unknown_key")
        last = Refused("signature")
        for candidate in candidates:
            try:
                claims = jwt.decode(
                    token,
                    key=candidate.key,
                    algorithms=[alg],
                    audience=self._config.audience,
                    issuer=self._config.issuer,
                    leeway=self._config.leeway,
                    options={"require": ["exp", "iss", "aud", "sub"], "verify_iat": False},
                )
            except jwt.InvalidSignatureError:
                continue  # another key with the same (or no) kid may have signed it
            except jwt.ExpiredSignatureError:
                raise Refused("expired") from None
            except jwt.ImmatureSignatureError:
                raise Refused("not_yet_valid") from None
            except jwt.InvalidIssuerError:
                raise Refused("issuer") from None
            except jwt.InvalidAudienceError:
                raise Refused("audience") from None
            except jwt.MissingRequiredClaimError:
                raise Refused("claims") from None
            except jwt.InvalidAlgorithmError:
                raise Refused("algorithm") from None
            except jwt.PyJWTError:
                # deny-on-error: anything else PyJWT refuses (bad encoding, bad claim types) is a refusal.
                last = Refused("malformed")
                continue
            subject = claims.get("sub")
            if not isinstance(subject, str) or not subject:
                raise Refused("claims")
            return Verified(principal_of(self._config.issuer, subject), float(claims["exp"]))
        raise last
