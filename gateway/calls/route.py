"""A route while the gateway runs: its configuration, its pool of backend sessions, what the backend
is sent as credentials, and the tool schemas cached for ``Mcp-Param-*`` validation. The front door,
the call core and the replica hop all serve a request through one of these."""

from __future__ import annotations

from dataclasses import dataclass, field

from gateway.backend_auth.credentials import RouteCredentials
from gateway.bounded import LruTtlCache
from gateway.config.model import RouteConfig
from gateway.legacy.pool import SessionPool
from gateway.legacy.session import JsonObj

TOOL_SCHEMA_TTL = 60.0
"""Seconds a backend's tool list is reused for ``Mcp-Param-*`` validation."""
TOOL_SCHEMA_ENTRIES = 1000
"""Default bound on cached tool lists per route (``limits.tool_schema_cache_entries``)."""


@dataclass(eq=False)
class RouteRuntime:
    config: RouteConfig
    pool: SessionPool
    credentials: RouteCredentials
    """What the backend is sent as credentials (``backend.auth``), resolved per backend request."""
    tool_schemas: LruTtlCache[str, dict[str, JsonObj]] = field(
        default_factory=lambda: LruTtlCache(TOOL_SCHEMA_ENTRIES, TOOL_SCHEMA_TTL)
    )
    """Per credential digest: tool name → inputSchema, for ``Mcp-Param-*`` validation. Bounded
    (least recently used first out) because every distinct credential adds an entry."""

    @property
    def name(self) -> str:
        return self.config.name
