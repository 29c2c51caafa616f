"""A backend's failure that was really the client's invalid params: ask the backend's listings.

After the backend failed a ``tools/call``, ``prompts/get`` or ``resources/read`` with a JSON-RPC
error that is not already -32602 (or, for ``tools/call``, with an ``isError`` result), the call
core lists the backend's tools, prompts or resources and templates with the caller's credential,
within the same call, and answers -32602 when the name or URI is unknown or a required prompt
argument is missing (:mod:`gateway.translate.catalogue`). Otherwise the backend's answer stands. A
listing that fails, or that the backend does not support, leaves the answer as it was: this never
turns a backend failure into the client's fault on a guess. Only failed calls pay for the extra listing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import structlog

from gateway.calls.request import Call, CallRequest
from gateway.errors import GatewayError, InvalidParams, UpstreamError
from gateway.legacy.session import JsonObj
from gateway.translate import catalogue

log = structlog.get_logger("gateway.calls")

MAX_PAGES = 20
"""Pages of one listing read at most (a backend that pages forever is not followed further)."""
_LISTED = {"tools/call": ("tools/list", "tools"), "prompts/get": ("prompts/list", "prompts")}


class Catalogue:
    """Checks a failed call's name or URI against the backend's listings, made through ``list_page``."""

    def __init__(self, list_page: Callable[[Call], Awaitable[JsonObj]]) -> None:
        self._list = list_page

    async def refine(self, call: Call, exc: GatewayError) -> GatewayError:
        """``exc``, or -32602 when the backend's listings show the client named something unknown."""
        if (
            not isinstance(exc, UpstreamError)
            or exc.code == InvalidParams.code
            or call.request.method not in (*_LISTED, "resources/read")
        ):
            return exc
        return await self._checked(call) or exc

    async def check_tool_result(self, call: Call, result: Mapping[str, Any]) -> None:
        """Raise -32602 when an ``isError`` result of ``tools/call`` answered an unknown tool."""
        request = call.request
        if request.method != "tools/call" or result.get("isError") is not True or "requestState" in request.params:
            return
        refused = await self._checked(call)
        if refused is not None:
            raise refused

    async def _listing(self, call: Call, method: str, field: str) -> list[Any]:
        entries: list[Any] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            params: dict[str, Any] = {"cursor": cursor} if cursor else {}
            page = await self._list(call.with_request(CallRequest(method, params, call.request.client_capabilities)))
            items = page.get(field)
            entries.extend(items if isinstance(items, list) else [])
            next_cursor = page.get("nextCursor")
            cursor = next_cursor if isinstance(next_cursor, str) and next_cursor else None
            if cursor is None:
                break
        return entries

    async def _problem(self, call: Call) -> str | None:
        request = call.request
        params = request.params
        if request.method == "resources/read":
            uri = params.get("uri")
            if not isinstance(uri, str):
                return None
            resources = await self._listing(call, "resources/list", "resources")
            templates = await self._listing(call, "resources/templates/list", "resourceTemplates")
            return catalogue.unknown_resource(resources, templates, uri)
        listed = _LISTED.get(request.method)
        name = params.get("name")
        if listed is None or not isinstance(name, str):
            return None
        entries = await self._listing(call, *listed)
        if request.method == "tools/call":
            return catalogue.unknown_tool(entries, name)
        return catalogue.prompt_problem(entries, name, params.get("arguments"))

    async def _checked(self, call: Call) -> InvalidParams | None:
        try:
            problem = await self._problem(call)
        except GatewayError as exc:  # the listing failed: the backend's own answer stands
            log.info("catalogue_unavailable", route=call.route.name, reason=exc.reason)
            return None
        if problem is None:
            return None
        # resources.mdx §Error Handling: the spec's not-found error names the URI in `data.uri`.
        uri = call.request.params.get("uri") if call.request.method == "resources/read" else None
        return InvalidParams(problem, data={"uri": uri} if isinstance(uri, str) else None, reason="unknown_name")
