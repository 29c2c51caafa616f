"""Helpers for multi-round exchanges: run a first round on one target, then build that target's
retry from the keys and the state *it* issued (both are server-assigned and opaque)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from mcp_types import jsonrpc

from conformance.differential import Target
from conformance.wire import Exchange, Observed, call

CITY = {"action": "accept", "content": {"city": "Paris"}}
SAMPLED = {"role": "assistant", "content": {"type": "text", "text": "short"}, "model": "m", "stopReason": "endTurn"}
ROOTS = {"roots": [{"uri": "file:///tmp/a", "name": "a"}]}

INPUT_REQUIRED = {
    "status": 200,
    "id": "echoed",
    "resultType": "input_required",
    "serverInfo": True,
    "cacheHints": "absent",
    "requestState": True,
}
COMPLETE = {"status": 200, "id": "echoed", "resultType": "complete", "serverInfo": True}
INVALID_PARAMS = {"status": 400, "id": "echoed", "error": jsonrpc.INVALID_PARAMS}


def text(observed: Observed) -> dict[str, Any]:
    final = observed.final
    result = final.get("result") if isinstance(final, dict) else None
    if not isinstance(result, dict) or result.get("resultType") != "complete":
        return {}
    return {"text": " ".join(c.get("text", "") for c in result.get("content", []) if c.get("type") == "text")}


async def first_round(target: Target, tool: str, arguments: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Call ``tool`` on ``target`` and return its InputRequiredResult."""
    answer = await target.send(call(tool, arguments, id_=100))
    assert answer.result["resultType"] == "input_required", answer
    return answer.result


def keys_by_method(result: Mapping[str, Any]) -> dict[str, str]:
    return {request["method"]: key for key, request in result["inputRequests"].items()}


def retry(
    tool: str,
    responses: Callable[[dict[str, str]], Any] | None,
    *,
    arguments: Mapping[str, Any] | None = None,
    state: Callable[[str], Any] = lambda s: s,
    retry_tool: str | None = None,
    retry_arguments: Mapping[str, Any] | None = None,
) -> Callable[[Target], Awaitable[Exchange]]:
    """A builder: run the first round on the target, then retry with ``responses(keys)`` and ``state(requestState)``."""

    async def build(target: Target) -> Exchange:
        result = await first_round(target, tool, arguments)
        extra: dict[str, Any] = {}
        if responses is not None:
            extra["inputResponses"] = responses(keys_by_method(result))
        sealed = state(result["requestState"])
        if sealed is not None:
            extra["requestState"] = sealed
        args = retry_arguments if retry_arguments is not None else arguments
        return call(retry_tool or tool, args, id_=101, **extra)

    return build


def answer_city(keys: dict[str, str]) -> dict[str, Any]:
    return {keys["elicitation/create"]: CITY}
