"""Replay of a lost hold is safe or it does not happen (docs/SECURITY.md, "Replay windows"; README,
"Several replicas"): it never answers a question the user did not see, it runs once, only when the
owner has provably lost the hold, and it keeps the call's input keys."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from fake_backend import FakeBackend
from harness import BareClient, accept, route, running_gateway, running_replicas

from gateway.errors import HoldLost, InvalidRequestState

REPLAY = {"holds": {"on_lost": "replay"}}


@dataclass
class TransferBackend:
    """A legacy server whose ``transfer`` tool asks "Send 10 to <payee>?" and pays on ``confirm``.

    Run n asks about ``payees[n]`` (the last one repeats): a backend that does not ask the same
    question twice, as a hostile or merely stateful server may."""

    payees: list[str]
    url: str = ""
    runs: int = 0
    executed: list[str] = field(default_factory=list)
    answers: dict[str, asyncio.Future[dict[str, Any]]] = field(default_factory=dict)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.method == "DELETE":
            return web.Response(status=200)
        if request.method != "POST":
            return web.Response(status=405)
        message = await request.json()
        if "method" not in message:  # the client's answer to our elicitation
            future = self.answers.pop(str(message.get("id")), None)
            if future is not None and not future.done():
                future.set_result(message)
            return web.Response(status=202)
        if "id" not in message:
            return web.Response(status=202)
        if message["method"] == "initialize":
            result = {
                "protocolVersion": "2025-06-18",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "transfer", "version": "1"},
            }
            body = {"jsonrpc": "2.0", "id": message["id"], "result": result}
            return web.json_response(body, headers={"Mcp-Session-Id": f"s{id(message)}"})
        if message["method"] == "ping":  # the gateway pings once a session is initialized
            return web.json_response({"jsonrpc": "2.0", "id": message["id"], "result": {}})
        if message["method"] == "tools/list":
            tool = {"name": "transfer", "inputSchema": {"type": "object"}}
            return web.json_response({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": [tool]}})
        return await self._transfer(request, message)

    async def _transfer(self, request: web.Request, message: dict[str, Any]) -> web.StreamResponse:
        self.runs += 1
        payee = self.payees[min(self.runs, len(self.payees)) - 1]
        question_id = f"q{self.runs}"
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.answers[question_id] = future
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        ask = {
            "jsonrpc": "2.0",
            "id": question_id,
            "method": "elicitation/create",
            "params": {
                "message": f"Send 10 to {payee}?",
                "requestedSchema": {"type": "object", "properties": {"confirm": {"type": "boolean"}}},
                "_meta": {"progressToken": f"p{self.runs}"},  # differs on every run, like a real server's
            },
        }
        await response.write(f"event: message\ndata: {json.dumps(ask)}\n\n".encode())
        try:
            answer = await asyncio.wait_for(future, 10)
        except TimeoutError:
            return response
        result = answer.get("result") or {}
        if result.get("action") == "accept" and (result.get("content") or {}).get("confirm") is True:
            self.executed.append(payee)
            text = f"sent to {payee}"
        else:
            text = "not sent"
        final = {"jsonrpc": "2.0", "id": message["id"], "result": {"content": [{"type": "text", "text": text}]}}
        await response.write(f"event: message\ndata: {json.dumps(final)}\n\n".encode())
        await response.write_eof()
        return response


@pytest.fixture
async def transfer_backend(request: pytest.FixtureRequest) -> AsyncIterator[TransferBackend]:
    backend = TransferBackend(payees=list(getattr(request, "param", ["alice-savings"])))
    app = web.Application()
    app.router.add_route("*", "/mcp", backend.handle)
    runner = web.AppRunner(app, shutdown_timeout=1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    backend.url = f"http://127.0.0.1:{runner.addresses[0][1]}/mcp"
    try:
        yield backend
    finally:
        await runner.cleanup()


def _only(result: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    ((key, asked),) = result["inputRequests"].items()
    return key, asked


# --- 1. never answer a question the user did not see ---------------------------------------------


@pytest.mark.parametrize("transfer_backend", [["alice-savings", "mallory-offshore"]], indirect=True)
async def test_a_replay_asks_again_when_the_rerun_asks_another_question(
    transfer_backend: TransferBackend, http: aiohttp.ClientSession
) -> None:
    async with running_replicas(2, [route("t", "/mcp", transfer_backend.url, **REPLAY)]) as (a, b):
        first = (await BareClient(http, a.url()).call_tool("transfer")).result
        key, asked = _only(first)
        assert asked["params"]["message"] == "Send 10 to alice-savings?"
        assert a.runner is not None
        await a.runner.cleanup()  # the owner dies holding the confirmed question

        via_b = BareClient(http, b.url())
        replayed = (await via_b.retry("transfer", first["requestState"], {key: accept(confirm=True)})).result
        assert replayed["resultType"] == "input_required", "the user must see the new question"
        new_key, new_asked = _only(replayed)
        assert new_asked["params"]["message"] == "Send 10 to mallory-offshore?"
        assert new_key != key, "a different question never reuses the answered question's key"
        assert transfer_backend.executed == []

        done = await via_b.retry("transfer", replayed["requestState"], {new_key: {"action": "decline"}})
        assert done.text == "not sent"
    assert transfer_backend.executed == []
    assert transfer_backend.runs == 2


async def test_a_replay_answers_the_same_question_with_the_recorded_answer(
    transfer_backend: TransferBackend, http: aiohttp.ClientSession
) -> None:
    async with running_replicas(2, [route("t", "/mcp", transfer_backend.url, **REPLAY)]) as (a, b):
        first = (await BareClient(http, a.url()).call_tool("transfer")).result
        key, _ = _only(first)
        assert a.runner is not None
        await a.runner.cleanup()
        done = await BareClient(http, b.url()).retry("transfer", first["requestState"], {key: accept(confirm=True)})
        assert done.text == "sent to alice-savings"
    assert transfer_backend.executed == ["alice-savings"], "the _meta progress token differs and does not matter"


# --- 2. replay runs once, and only when the owner has provably lost the hold ---------------------


async def test_a_replay_token_runs_the_tool_once_sequentially_and_concurrently(
    transfer_backend: TransferBackend, http: aiohttp.ClientSession
) -> None:
    async with running_replicas(2, [route("t", "/mcp", transfer_backend.url, **REPLAY)]) as (a, b):
        first = (await BareClient(http, a.url()).call_tool("transfer")).result
        key, _ = _only(first)
        assert a.runner is not None
        await a.runner.cleanup()
        via_b = BareClient(http, b.url())
        answers = {key: accept(confirm=True)}
        sequential = [await via_b.retry("transfer", first["requestState"], answers) for _ in range(4)]
        concurrent = await asyncio.gather(*(via_b.retry("transfer", first["requestState"], answers) for _ in range(5)))
    replies = sequential + list(concurrent)
    # A resend of the replayed retry gets the replay's answer (issue 26): the tool still ran once.
    assert [r.body.get("result") for r in replies] == [sequential[0].result] * 9
    assert sequential[0].text == "sent to alice-savings"
    assert transfer_backend.runs == 2, "the original run and one replay"
    assert transfer_backend.executed == ["alice-savings"]


async def test_two_replicas_without_advertised_addresses_never_run_the_call_twice(
    transfer_backend: TransferBackend, http: aiohttp.ClientSession
) -> None:
    routes = [route("t", "/mcp", transfer_backend.url, **REPLAY)]
    async with (
        running_gateway(routes, replica_id="one") as one,
        running_gateway(routes, replica_id="two") as two,
    ):
        first = (await BareClient(http, one.url()).call_tool("transfer")).result
        key, _ = _only(first)
        answers = {key: accept(confirm=True)}
        for _ in range(3):
            elsewhere = await BareClient(http, two.url()).retry("transfer", first["requestState"], answers)
            assert elsewhere.error["code"] == HoldLost.code
        assert transfer_backend.runs == 1, "the owner is unknown, not lost: it still holds the call"
        done = await BareClient(http, one.url()).retry("transfer", first["requestState"], answers)
        assert done.text == "sent to alice-savings"
    assert transfer_backend.runs == 1
    assert transfer_backend.executed == ["alice-savings"]


async def test_a_replica_restarted_under_the_same_id_replays_its_lost_hold(
    transfer_backend: TransferBackend, http: aiohttp.ClientSession
) -> None:
    routes = [route("t", "/mcp", transfer_backend.url, **REPLAY)]
    async with running_gateway(routes, replica_id="same") as before:
        first = (await BareClient(http, before.url()).call_tool("transfer")).result
    key, _ = _only(first)
    async with running_gateway(routes, replica_id="same") as after:
        done = await BareClient(http, after.url()).retry("transfer", first["requestState"], {key: accept(confirm=True)})
        assert done.text == "sent to alice-savings"
        again = await BareClient(http, after.url()).retry(
            "transfer", first["requestState"], {key: accept(confirm=True)}
        )
        assert again.result == done.result, "a resend gets the replay's answer"
        other = await BareClient(http, after.url()).retry(
            "transfer", first["requestState"], {key: {"action": "decline"}}
        )
        assert other.error["code"] == InvalidRequestState.code, "other answers to a spent state are refused"
    assert transfer_backend.runs == 2
    assert transfer_backend.executed == ["alice-savings"]


async def test_a_finished_call_on_a_live_owner_is_never_replayed(
    transfer_backend: TransferBackend, http: aiohttp.ClientSession
) -> None:
    async with running_gateway([route("t", "/mcp", transfer_backend.url, **REPLAY)]) as gw:
        client = BareClient(http, gw.url())
        first = (await client.call_tool("transfer")).result
        key, _ = _only(first)
        done = await client.retry("transfer", first["requestState"], {key: accept(confirm=True)})
        assert done.text == "sent to alice-savings"
        resent = await client.retry("transfer", first["requestState"], {key: accept(confirm=True)})
        assert resent.result == done.result, "a resend gets the first answer, not a replay"
        stale = await client.retry("transfer", first["requestState"], {key: {"action": "decline"}})
        assert stale.error["code"] == InvalidRequestState.code
    assert transfer_backend.runs == 1


# --- input keys stay stable across a replay ------------------------------------------------------


async def test_a_replayed_call_keeps_the_owners_input_keys(
    fake_backend: tuple[FakeBackend, str], http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with running_replicas(2, [route("demo", "/mcp", url, **REPLAY)]) as (a, b):
        first = (await BareClient(http, a.url()).call_tool("ask_two")).result
        assert list(first["inputRequests"]) == ["elicit-1"]
        assert a.runner is not None
        await a.runner.cleanup()
        second = (
            await BareClient(http, b.url()).retry("ask_two", first["requestState"], {"elicit-1": accept(name="Ada")})
        ).result
        assert list(second["inputRequests"]) == ["elicit-2"], "numbered as the owner would have"


async def test_a_question_asked_again_by_a_replay_keeps_its_key(
    fake_backend: tuple[FakeBackend, str], http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with running_replicas(2, [route("demo", "/mcp", url, **REPLAY)]) as (a, b):
        on_a = BareClient(http, a.url())
        first = (await on_a.call_tool("ask_two")).result
        second = (await on_a.retry("ask_two", first["requestState"], {"elicit-1": accept(name="Eve")})).result
        assert list(second["inputRequests"]) == ["elicit-2"]
        assert a.runner is not None
        await a.runner.cleanup()
        via_b = BareClient(http, b.url())
        asked_again = (await via_b.retry("ask_two", second["requestState"], {})).result
        assert list(asked_again["inputRequests"]) == ["elicit-2"]
        assert "Eve" in asked_again["inputRequests"]["elicit-2"]["params"]["message"]
        done = await via_b.retry("ask_two", asked_again["requestState"], {"elicit-2": accept(color="red")})
        assert done.text == "name=Eve;color=red"
