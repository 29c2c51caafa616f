"""requestState: the sealed token that carries a multi-round-trip call from one round to the next.

:mod:`gateway.state.claims` says what a token binds (:class:`Claims`, :func:`args_digest`,
:func:`principal_tag`); :mod:`gateway.state.codec` seals and verifies it (:class:`KeyRing`,
:func:`check_bindings`, :class:`StateError`). Pure code: no aiohttp, no I/O, so the front door,
the hold registry and the replica hop can all share it and it can be tested without a server.
Single-use enforcement lives in the hold registry, not here.
"""

from gateway.state.claims import Claims, args_digest, principal_tag
from gateway.state.codec import (
    MAX_TOKEN_LENGTH,
    WIRE_MESSAGE,
    KeyRing,
    StateError,
    StateReason,
    check_bindings,
    generate_secret,
)

__all__ = [
    "MAX_TOKEN_LENGTH",
    "WIRE_MESSAGE",
    "Claims",
    "KeyRing",
    "StateError",
    "StateReason",
    "args_digest",
    "check_bindings",
    "generate_secret",
    "principal_tag",
]
