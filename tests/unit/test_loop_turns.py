"""Long work handed over in steps: the loop turn, and the three places a large message takes one
(after its JSON is parsed, after the answer is encoded, between slices of the answer written).

Nothing here measures time: each test forces or rules out a turn and checks what ran meanwhile."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from harness import serving

from gateway import envelopes
from gateway.frontdoor import responses
from gateway.frontdoor.responses import WRITE_SLICE_BYTES, SlicedResponse, body_response, encoded, json_response
from gateway.legacy import wire
from gateway.legacy.wire import jsonrpc_messages, parse_messages
from gateway.turns import give_turn

BOUND = 10.0


async def test_a_turn_reads_the_io_that_arrived_meanwhile() -> None:
    """A request that arrived while a task held the loop is read before the task that gave the turn
    goes on. On asyncio's own loop ``asyncio.sleep(0)`` would not let it be read (checked first, so
    the test can fail); uvloop's polls for I/O before it runs the task again, so there only the turn
    itself is checked (``MRTR_TEST_LOOP=uvloop``)."""
    loop = asyncio.get_running_loop()
    stdlib_loop = type(loop).__module__.startswith("asyncio.")
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    theirs.setblocking(False)
    served: list[str] = []

    def readable() -> None:
        ours.recv(64)
        loop.remove_reader(ours)
        served.append("read")

    loop.add_reader(ours, readable)
    try:
        theirs.send(b"GET /healthz")  # arrives while this task holds the loop
        if stdlib_loop:
            await asyncio.sleep(0)
            assert served == []
        await give_turn()
        assert served == ["read"]
    finally:
        loop.remove_reader(ours)
        ours.close()
        theirs.close()


def _ran_meanwhile() -> list[bool]:
    """A flag set by a callback scheduled now: true once the loop has had a turn."""
    ran = [False]
    asyncio.get_running_loop().call_soon(ran.__setitem__, 0, True)
    return ran


async def test_parsing_a_message_gives_a_turn_only_when_it_held_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    raw = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"x": "y" * 100}})
    ran = _ran_meanwhile()
    assert await parse_messages(raw) == jsonrpc_messages(json.loads(raw))
    assert ran == [False]  # a small message: parsed and routed in one step
    monkeypatch.setattr(wire, "LOOP_HOLD_SECONDS", -1.0)  # as if the parse had held the loop
    ran = _ran_meanwhile()
    assert await parse_messages(raw.encode()) == jsonrpc_messages(json.loads(raw))
    assert ran == [True]


@pytest.mark.parametrize("raw", ["[]", "{", '{"jsonrpc":"1.0","id":1}', "[1]", '"x"'])
async def test_parsing_refuses_what_the_parser_and_the_envelope_check_refuse(raw: str) -> None:
    with pytest.raises(ValueError) as expected:
        jsonrpc_messages(json.loads(raw))
    with pytest.raises(type(expected.value), match=str(expected.value).replace("(", r"\(").replace(")", r"\)")):
        await parse_messages(raw)


async def test_encoding_an_answer_gives_a_turn_only_when_it_held_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    message = envelopes.result(7, {"resultType": "complete", "content": [{"type": "text", "text": "é" * 10}]})
    ran = _ran_meanwhile()
    assert await encoded(message) == envelopes.encode(message)
    assert ran == [False]
    monkeypatch.setattr(responses, "LOOP_HOLD_SECONDS", -1.0)
    ran = _ran_meanwhile()
    assert await encoded(message) == envelopes.encode(message)
    assert ran == [True]


# --- the answer written in slices: the same bytes on the wire --------------------------------------


LARGE = ("0123456789abcdef" * (WRITE_SLICE_BYTES // 16) * 3 + "tail-é").encode()


@pytest.fixture
async def answers() -> AsyncIterator[str]:
    """One server answering the same large body as ``web.Response`` and as :func:`body_response`."""

    async def plain(request: web.Request) -> web.StreamResponse:
        return web.Response(body=LARGE, content_type="application/json", headers={"X-Extra": "1"})

    async def sliced(request: web.Request) -> web.StreamResponse:
        response = body_response(LARGE, headers={"X-Extra": "1"})
        assert isinstance(response, SlicedResponse)
        return response

    app = web.Application()
    app.router.add_route("*", "/plain", plain)
    app.router.add_route("*", "/sliced", sliced)
    async with serving(app) as base:
        yield base


async def _raw_exchange(base: str, method: str, path: str, *, read_size: int = 1 << 20) -> tuple[list[bytes], bytes]:
    """Headers (without Date) and body of one HTTP/1.1 exchange, read from the socket as it comes."""
    host, port = base.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\n\r\n".encode())
        async with asyncio.timeout(BOUND):
            head = await reader.readuntil(b"\r\n\r\n")
            headers = [line for line in head.split(b"\r\n") if not line.lower().startswith(b"date:")]
            length = int(next(h for h in headers if h.lower().startswith(b"content-length:")).split(b":")[1])
            body = b""
            if method != "HEAD":
                while len(body) < length:
                    piece = await reader.read(read_size)
                    assert piece, "connection closed before the whole body"
                    body += piece
            # nothing beyond the declared body: the next request on the connection is answered alone
            writer.write(f"GET /plain HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
            rest = await reader.read()
        assert rest.startswith(b"HTTP/1.1 200 OK\r\n")
        return headers, body
    finally:
        writer.close()
        await writer.wait_closed()


@pytest.mark.parametrize("read_size", [1 << 20, 997], ids=["fast-reader", "slow-reader"])
async def test_a_sliced_answer_is_byte_for_byte_what_a_plain_response_writes(answers: str, read_size: int) -> None:
    plain = await _raw_exchange(answers, "POST", "/plain", read_size=read_size)
    sliced = await _raw_exchange(answers, "POST", "/sliced", read_size=read_size)
    assert sliced == plain
    assert sliced[1] == LARGE


async def test_a_sliced_answer_to_a_head_request_carries_no_body(answers: str) -> None:
    assert await _raw_exchange(answers, "HEAD", "/sliced") == await _raw_exchange(answers, "HEAD", "/plain")


async def test_the_loop_has_a_turn_between_two_slices(answers: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A callback scheduled as a slice is written runs before the next slice is: whatever arrived
    meanwhile (a ``/healthz``) waits for one slice at most."""
    turns: list[bool] = []
    ran: list[bool] | None = None

    async def write(self: SlicedResponse, data: bytes | bytearray | memoryview) -> None:
        nonlocal ran
        if ran is not None:
            turns.append(ran[0])
        ran = _ran_meanwhile()
        await web.StreamResponse.write(self, data)

    monkeypatch.setattr(SlicedResponse, "write", write)
    _, body = await _raw_exchange(answers, "POST", "/sliced")
    assert body == LARGE
    assert turns == [True] * (-(-len(LARGE) // WRITE_SLICE_BYTES) - 1)


def test_small_answers_stay_plain_responses() -> None:
    assert type(json_response({"jsonrpc": "2.0", "id": 1, "result": {}})) is web.Response
    assert type(body_response(b"x" * WRITE_SLICE_BYTES)) is web.Response
    assert type(body_response(b"x" * (WRITE_SLICE_BYTES + 1))) is SlicedResponse


# --- the SSE reader: a turn between completing a large event and handing it over ------------------


class _Content:
    def __init__(self, chunks: list[bytes]) -> None:
        self._chunks = chunks

    async def readany(self) -> bytes:
        return self._chunks.pop(0) if self._chunks else b""


class _Response:
    def __init__(self, chunks: list[bytes]) -> None:
        self.content = _Content(chunks)


async def test_an_event_completed_after_the_loop_was_held_is_handed_over_after_a_turn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stream = [b"data: " + b"x" * 70_000, b"x\n\ndata: small\n\n"]
    seen: list[tuple[str, bool]] = []
    monkeypatch.setattr(wire, "LOOP_HOLD_SECONDS", -1.0)
    ran = _ran_meanwhile()
    response: Any = _Response(list(stream))
    async for event in wire.sse_events(response):
        seen.append((event.data[:5], ran[0]))
        ran = _ran_meanwhile()
    assert seen == [("xxxxx", True), ("small", True)]


async def test_events_read_without_holding_the_loop_are_handed_over_at_once() -> None:
    ran = _ran_meanwhile()
    response: Any = _Response([b"data: a\n\ndata: b\n\n"])
    seen = [(event.data, ran[0]) async for event in wire.sse_events(response)]
    assert seen == [("a", False), ("b", False)]
