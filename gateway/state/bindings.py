"""Whether an unsealed ``requestState`` was minted for the very request and caller retrying with it.

Pure: stdlib only.
"""

from __future__ import annotations

import hmac

from gateway.state.claims import Claims
from gateway.state.refusal import StateError, StateReason

__all__ = ["check_bindings"]


def _same(sealed: str, actual: str) -> bool:
    # compare_digest refuses non-ASCII str, and names and URIs may be non-ASCII: compare bytes.
    return hmac.compare_digest(sealed.encode("utf-8", "surrogatepass"), actual.encode("utf-8", "surrogatepass"))


def check_bindings(
    claims: Claims,
    *,
    aud: str,
    method: str,
    target: str,
    args_digest: str,
    principal: str | None,
) -> None:
    """Refuse ``claims`` unless they were minted for this very request and caller.

    Checks in a fixed order and raises :class:`StateError` with the reason of the first mismatch:
    ``audience``, ``method``, ``target``, ``arguments``, ``principal``. ``principal`` is the
    :func:`~gateway.state.claims.principal_tag` of the retry's credential; a sealed ``None`` only
    matches ``None`` and vice versa, so adding or dropping a credential between rounds is refused.
    """
    checks: tuple[tuple[StateReason, str, str], ...] = (
        ("audience", claims.aud, aud),
        ("method", claims.method, method),
        ("target", claims.target, target),
        ("arguments", claims.args_digest, args_digest),
    )
    for reason, sealed, actual in checks:
        if not _same(sealed, actual):
            raise StateError(reason)
    if claims.principal is None or principal is None:
        if claims.principal is not None or principal is not None:
            raise StateError("principal", "credential presence changed")
    elif not _same(claims.principal, principal):
        raise StateError("principal")
