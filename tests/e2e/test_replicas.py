"""Retries that land on a replica that does not hold their call are forwarded to the owner."""

from __future__ import annotations

import json

import aiohttp
from harness import MODERN, BareClient, accept, route, running_gateway, running_replicas

from gateway import keys
from gateway.demo.backend import DemoBackend
from gateway.replicas.auth import FORWARD_HEADER

Backend = tuple[DemoBackend, str]


async def test_a_retry_on_another_replica_is_forwarded_to_the_owner(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with running_replicas(2, [route("demo", "/mcp", url)]) as (a, b):
        first = (await BareClient(http, a.url(), authorization="Bearer u").call_tool("ask_two")).result
        (k1,) = first["inputRequests"]
        via_b = BareClient(http, b.url(), authorization="Bearer u")
        second = (await via_b.retry("ask_two", first["requestState"], {k1: accept(name="Ada")})).result
        assert second["resultType"] == "input_required"
        assert "Ada" in second["inputRequests"][next(iter(second["inputRequests"]))]["params"]["message"]
        (k2,) = second["inputRequests"]
        done = await via_b.retry("ask_two", second["requestState"], {k2: accept(color="red")})
        assert done.text == "name=Ada;color=red"
        assert len(a.app[keys.HOLDS]) == 0
        assert len(b.app[keys.HOLDS]) == 0
        forwarded = b.app[keys.METRICS].forwards.labels("demo", "forwarded")._value.get()
        assert forwarded == 2


async def test_forwarding_keeps_the_bindings_of_the_original_request(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with running_replicas(2, [route("demo", "/mcp", url)]) as (a, b):
        first = (await BareClient(http, a.url(), authorization="Bearer alice").call_tool("ask_city")).result
        (key,) = first["inputRequests"]
        stolen = await BareClient(http, b.url(), authorization="Bearer mallory").retry(
            "ask_city", first["requestState"], {key: accept(city="x")}
        )
        assert (stolen.status, stolen.error["code"]) == (400, -32602)
        done = await BareClient(http, b.url(), authorization="Bearer alice").retry(
            "ask_city", first["requestState"], {key: accept(city="Oslo")}
        )
        assert done.text == "city=Oslo"


async def test_an_unreachable_owner_is_a_clear_retryable_error(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with running_replicas(2, [route("demo", "/mcp", url)]) as (a, b):
        first = (await BareClient(http, a.url()).call_tool("ask_city")).result
        (key,) = first["inputRequests"]
        assert a.runner is not None
        await a.runner.cleanup()
        reply = await BareClient(http, b.url()).retry("ask_city", first["requestState"], {key: accept(city="x")})
    assert reply.status == 502
    assert (reply.error["code"], reply.error["data"]["reason"]) == (-32603, "hold_lost")
    assert reply.error["data"]["cause"] == "owner_unreachable"


async def test_without_an_advertised_address_the_retry_gets_hold_lost(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with (
        running_gateway([route("demo", "/mcp", url)], replica_id="one") as one,
        running_gateway([route("demo", "/mcp", url)], replica_id="two") as two,
    ):
        first = (await BareClient(http, one.url()).call_tool("ask_city")).result
        (key,) = first["inputRequests"]
        reply = await BareClient(http, two.url()).retry("ask_city", first["requestState"], {key: accept(city="x")})
    assert (reply.status, reply.error["code"], reply.error["data"]["reason"]) == (502, -32603, "hold_lost")
    assert reply.error["data"]["cause"] == "owner_unreachable"


async def test_a_forged_forward_header_is_refused(fake_backend: Backend, http: aiohttp.ClientSession) -> None:
    _, url = fake_backend
    async with running_replicas(1, [route("demo", "/mcp", url)]) as (a,):
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/list",
            "params": {
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": MODERN,
                    "io.modelcontextprotocol/clientCapabilities": {},
                }
            },
        }
        headers = {
            "Accept": "application/json",
            "Content-Type": "application/json",
            "MCP-Protocol-Version": MODERN,
            "Mcp-Method": "tools/list",
            FORWARD_HEADER: "v1.1.AAAA",
        }
        async with http.post(a.url(), data=json.dumps(body), headers=headers) as resp:
            assert resp.status == 403


REPLAY = {"holds": {"on_lost": "replay"}}


async def test_replay_reruns_a_lost_call_with_the_pending_answer(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with running_replicas(2, [route("demo", "/mcp", url, **REPLAY)]) as (a, b):
        first = (await BareClient(http, a.url()).call_tool("ask_two")).result
        (k1,) = first["inputRequests"]
        assert a.runner is not None
        await a.runner.cleanup()  # the owner dies with the held call
        via_b = BareClient(http, b.url())
        second = (await via_b.retry("ask_two", first["requestState"], {k1: accept(name="Ada")})).result
        assert second["resultType"] == "input_required", "replayed up to the next question, now held by b"
        ((k2, asked),) = second["inputRequests"].items()
        assert "Ada" in asked["params"]["message"]
        done = await via_b.retry("ask_two", second["requestState"], {k2: accept(color="red")})
        assert done.text == "name=Ada;color=red"
        assert b.app[keys.METRICS].forwards.labels("demo", "replayed")._value.get() == 1


async def test_replay_answers_earlier_rounds_from_the_sealed_log(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with running_replicas(2, [route("demo", "/mcp", url, **REPLAY)]) as (a, b):
        on_a = BareClient(http, a.url())
        first = (await on_a.call_tool("ask_two")).result
        (k1,) = first["inputRequests"]
        second = (await on_a.retry("ask_two", first["requestState"], {k1: accept(name="Eve")})).result
        (k2,) = second["inputRequests"]
        assert a.runner is not None
        await a.runner.cleanup()
        done = await BareClient(http, b.url()).retry("ask_two", second["requestState"], {k2: accept(color="blue")})
    assert done.text == "name=Eve;color=blue", "the first answer came from the sealed log, the second from the retry"


async def test_without_replay_a_lost_call_is_an_error_and_nothing_reruns(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with running_replicas(2, [route("demo", "/mcp", url)]) as (a, b):
        first = (await BareClient(http, a.url()).call_tool("ask_city")).result
        (key,) = first["inputRequests"]
        assert a.runner is not None
        await a.runner.cleanup()
        reply = await BareClient(http, b.url()).retry("ask_city", first["requestState"], {key: accept(city="x")})
        assert (reply.error["code"], reply.error["data"]["reason"]) == (-32603, "hold_lost")
        assert b.app[keys.METRICS].forwards.labels("demo", "replayed")._value.get() == 0
        assert len(b.app[keys.HOLDS]) == 0
