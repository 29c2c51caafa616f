"""Every server request gets an owner, an answer or a logged refusal (issue 17): a request attributed
to a call that ends before reading it is answered by the gateway (an elicitation cancelled, anything
else a JSON-RPC error) with a ``server_request_unanswered`` line, never dropped in silence.

The backends are small hostile servers (tests/hostile.py) whose tool sends a server request its
call will never read: just before the call's answer on the same stream (the call ends before its
client could be asked), after the answer in the same chunk, or after the client went away.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from harness import BareClient, client_disconnects, route, running_gateway
from hostile import HostileBackend, event, sse_response, text_result
from waiting import eventually

from gateway.legacy import base, call_stream

BOUND = 10.0
"""Upper bound on every wait in this module."""


@pytest.fixture
def unanswered(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Methods of the server requests the gateway logged as unanswered."""
    logged: list[str] = []
    info = base.log.info

    def record(event_name: str, **fields: Any) -> Any:
        if event_name == "server_request_unanswered":
            logged.append(fields["method"])
        return info(event_name, **fields)

    monkeypatch.setattr(base.log, "info", record)
    return logged


async def answer_to(backend: HostileBackend, request_id: str) -> dict[str, Any]:
    """The gateway's answer to the server request ``request_id``, once the backend has it."""

    def posted() -> dict[str, Any] | None:
        return next((message for message in backend.posted if message.get("id") == request_id), None)

    answer: dict[str, Any] = await eventually(posted, what=f"the gateway answered {request_id}", timeout=BOUND)
    return answer


async def test_a_request_just_before_the_call_s_answer_on_its_own_stream_is_answered(
    backend: HostileBackend, http: aiohttp.ClientSession, unanswered: list[str]
) -> None:
    """``roots/list`` and the call's result in one SSE stream, back to back: the call ends with its
    result before its client could be asked, and the backend hears an error for the request."""

    async def ask_then_answer(request: web.Request, message: dict[str, Any]) -> web.StreamResponse:
        response = await sse_response(request)
        await response.write(event({"jsonrpc": "2.0", "id": "late-roots", "method": "roots/list"}))
        await response.write(event(text_result(message["id"], "done")))
        await response.write_eof()
        return response

    backend.tools["ask_then_answer"] = ask_then_answer
    async with running_gateway([route("hostile", "/mcp", backend.url)]) as gateway:
        reply = await BareClient(http, gateway.url()).call_tool("ask_then_answer")
        assert reply.text == "done"
        answer = await answer_to(backend, "late-roots")
    assert answer["error"]["message"] == "The request this belongs to has ended"
    assert unanswered == ["roots/list"]


async def test_a_late_request_the_route_answers_itself_gets_the_route_s_answer(
    backend: HostileBackend, http: aiohttp.ClientSession, unanswered: list[str]
) -> None:
    """The same late ``roots/list``, on a route with static roots: the gateway answers it with them
    (as it does whenever no call is there to ask), not with an error."""

    async def answer_then_ask(request: web.Request, message: dict[str, Any]) -> web.StreamResponse:
        response = await sse_response(request)
        late = {"jsonrpc": "2.0", "id": "late-roots", "method": "roots/list"}
        await response.write(event(text_result(message["id"], "done")) + event(late))
        await response.write_eof()
        return response

    backend.tools["answer_then_ask"] = answer_then_ask
    roots = [{"uri": "file:///workspace", "name": "workspace"}]
    async with running_gateway([route("hostile", "/mcp", backend.url, roots=roots)]) as gateway:
        reply = await BareClient(http, gateway.url()).call_tool("answer_then_ask")
        assert reply.text == "done"
        answer = await answer_to(backend, "late-roots")
    assert answer["result"] == {"roots": roots}
    assert unanswered == ["roots/list"]


async def test_a_request_to_a_call_whose_client_went_away_is_answered(
    backend: HostileBackend, http: aiohttp.ClientSession, unanswered: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The client gives up on a call; while the gateway waits a moment for the call's answer before
    cancelling it (``ABANDON_GRACE``), the call asks an elicitation instead: cancelled, and logged."""
    asked, gone = asyncio.Event(), client_disconnects(monkeypatch)

    async def slow_then_ask(request: web.Request, message: dict[str, Any]) -> web.StreamResponse:
        response = await sse_response(request)
        await gone.wait()  # the gateway saw the client go: the call is inside its ABANDON_GRACE now
        params = {"mode": "form", "message": "Who?", "requestedSchema": {"type": "object", "properties": {}}}
        await response.write(
            event({"jsonrpc": "2.0", "id": "orphan", "method": "elicitation/create", "params": params})
        )
        asked.set()
        await asyncio.sleep(BOUND)  # deliberate silence: never answers, the gateway cancels the call
        return response

    backend.tools["slow_then_ask"] = slow_then_ask
    async with running_gateway([route("hostile", "/mcp", backend.url)]) as gateway:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.1):
                await BareClient(http, gateway.url()).call_tool("slow_then_ask")
        answer = await answer_to(backend, "orphan")
    assert asked.is_set()
    assert answer["result"] == {"action": "cancel"}
    assert unanswered == ["elicitation/create"]
    assert any(m.get("method") == "notifications/cancelled" for m in backend.posted)


@pytest.mark.parametrize("turns", ["when_parsing_is_slow", "after_every_event"])
async def test_a_request_after_the_answer_in_the_same_chunk_is_answered(
    backend: HostileBackend,
    http: aiohttp.ClientSession,
    unanswered: list[str],
    turns: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The call's result, then a server request, in one write: the gateway stops reading the stream
    at the answer, and still answers the request that arrived with it. The reader may give the loop
    a turn between the two (it does when parsing has held the loop for long: on a loaded machine,
    at any event); the call, which has its answer, then closes its exchange, and that must not cut
    the routing of the rest of the chunk."""
    if turns == "after_every_event":
        monkeypatch.setattr(call_stream, "LOOP_HOLD_SECONDS", -1.0)

    async def answer_then_ask(request: web.Request, message: dict[str, Any]) -> web.StreamResponse:
        response = await sse_response(request)
        late = {"jsonrpc": "2.0", "id": "after-answer", "method": "sampling/createMessage", "params": {}}
        await response.write(event(text_result(message["id"], "done")) + event(late))
        await response.write_eof()
        return response

    backend.tools["answer_then_ask"] = answer_then_ask
    async with running_gateway([route("hostile", "/mcp", backend.url)]) as gateway:
        reply = await BareClient(http, gateway.url()).call_tool("answer_then_ask")
        assert reply.text == "done"
        answer = await answer_to(backend, "after-answer")
    assert "error" in answer
    assert unanswered == ["sampling/createMessage"]
