"""Which session object a route's transport needs: streamable HTTP, HTTP+SSE or stdio, with the
route's timeouts, limits and pinned revision, and the capabilities its client declared (mapped to
the handshake era). Kept apart from the pool so the pool reads as leasing, not construction."""

from __future__ import annotations

from typing import TypedDict

import aiohttp

from gateway.config.model import RouteConfig
from gateway.legacy.http_sse import HttpSseSession
from gateway.legacy.limits import BackendLimits
from gateway.legacy.session import JsonObj
from gateway.legacy.starts import StartBudget
from gateway.legacy.stdio import StdioSession
from gateway.legacy.streamable_http import StreamableHttpSession
from gateway.translate import capabilities as caps

LegacySession = StreamableHttpSession | HttpSseSession | StdioSession


def http_session(
    http: aiohttp.ClientSession, route: RouteConfig, legacy_caps: JsonObj, headers: dict[str, str]
) -> StreamableHttpSession | HttpSseSession:
    backend = route.backend
    assert backend.url is not None  # the config requires it for HTTP transports
    factory: type[StreamableHttpSession] | type[HttpSseSession]
    factory = HttpSseSession if backend.transport == "sse" else StreamableHttpSession
    return factory(http, backend.url, headers=headers, **_session_options(route, legacy_caps))


def stdio_session(route: RouteConfig, legacy_caps: JsonObj, *, starts: StartBudget | None = None) -> StdioSession:
    """An unstarted stdio session (``legacy_caps`` may be replaced before its handshake: a spare);
    its start waits for a place in ``starts``, the gateway-wide budget."""
    backend = route.backend
    assert backend.command is not None  # the config requires it for stdio
    options = _session_options(route, legacy_caps)
    return StdioSession(backend.command, env=backend.env, cwd=backend.cwd, starts=starts, **options)


class _SessionOptions(TypedDict):
    capabilities: JsonObj
    timeout: float
    connect_timeout: float
    offer_version: str | None
    limits: BackendLimits


def _session_options(route: RouteConfig, legacy_caps: JsonObj) -> _SessionOptions:
    """What every transport's session takes from the route: handshake capabilities, bounds, limits."""
    backend = route.backend
    return {
        "capabilities": legacy_caps,
        "timeout": backend.timeout,
        "connect_timeout": backend.connect_timeout,
        "offer_version": backend.protocol_version,
        "limits": BackendLimits(**backend.limits.model_dump()),
    }


def legacy_capabilities(route: RouteConfig, normalized_caps: JsonObj) -> JsonObj:
    """The client's (normalized) capabilities as the handshake revision offered declares them."""
    return caps.to_legacy(normalized_caps, route.backend.protocol_version or "2025-11-25")
