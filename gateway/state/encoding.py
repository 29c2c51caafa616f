"""The byte encodings every sealed value of the gateway shares: unpadded base64url and HKDF keys.

requestState tokens, old clients' session ids and the replica hop's MAC all use these, so a value
has exactly one accepted spelling everywhere and every key is derived from a state secret the same
way (HKDF-SHA256, no salt, a label of its own per use, so no two uses ever share a key).
Pure: stdlib and ``cryptography`` only.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Final

from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

_B64URL: Final = re.compile(r"[A-Za-z0-9_-]+", re.ASCII)


def b64url_nopad(data: bytes) -> str:
    """Base64url without padding: the one text encoding every value in this package uses."""
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def b64url_decode_strict(text: str) -> bytes:
    """Inverse of :func:`b64url_nopad` that accepts exactly one spelling per byte string.

    Raises ValueError for padding, characters outside the alphabet, an impossible length, or
    non-zero trailing bits (a second spelling of the same bytes)."""
    if not _B64URL.fullmatch(text) or len(text) % 4 == 1:
        raise ValueError("not unpadded base64url")
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as exc:
        raise ValueError("not unpadded base64url") from exc
    if b64url_nopad(raw) != text:
        raise ValueError("non-canonical base64url")
    return raw


def derive_key(secret: bytes, info: bytes) -> bytes:
    """A 32-byte key for the use ``info`` names, derived from one state secret (HKDF-SHA256)."""
    return HKDF(algorithm=SHA256(), length=32, salt=None, info=info).derive(secret)
