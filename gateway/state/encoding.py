"""The byte encodings every sealed value of the gateway shares: unpadded base64url and HKDF keys.

requestState tokens, old clients' session ids and the replica hop's MAC all use these, so a value
has exactly one accepted spelling everywhere and every key is derived from a state secret the same
way (HKDF-SHA256, no salt, a label of its own per use, so no two uses ever share a key).

Both directions go straight to :mod:`binascii` (the C codec under :mod:`base64`), because a
requestState is encoded once and decoded once on every round of every held call. Strictness does
not come from a regular expression but from three cheap steps that together admit exactly the
strings :func:`b64url_nopad` produces:

1. ``str.encode("ascii")`` refuses every non-ASCII character;
2. one ``bytes.translate`` maps the urlsafe alphabet onto the standard one and maps ``+``, ``/``
   and ``=`` (the standard alphabet's own characters and padding, never part of an unpadded
   base64url string) to ``!``, which ``binascii.a2b_base64(..., strict_mode=True)`` refuses like
   any other non-alphabet byte (whitespace included);
3. the last character must leave the bits past the last whole byte at zero, as an encoder
   writes them (``QR`` and ``QQ`` both decode to ``A``; only ``QQ`` is accepted). This is what a
   canonical re-encode and compare would check, at the price of one set lookup instead of a
   second pass over the token.

Pure: stdlib and ``cryptography`` only.
"""

from __future__ import annotations

import binascii
from typing import Final

from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

URL_TO_STD: Final = bytes.maketrans(b"-_+/=", b"+/!!!")
STD_TO_URL: Final = bytes.maketrans(b"+/", b"-_")
# Padding that turns an unpadded body of each length (mod 4) into standard base64. A length of
# 1 (mod 4) encodes no whole byte: ``!`` makes strict mode refuse it.
PADDING: Final = (b"", b"!", b"==", b"=")
# The characters that may end a body of each length (mod 4): after 2 characters (one byte) the
# last one carries 4 unused bits, after 3 (two bytes) 2 unused bits, and unused bits are zero.
_ALPHABET: Final = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
CANONICAL_LAST: Final[tuple[frozenset[str], ...]] = (
    frozenset(),  # unused: a whole number of bytes
    frozenset(),  # unused: refused by the decoder already
    frozenset(_ALPHABET[0::16]),
    frozenset(_ALPHABET[0::4]),
)
_b2a: Final = binascii.b2a_base64
_a2b: Final = binascii.a2b_base64


def b64url_nopad(data: bytes) -> str:
    """Base64url without padding: the one text encoding every value in this package uses.

    The encoder's newline goes with the padding in one ``rstrip`` (no keyword argument to parse;
    a ``translate`` that deletes them instead costs more than the ``rstrip``).
    """
    return _b2a(data).translate(STD_TO_URL).rstrip(b"=\n").decode("ascii")


def b64url_decode_strict(text: str) -> bytes:
    """Inverse of :func:`b64url_nopad` that accepts exactly one spelling per byte string.

    Raises ValueError for an empty string, padding, characters outside the alphabet (whitespace
    and non-ASCII included), an impossible length, or non-zero trailing bits (a second spelling of
    the same bytes)."""
    if not text:
        raise ValueError("not unpadded base64url")
    rest = len(text) & 3
    try:
        raw = _a2b(text.encode("ascii").translate(URL_TO_STD) + PADDING[rest], strict_mode=True)
    except (binascii.Error, ValueError) as exc:  # UnicodeEncodeError is a ValueError
        raise ValueError("not unpadded base64url") from exc
    if rest and text[-1] not in CANONICAL_LAST[rest]:
        raise ValueError("non-canonical base64url")
    return raw


def derive_key(secret: bytes, info: bytes) -> bytes:
    """A 32-byte key for the use ``info`` names, derived from one state secret (HKDF-SHA256)."""
    return HKDF(algorithm=SHA256(), length=32, salt=None, info=info).derive(secret)
