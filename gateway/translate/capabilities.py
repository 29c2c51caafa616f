"""Modern per-request client capabilities ⇄ legacy per-session capabilities.

Legacy capabilities are fixed when a session is initialized, modern ones travel with every
request; so backend sessions are keyed by the *normalized* modern capabilities and initialized
with exactly their legacy mapping for the offered revision (wire reference §5). Only what a legacy
server can act on survives normalization: elicitation (form/url), sampling (tools/context), roots.
``roots.listChanged`` and ``tasks`` are never declared upstream: the gateway has no modern source
for ``notifications/roots/list_changed`` and does not host client-side tasks.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypeGuard

import orjson
from mcp_types.version import is_version_at_least

JsonObj = dict[str, Any]

INPUT_KIND_BY_METHOD: Mapping[str, str] = {
    "elicitation/create": "elicitation",
    "sampling/createMessage": "sampling",
    "roots/list": "roots",
}


def _is_object(value: Any) -> TypeGuard[Mapping[str, Any]]:
    """``isinstance(value, Mapping)``, with the decoded-JSON case (a plain dict) answered first:
    the abstract-class check is the slow part of running this on every request."""
    return type(value) is dict or isinstance(value, Mapping)


def _declared(capability: Mapping[str, Any], names: tuple[str, ...]) -> JsonObj:
    """The sub-capabilities of ``capability`` among ``names`` that the client declared (as objects)."""
    return {name: {} for name in names if _is_object(capability.get(name))}


def normalize(caps: Mapping[str, Any]) -> JsonObj:
    """Reduce modern client capabilities to the parts that matter to a legacy backend."""
    out: JsonObj = {}
    elicitation = caps.get("elicitation")
    if _is_object(elicitation):
        out["elicitation"] = _declared(elicitation, ("form", "url")) or {"form": {}}
    sampling = caps.get("sampling")
    if _is_object(sampling):
        out["sampling"] = _declared(sampling, ("context", "tools"))
    if _is_object(caps.get("roots")):
        out["roots"] = {}
    return out


def cache_key(normalized: Mapping[str, Any]) -> str:
    """One spelling per set of normalized capabilities, whatever their key order: compact JSON
    with sorted keys (orjson's where it can, as the standard library spells it for ASCII keys)."""
    try:
        return orjson.dumps(normalized, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:
        return json.dumps(normalized, sort_keys=True, separators=(",", ":"))


def to_legacy(normalized: Mapping[str, Any], version: str) -> JsonObj:
    """The ``initialize`` capabilities to declare for ``version`` given normalized modern ones."""
    out: JsonObj = {}
    if "elicitation" in normalized and is_version_at_least(version, "2025-06-18"):
        if is_version_at_least(version, "2025-11-25"):
            out["elicitation"] = dict(normalized["elicitation"])
        else:
            out["elicitation"] = {}
    if "sampling" in normalized:
        out["sampling"] = dict(normalized["sampling"]) if is_version_at_least(version, "2025-11-25") else {}
    if "roots" in normalized:
        out["roots"] = {}
    return out


def allows(normalized: Mapping[str, Any], method: str, params: Mapping[str, Any]) -> JsonObj | None:
    """None when the client declared what ``method`` needs; else the missing capabilities, as
    ``requiredCapabilities`` of a -32021 names them; ``{}`` when no client can be asked it at all
    (not an input request, or an unknown elicitation mode)."""
    kind = INPUT_KIND_BY_METHOD.get(method)
    if kind is None:
        return {}
    declared = normalized.get(kind)
    if kind == "elicitation":
        # Name the mode that is missing, as the schema's requiredCapabilities can (url vs form).
        mode = params.get("mode", "form")
        if mode not in ("form", "url"):
            return {}  # no client can be asked this
        return None if declared is not None and mode in declared else {"elicitation": {mode: {}}}
    wants_tools = kind == "sampling" and bool(params.get("tools") or params.get("toolChoice"))
    if declared is None:
        return {"sampling": {"tools": {}}} if wants_tools else {kind: {}}
    if wants_tools and "tools" not in declared:
        return {"sampling": {"tools": {}}}
    return None


TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
"""The tasks extension's id (ext-tasks ``specification/draft/tasks.md``); its settings object is empty."""


def declares_tasks(client_capabilities: Mapping[str, Any]) -> bool:
    """The request's own client capabilities declare the tasks extension (per request, never remembered).

    Read from the raw capabilities: :func:`normalize` keeps only what a backend may be asked for, so
    the extension never reaches a backend's ``initialize`` nor the pool key."""
    extensions = client_capabilities.get("extensions")
    return _is_object(extensions) and _is_object(extensions.get(TASKS_EXTENSION))


def tasks_required() -> JsonObj:
    """``data.requiredCapabilities`` of a -32021 for the tasks extension."""
    return {"extensions": {TASKS_EXTENSION: {}}}
