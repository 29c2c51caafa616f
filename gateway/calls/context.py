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
class _Progress:
    """What changes while a call runs: only :class:`CallContext`'s methods write it."""

    exchange: Exchange | None = None
    reissue: bool = False
    replay: Carry | None = None
    replayed: list[Step] = field(default_factory=list)
    released: bool = False
    answer_timeout: float | None = None
    span: tracing.Span | None = None


@dataclass(frozen=True, eq=False, slots=True)
class CallContext:
    """A call's lease: the backend session it holds (never absent while the lease lives), the exchange
    running on it, and what a hold keeps between rounds. Released once (:meth:`mark_released`).

    What the call is (its route, session, capabilities, headers, method and params) is fixed when the
    session is leased; what happens to it afterwards changes only through the methods below."""

    route: RouteRuntime
    pooled: PooledSession
    normalized_caps: JsonObj
    headers: dict[str, str]
    backend_method: str
    backend_params: JsonObj
    exclusive: bool = True  # an interactive call's lease; plain calls share sessions
    _progress: _Progress = field(default_factory=_Progress, init=False, repr=False)

    @property
    def session(self) -> LegacySession:
        return self.pooled.session

    # -- what the call is doing, read -------------------------------------------------------------

    @property
    def exchange(self) -> Exchange | None:
        """None before the call is sent (a round asked first), while a url-mode hold waits for
        consent, and once the session is released."""
        return self._progress.exchange

    @property
    def reissue(self) -> bool:
        """A url-mode hold: the call is sent again after the client's consent (:meth:`await_consent`)."""
        return self._progress.reissue

    @property
    def replay(self) -> Carry | None:
        """A replayed call: its stable input keys and the original call's deadline (:meth:`replaying`)."""
        return self._progress.replay

    @property
    def replayed(self) -> tuple[Step, ...]:
        """The transcript steps a replay answered (:meth:`answered_from_transcript`)."""
        return tuple(self._progress.replayed)

    @property
    def released(self) -> bool:
        """The session went back to the pool (or is being wound down): nothing may use it any more."""
        return self._progress.released

    @property
    def answer_timeout(self) -> float | None:
        """A call that may become a task: how long the answer of what is sent next may take (its
        task's ttl), not ``backend.timeout`` (:meth:`answer_within`)."""
        return self._progress.answer_timeout

    @property
    def span(self) -> tracing.Span | None:
        """The backend exchange's CLIENT span while tracing is on, ended when the lease is (:meth:`end_span`)."""
        return self._progress.span

    # -- what happens to it --------------------------------------------------------------------

    def new_span(self, span: tracing.Span | None) -> None:
        """A new backend exchange is traced by ``span``; the previous one's span (a url-mode call sent
        again after consent) ends first."""
        self.end_span()
        self._progress.span = span

    def sent(self, exchange: Exchange) -> None:
        """``exchange`` now runs the call on the session; no url-mode consent is awaited any more."""
        self._progress.exchange = exchange
        self._progress.reissue = False

    def await_consent(self) -> None:
        """The backend ended the call asking for URL interactions (-32042): no exchange runs; the
        call is sent again once the client consents."""
        self._progress.exchange = None
        self._progress.reissue = True

    def answer_within(self, seconds: float) -> None:
        """The answer of what is sent next may take ``seconds`` (the ttl of the task the call may
        become, or of a backend's own task), not ``backend.timeout``."""
        self._progress.answer_timeout = seconds

    def replaying(self, carry: Carry) -> None:
        """The call is a replay of a lost hold's: ``carry`` keeps its input keys and deadline."""
        self._progress.replay = carry

    def answered_from_transcript(self, step: Step) -> None:
        """A replay answered the backend's request with ``step``'s recorded answer."""
        self._progress.replayed.append(step)

    def mark_released(self) -> bool:
        """The session is given up from now on: True the first time, False when it already was."""
        if self._progress.released:
            return False
        self._progress.released = True
        return True

    def take_exchange(self) -> Exchange | None:
        """The exchange running on the session, which the call stops reading (None from then on)."""
        exchange, self._progress.exchange = self._progress.exchange, None
        return exchange

    def end_span(self, error: str | None = None, code: int | None = None, message: str | None = None) -> None:
        """End the backend exchange's span (failed with ``error`` when given); once."""
        span, self._progress.span = self._progress.span, None
        tracing.end(span, error, code, message)
