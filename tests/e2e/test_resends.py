"""Issue 26 item 1: a retry sent again (the same requestState, inputResponses and principal) gets the
answer the first send got, on the owner and through another replica, while the first still runs and
after its client went away; a resend that differs is refused; the memory is bounded in count, bytes
and time, and counted (``mrtr_gateway_resends_total``)."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from typing import Any

import aiohttp
from fake_backend import FakeBackend
from harness import BareClient, accept, route, running_gateway, running_replicas
from mcp_types.jsonrpc import INVALID_PARAMS

from gateway import keys

Backend = tuple[FakeBackend, str]
BOUND = 30


def resends(gw: Any, outcome: str, route_name: str = "demo") -> float:
    metrics = gw.app[keys.METRICS]
    for sample in metrics.resends.collect()[0].samples:
        if sample.name.endswith("_total") and sample.labels == {"route": route_name, "outcome": outcome}:
            return float(sample.value)
    return 0.0


def resender(client: BareClient, url: str | None = None) -> BareClient:
    """A second client whose requests carry the same JSON-RPC ids as ``client``'s next ones: what a
    proxy or an SDK resending a request sends (``url``: through another replica)."""
    client.ids, same = itertools.tee(client.ids)
    return BareClient(client.http, url or client.url, ids=same)


async def test_a_resend_of_each_round_gets_the_first_answer_byte_for_byte(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url)]) as gw:
        client = BareClient(http, gw.url())
        first = (await client.call_tool("ask_two")).result
        (k1,) = first["inputRequests"]
        answer1 = {k1: accept(name="Ada")}
        again_client = resender(client)
        next_round = await client.retry("ask_two", first["requestState"], answer1)
        again = await again_client.retry("ask_two", first["requestState"], answer1)
        assert next_round.result["resultType"] == "input_required"
        assert again.raw == next_round.raw, "the next round's InputRequiredResult, same requestState, same bytes"
        second = next_round.result
        (k2,) = second["inputRequests"]
        answer2 = {k2: accept(color="red")}
        again_client = resender(client)
        done = await client.retry("ask_two", second["requestState"], answer2)
        resent = await again_client.retry("ask_two", second["requestState"], answer2)
        assert done.text == "name=Ada;color=red"
        assert resent.raw == done.raw, "the final result, same bytes"
        differs = await client.retry("ask_two", second["requestState"], {k2: accept(color="blue")})
        assert differs.status == 400
        assert differs.error["code"] == INVALID_PARAMS
        assert differs.error["data"] == {"reason": "invalid_request_state"}
        other_principal = await client.retry("ask_two", second["requestState"], answer2, authorization="Bearer eve")
        assert other_principal.error["code"] == INVALID_PARAMS
        assert resends(gw, "answered") == 2
        assert resends(gw, "differs") == 1


async def test_a_resend_through_another_replica_is_answered_from_the_owner(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with running_replicas(2, [route("demo", "/mcp", url)]) as (owner, other):
        first = (await BareClient(http, owner.url()).call_tool("ask_city")).result
        (key,) = first["inputRequests"]
        answers = {key: accept(city="Oslo")}
        client = BareClient(http, owner.url())
        through_other = resender(client, other.url())
        done = await client.retry("ask_city", first["requestState"], answers)
        via_other = await through_other.retry("ask_city", first["requestState"], answers)
        assert done.text == "city=Oslo"
        assert via_other.raw == done.raw
        assert resends(owner, "answered") == 1


async def test_a_resend_while_the_first_runs_waits_for_its_answer(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url)]) as gw:
        client = BareClient(http, gw.url())
        first = (await client.call_tool("ask_then_slow", {"seconds": 0.5})).result
        (key,) = first["inputRequests"]
        answers = {key: accept(city="Lima")}
        state = first["requestState"]
        replies = await asyncio.gather(
            *(client.retry("ask_then_slow", state, answers, arguments={"seconds": 0.5}) for _ in range(4))
        )
        assert [r.text for r in replies] == ["city=Lima"] * 4
        assert len({json.dumps(r.result) for r in replies}) == 1
        assert resends(gw, "waited") == 3


async def test_a_retry_whose_client_went_away_is_answered_to_its_resend(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    """The client gives up on the first send (its timeout) while the backend works; the call is not
    abandoned, and the resend gets its answer."""
    _, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url)]) as gw:
        client = BareClient(http, gw.url())
        arguments = {"seconds": 1.0}
        first = (await client.call_tool("ask_then_slow", arguments)).result
        (key,) = first["inputRequests"]
        answers = {key: accept(city="Quito")}
        gave_up = False
        try:
            async with asyncio.timeout(0.3):
                await client.retry("ask_then_slow", first["requestState"], answers, arguments=arguments)
        except TimeoutError:
            gave_up = True
        assert gave_up, "the first send outlives the client's patience"
        resent = await client.retry("ask_then_slow", first["requestState"], answers, arguments=arguments)
        assert resent.text == "city=Quito"


async def test_an_answer_over_the_size_cap_is_not_kept_and_its_resend_hears_already_answered(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url)], limits={"resend_answer_max_bytes": 16}) as gw:
        client = BareClient(http, gw.url())
        first = (await client.call_tool("ask_city")).result
        (key,) = first["inputRequests"]
        answers = {key: accept(city="Oslo")}
        done = await client.retry("ask_city", first["requestState"], answers)
        resent = await client.retry("ask_city", first["requestState"], answers)
        assert done.text == "city=Oslo"
        assert resent.status == 409
        assert resent.error["data"] == {"reason": "already_answered", "cause": "answer_not_kept"}
        assert resends(gw, "not_kept") == 1


async def test_the_resend_memory_is_bounded_in_count_bytes_and_time(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    holds = {"ttl": 1}
    limits = {"resend_memory_entries": 3, "resend_memory_bytes": 100_000}
    async with running_gateway([route("demo", "/mcp", url, holds=holds)], limits=limits) as gw:
        client = BareClient(http, gw.url())
        core = gw.app[keys.DOOR].core
        memory = core._resends  # the one store of this replica
        finished = []
        for city in ("A", "B", "C", "D", "E"):
            first = (await client.call_tool("ask_city")).result
            (key,) = first["inputRequests"]
            answers = {key: accept(city=city)}
            assert (await client.retry("ask_city", first["requestState"], answers)).text == f"city={city}"
            finished.append((first["requestState"], answers))
            assert len(memory) <= 3, "count"
        oldest, newest = finished[0], finished[-1]
        assert (await client.retry("ask_city", newest[0], newest[1])).text == "city=E"
        dropped = await client.retry("ask_city", oldest[0], oldest[1])
        assert dropped.error["code"] == INVALID_PARAMS, "the oldest was dropped: its state is spent, as before"
        assert memory.bytes <= 100_000
        gw_metrics = gw.app[keys.METRICS]
        (family,) = gw_metrics.resend_memory_bytes.collect()
        (kept_bytes,) = (s.value for s in family.samples)
        assert kept_bytes == memory.bytes > 0
        time.sleep(1.1)  # deliberate: past the route's holds.ttl, the lifetime of an entry
        expired = await client.retry("ask_city", newest[0], newest[1])
        assert expired.error["code"] == INVALID_PARAMS, "expired with its state"


async def test_kept_answers_stay_within_their_bytes_the_oldest_dropped_first(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    limits = {"resend_memory_bytes": 400}  # room for about two small final results
    async with running_gateway([route("demo", "/mcp", url)], limits=limits) as gw:
        client = BareClient(http, gw.url())
        memory = gw.app[keys.DOOR].core._resends
        finished = []
        for city in ("A", "B", "C", "D"):
            first = (await client.call_tool("ask_city")).result
            (key,) = first["inputRequests"]
            answers = {key: accept(city=city)}
            assert (await client.retry("ask_city", first["requestState"], answers)).text == f"city={city}"
            finished.append((first["requestState"], answers))
            assert 0 < memory.bytes <= 400
        newest = await client.retry("ask_city", *finished[-1])
        oldest = await client.retry("ask_city", *finished[0])
    assert newest.text == "city=D"
    assert oldest.error["code"] == INVALID_PARAMS, "dropped to stay within the bytes: its state is spent"
