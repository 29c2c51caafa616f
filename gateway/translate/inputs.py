"""Legacy server requests ⇄ 2026-07-28 ``inputRequests`` / ``inputResponses`` (pure functions)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pydantic
from mcp_types.methods import validate_client_result

JsonObj = dict[str, Any]

INPUT_METHODS = ("elicitation/create", "sampling/createMessage", "roots/list")
# 2026-07-28 has no server→client requests, so the result shapes are validated against the newest
# revision that defines them; the shapes did not change (wire reference §3.4).
_SHAPE_VERSION = "2025-11-25"
_KEY_PREFIX = {"elicitation/create": "elicit", "sampling/createMessage": "sample", "roots/list": "roots"}


def input_key(method: str, counter: int) -> str:
    """A stable, gateway-chosen key for one server request (unique within a hold)."""
    return f"{_KEY_PREFIX.get(method, 'input')}-{counter}"


def input_request(method: str, params: Mapping[str, Any]) -> tuple[JsonObj, str | None]:
    """The ``{method, params}`` entry for ``inputRequests`` and a legacy elicitationId to keep.

    Legacy-only fields are dropped: ``elicitationId`` (kept server-side), sampling's ``task``, and
    the legacy ``_meta`` (related-task, progress tokens).
    """
    clean = {k: v for k, v in params.items() if k not in ("_meta", "task")}
    elicitation_id = None
    if method == "elicitation/create":
        raw_id = clean.pop("elicitationId", None)
        elicitation_id = str(raw_id) if raw_id is not None else None
    if method == "roots/list":
        return {"method": method}, None
    return {"method": method, "params": clean}, elicitation_id


class MalformedInputResponse(ValueError):
    """An inputResponses value does not have the shape of the request kind's result."""


def check_response(method: str, response: Any) -> JsonObj:
    """Validate one ``inputResponses`` value against the result type of ``method``."""
    if not isinstance(response, Mapping):
        raise MalformedInputResponse(f"response for {method} must be an object")
    try:
        validate_client_result(method, _SHAPE_VERSION, dict(response))
    except (pydantic.ValidationError, KeyError) as exc:
        raise MalformedInputResponse(f"response does not match the {method} result") from exc
    return dict(response)


def url_elicitations(error: Mapping[str, Any]) -> list[JsonObj]:
    """The url-mode elicitations of a legacy ``-32042`` URLElicitationRequiredError (may be empty)."""
    data = error.get("data")
    items = data.get("elicitations") if isinstance(data, Mapping) else None
    if not isinstance(items, list):
        return []
    return [dict(i) for i in items if isinstance(i, Mapping) and isinstance(i.get("url"), str)]
