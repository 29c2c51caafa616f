"""A gateway configured with ``state.seal_version: 1`` (step 1 of the upgrade in docs/operations.md).

Held calls go through every round; every ``requestState`` it hands out is a ``v1.`` token that the
previous release's own unseal (:mod:`previous_release`) reads, so a retry reaching a replica not
yet upgraded would go on too.
"""

from __future__ import annotations

import aiohttp
from fake_backend import FakeBackend
from harness import TEST_KEY, BareClient, accept, route, running_gateway, running_replicas
from previous_release import load_codec

from gateway import keys

Backend = tuple[FakeBackend, str]
STATE = {"keys": [TEST_KEY], "seal_version": 1}


def previous_release_reads(token: str, *, round_: int) -> bool:
    claims = load_codec().KeyRing([TEST_KEY.encode()]).unseal(token)
    return bool(token.startswith("v1.") and claims.round == round_ and claims.target == "ask_two")


async def test_a_two_round_call_completes_through_a_gateway_sealing_v1(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url)], state=STATE) as gw:
        client = BareClient(http, gw.url(), authorization="Bearer u")
        first = (await client.call_tool("ask_two")).result
        assert first["resultType"] == "input_required"
        assert previous_release_reads(first["requestState"], round_=1)
        (k1,) = first["inputRequests"]
        second = (await client.retry("ask_two", first["requestState"], {k1: accept(name="Ada")})).result
        assert second["resultType"] == "input_required"
        assert previous_release_reads(second["requestState"], round_=2)
        (k2,) = second["inputRequests"]
        done = await client.retry("ask_two", second["requestState"], {k2: accept(color="red")})
        assert done.text == "name=Ada;color=red"
        assert len(gw.app[keys.HOLDS]) == 0


async def test_replicas_sealing_v1_forward_retries_to_the_owner(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with running_replicas(2, [route("demo", "/mcp", url)], state=STATE) as (a, b):
        first = (await BareClient(http, a.url(), authorization="Bearer u").call_tool("ask_two")).result
        assert previous_release_reads(first["requestState"], round_=1)
        (k1,) = first["inputRequests"]
        via_b = BareClient(http, b.url(), authorization="Bearer u")
        second = (await via_b.retry("ask_two", first["requestState"], {k1: accept(name="Ada")})).result
        assert previous_release_reads(second["requestState"], round_=2)
        (k2,) = second["inputRequests"]
        done = await via_b.retry("ask_two", second["requestState"], {k2: accept(color="red")})
        assert done.text == "name=Ada;color=red"
        assert len(a.app[keys.HOLDS]) == 0
