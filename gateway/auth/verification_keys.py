"""Verification keys for bearer JWTs: parsing (PEM, JWK, JWKS) and which key may check which ``alg``.

Parsing and signature checking belong to PyJWT and ``cryptography``; this module only turns
configured or fetched key material into public-key objects and refuses what must never verify a
token:

* symmetric keys (``kty: oct``) and private keys: a public key must never double as an HMAC secret,
  and the gateway has no business holding an issuer's private key;
* JWKs whose ``use`` is not ``sig``;
* a key whose family does not match the token's ``alg`` (an RSA key never checks an ``ES256``
  token, a P-384 key never checks ``ES256``), so an algorithm-confusion token finds no key.

Pure: no I/O beyond reading the files it is given, no aiohttp.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
from cryptography.hazmat.primitives.serialization import load_pem_public_key

__all__ = ["BadKey", "PublicKey", "VerificationKey", "compatible", "parse_jwks", "parse_static_keys"]

PublicKey = rsa.RSAPublicKey | ec.EllipticCurvePublicKey | ed25519.Ed25519PublicKey | ed448.Ed448PublicKey

_EC_CURVES = {"ES256": "secp256r1", "ES384": "secp384r1", "ES512": "secp521r1"}

MAX_KEYS = 64
"""Most keys kept from one JWKS document or one static list (more are ignored, and logged by the caller)."""


class BadKey(ValueError):
    """Configured key material that cannot be used; the message says which item and why."""


@dataclass(frozen=True, slots=True)
class VerificationKey:
    kid: str | None
    key: PublicKey


def compatible(alg: str, key: PublicKey) -> bool:
    """Whether ``key`` may verify a token signed with ``alg`` (family and, for EC, curve)."""
    if alg.startswith(("RS", "PS")):
        return isinstance(key, rsa.RSAPublicKey)
    if alg in _EC_CURVES:
        return isinstance(key, ec.EllipticCurvePublicKey) and key.curve.name == _EC_CURVES[alg]
    if alg == "EdDSA":
        return isinstance(key, ed25519.Ed25519PublicKey | ed448.Ed448PublicKey)
    return False


def _from_jwk(jwk: Mapping[str, Any]) -> VerificationKey:
    kty = jwk.get("kty")
    if kty not in ("RSA", "EC", "OKP"):
        raise BadKey(f"kty {kty!r} is not an asymmetric key type (RSA, EC, OKP)")
    if "d" in jwk:
        raise BadKey("is a private key; configure the public key only")
    if jwk.get("use", "sig") != "sig":
        raise BadKey("is not a signing key (use != sig)")
    kid = jwk.get("kid")
    if kid is not None and not isinstance(kid, str):
        raise BadKey("kid is not a string")
    try:
        key = jwt.PyJWK(dict(jwk)).key
    except (jwt.PyJWTError, ValueError, TypeError, KeyError) as exc:
        raise BadKey(f"is not a usable JWK ({type(exc).__name__})") from exc
    if not isinstance(key, PublicKey):
        raise BadKey("is not a public key")
    return VerificationKey(kid, key)


def parse_jwks(document: Any) -> tuple[list[VerificationKey], int]:
    """The usable signing keys of a JWKS document, and how many entries were skipped.

    Raises :class:`BadKey` when the document is not a JWKS at all; unusable entries (symmetric,
    encryption-only, unknown types) are skipped, as RFC 7517 asks of unknown key types.
    """
    if not isinstance(document, Mapping) or not isinstance(document.get("keys"), list):
        raise BadKey('not a JWKS document (an object with a "keys" list)')
    usable: list[VerificationKey] = []
    skipped = 0
    for entry in document["keys"][:MAX_KEYS]:
        try:
            usable.append(_from_jwk(entry if isinstance(entry, Mapping) else {}))
        except BadKey:
            skipped += 1
    return usable, skipped + max(len(document["keys"]) - MAX_KEYS, 0)


def _parse_one(text: str) -> list[VerificationKey]:
    stripped = text.strip()
    if stripped.startswith("-----BEGIN"):
        if "PRIVATE KEY" in stripped.split("\n", 1)[0]:
            raise BadKey("is a private key; configure the public key only")
        try:
            key = load_pem_public_key(stripped.encode())
        except ValueError as exc:
            raise BadKey("is not a PEM public key") from exc
        if not isinstance(key, PublicKey):
            raise BadKey("is not an RSA, EC or Ed25519/Ed448 public key")
        return [VerificationKey(None, key)]
    try:
        document = json.loads(stripped)
    except ValueError as exc:
        raise BadKey("is neither PEM nor JSON (a JWK or a JWKS)") from exc
    if isinstance(document, Mapping) and "keys" in document:
        keys, skipped = parse_jwks(document)
        if skipped or not keys:
            raise BadKey("holds keys that cannot verify signatures (symmetric, private or unknown)")
        return keys
    if not isinstance(document, Mapping):
        raise BadKey("is JSON but not a JWK object")
    return [_from_jwk(document)]


def parse_static_keys(inline: Iterable[str], files: Iterable[str]) -> list[VerificationKey]:
    """Every configured static key; a bad one is an error naming its place, never silently dropped."""
    keys: list[VerificationKey] = []
    for index, text in enumerate(inline):
        try:
            keys += _parse_one(text)
        except BadKey as exc:
            raise BadKey(f"keys[{index}] {exc}") from exc
    for index, name in enumerate(files):
        try:
            text = Path(name).read_text(encoding="utf-8")
        except OSError as exc:
            raise BadKey(f"key_files[{index}] ({name}) cannot be read: {exc.strerror}") from exc
        try:
            keys += _parse_one(text)
        except BadKey as exc:
            raise BadKey(f"key_files[{index}] ({name}) {exc}") from exc
    if len(keys) > MAX_KEYS:
        raise BadKey(f"{len(keys)} static keys; at most {MAX_KEYS}")
    return keys
