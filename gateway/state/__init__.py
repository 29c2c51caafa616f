"""requestState: the sealed token that carries a multi-round-trip call from one round to the next.

:mod:`~gateway.state.claims` says what a token binds (:class:`Claims`, the digests),
:mod:`~gateway.state.codec` seals and unseals it (:class:`KeyRing`, :class:`StateError`),
:mod:`~gateway.state.boundary` opens a retry's token, checks it (:func:`check_bindings`) and seals a
new round's, with keys from the gateway's one :class:`~gateway.keyset.KeySet`. Pure: no I/O.
"""

from gateway.keyset import generate_secret
from gateway.state.boundary import check_bindings
from gateway.state.claims import Claims, args_digest, principal_tag
from gateway.state.codec import MAX_TOKEN_LENGTH, WIRE_MESSAGE, KeyRing, StateError, StateReason

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
