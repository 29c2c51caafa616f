"""Property-based fuzzing of the retry path: ``inputResponses`` and ``requestState`` of every shape.

Each example opens a real hold (a tool that elicits), sends one hostile retry (the state mutated,
replaced or of another type; answers of any JSON shape, under the real key or others; arguments or
tool changed), and then answers the call properly. Invariants: no 5xx and one valid JSON-RPC answer
per request (tests/fuzz/live.py); a refused retry leaves the hold usable with its state; the call
then completes; and holds and leases are back to baseline after every example.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from live import Answer, LiveGateway, count_case, fuzz_settings

SAMPLED = {"role": "assistant", "content": {"type": "text", "text": "short"}, "model": "m", "stopReason": "endTurn"}
TOOLS = {"ask_city": {}, "ask_two": {}, "ask_and_sample": {}, "summarize": {"text": "t"}}
HEADERS = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
    "MCP-Protocol-Version": "2026-07-28",
    "Mcp-Method": "tools/call",
}
CAPS: dict[str, Any] = {"elicitation": {"form": {}}, "sampling": {}, "roots": {}}

json_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=16)
)
json_value = st.recursive(
    json_leaf,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=10,
)


def call(gateway: LiveGateway, name: str, arguments: Any, extra: dict[str, Any] | None = None) -> Answer:
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": CAPS}
    params = {"name": name, "arguments": arguments, "_meta": meta, **(extra or {})}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}).encode()
    mcp_name = name if name.isascii() and name.isprintable() else "x"
    return gateway.send("POST", "/mcp", {**HEADERS, "Mcp-Name": mcp_name}, body)


def result_of(answer: Answer) -> dict[str, Any] | None:
    result = (answer.message or {}).get("result")
    return result if isinstance(result, dict) else None


def good_answers(result: dict[str, Any]) -> dict[str, Any]:
    """A valid answer for every request of an input_required round."""
    answers: dict[str, Any] = {}
    for key, request in result["inputRequests"].items():
        if request["method"] == "elicitation/create":
            properties = request["params"].get("requestedSchema", {}).get("properties", {})
            answers[key] = {"action": "accept", "content": dict.fromkeys(properties, "x")}
        elif request["method"] == "sampling/createMessage":
            answers[key] = SAMPLED
        else:
            answers[key] = {"roots": []}
    return answers


@st.composite
def mutated_state(draw: st.DrawFn, state: str) -> Any:
    kind = draw(st.integers(0, 7))
    if kind == 0:
        return state
    if kind == 1:
        at = draw(st.integers(0, len(state) - 1))
        return state[:at] + draw(st.characters(codec="utf-8")) + state[at + 1 :]
    if kind == 2:
        return state[: draw(st.integers(0, len(state) - 1))]
    if kind == 3:
        return state + draw(st.text(min_size=1, max_size=8))
    if kind == 4:
        return draw(st.sampled_from(["v3.", "v1.", "v2", "", "v2.."])) + state[3:]
    if kind == 5:
        return draw(st.text(max_size=80))
    if kind == 6:
        return draw(json_value.filter(lambda v: not isinstance(v, str)))
    return state.swapcase()


@st.composite
def hostile_retry(draw: st.DrawFn, state: str, answers: dict[str, Any]) -> tuple[str, Any, dict[str, Any]]:
    """(tool, arguments, params extra) of one hostile retry of a call to ``ask_*``."""
    keys = list(answers)
    responses: Any
    kind = draw(st.integers(0, 5))
    if kind == 0:
        responses = answers
    elif kind == 1:
        responses = {k: draw(json_value) for k in keys}
    elif kind == 2:
        responses = draw(st.dictionaries(st.text(max_size=10), json_value, max_size=4))
    elif kind == 3:
        responses = {k: {"action": draw(st.text(max_size=8) | json_leaf), "content": draw(json_value)} for k in keys}
    elif kind == 4:
        responses = draw(json_value)
    else:
        responses = {**answers, draw(st.text(max_size=10)): draw(json_value)}
    extra: dict[str, Any] = {"inputResponses": responses, "requestState": draw(mutated_state(state))}
    if draw(st.integers(0, 5)) == 0:
        del extra[draw(st.sampled_from(sorted(extra)))]
    return draw(st.sampled_from([None, "add", "ask_city"])) or "", draw(st.none() | json_value), extra


def finish(gateway: LiveGateway, name: str, arguments: Any, state: str, result: dict[str, Any]) -> None:
    """Answer rounds properly until the call completes (bounded)."""
    for _ in range(4):
        answer = call(gateway, name, arguments, {"inputResponses": good_answers(result), "requestState": state})
        done = result_of(answer)
        assert done is not None, answer.message
        if done.get("resultType") != "input_required":
            return
        state, result = done["requestState"], done
    raise AssertionError("the call did not complete after four proper rounds")


@pytest.fixture(scope="module")
def gateway() -> Iterator[LiveGateway]:
    with LiveGateway([{"name": "open", "path": "/mcp", "holds": {"ttl": 30}}]) as live:
        yield live
        live.wait_for_baseline()


@fuzz_settings(100)
@given(tool=st.sampled_from(sorted(TOOLS)), data=st.data())
def test_hostile_retries_never_break_a_hold(gateway: LiveGateway, tool: str, data: st.DataObject) -> None:
    count_case("test_hostile_retries_never_break_a_hold")
    try:
        arguments = TOOLS[tool]
        opened = result_of(call(gateway, tool, arguments))
        assert opened is not None
        assert opened["resultType"] == "input_required", opened
        state = opened["requestState"]
        assert gateway.holds == 1
        name, hostile_args, extra = data.draw(hostile_retry(state, good_answers(opened)))
        retried = call(gateway, name or tool, arguments if hostile_args is None else hostile_args, extra)
        after = result_of(retried)
        if after is not None and after.get("resultType") == "input_required" and after.get("requestState") != state:
            # The hostile retry was a valid one (or started a new call): finish what it opened.
            finish(
                gateway, name or tool, arguments if hostile_args is None else hostile_args, after["requestState"], after
            )
        if gateway.holds:
            # The original hold must still answer its own state.
            finish(gateway, tool, arguments, state, opened)
        gateway.wait_for_baseline(timeout=10)
    finally:
        gateway.expire_all()
