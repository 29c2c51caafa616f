"""What a sealed ``requestState`` says, and the two digests that keep it small and private.

The MCP 2026-07-28 spec makes the echoed ``requestState`` attacker-controlled, so the gateway never
trusts anything a client sends back beyond what it sealed itself. :class:`Claims` is that sealed
content: enough to bind a retry to the exact request it continues (route, method, target, a digest
of the arguments, the caller) and to find the held legacy exchange (hold id, round, owning replica).

Two values are digests rather than copies, for different reasons:

* :func:`args_digest` binds the arguments without carrying them. Arguments can be large, and the
  token only has to prove "same arguments as the round that minted it", not reproduce them.
* :func:`principal_tag` binds the caller's credential without carrying it, even encrypted. It is a
  keyed MAC (HMAC-SHA256 under a salt derived from the gateway's key ring), so a leaked token does
  not offer an offline guessing oracle for the credential, and two gateways with different keys
  produce unrelated tags for the same credential.

A third, :func:`request_digest`, binds each answer in a replay transcript to the server request it
answered, so a replay never hands an answer to a question the user did not see. All three are 16
bytes (128 bits) in unpadded base64url: plenty for equality checks, and short. Pure: stdlib only.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from gateway.keyset import b64url_nopad

__all__ = [
    "MRTR_METHODS",
    "Claims",
    "RequestIdentity",
    "args_digest",
    "credential_digest",
    "principal_tag",
    "request_digest",
]

_DIGEST_BYTES = 16

MRTR_METHODS: Final = frozenset({"tools/call", "prompts/get", "resources/read"})
"""The only methods whose results carry ``requestState``."""


@dataclass(frozen=True, slots=True)
class Claims:
    """The content of one sealed ``requestState``; see :mod:`gateway.state.codec` for its wire form.

    ``extra`` is for small JSON-native values (dict/list/str/int/float/bool/None) such as URL-mode
    elicitation ids or a replay transcript. It is sealed like every other claim; after a round trip
    it comes back as plain ``dict``/``list`` values, so use those types if you compare claims.
    """

    iat: int
    """Issued-at, unix seconds."""
    exp: int
    """Expiry, unix seconds; the token is refused from this instant on."""
    aud: str
    """Audience: the route name that minted the token."""
    method: str
    """``tools/call``, ``prompts/get`` or ``resources/read``."""
    target: str
    """Tool or prompt name, or resource URI."""
    args_digest: str
    """:func:`args_digest` of the request's arguments."""
    principal: str | None
    """:func:`principal_tag` of the caller's credential; ``None`` when the client presented none."""
    hold_id: str
    """The held legacy exchange this token continues."""
    round: int
    """1-based input round; the hold registry refuses stale rounds."""
    owner: str
    """Replica id of the gateway instance that holds the exchange."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Small JSON-native extras, sealed too."""


def args_digest(arguments: Mapping[str, Any] | None) -> str:
    """Order-independent digest of a request's arguments (``None`` digests like ``{}``).

    Canonical JSON (sorted keys, no whitespace, UTF-8 text) hashed with SHA-256, first 16 bytes.
    The ``surrogatepass`` encode keeps this total: a lone surrogate in client text digests instead
    of raising, and the digest is never decoded.
    """
    canonical = json.dumps(
        {} if arguments is None else dict(arguments),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return b64url_nopad(hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).digest()[:_DIGEST_BYTES])


REQUEST_DIGEST_IGNORES = frozenset({"_meta"})
"""Top-level ``params`` members left out of :func:`request_digest`: ``_meta`` carries progress
tokens, related-request and related-task ids, which a legacy server mints afresh on every run and
a client never shows the user. The JSON-RPC ``id`` of the server request is not part of ``params``
and is left out too. Everything else stays in, ``elicitationId`` and a url-mode elicitation's
``url`` included: a value that changes between runs makes the replay stop there and ask the user
again, which costs a round but never answers an unseen question."""


def request_digest(method: str, params: Mapping[str, Any] | None) -> str:
    """Digest of one server request as the user saw it: method and params, canonical JSON.

    Same canonical form as :func:`args_digest` (sorted keys, no whitespace, UTF-8), over
    ``[method, params]`` without the members in :data:`REQUEST_DIGEST_IGNORES`.
    """
    kept = {k: v for k, v in (params or {}).items() if k not in REQUEST_DIGEST_IGNORES}
    canonical = json.dumps([method, kept], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return b64url_nopad(hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).digest()[:_DIGEST_BYTES])


def principal_tag(credential: str | None, salt: bytes) -> str | None:
    """Keyed, truncated MAC of the client's credential, or ``None`` when there is no credential.

    ``salt`` is normally :attr:`gateway.state.codec.KeyRing.salt`. An empty credential counts as no
    credential, so a binding never hinges on the empty string.
    """
    if not credential:
        return None
    mac = hmac.new(salt, credential.encode("utf-8", "surrogatepass"), hashlib.sha256).digest()
    return b64url_nopad(mac[:_DIGEST_BYTES])


@dataclass(frozen=True, slots=True)
class RequestIdentity:
    """What a requestState binds a retry to besides its caller: the method, its target (tool or
    prompt name, or resource URI) and :func:`args_digest` of its arguments."""

    method: str
    target: str
    args_digest: str

    @classmethod
    def of(cls, method: str, params: Mapping[str, Any]) -> RequestIdentity:
        arguments = params.get("arguments")
        bound = arguments if isinstance(arguments, Mapping) and method != "resources/read" else None
        return cls(method, request_target(method, params), args_digest(bound))


def request_target(method: str, params: Mapping[str, Any]) -> str:
    """The tool or prompt name, or the resource URI, of a request ("" when it names none).

    Cheap, unlike a whole :class:`RequestIdentity`, whose digest encodes every argument: what
    only needs the target (the request log) asks for this alone.
    """
    value = params.get("uri") if method == "resources/read" else params.get("name")
    return str(value) if value is not None else ""


def credential_digest(credential: str | None) -> str:
    """A short unkeyed digest of a client credential: what backend sessions, caches and old clients'
    session ids are keyed by (never the credential itself)."""
    if not credential:
        return "-"
    return hashlib.sha256(credential.encode()).hexdigest()[:32]
