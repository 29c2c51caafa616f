"""Which input rounds the gateway fences with a ``ping`` (:class:`gateway.calls.route.RoundFences`).

A hostile backend whose tool asks one ``elicitation/create`` per round and counts the pings it is
sent while a call runs: a request's rounds are fenced until its backend has shown, in
:data:`~gateway.calls.route.UNFENCE_AFTER` fenced rounds, that it asks one question at a time;
after that a round sends no ping. A round found split (the backend's next question was already
queued when the client's answer went upstream) fences the request again, for good.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest
from harness import BareClient, accept, route, running_gateway
from hostile import HostileBackend, event, hostile_backend, sse_response, text_result
from waiting import eventually

from gateway.calls.route import UNFENCE_AFTER, RoundFences
from gateway.keys import ROUTES

pytestmark = pytest.mark.timeout(60)


class Asker:
    """The tool ``ask``: one question, or (``together``) a second one written ``later`` seconds
    after the first, before either is answered; the result once every question is answered."""

    def __init__(self, backend: HostileBackend) -> None:
        self.backend = backend
        self.together = False
        self.later = 0.0
        self.calls = 0
        self.pings_in_calls: list[int] = []
        self.second_written = asyncio.Event()

    async def __call__(self, request: Any, message: dict[str, Any]) -> Any:
        self.calls += 1
        pings = self.backend.pings
        self.second_written = asyncio.Event()
        response = await sse_response(request)
        asked = [f"c{self.calls}-q1"]
        await response.write(event(_elicit(asked[0])))
        if self.together:
            await asyncio.sleep(self.later)
            asked.append(f"c{self.calls}-q2")
            await response.write(event(_elicit(asked[1])))
        self.second_written.set()
        await eventually(lambda: all(self._answered(key) for key in asked), what="the answers", timeout=10)
        self.pings_in_calls.append(self.backend.pings - pings)
        await response.write(event(text_result(message["id"], "done")))
        return response

    def _answered(self, key: str) -> bool:
        return any(posted.get("id") == key for posted in self.backend.posted)


def _elicit(request_id: str) -> dict[str, Any]:
    params = {"message": "City?", "requestedSchema": {"type": "object", "properties": {"city": {"type": "string"}}}}
    return {"jsonrpc": "2.0", "id": request_id, "method": "elicitation/create", "params": params}


async def _flow(client: BareClient, think: float = 0.0) -> list[int]:
    """One call of ``ask`` answered to its end (``think`` seconds before each answer); the number of
    questions in each round."""
    reply = await client.call_tool("ask", {})
    rounds: list[int] = []
    while reply.result.get("resultType") == "input_required":
        asked = reply.result["inputRequests"]
        rounds.append(len(asked))
        await asyncio.sleep(think)
        answers = {key: accept(city="Paris") for key in asked}
        reply = await client.retry("ask", reply.result["requestState"], answers)
    assert reply.status == 200, reply.body
    assert reply.text == "done", json.dumps(reply.body)[:300]
    return rounds


@asynccontextmanager
async def asking() -> AsyncIterator[tuple[Asker, BareClient, RoundFences]]:
    """The hostile backend with :class:`Asker`, a gateway on default settings in front of it, a
    client, and the route's round records."""
    async with hostile_backend() as backend:
        asker = Asker(backend)
        backend.tools["ask"] = asker
        async with (
            running_gateway([route("hostile", "/mcp", backend.url)]) as gw,
            aiohttp.ClientSession() as http,
        ):
            yield asker, BareClient(http, gw.url()), gw.app[ROUTES]["/mcp"].round_fences


async def test_rounds_lose_their_fence_once_the_backend_asks_one_at_a_time() -> None:
    async with asking() as (asker, client, fences):
        for _ in range(UNFENCE_AFTER + 3):
            assert await _flow(client) == [1]
        assert not fences.fenced("tools/call ask")
    assert asker.pings_in_calls == [1] * UNFENCE_AFTER + [0] * 3


async def test_a_split_round_fences_its_request_for_good() -> None:
    """Unfenced, a second question written 50 ms after the first comes as a round of its own; the
    client answers the first 200 ms later, when the second is already queued: the evidence. The next
    call is fenced, and its ping (answered only once the second question is written) gathers both."""
    async with asking() as (asker, client, fences):
        for _ in range(UNFENCE_AFTER):
            assert await _flow(client) == [1]
        asker.together, asker.later = True, 0.05
        assert await _flow(client, think=0.2) == [1, 1]  # split: nothing fenced it
        assert fences.fenced("tools/call ask")

        async def after_the_second() -> None:
            await asker.second_written.wait()

        asker.backend.on_ping = after_the_second
        assert await _flow(client) == [2]
        assert await _flow(client) == [2]
    assert asker.pings_in_calls == [1] * UNFENCE_AFTER + [1, 1, 1]  # the split call: its second round
