"""The backend's tool input schemas, for checking ``Mcp-Param-*`` headers before a ``tools/call``.

The front door needs a tool's ``inputSchema`` to check the headers a client derived from it. Listing
the tools on every call would double the backend traffic, so each route keeps a bounded cache
(:attr:`~gateway.calls.route.RouteRuntime.tool_schemas`: least recently used first out, entries
kept :data:`~gateway.calls.context.TOOL_SCHEMA_TTL` seconds) keyed by the caller's credential digest:
two callers may see different tools.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import structlog

from gateway.calls.request import Call, CallRequest
from gateway.errors import GatewayError
from gateway.legacy.session import JsonObj
from gateway.state.claims import credential_digest

log = structlog.get_logger("gateway.calls")

MAX_PAGES = 100
"""Pages of one tool listing read at most."""


class ToolSchemas:
    """Tool name → inputSchema per route and credential, listed through ``list_tools``."""

    def __init__(self, list_tools: Callable[[Call], Awaitable[JsonObj]]) -> None:
        self._list = list_tools

    async def input_schema(self, call: Call, name: str) -> JsonObj | None:
        """The backend's inputSchema for tool ``name`` (cached per credential; None if unknown).

        The listing runs with the caller's capabilities so it reuses the session the call will
        lease. Fail-open: when the listing fails the call proceeds without ``Mcp-Param-*`` validation,
        and the call itself then reports the backend's state.
        """
        route = call.route
        digest = credential_digest(call.caller.principal)
        schemas = route.tool_schemas.get(digest)
        if schemas is None:
            try:
                schemas = await self._listing(call)
            except GatewayError as exc:
                log.info("tool_schema_unavailable", route=route.name, reason=exc.reason)
                return None
            route.tool_schemas.put(digest, schemas)
        return schemas.get(name)

    async def _listing(self, call: Call) -> dict[str, JsonObj]:
        schemas: dict[str, JsonObj] = {}
        cursor: str | None = None
        for _ in range(MAX_PAGES):  # bounded paging
            params: JsonObj = {"cursor": cursor} if cursor else {}
            request = CallRequest("tools/list", params, call.request.client_capabilities)
            listing = await self._list(call.with_request(request))
            for tool in listing.get("tools") or []:
                if isinstance(tool, Mapping) and isinstance(tool.get("inputSchema"), Mapping):
                    schemas[str(tool.get("name"))] = dict(tool["inputSchema"])
            next_cursor: Any = listing.get("nextCursor")
            cursor = next_cursor if isinstance(next_cursor, str) else None
            if not cursor:
                break
        return schemas
