"""What the requestState tests share: the fixed instant and secrets, a full set of claims, and the
version-1 plaintext written independently of the gateway's own writer (an oracle must not call the
code it checks)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from gateway.state.claims import Claims, args_digest, principal_tag
from gateway.state.codec import KeyRing

NOW = 1_800_000_000
OLD = b"old-secret-old-secret-old-secret-0"
NEW = b"new-secret-new-secret-new-secret-1"

UNSEALABLE: list[dict[str, Any]] = [
    {"round": 0},
    {"iat": True},
    {"exp": NOW},
    {"method": "tools/list"},
    {"hold_id": ""},
    {"owner": ""},
    {"principal": ""},
    {"extra": {"t": (1, 2)}},
    {"extra": {"s": {1, 2}}},
    {"extra": {1: "int key"}},
    {"extra": {"n": float("nan")}},
]
"""Overrides of :func:`make_claims` that no token may carry: seal refuses them (every format)."""


def make_claims(**overrides: Any) -> Claims:
    base = Claims(
        iat=NOW,
        exp=NOW + 600,
        aud="weather",
        method="tools/call",
        target="get_forecast",
        args_digest=args_digest({"city": "Paris", "days": 3}),
        principal=principal_tag("Bearer abc", KeyRing([OLD]).salt),
        hold_id="hold-7f3a",
        round=2,
        owner="gateway-0",
        extra={"urlElicitations": ["e-1", "e-2"], "transcript": [{"k": "v", "n": 1.5, "ok": True}]},
    )
    return replace(base, **overrides)


def v1_plaintext(claims: Claims) -> bytes:
    """The documented version-1 plaintext (compact ASCII JSON, short keys) the previous release sealed."""
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
    return json.dumps(wire, separators=(",", ":")).encode()
