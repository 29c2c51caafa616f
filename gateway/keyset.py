"""The state secrets, every key derived from them, and the one text encoding of every sealed value.

One :class:`KeySet` holds the operator's state secrets (``state.keys`` or ``state.keys_file``) and,
for each use of them, one key per secret derived by HKDF-SHA256 (no salt, 32 bytes) under that
use's own :class:`Label`, so no two uses share a key. Every token format the gateway mints asks it
for its keys when it needs them: requestState and its principal salt (:mod:`gateway.state.codec`),
old clients' ``s1.`` session ids (:mod:`gateway.frontdoor.legacy_ids`), ``c1.`` cursors
(:mod:`gateway.translate.cursors`), the replica hop's signature (:mod:`gateway.replicas.auth`) and
``t1.`` task ids (:mod:`gateway.mcptasks.ids`).
The first secret's key seals or signs, every secret's key opens or verifies, so a key reload is one
:meth:`KeySet.replace` and every format rotates at once. Adding a use is adding a line to
:class:`Label`. It sits at the bottom of the package, beside ``errors``, because every format,
pure ``translate`` included, depends on it.

Every sealed or signed value is spelled in unpadded base64url and read back by
:func:`b64url_decode_strict`, which accepts exactly what :func:`b64url_nopad` writes (one spelling
per value): ``binascii.a2b_base64`` in strict mode, after a translate that maps the urlsafe alphabet
onto the standard one and the standard one's own ``+``, ``/`` and ``=`` onto a byte it refuses; the
last character must leave the bits past the last whole byte at zero.

Pure: stdlib and ``cryptography`` only.
"""

from __future__ import annotations

import binascii
import os
from collections.abc import Sequence
from enum import Enum
from typing import Final, cast

from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

__all__ = ["MIN_SECRET_BYTES", "KeySet", "Label", "b64url_decode_strict", "b64url_nopad", "generate_secret"]

MIN_SECRET_BYTES: Final = 32


class Label(bytes, Enum):
    """The HKDF ``info`` of each use of the state secrets (never change one: its keys would change)."""

    REQUEST_STATE = b"mrtr-gateway/request-state/v1/aes-256-gcm"
    PRINCIPAL_SALT = b"mrtr-gateway/request-state/v1/principal-salt"
    LEGACY_SESSION = b"mrtr-gateway/legacy-session/v1/aes-256-gcm"
    CURSOR = b"mrtr-gateway/cursor/v1/hmac-sha256"
    REPLICA_HOP = b"mrtr-gateway/replica-forward/v2/hmac-sha256"
    TASK_ID = b"mrtr-gateway/task-id/v1/aes-256-gcm"


class KeySet:
    """The state secrets and, per :class:`Label`, their derived keys in ring order (the first seals)."""

    def __init__(self, secrets: Sequence[bytes]) -> None:
        self._derived: dict[Label, tuple[bytes, ...]] = {}
        self.replace(secrets)

    def __repr__(self) -> str:
        return f"<KeySet secrets={len(self._derived[Label.REQUEST_STATE])}>"

    def __getitem__(self, label: Label) -> tuple[bytes, ...]:
        """The keys of ``label``, one per secret, the sealing (signing) one first."""
        return self._derived[label]

    def replace(self, secrets: Sequence[bytes]) -> None:
        """Use ``secrets`` from now on, for every label at once; raise and change nothing if they are bad."""
        if isinstance(cast("object", secrets), str | bytes | bytearray):
            raise TypeError("the state keys are a sequence of secrets, e.g. KeySet([secret]), not one secret")
        for index, secret in enumerate(cast("Sequence[object]", secrets)):
            if not isinstance(secret, bytes | bytearray):
                # Never coerce: bytes(32) would silently build an all-zero secret.
                raise TypeError(
                    f"request-state secret #{index} is a {type(secret).__name__}; pass bytes "
                    "(encode configured strings as UTF-8)"
                )
            if len(secret) < MIN_SECRET_BYTES:
                raise ValueError(
                    f"request-state secret #{index} is {len(secret)} bytes; each secret must be at least "
                    f"{MIN_SECRET_BYTES} bytes. Generate one with `mrtr-gateway gen-key`."
                )
            if secret in secrets[:index]:
                raise ValueError(f"request-state secret #{index} repeats an earlier secret; remove the duplicate")
        if not secrets:
            raise ValueError("at least one request-state secret is required; generate one with `mrtr-gateway gen-key`")
        # One assignment: no reader ever sees some labels rotated and others not.
        self._derived = {label: tuple(_derive(bytes(secret), label) for secret in secrets) for label in Label}


def generate_secret() -> str:
    """A new secret for ``state.keys``: 32 random bytes as unpadded base64url (43 characters).

    The configured string itself (UTF-8 encoded) is the secret, never base64-decoded; HKDF turns its
    256 bits of entropy into each key."""
    return b64url_nopad(os.urandom(32))


def _derive(secret: bytes, label: Label) -> bytes:
    return HKDF(algorithm=SHA256(), length=32, salt=None, info=label.value).derive(secret)


_URL_TO_STD: Final = bytes.maketrans(b"-_+/=", b"+/!!!")
_STD_TO_URL: Final = bytes.maketrans(b"+/", b"-_")
# Padding that makes an unpadded body of each length (mod 4) standard base64; "!" refuses length 1.
_PADDING: Final = (b"", b"!", b"==", b"=")
# The characters that may end a body of each length (mod 4): the unused low bits are zero.
_ALPHABET: Final = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
_CANONICAL_LAST: Final = ("", "", _ALPHABET[0::16], _ALPHABET[0::4])


def b64url_nopad(data: bytes) -> str:
    """Base64url without padding: the one text encoding of every sealed or signed value."""
    return binascii.b2a_base64(data, newline=False).translate(_STD_TO_URL).rstrip(b"=").decode("ascii")


def b64url_decode_strict(text: str) -> bytes:
    """Inverse of :func:`b64url_nopad` that accepts exactly one spelling per byte string.

    Raises ``ValueError`` for an empty string, padding, characters outside the alphabet (whitespace
    and non-ASCII included), an impossible length, or non-zero trailing bits."""
    rest = len(text) % 4
    try:
        raw = binascii.a2b_base64(text.encode("ascii").translate(_URL_TO_STD) + _PADDING[rest], strict_mode=True)
    except (binascii.Error, ValueError) as exc:  # UnicodeEncodeError is a ValueError
        raise ValueError("not unpadded base64url") from exc
    if not raw or (rest and text[-1] not in _CANONICAL_LAST[rest]):
        raise ValueError("non-canonical base64url")
    return raw
