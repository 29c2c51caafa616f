"""The front door's collaborators, built once by :func:`gateway.app.build_app` and handed to every
route handler (rather than each handler looking services up in ``request.app``).

Everything here is constructed before the application starts, except what only exists while it
runs: the outgoing HTTP client and the routes' session pools, which the app's cleanup contexts add
(:meth:`FrontDoor.open_routes`) and take away again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import aiohttp
from aiohttp import web

from gateway.auth import AuthGates
from gateway.calls import CallDriver, Caller, RouteRuntime, ToolSchemas
from gateway.config.load import Settings
from gateway.drain import Drain
from gateway.frontdoor.origin import OriginPolicy
from gateway.listen import ListenHubs
from gateway.observability.metrics import Metrics
from gateway.replicas.auth import ForwardSigner
from gateway.replicas.forward import ReplicaHop
from gateway.state.boundary import RequestStateBoundary
from gateway.state.legacy_ids import LegacySessionIds
from gateway.translate.cursors import Cursors


@dataclass(eq=False)
class FrontDoor:
    """What the handlers of every route share."""

    settings: Settings
    metrics: Metrics
    origins: OriginPolicy
    auth: AuthGates
    signer: ForwardSigner
    cursors: Cursors
    legacy_ids: LegacySessionIds
    hubs: ListenHubs
    boundary: RequestStateBoundary
    driver: CallDriver
    schemas: ToolSchemas
    hop: ReplicaHop
    drain: Drain
    """This replica's drain state: a draining replica refuses new calls, serves retries."""
    http: Callable[[], aiohttp.ClientSession]
    """The outgoing HTTP client (exists while the app runs)."""
    routes: dict[str, RouteRuntime] = field(default_factory=dict)
    """Route path → runtime, filled when the app starts (the pools need the HTTP client)."""
    closing: bool = False
    """Set on shutdown: old clients' open streams end at their next quiet moment (they resume elsewhere)."""


@dataclass(frozen=True, slots=True)
class Inbound:
    """One request past the front door's checks (Origin, body, replica hop signature, auth)."""

    request: web.Request
    route: RouteRuntime
    body: bytes
    principal: str | None
    forwarded: bool
    """It came from another replica over the authenticated hop (never forwarded again)."""

    def caller(self) -> Caller:
        """Who calls, and what the backend is sent on their behalf (the route's headers, and the
        client's ``Authorization`` when the route forwards it)."""
        backend = self.route.config.backend
        credential = self.request.headers.get("Authorization")
        forward = dict(backend.headers)
        if backend.forward_authorization and credential:
            forward["Authorization"] = credential
        return Caller(principal=self.principal, forward_headers=forward, forwarded=self.forwarded)
