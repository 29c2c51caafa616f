"""The InputRequiredResult itself (basic/patterns/mrtr.mdx §InputRequiredResult, §Error Handling):
its request kinds, its state, no caching hints (server/utilities/caching.mdx §Cacheable Results)
and serverInfo in its ``_meta`` like every result (basic/index.mdx §_meta); and a retry that lacks
an answer is asked again rather than refused."""

from __future__ import annotations

from typing import Any

import pytest

from conformance.differential import Pair, Target
from conformance.rounds import CITY, INPUT_REQUIRED, first_round, keys_by_method, retry
from conformance.wire import Exchange, call

pytestmark = pytest.mark.interop

FIRST_ROUNDS: list[tuple[str, str, dict[str, Any], list[str]]] = [
    ("input_required for an elicitation", "ask_city", {}, ["elicitation/create"]),
    ("input_required for sampling", "summarize", {"text": "hello"}, ["sampling/createMessage"]),
    ("input_required for roots", "show_roots", {}, ["roots/list"]),
    (
        "input_required for elicitation and sampling at once",
        "ask_and_sample",
        {},
        ["elicitation/create", "sampling/createMessage"],
    ),
]


@pytest.mark.parametrize(("case", "tool", "arguments", "kinds"), FIRST_ROUNDS, ids=[c[0] for c in FIRST_ROUNDS])
async def test_input_required_result(
    pair: Pair, case: str, tool: str, arguments: dict[str, Any], kinds: list[str]
) -> None:
    await pair.check(case, call(tool, arguments), {**INPUT_REQUIRED, "inputRequests": sorted(kinds)})


ASKS_AGAIN: list[tuple[str, Any, dict[str, Any]]] = [
    (
        "retry with no answer asks again",
        retry("ask_city", lambda k: {}),
        {**INPUT_REQUIRED, "inputRequests": ["elicitation/create"]},
    ),
    (
        "retry without inputResponses asks again",
        retry("ask_city", None),
        {**INPUT_REQUIRED, "inputRequests": ["elicitation/create"]},
    ),
    (
        "retry with only an unknown key asks again",
        retry("ask_city", lambda k: {"not-asked": CITY}),
        {**INPUT_REQUIRED, "inputRequests": ["elicitation/create"]},
    ),
    (
        "one of two answered asks for the other",
        retry("ask_and_sample", lambda k: {k["elicitation/create"]: CITY}),
        {**INPUT_REQUIRED, "inputRequests": ["sampling/createMessage"]},
    ),
]


@pytest.mark.parametrize(("case", "build", "expect"), ASKS_AGAIN, ids=[c[0] for c in ASKS_AGAIN])
async def test_missing_answer_is_asked_again(pair: Pair, case: str, build: Any, expect: dict[str, Any]) -> None:
    await pair.check(case, build, expect)


async def test_second_round_of_dependent_questions(pair: Pair) -> None:
    async def build(target: Target) -> Exchange:
        first = await first_round(target, "ask_two")
        key = keys_by_method(first)["elicitation/create"]
        responses = {key: {"action": "accept", "content": {"name": "Ann"}}}
        return call("ask_two", {}, id_=101, inputResponses=responses, requestState=first["requestState"])

    reference, gateway = await pair.check(
        "second round of dependent questions", build, {**INPUT_REQUIRED, "inputRequests": ["elicitation/create"]}
    )
    for observed in (reference, gateway):
        (question,) = observed.result["inputRequests"].values()
        assert question["params"]["message"] == "Hello Ann, which color?"
