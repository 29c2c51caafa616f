"""Holds cannot be pinned and per-credential caches stay bounded (hostile clients)."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest
from fake_backend import FakeBackend
from harness import TEST_KEY, BareClient, accept, route, running_gateway
from mcp_types.jsonrpc import INTERNAL_ERROR
from waiting import eventually

from gateway import keys
from gateway.errors import HOLD_LOST
from gateway.holds.registry import HoldLimitReached
from gateway.state.claims import credential_digest
from gateway.state.codec import KeyRing

Backend = tuple[FakeBackend, str]


async def test_retries_that_answer_nothing_count_toward_max_rounds(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    backend, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url, holds={"max_rounds": 3, "ttl": 300})]) as gw:
        client = BareClient(http, gw.url())
        state = (await client.call_tool("ask_city")).result["requestState"]
        for _ in range(2):  # rounds 2 and 3: the same question again, the TTL re-armed
            again = (await client.retry("ask_city", state, {})).result
            assert again["resultType"] == "input_required"
            state = again["requestState"]
        over = await client.retry("ask_city", state, {})
        assert (over.status, over.error["code"]) == (502, HoldLimitReached.code)
        assert (over.error["data"]["reason"], over.error["data"]["cause"]) == (HOLD_LOST, "max_rounds")
        assert len(gw.app[keys.HOLDS]) == 0
        pool = gw.app[keys.ROUTES]["/mcp"].pool
        await eventually(
            lambda: {"action": "cancel"} in [r.get("result") for r in backend.received_responses],
            what="the backend got a cancel answer",
        )
        await eventually(lambda: pool.leased_count == 0, what="no leased session")


@pytest.mark.parametrize(
    ("tool", "answer"),
    [
        ("ask_two", True),  # the backend asks again on a live hold: a server request past the limit
        ("ask_city", False),  # a retry that answers nothing opens the round past the limit
    ],
    ids=["server_request_on_a_live_hold", "retry"],
)
async def test_max_rounds_is_one_answer_on_either_path(
    fake_backend: Backend, http: aiohttp.ClientSession, tool: str, answer: bool
) -> None:
    backend, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url, holds={"max_rounds": 1, "ttl": 300})]) as gw:
        client = BareClient(http, gw.url())
        first = (await client.call_tool(tool)).result
        (key,) = first["inputRequests"]
        over = await client.retry(tool, first["requestState"], {key: accept(name="Ada")} if answer else {})
        assert (over.status, over.error["code"]) == (502, INTERNAL_ERROR)
        assert (over.error["data"]["reason"], over.error["data"]["cause"]) == (HOLD_LOST, "max_rounds")
        assert len(gw.app[keys.HOLDS]) == 0
        pool = gw.app[keys.ROUTES]["/mcp"].pool
        await eventually(
            lambda: {"action": "cancel"} in [r.get("result") for r in backend.received_responses],
            what="the backend got a cancel answer",
        )
        await eventually(lambda: pool.leased_count == 0, what="no leased session")


async def test_no_state_outlives_the_calls_absolute_deadline(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url, holds={"ttl": 300, "max_duration": 20})]) as gw:
        client = BareClient(http, gw.url())
        started = time.time()
        first = (await client.call_tool("ask_city")).result
        again = (await client.retry("ask_city", first["requestState"], {})).result
        ring = KeyRing([TEST_KEY.encode()])
        for state in (first["requestState"], again["requestState"]):
            assert ring.unseal(state).exp <= started + 21


async def test_the_tool_schema_cache_is_bounded_across_many_credentials(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with running_gateway(
        [route("demo", "/mcp", url, backend={"max_sessions": 16})], limits={"tool_schema_cache_entries": 16}
    ) as gw:
        runtime = gw.app[keys.ROUTES]["/mcp"]
        gate = asyncio.Semaphore(8)

        async def call(n: int) -> str:
            async with gate:
                reply = await BareClient(http, gw.url(), authorization=f"Bearer user-{n}").call_tool(
                    "add", {"a": n, "b": 1}
                )
                return reply.text

        # Every credential is its own backend session, so this stays in the hundreds; the cache
        # itself is driven with thousands of keys in tests/unit/test_bounded.py.
        texts = await asyncio.gather(*(call(n) for n in range(300)))
        assert texts == [str(n + 1) for n in range(300)]
        assert len(runtime.tool_schemas) == 16
        assert runtime.tool_schemas.get(credential_digest("Bearer user-299")) is not None, "most recent kept"
        assert runtime.tool_schemas.get(credential_digest("Bearer user-0")) is None, "least recent dropped"
