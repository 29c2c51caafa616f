# ruff: noqa: E501  (one exchange per table line reads best)
"""Multi round-trip requests (basic/patterns/mrtr.mdx): the InputRequiredResult itself, and every
way a retry can carry ``inputResponses`` and ``requestState``. Each server answers the retry with
the state *it* issued (keys and state are server-assigned and opaque), so exchanges here are built
per target after a first round against that same target."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from mcp_types import jsonrpc

from conformance.differential import Pair, Target
from conformance.rounds import (
    CITY,
    COMPLETE,
    INVALID_PARAMS,
    ROOTS,
    SAMPLED,
    answer_city,
    first_round,
    keys_by_method,
    retry,
    text,
)
from conformance.wire import Exchange, call, send

pytestmark = pytest.mark.interop

# --- inputResponses shapes -------------------------------------------------------------------

RESPONSE_CASES: list[tuple[str, Callable[[Target], Awaitable[Exchange]], dict[str, Any]]] = [
    ("retry with the answer", retry("ask_city", answer_city), {**COMPLETE, "text": "city=Paris"}),
    ("retry with a declined elicitation", retry("ask_city", lambda k: {k["elicitation/create"]: {"action": "decline"}}), {**COMPLETE, "text": "action=decline"}),
    ("retry with a cancelled elicitation", retry("ask_city", lambda k: {k["elicitation/create"]: {"action": "cancel"}}), {**COMPLETE, "text": "action=cancel"}),
    ("retry with an unknown extra key", retry("ask_city", lambda k: {**answer_city(k), "not-asked": {"x": 1}}), {**COMPLETE, "text": "city=Paris"}),
    ("inputResponses is an array", retry("ask_city", lambda k: [CITY]), INVALID_PARAMS),
    ("inputResponses is a string", retry("ask_city", lambda k: "accept"), INVALID_PARAMS),
    ("inputResponses value is not an object", retry("ask_city", lambda k: {k["elicitation/create"]: "Paris"}), INVALID_PARAMS),
    ("sampling answered", retry("summarize", lambda k: {k["sampling/createMessage"]: SAMPLED}, arguments={"text": "hello"}), {**COMPLETE, "text": "sampled=short"}),
    ("roots answered", retry("show_roots", lambda k: {k["roots/list"]: ROOTS}), {**COMPLETE, "text": "roots=file:///tmp/a"}),
    ("both answered in one retry", retry("ask_and_sample", lambda k: {k["elicitation/create"]: CITY, k["sampling/createMessage"]: SAMPLED}), {**COMPLETE, "text": "city=Paris;sampled=short"}),
]  # fmt: skip


@pytest.mark.parametrize(("case", "build", "expect"), RESPONSE_CASES, ids=[c[0] for c in RESPONSE_CASES])
async def test_input_responses(
    pair: Pair, case: str, build: Callable[[Target], Awaitable[Exchange]], expect: dict[str, Any]
) -> None:
    await pair.check(case, build, expect, extra=text)


# --- requestState variants -------------------------------------------------------------------


def _flip_middle(state: str) -> str:
    middle = len(state) // 2
    return state[:middle] + ("A" if state[middle] != "A" else "B") + state[middle + 1 :]


STATE_CASES: list[tuple[str, Callable[[Target], Awaitable[Exchange]]]] = [
    ("requestState garbage", retry("ask_city", answer_city, state=lambda s: "not-a-state")),
    ("requestState empty string", retry("ask_city", answer_city, state=lambda s: "")),
    ("requestState truncated", retry("ask_city", answer_city, state=lambda s: s[: len(s) // 2])),
    ("requestState one character changed", retry("ask_city", answer_city, state=_flip_middle)),
    ("requestState is a number", retry("ask_city", answer_city, state=lambda s: 12345)),
    ("requestState is an object", retry("ask_city", answer_city, state=lambda s: {"state": s})),
    ("requestState of another tool", retry("ask_city", answer_city, retry_tool="ask_two")),
    ("requestState with other arguments", retry("summarize", lambda k: {k["sampling/createMessage"]: SAMPLED}, arguments={"text": "a"}, retry_arguments={"text": "b"})),
]  # fmt: skip


@pytest.mark.parametrize(("case", "build"), STATE_CASES, ids=[c[0] for c in STATE_CASES])
async def test_request_state_is_verified(pair: Pair, case: str, build: Callable[[Target], Awaitable[Exchange]]) -> None:
    await pair.check(case, build, INVALID_PARAMS)


async def test_request_state_of_another_route_is_refused(pair: Pair) -> None:
    # Only the gateway has a second endpoint: a state sealed for one route is refused on another
    # (mrtr.mdx §Server Requirements 5: state bound to the originating request).
    assert pair.gateway.other_url is not None
    result = await first_round(pair.gateway, "ask_city")
    retry_exchange = call(
        "ask_city", {}, id_=101, inputResponses=answer_city(keys_by_method(result)), requestState=result["requestState"]
    )
    answer = await send(pair.gateway.http, pair.gateway.other_url, retry_exchange)
    assert (answer.status, answer.error["code"]) == (400, jsonrpc.INVALID_PARAMS)


async def test_request_state_sent_again_gets_the_same_answer(pair: Pair) -> None:
    async def build(target: Target) -> Exchange:
        first = await first_round(target, "ask_city")
        retry_exchange = call(
            "ask_city",
            {},
            id_=101,
            inputResponses=answer_city(keys_by_method(first)),
            requestState=first["requestState"],
        )
        done = await target.send(retry_exchange)
        assert done.result["resultType"] == "complete"
        message = json.loads(retry_exchange.body)
        message["id"] = 102
        return retry_exchange.with_body(json.dumps(message).encode())

    # The reference re-runs the tool (its state is self-contained); the gateway answers the resend with
    # the first answer, without touching the backend again (issue 26; single use stays enforced:
    # e2e/test_replay_safety.py::test_a_finished_call_on_a_live_owner_is_never_replayed).
    await pair.check("requestState sent again after the call completed", build, COMPLETE)
