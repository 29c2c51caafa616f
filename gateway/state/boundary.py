"""The one place a ``requestState`` is opened and sealed, modelled on the SDK's ``RequestStateBoundary``.

Unseal on the way in, seal on the way out; the call layer never touches the codec. The front door
opens a retry's token before any backend work (:meth:`RequestStateBoundary.open`): unsealed, then
checked against the request it claims to continue (:func:`check_bindings`: route, method, target,
arguments digest, caller), and only then handed on as :class:`~gateway.state.claims.Claims`. A new
round's token is sealed here too (:meth:`RequestStateBoundary.seal`), so the binding written and
the binding checked cannot drift apart. Every refusal goes through :meth:`RequestStateBoundary.reject`:
the real reason is logged and counted, the client gets the one fixed -32602 "Invalid or expired
requestState" (:class:`~gateway.errors.InvalidRequestState`). Pure: no aiohttp, no I/O.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, NoReturn

import structlog

from gateway.errors import InvalidRequestState
from gateway.state.claims import Claims, RequestIdentity, principal_tag
from gateway.state.codec import KeyRing, StateError, StateReason

log = structlog.get_logger("gateway.state")

TRACE_LINK = "tl"
"""The ``extra`` claim with the call's first round span, when the call was traced."""


class RequestStateBoundary:
    """Opens retries' tokens and seals new rounds' tokens for one replica."""

    def __init__(
        self,
        keyring: KeyRing,
        *,
        replica_id: str,
        ttl: float,
        advertise_url: str | None = None,
        count_refusal: Callable[[str], None] | None = None,
    ) -> None:
        self._keyring = keyring
        self.replica_id = replica_id
        self.advertise_url = advertise_url
        self._ttl = ttl
        self._count_refusal = count_refusal or (lambda _reason: None)
        # This process's incarnation, sealed into every state: a replica restarted under the same
        # id knows a hold its predecessor sealed died with it (and may be replayed).
        self.boot = secrets.token_urlsafe(9)

    def principal(self, credential: str | None) -> str | None:
        """The caller's tag as tokens and holds bind it (keyed with the current sealing key's salt)."""
        return principal_tag(credential, self._keyring.salt)

    def reject(self, route: str, reason: str) -> NoReturn:
        """Refuse a retry: the real ``reason`` to the log and metrics, the fixed error to the client."""
        self._count_refusal(reason)
        log.warning("request_state_refused", route=route, reason=reason)
        raise InvalidRequestState(reason)

    def open(self, route: str, method: str, params: Mapping[str, Any], credential: str | None) -> Claims:
        """The claims of ``params["requestState"]``, checked against this request and caller."""
        identity = RequestIdentity.of(method, params)
        try:
            claims = self._keyring.unseal(params.get("requestState"))
            # A tag sealed before a key rotation was made with an older ring entry's salt.
            salts = self._keyring.salts
            for salt in salts:
                try:
                    check_bindings(
                        claims,
                        aud=route,
                        method=method,
                        target=identity.target,
                        args_digest=identity.args_digest,
                        principal=principal_tag(credential, salt),
                    )
                    break
                except StateError as exc:
                    if exc.reason != "principal" or salt is salts[-1]:
                        raise
        except StateError as exc:
            self.reject(route, exc.reason)
        return claims

    def owned_here(self, claims: Claims) -> bool:
        return claims.owner == self.replica_id

    def owner_url(self, claims: Claims) -> str | None:
        """Where the replica that sealed ``claims`` said it can be reached (sealed, so trusted)."""
        url = claims.extra.get("owner_url")
        return url if isinstance(url, str) else None

    def trace_link(self, claims: Claims) -> str | None:
        """The call's first round span (``trace_id-span_id``) when it was traced (sealed, so trusted)."""
        link = claims.extra.get(TRACE_LINK)
        return link if isinstance(link, str) else None

    def sealed_before_restart(self, claims: Claims) -> bool:
        """Sealed under this replica's id by an earlier process: its holds died with that process."""
        return claims.extra.get("boot") != self.boot

    def seal(
        self,
        *,
        route: str,
        identity: RequestIdentity,
        principal: str | None,
        hold_id: str,
        round_: int,
        lifetime: float,
        not_after: float,
        transcript: list[Any] | None = None,
        trace_link: str | None = None,
    ) -> str:
        """The token of one round of a held call.

        It expires after ``lifetime`` seconds (bounded by the state TTL) and never after the call's
        absolute deadline ``not_after`` (monotonic seconds), which it also carries for a replay. A
        ``transcript`` (the call's server requests and answers) is sealed in for routes that may replay
        a lost hold, unless it makes the token too large: then that round cannot be replayed. A
        ``trace_link`` (the first round's span, 49 characters, only while tracing is on) lets a later
        round's span link to it (:mod:`gateway.observability.tracing`)."""
        now = int(time.time())
        ttl = int(min(self._ttl, lifetime))
        until = int(time.time() + (not_after - time.monotonic()))  # the call's absolute deadline
        extra: dict[str, Any] = {"boot": self.boot, "until": until}
        if self.advertise_url:
            extra["owner_url"] = self.advertise_url
        if trace_link:
            extra[TRACE_LINK] = trace_link
        exp = max(min(now + max(ttl, 1), until), now + 1)
        claims = Claims(
            iat=now,
            exp=exp,
            aud=route,
            method=identity.method,
            target=identity.target,
            args_digest=identity.args_digest,
            principal=principal,
            hold_id=hold_id,
            round=round_,
            owner=self.replica_id,
            extra=extra,
        )
        if transcript is not None:
            try:
                return self._keyring.seal(replace(claims, extra={**extra, "log": transcript}))
            except ValueError:  # the answers do not fit in a token: this round cannot be replayed
                log.info("replay_log_too_large", route=route, entries=len(transcript))
        return self._keyring.seal(claims)


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


def _same(sealed: str, actual: str) -> bool:
    # compare_digest refuses non-ASCII str, and names and URIs may be non-ASCII: compare bytes.
    return hmac.compare_digest(sealed.encode("utf-8", "surrogatepass"), actual.encode("utf-8", "surrogatepass"))
