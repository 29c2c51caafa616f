"""requestState: the sealed token that carries a multi-round-trip call from one round to the next.

:mod:`~gateway.state.claims` says what a token binds (:class:`~gateway.state.claims.Claims`, the
digests), :mod:`~gateway.state.codec` seals and unseals it (:class:`~gateway.state.codec.KeyRing`,
:class:`~gateway.state.codec.StateError`), :mod:`~gateway.state.boundary` opens a retry's token,
checks it (:func:`~gateway.state.boundary.check_bindings`) and seals a new round's, with keys from
the gateway's one :class:`~gateway.keyset.KeySet`. Pure: no I/O.
"""
