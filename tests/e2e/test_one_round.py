"""Questions a legacy server asks at once arrive as one input round, every time.

mcp 1.30.0 FastMCP's ``ask_and_sample`` (tests/peers/legacy_fastmcp.py) sends an
``elicitation/create`` and a ``sampling/createMessage`` with ``asyncio.gather``: two writes to the
call's SSE stream a few task switches apart. A request's rounds are fenced by a ``ping`` until its
backend has shown it asks one question at a time (:class:`gateway.calls.route.RoundFences`); this
tool's first fenced round holds two, so all of its rounds stay fenced: both requests are written
before the server answers the ping, so the first InputRequiredResult holds both however the
processes are scheduled (run it beside busy loops to see it under CPU contention). Without the
fence (a round is what the bytes already received hold) 152/200 flows were one round here on a
quiet machine and 190/200 beside two busy loops: what the fence is for.

The flow is repeated :data:`RUNS` times on one gateway. A split round is not retried away: it is
answered as the client would (the flow still has to end right) and counted, and the test fails
with the count, so a rate below 100 % is measured rather than hidden.
"""

from __future__ import annotations

import time
from typing import Any

import aiohttp
import pytest
from harness import BareClient, accept, route, running_gateway

pytestmark = pytest.mark.interop

RUNS = 200
BOTH = ["elicitation/create", "sampling/createMessage"]
SAMPLED_TEXT = "a sampled line"
SAMPLED: dict[str, Any] = {
    "role": "assistant",
    "content": {"type": "text", "text": SAMPLED_TEXT},
    "model": "m",
    "stopReason": "endTurn",
}


def _answer(request: dict[str, Any]) -> dict[str, Any]:
    if request["method"] == "elicitation/create":
        return accept(city="Paris")
    assert request["method"] == "sampling/createMessage", request
    return SAMPLED


@pytest.mark.timeout(110)
async def test_concurrent_questions_arrive_as_one_round(legacy_server: str) -> None:
    one_round = 0
    splits: list[tuple[int, list[list[str]]]] = []
    started = time.monotonic()
    async with (
        running_gateway([route("legacy", "/mcp", legacy_server)]) as gw,  # default holds settings
        aiohttp.ClientSession() as http,
    ):
        client = BareClient(http, gw.url())
        for n in range(RUNS):
            rounds = await _flow(client)
            if rounds == [BOTH]:
                one_round += 1
            else:
                splits.append((n, rounds))
    seconds = time.monotonic() - started
    print(f"{one_round}/{RUNS} flows one round in {seconds:.1f} s")  # shown with -s
    assert one_round == RUNS, f"{one_round}/{RUNS} flows were one round ({seconds:.1f} s); split: {splits[:5]}"


async def _flow(client: BareClient) -> list[list[str]]:
    """One ``ask_and_sample`` call answered to its end; the methods asked in each round."""
    reply = await client.call_tool("ask_and_sample", {})
    rounds: list[list[str]] = []
    while reply.result.get("resultType") == "input_required":
        asked = reply.result["inputRequests"]
        rounds.append(sorted(r["method"] for r in asked.values()))
        assert len(rounds) <= 2, rounds
        answers = {key: _answer(request) for key, request in asked.items()}
        reply = await client.retry("ask_and_sample", reply.result["requestState"], answers)
    assert reply.status == 200, reply.body
    assert reply.text == f"city=Paris;sampled={SAMPLED_TEXT}", reply.body
    assert sorted(m for r in rounds for m in r) == BOTH, rounds
    return rounds
