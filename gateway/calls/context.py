"""What one call carries through the gateway: who calls, the route it uses, and the leased session
and exchange a hold keeps between rounds."""

from __future__ import annotations

from dataclasses import dataclass, field

from gateway.backend_auth.credentials import BackendCredential, OutboundHeaders
from gateway.calls.route import RouteRuntime
from gateway.calls.transcript import Carry, Step
from gateway.legacy.pool import LegacySession, PooledSession
from gateway.legacy.session import Exchange, JsonObj
from gateway.observability import tracing


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is calling (the principal) and what the backend is sent on the caller's behalf."""

    principal: str | None
    """The caller's identity as :mod:`gateway.auth` established it: what holds are bound to and counted
    by, and what backend sessions and caches are keyed by. ``None``: anonymous."""
    forward_headers: dict[str, str]
    """What the backend is sent on the caller's behalf (an :class:`OutboundHeaders` from the front door,
    which also carries the credential each backend request resolves)."""
    forwarded: bool = False
    """The request came from another replica over the authenticated hop (never forwarded again)."""

    @property
    def credential(self) -> BackendCredential | None:
        """The route's own backend credential for this caller (``backend.auth``), if any."""
        headers = self.forward_headers
        return headers.credential if isinstance(headers, OutboundHeaders) else None

    @property
    def session_identity(self) -> str | None:
        """Key of the backend sessions this caller may use: the principal, plus the client's
        ``Authorization`` only when the route forwards it as it came (a session's static headers are
        fixed when it opens, so a refreshed token gets its own session instead of riding on one
        opened with the old token). The gateway's own backend credential (``backend.auth``) is
        resolved per request and never part of the key."""
        forwarded = self.forward_headers.get("Authorization")
        if forwarded is None or forwarded == self.principal:
            return self.principal
        return f"{self.principal or ''}\n{forwarded}"


@dataclass(eq=False, slots=True)
class CallContext:
    """A call's lease: the backend session it holds (never absent while the lease lives), the exchange
    running on it, and what a hold keeps between rounds. Released once (:attr:`released`)."""

    route: RouteRuntime
    pooled: PooledSession
    exchange: Exchange | None
    """None before the call is sent (a round asked first) and while a url-mode hold waits for consent."""
    normalized_caps: JsonObj
    headers: dict[str, str]
    backend_method: str
    backend_params: JsonObj
    exclusive: bool = True  # an interactive call's lease; plain calls share sessions
    replayed: list[Step] = field(default_factory=list)  # transcript steps a replay answered
    reissue: bool = False  # url-mode hold: re-send the call after the client's consent
    replay: Carry | None = None  # a replayed call: stable input keys and the original call's deadline
    released: bool = False
    """The session went back to the pool (or is being wound down): nothing may use it any more."""
    answer_timeout: float | None = None
    """A call that may become a task: how long its answer may take (its task's ttl), not ``backend.timeout``."""
    span: tracing.Span | None = None
    """The backend exchange's CLIENT span while tracing is on, ended when the lease is (:meth:`end_span`)."""

    @property
    def session(self) -> LegacySession:
        return self.pooled.session

    def end_span(self, error: str | None = None, code: int | None = None, message: str | None = None) -> None:
        """End the backend exchange's span (failed with ``error`` when given); once."""
        span, self.span = self.span, None
        tracing.end(span, error, code, message)
