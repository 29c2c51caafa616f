"""A backend that answers garbage: a clear error, and the session is not reused.

Issue 17: whatever bytes a backend answers with - not JSON, not UTF-8, nested past
:data:`~gateway.legacy.wire.MAX_NESTING`, a JSON-RPC message of the wrong shape, or a body that
never finishes - on any wire (a streamable-HTTP JSON body or SSE stream, the HTTP+SSE stream,
stdio lines, the ``initialize`` answer), the client hears the gateway's own backend error (HTTP
502, -32603, ``backend_unavailable``), never an HTTP 500; it is counted once in
``mrtr_gateway_backend_errors_total``; the session is dropped and the next call works.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from emitters import (
    answer,
    as_event,
    emit_args,
    http_sse_emitter,
    stdio_command,
    streamable_emitter,
)
from harness import BareClient, GatewayHandle, Reply, route, running_gateway, serving, stdio_route
from mcp_types.jsonrpc import INTERNAL_ERROR
from waiting import eventually

from gateway import keys
from gateway.errors import BACKEND_UNAVAILABLE
from gateway.legacy.wire import MAX_NESTING


@pytest.fixture
async def broken_sse_backend() -> AsyncIterator[tuple[str, dict[str, int]]]:
    counters = {"initialize": 0}

    async def mcp(request: web.Request) -> web.StreamResponse:
        if request.method != "POST":
            return web.Response(status=405)
        message = await request.json()
        if "id" not in message or "method" not in message:
            return web.Response(status=202)
        if message["method"] == "initialize":
            counters["initialize"] += 1
            result = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "b", "version": "1"},
            }
            body = {"jsonrpc": "2.0", "id": message["id"], "result": result}
            return web.json_response(body, headers={"Mcp-Session-Id": f"s{counters['initialize']}"})
        if message["method"] == "tools/list":
            return web.json_response({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": []}})
        if message["method"] == "ping":  # only tool calls break the wire
            return web.json_response({"jsonrpc": "2.0", "id": message["id"], "result": {}})
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        if message["params"].get("name") == "ok":
            final = {"jsonrpc": "2.0", "id": message["id"], "result": {"content": []}}
            await response.write(f"event: message\ndata: {json.dumps(final)}\n\n".encode())
        else:
            await response.write(b"event: message\ndata: {this is not json\n\n")
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_route("*", "/mcp", mcp)
    async with serving(app) as base:
        yield f"{base}/mcp", counters


async def test_malformed_sse_is_backend_unavailable_and_the_session_is_discarded(
    broken_sse_backend: tuple[str, dict[str, int]],
) -> None:
    url, counters = broken_sse_backend
    async with (
        aiohttp.ClientSession() as http,
        running_gateway([route("b", "/mcp", url, backend={"timeout": 2})]) as gw,
    ):
        client = BareClient(http, gw.url())
        assert (await client.call_tool("ok")).result["resultType"] == "complete"
        assert counters["initialize"] == 1
        broken = await client.call_tool("garbage")
        assert broken.status == 502
        assert (broken.error["code"], broken.error["data"]["reason"]) == (INTERNAL_ERROR, "backend_unavailable")
        assert broken.error["data"]["cause"] == "malformed_response"
        assert (await client.call_tool("ok")).result["resultType"] == "complete"
        assert counters["initialize"] == 2  # the poisoned session was not handed out again
        assert gw.app[keys.ROUTES]["/mcp"].pool.initializations == 2


# --- issue 17: every malformed answer, on every wire ----------------------------------------------

BOUND = 30.0
"""Upper bound on every test's waits."""
MALFORMED = "malformed_response"
TIMEOUT = "timeout"
"""What a call hears when its answer is dropped: a stdio line that is not JSON-RPC is taken for a
banner or a debug print and skipped (gateway.legacy.stdio), and an answer to an id the gateway never
asked is not this call's, so the call waits for ``backend.timeout``."""
COMPLETE = "complete"
"""SSE decodes invalid UTF-8 as U+FFFD (the SSE specification's decoding), so such an event is valid."""
WIRES = ("json", "sse", "http-sse", "stdio")
"""A streamable-HTTP JSON body, a streamable-HTTP SSE stream, the HTTP+SSE stream, a stdio line."""
INVALID_UTF8 = b'{"jsonrpc":"2.0","id":@ID@,"result":{"content":[{"type":"text","text":"\xff\xfe"}]}}'


def nested(depth: int) -> bytes:
    """A valid answer whose message nests ``depth`` deep (its envelope is 1, ``result`` 2)."""
    inner = depth - 2
    return b'{"jsonrpc":"2.0","id":@ID@,"result":{"content":[],"x":' + b"[" * inner + b"]" * inner + b"}}"


CASES: dict[str, tuple[bytes, tuple[str, str, str, str]]] = {
    # name: (the answer, the cause each of WIRES ends the call with)
    "not-json": (b"{this is not json", (MALFORMED, MALFORMED, MALFORMED, TIMEOUT)),
    "invalid-utf8": (INVALID_UTF8, (MALFORMED, COMPLETE, COMPLETE, TIMEOUT)),
    "nested-10000": (b"[" * 10_000 + b"]" * 10_000, (MALFORMED,) * 4),
    "nested-10000-in-a-result": (nested(10_000), (MALFORMED,) * 4),
    "nested-one-past-the-bound": (nested(MAX_NESTING + 1), (MALFORMED,) * 4),
    "result-not-an-object": (b'{"jsonrpc":"2.0","id":@ID@,"result":[1]}', (MALFORMED,) * 4),
    "error-not-an-object": (b'{"jsonrpc":"2.0","id":@ID@,"error":"boom"}', (MALFORMED,) * 4),
    "request-with-a-float-id": (
        b'{"jsonrpc":"2.0","id":1.5,"method":"elicitation/create","params":{}}',
        (MALFORMED,) * 4,
    ),
    "a-json-scalar": (b"5", (MALFORMED, MALFORMED, MALFORMED, TIMEOUT)),
    "jsonrpc-1.0": (b'{"jsonrpc":"1.0","id":@ID@,"result":{}}', (MALFORMED, MALFORMED, MALFORMED, TIMEOUT)),
    "an-empty-batch": (b"[]", (MALFORMED, MALFORMED, MALFORMED, TIMEOUT)),
    "an-answer-to-another-id": (
        b'{"jsonrpc":"2.0","id":"not-ours","result":{}}',
        (MALFORMED, "stream_closed", TIMEOUT, TIMEOUT),
    ),
}


@asynccontextmanager
async def wire_gateway(wire: str) -> AsyncIterator[GatewayHandle]:
    """A gateway whose route ``b`` (``/mcp``) fronts an emitter backend on ``wire``."""
    timeout = {"timeout": 2}
    if wire == "http-sse":
        async with (
            http_sse_emitter() as sse,
            running_gateway([route("b", "/mcp", sse.url, backend={"transport": "sse", **timeout})]) as gw,
        ):
            yield gw
    elif wire == "stdio":
        async with running_gateway([stdio_route("b", "/mcp", stdio_command(), backend=timeout)]) as gw:
            yield gw
    else:
        async with (
            streamable_emitter() as backend,
            running_gateway([route("b", "/mcp", backend.url, backend=timeout)]) as gw,
        ):
            yield gw


def framed(wire: str, body: bytes) -> dict[str, Any]:
    """The arguments that make the backend answer with ``body`` on ``wire``."""
    if wire == "sse":
        return emit_args(as_event(body), mode="sse")
    if wire == "http-sse":
        return emit_args(as_event(body))
    if wire == "stdio":
        return emit_args(body + b"\n")
    return emit_args(body)


def error_counts(gw: GatewayHandle) -> dict[str, float]:
    """``mrtr_gateway_backend_errors_total`` by cause, causes never counted left out (every cause's
    series exists at 0 from the start, issue 20)."""
    registry = gw.app[keys.METRICS].registry
    return {
        sample.labels["reason"]: sample.value
        for family in registry.collect()
        if family.name == "mrtr_gateway_backend_errors"
        for sample in family.samples
        if sample.name == "mrtr_gateway_backend_errors_total" and sample.value
    }


def increments(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {cause: value - before.get(cause, 0.0) for cause, value in after.items() if value != before.get(cause)}


def assert_backend_error(reply: Reply, cause: str) -> None:
    assert (reply.status, reply.error["code"], reply.error["message"]) == (502, INTERNAL_ERROR, "Backend unavailable")
    assert reply.error["data"] == {"reason": BACKEND_UNAVAILABLE, "cause": cause}, reply.body


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("case", list(CASES))
async def test_a_malformed_answer_is_a_counted_backend_error_and_the_next_call_works(
    case: str, wire: str, http: aiohttp.ClientSession
) -> None:
    body, causes = CASES[case]
    expected = causes[WIRES.index(wire)]
    async with wire_gateway(wire) as gw, asyncio.timeout(BOUND):
        client = BareClient(http, gw.url())
        assert (await client.call_tool("emit", framed(wire, answer("first")))).text == "first"
        pool = gw.app[keys.ROUTES]["/mcp"].pool
        before, opened = error_counts(gw), pool.initializations
        reply = await client.call_tool("emit", framed(wire, body))
        if expected == COMPLETE:
            assert (reply.status, reply.text) == (200, "\ufffd\ufffd")
            assert error_counts(gw) == before
            return
        assert_backend_error(reply, expected)
        assert increments(before, error_counts(gw)) == {expected: 1}
        assert (await client.call_tool("emit", framed(wire, answer("next")))).text == "next"
        assert pool.initializations == opened + 1  # the session that answered garbage was dropped


@pytest.mark.parametrize("wire", WIRES)
async def test_a_result_nested_to_the_bound_is_relayed_whole(wire: str, http: aiohttp.ClientSession) -> None:
    async with wire_gateway(wire) as gw, asyncio.timeout(BOUND):
        reply = await BareClient(http, gw.url()).call_tool("emit", framed(wire, nested(MAX_NESTING)))
    inner = MAX_NESTING - 2
    assert reply.status == 200
    assert json.dumps(reply.result["x"], separators=(",", ":")) == "[" * inner + "]" * inner


async def test_a_json_body_that_never_finishes_is_a_timeout(http: aiohttp.ClientSession) -> None:
    async with wire_gateway("json") as gw, asyncio.timeout(BOUND):
        client = BareClient(http, gw.url())
        before = error_counts(gw)
        reply = await client.call_tool("emit", emit_args(answer(), mode="stall"))
        assert_backend_error(reply, TIMEOUT)
        assert increments(before, error_counts(gw)) == {TIMEOUT: 1}
        assert (await client.call_tool("emit", emit_args(answer("next")))).text == "next"


@pytest.mark.parametrize(
    "case", ["not-json", "invalid-utf8", "nested-10000", "nested-one-past-the-bound", "result-not-an-object"]
)
async def test_a_malformed_initialize_answer_is_a_counted_backend_error(case: str, http: aiohttp.ClientSession) -> None:
    async with (
        streamable_emitter() as backend,
        running_gateway([route("b", "/mcp", backend.url, backend={"timeout": 2})]) as gw,
        asyncio.timeout(BOUND),
    ):
        backend.handshakes["Bearer hostile"] = CASES[case][0]
        client = BareClient(http, gw.url())
        assert (await client.call_tool("emit", emit_args(answer("first")), authorization="Bearer fine")).text == "first"
        before = error_counts(gw)
        reply = await client.call_tool("emit", emit_args(answer()), authorization="Bearer hostile")
        assert_backend_error(reply, MALFORMED)
        # Two handshakes failed: the tool listing the front door makes for this credential (to check
        # Mcp-Param-* headers; it fails open), then the call's own. One client request counts one
        # backend error (issue 20: gateway.observability.requests.count_backend_error).
        assert backend.initializations == 1 + 2
        assert increments(before, error_counts(gw)) == {MALFORMED: 1}
        fine = await client.call_tool("emit", emit_args(answer("next")), authorization="Bearer fine")
        assert fine.text == "next"


@pytest.mark.parametrize("case", ["not-json", "nested-10000", "request-with-a-float-id", "result-not-an-object"])
async def test_garbage_on_the_get_stream_drops_only_that_stream(case: str, http: aiohttp.ClientSession) -> None:
    async with (
        streamable_emitter() as backend,
        running_gateway([route("b", "/mcp", backend.url, backend={"timeout": 2})]) as gw,
        asyncio.timeout(BOUND),
    ):
        backend.get_streams["Bearer g"] = [as_event(CASES[case][0])]
        client = BareClient(http, gw.url(), authorization="Bearer g")
        assert (await client.call_tool("emit", emit_args(answer("first")))).text == "first"
        await eventually(lambda: backend.gets >= 2, what="the GET stream dropped and opened again", timeout=BOUND)
        assert (await client.call_tool("emit", emit_args(answer("next")))).text == "next"
        assert gw.app[keys.ROUTES]["/mcp"].pool.initializations == 1  # the session itself was kept
        assert error_counts(gw) == {}  # no call failed


@pytest.mark.parametrize("case", ["not-json", "invalid-utf8", "nested-10000", "result-not-an-object"])
async def test_handshake_era_clients_get_the_backend_bytes_as_they_are(case: str, http: aiohttp.ClientSession) -> None:
    """The passthrough parses nothing a backend sends: garbage is relayed byte for byte."""
    async with streamable_emitter() as backend, running_gateway([route("b", "/mcp", backend.url)]) as gw:
        backend.handshakes["Bearer old"] = CASES[case][0]
        params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "old", "version": "1"}}
        headers = {
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "Authorization": "Bearer old",
        }
        initialize = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}
        async with asyncio.timeout(BOUND), http.post(gw.url(), json=initialize, headers=headers) as resp:
            assert resp.status == 200
            assert await resp.read() == CASES[case][0].replace(b"@ID@", b"0")
        assert error_counts(gw) == {}
