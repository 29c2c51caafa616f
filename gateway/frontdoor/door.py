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

from gateway.auth.gate import AuthGates
from gateway.backend_auth.credentials import OutboundHeaders
from gateway.calls.context import Caller
from gateway.calls.core import CallCore
from gateway.calls.route import RouteRuntime
from gateway.calls.schemas import ToolSchemas
from gateway.config.load import Settings
from gateway.drain import Drain
from gateway.frontdoor.legacy_ids import LegacySessionIds
from gateway.frontdoor.origin import OriginPolicy
from gateway.listen.hub import ListenHubs
from gateway.mcptasks.service import TaskService
from gateway.observability.metrics.registry import Metrics
from gateway.replicas.auth import ForwardSigner
from gateway.replicas.forward import ReplicaHop
from gateway.state.boundary import RequestStateBoundary
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
    core: CallCore
    schemas: ToolSchemas
    hop: ReplicaHop
    drain: Drain
    """This replica's drain state: a draining replica refuses new calls, serves retries."""
    tasks: TaskService
    """The tasks this replica owns: ``tasks/get``, ``tasks/update``, ``tasks/cancel``."""
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
    token: str | None = None
    """``auth.jwt`` routes: the client's verified bearer token."""
    token_expires: float | None = None
    """``auth.jwt`` routes: that token's ``exp`` (Unix time)."""

    def caller(self) -> Caller:
        """Who calls, and what the backend is sent on their behalf: the route's headers, the
        client's ``Authorization`` only where the route forwards it (never on an ``auth.jwt`` route
        unless ``backend.auth.mode`` is ``passthrough``), and the route's own credential, resolved
        per backend request (``backend.auth``)."""
        credentials = self.route.credentials
        forward = dict(self.route.config.backend.headers)
        client = self.request.headers.get("Authorization")
        if client and credentials.forwards_client_token:
            forward["Authorization"] = client
        credential = credentials.for_caller(self.principal, self.token, self.token_expires)
        return Caller(self.principal, OutboundHeaders(forward, credential), self.forwarded)
