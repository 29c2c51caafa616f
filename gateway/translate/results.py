"""Legacy results and errors → 2026-07-28 results and errors (pure functions).

Every modern result carries ``resultType``; cacheable ones carry ``ttlMs``/``cacheScope`` (legacy
servers have no such hints, so the route supplies safe ones); ``serverInfo`` moves into result
``_meta``; backend error codes become codes the 2026-07-28 spec allows (:func:`modern_error`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp_types import SERVER_INFO_META_KEY
from mcp_types.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND
from mcp_types.methods import CACHEABLE_METHODS
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from gateway.errors import UpstreamError
from gateway.translate.capabilities import TASKS_EXTENSION

JsonObj = dict[str, Any]

LEGACY_RESOURCE_NOT_FOUND = -32002
RELAYED_CODES: Mapping[int, int] = {
    INVALID_PARAMS: INVALID_PARAMS,
    METHOD_NOT_FOUND: METHOD_NOT_FOUND,
    INTERNAL_ERROR: INTERNAL_ERROR,
    LEGACY_RESOURCE_NOT_FOUND: INVALID_PARAMS,
}
"""Backend error codes kept (or renamed) when relayed; every other code becomes -32603."""

LEGACY_RELATED_TASK = "io.modelcontextprotocol/related-task"
"""The ``_meta`` key a 2025-11-25 ``tasks/result`` answer links its task by: no 2026-07-28 meaning."""
LEGACY_TASK_RESULT = "tasks/result"
"""The legacy request whose answer is a backend task's outcome (the call's result, or none)."""
NO_TOOL_RESULT = "The backend's task ended without a tool result"
"""A backend task's ``tasks/result`` answered with a success that is no ``CallToolResult`` (no
``content``): ``mcp`` 1.30.0 answers so for a task whose work raised. The call did not complete
(docs/conformance.md A38): -32603 with ``data.reason`` ``legacy_task_failed``."""


def is_tool_result(legacy: Mapping[str, Any]) -> bool:
    """``legacy`` (a success) is a ``CallToolResult``: it has its required ``content`` list."""
    return isinstance(legacy.get("content"), list)


def complete_result(
    method: str,
    legacy: Mapping[str, Any],
    *,
    ttl_ms: int,
    cache_scope: str,
    server_info: Mapping[str, Any] | None,
    cacheable: bool = True,
) -> JsonObj:
    """A legacy result as a 2026-07-28 ``complete`` result for ``method``.

    ``cacheable=False`` is used for results of MRTR retries, which must not be cached; the hints
    are still present (the schema requires them on cacheable methods) but with ``ttlMs: 0`` and
    ``private`` scope. A backend task's answer that is no tool result (its work failed, A38) raises
    :class:`~gateway.errors.UpstreamError` with :data:`NO_TOOL_RESULT`.
    """
    result: JsonObj = {k: v for k, v in legacy.items() if k != "resultType"}
    meta = result.get("_meta")
    if isinstance(meta, Mapping) and LEGACY_RELATED_TASK in meta:  # a legacy task's result (docs/conformance.md A30)
        if method == "tools/call" and not is_tool_result(legacy):  # its work failed (A38)
            raise UpstreamError(INTERNAL_ERROR, NO_TOOL_RESULT, {"reason": "legacy_task_failed"})
        result["_meta"] = {k: v for k, v in meta.items() if k != LEGACY_RELATED_TASK}
    result["resultType"] = "complete"
    if method in CACHEABLE_METHODS:
        result["ttlMs"] = ttl_ms if cacheable else 0
        result["cacheScope"] = cache_scope if cacheable else "private"
    return with_server_info(result, server_info)


def server_info_of(initialize_result: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The backend's ``serverInfo`` from its ``initialize`` result, if it sent a usable one."""
    info = initialize_result.get("serverInfo")
    return info if isinstance(info, Mapping) and info else None


def with_server_info(result: JsonObj, server_info: Mapping[str, Any] | None) -> JsonObj:
    """``result`` with the backend's ``serverInfo`` in its ``_meta``.

    basic/index.mdx §_meta: servers SHOULD include ``io.modelcontextprotocol/serverInfo`` in every
    result's ``_meta``, so complete results, ``input_required`` results and the final result of a
    listen stream all carry it. A value the backend already put there is kept.
    """
    if server_info:
        existing = result.get("_meta")
        meta = dict(existing) if isinstance(existing, Mapping) else {}
        meta.setdefault(SERVER_INFO_META_KEY, dict(server_info))
        result["_meta"] = meta
    return result


def discover_result(
    initialize_result: Mapping[str, Any], *, ttl_ms: int, cache_scope: str, tasks: bool = False
) -> JsonObj:
    """``server/discover`` built from the backend's ``initialize`` result; with ``tasks`` (the route
    makes tasks) the tasks extension is advertised beside the backend's own extensions. A backend's
    legacy ``capabilities.tasks`` is never passed on (it is not the extension)."""
    capabilities = {
        k: v
        for k, v in dict(initialize_result.get("capabilities") or {}).items()
        if k in ("experimental", "logging", "completions", "prompts", "resources", "tools", "extensions")
    }
    if tasks:
        extensions = capabilities.get("extensions")
        merged = dict(extensions) if isinstance(extensions, Mapping) else {}
        merged[TASKS_EXTENSION] = {}
        capabilities["extensions"] = merged
    result: JsonObj = {
        "resultType": "complete",
        "supportedVersions": list(MODERN_PROTOCOL_VERSIONS),
        "capabilities": capabilities,
        "ttlMs": ttl_ms,
        "cacheScope": cache_scope,
    }
    instructions = initialize_result.get("instructions")
    if isinstance(instructions, str):
        result["instructions"] = instructions
    return with_server_info(result, server_info_of(initialize_result))


def modern_error(error: Mapping[str, Any]) -> JsonObj:
    """A backend JSON-RPC error as the modern client should see it: a code the spec allows, the message kept.

    Relayed as they are: -32602 (invalid params), -32601 (method not found), -32603 (internal
    error). The retired -32002 (resource not found) becomes -32602 (basic/index.mdx §Error Codes,
    server/resources.mdx §Error Handling). Every other code becomes -32603: a parse or
    invalid-request error answers the gateway's own message to the backend (the client's was
    checked at the front door); codes in -32020..-32099 belong to the specification and must not
    be emitted with another meaning; codes of the legacy band -32000..-32019, ``0`` (FastMCP's code
    for any exception, unknown resources and prompts included) or an application's own code mean
    nothing the client can rely on. Whether a -32603 from a backend was really the client's
    invalid params (an unknown prompt, say) is decided with the backend's listings by
    :mod:`gateway.calls.catalogue`.
    """
    code = error.get("code")
    code = code if isinstance(code, int) and not isinstance(code, bool) else INTERNAL_ERROR
    out: JsonObj = {
        "code": RELAYED_CODES.get(code, INTERNAL_ERROR),
        "message": str(error.get("message") or "Backend error")[:1000],
    }
    if "data" in error:
        out["data"] = error["data"]
    return out


PASSED_META = ("progressToken", "traceparent", "tracestate", "baggage")
"""The client's ``params._meta`` keys a backend request keeps."""


def legacy_params(params: Mapping[str, Any]) -> JsonObj:
    """Request params for the backend: the modern envelope, MRTR fields and a legacy ``task`` stripped.

    ``progressToken`` survives so legacy progress can be tied back to the request, and so does the
    client's W3C trace context (SEP-414's ``traceparent``, ``tracestate``, ``baggage``): a proxy passes
    it on unchanged (the gateway's own tracing, when on, replaces it with its backend span's). A
    client's legacy ``params.task`` is ignored (only the gateway decides what becomes a task, and
    never asks a backend for a legacy task on a client's word).
    """
    out = {k: v for k, v in params.items() if k not in ("_meta", "inputResponses", "requestState", "task")}
    meta = params.get("_meta")
    if isinstance(meta, Mapping):
        kept = {k: meta[k] for k in PASSED_META if k in meta}
        if kept:
            out["_meta"] = kept
    return out
