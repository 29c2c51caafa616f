"""A new session of a route, for its pool (:mod:`gateway.legacy.pool`): of the route's transport,
declaring the client's capabilities as the handshake revision offered declares them (a stdio
route's spare process when one is ready), answering the route's static roots itself; and its open,
reported to the route's health.
"""

from __future__ import annotations

import aiohttp

from gateway.config.model import RouteConfig
from gateway.errors import BackendUnavailable
from gateway.legacy.http_sse import HttpSseSession
from gateway.legacy.pooled import LegacySession
from gateway.legacy.session import JsonObj, SessionExpired
from gateway.legacy.spares import StdioSpares
from gateway.legacy.starts import RouteHealth, StartBudget
from gateway.legacy.stdio import StdioSession
from gateway.legacy.streamable_http import StreamableHttpSession
from gateway.translate import capabilities as caps


def new_session(
    http: aiohttp.ClientSession,
    route: RouteConfig,
    normalized_caps: JsonObj,
    headers: dict[str, str],
    *,
    spares: StdioSpares,
    starts: StartBudget | None,
) -> LegacySession:
    """An unopened session of the route's transport declaring the client's capabilities as the
    handshake revision offered declares them (stdio: one process, a ready spare if there is one, no
    headers to send); with the route's static ``roots``, it answers ``roots/list`` itself."""
    backend = route.backend
    legacy_caps = caps.to_legacy(normalized_caps, backend.protocol_version or "2025-11-25")
    session: LegacySession
    if backend.transport == "sse":
        session = HttpSseSession.for_route(http, route, legacy_caps, headers)
    elif backend.transport != "stdio":
        session = StreamableHttpSession.for_route(http, route, legacy_caps, headers)
    elif (spare := spares.take()) is not None:
        spare.adopt(legacy_caps)
        session = spare
    else:
        session = StdioSession.for_route(route, legacy_caps, starts=starts)
    if route.roots is not None:
        roots = [r.model_dump(exclude_none=True) for r in route.roots]
        session.self_answers["roots/list"] = {"roots": roots}
    return session


async def open_session(session: LegacySession, health: RouteHealth) -> None:
    """Open ``session`` (its handshake), telling ``health`` how a stdio start went."""
    try:
        await session.open()
    except SessionExpired as exc:
        raise BackendUnavailable("initialize_failed", "backend refused the new session") from exc
    except BackendUnavailable as exc:  # (a session that fails to open has closed itself)
        if exc.reason == "spawn_failed":
            health.failed(exc.reason)  # stdio: the process could not be started
        raise
    health.succeeded()
