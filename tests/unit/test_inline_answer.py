"""An exchange's answer stream is read by the task waiting on the exchange, with no reader task.

That read is parked while it waits for bytes; a push from elsewhere (a server request on the
session's standalone stream, attributed to the lease holder) or the wait's deadline must still
wake it, an outside cancellation must still cancel it, and nothing the stream had received may be
lost. Exercised first with a stream of the test's own (every interleaving made explicit), then
against a small streamable-HTTP backend over real sockets. Every wait is bounded by ``WAIT``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Coroutine
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from harness import serving

from gateway.errors import BackendUnavailable
from gateway.legacy.events import EventQueue
from gateway.legacy.session import Exchange, FinalResponse, ServerRequest
from gateway.legacy.streamable_http import StreamableHttpSession

WAIT = 5.0
Json = dict[str, Any]


def request(n: int) -> ServerRequest:
    return ServerRequest(n, "elicitation/create", {"message": f"q{n}"})


class HandStream:
    """An answer stream driven by hand: each read waits on a future the test completes."""

    def __init__(self) -> None:
        self.pending: asyncio.Future[ServerRequest | FinalResponse] | None = None
        self.parked = asyncio.Event()
        self.reads = 0
        self.handed_over = False
        self.closed = False

    async def read(self, exchange: Exchange) -> bool:
        self.reads += 1
        pending = self.pending = asyncio.get_running_loop().create_future()
        self.parked.set()
        try:
            got = await exchange.parked(pending, pending.done)
        finally:
            self.parked.clear()
        if got is not None:
            exchange.push(got)
        return True

    def background(self, exchange: Exchange) -> Coroutine[Any, Any, None]:
        self.handed_over = True

        async def rest() -> None:
            while not exchange.answered:
                await self.read(exchange)

        return rest()

    def close(self) -> None:
        self.closed = True


def stream_of(exchange: Exchange) -> object:
    return exchange.stream  # (read through a call: mypy would keep the type of the last assignment)


def reader_of(exchange: Exchange) -> asyncio.Task[None] | None:
    return exchange.reader


async def parked(stream: HandStream) -> None:
    async with asyncio.timeout(WAIT):
        await stream.parked.wait()


async def test_a_push_from_elsewhere_wakes_the_inline_read_and_hands_the_stream_to_a_reader() -> None:
    exchange = Exchange(request_id=1, method="tools/call")
    stream = exchange.stream = HandStream()
    waiting = asyncio.ensure_future(exchange.next(WAIT))
    await parked(stream)
    exchange.push(request(7))  # what the standalone stream routes to the lease holder
    async with asyncio.timeout(WAIT):
        assert await waiting == request(7)
    # More than a request and its answer: the rest is read by a task of its own, as before.
    assert stream_of(exchange) is None
    assert reader_of(exchange) is not None
    assert stream.handed_over
    await parked(stream)
    assert stream.pending is not None
    stream.pending.set_result(FinalResponse(result={"ok": True}))
    async with asyncio.timeout(WAIT):
        assert await exchange.next(WAIT) == FinalResponse(result={"ok": True})
        reader = reader_of(exchange)
        assert reader is not None
        await reader


async def test_the_answer_read_inline_creates_no_task() -> None:
    exchange = Exchange(request_id=1, method="tools/call")
    stream = exchange.stream = HandStream()
    before = asyncio.all_tasks()
    waiting = asyncio.ensure_future(exchange.next(WAIT))
    await parked(stream)
    assert asyncio.all_tasks() - before == {waiting}
    assert stream.pending is not None
    stream.pending.set_result(FinalResponse(result={}))
    async with asyncio.timeout(WAIT):
        assert await waiting == FinalResponse(result={})
    assert exchange.reader is None
    assert not stream.handed_over


async def test_bytes_that_arrived_before_the_push_are_not_lost() -> None:
    """The read's wait is already over (``ready``): the push must not interrupt it, or what the
    stream received would be dropped; both events are delivered and nothing is cancelled."""
    exchange = Exchange(request_id=1, method="tools/call")
    stream = exchange.stream = HandStream()
    waiting = asyncio.ensure_future(exchange.next(WAIT))
    await parked(stream)
    assert stream.pending is not None
    stream.pending.set_result(request(1))  # the stream's own bytes, not yet seen by the read
    exchange.push(request(2))  # in the same turn, from elsewhere
    async with asyncio.timeout(WAIT):
        first = await waiting
        second = await exchange.next(WAIT)
    assert sorted([first, second], key=lambda r: r.id if isinstance(r, ServerRequest) else 0) == [
        request(1),
        request(2),
    ]
    assert not waiting.cancelled()


async def test_the_deadline_ends_an_inline_read() -> None:
    exchange = Exchange(request_id=1, method="tools/call")
    stream = exchange.stream = HandStream()
    with pytest.raises(BackendUnavailable) as failure:
        async with asyncio.timeout(WAIT):
            await exchange.next(0.01)
    assert failure.value.reason == "timeout"
    assert exchange.reader is None
    exchange.close_nowait()
    assert stream.closed
    assert stream_of(exchange) is None


async def test_an_outside_cancellation_propagates_and_leaves_no_task() -> None:
    for push_too in (False, True):
        exchange = Exchange(request_id=1, method="tools/call")
        stream = exchange.stream = HandStream()
        before = asyncio.all_tasks()
        waiting = asyncio.ensure_future(exchange.next(WAIT))
        await parked(stream)
        waiting.cancel()
        if push_too:  # a push in the same turn must not swallow the cancellation
            exchange.push(request(3))
        with pytest.raises(asyncio.CancelledError):
            async with asyncio.timeout(WAIT):
                await waiting
        assert exchange.reader is None
        assert asyncio.all_tasks() <= before
        exchange.close_nowait()
        assert stream.closed


async def test_polling_a_round_hands_the_stream_to_a_reader() -> None:
    exchange = Exchange(request_id=1, method="tools/call")
    stream = exchange.stream = HandStream()
    exchange.push(request(1))
    async with asyncio.timeout(WAIT):
        assert await exchange.poll(0) == request(1)
    assert stream_of(exchange) is None
    assert stream.handed_over
    assert reader_of(exchange) is not None
    exchange.close_nowait()
    with contextlib.suppress(asyncio.CancelledError):
        async with asyncio.timeout(WAIT):
            reader = reader_of(exchange)
        assert reader is not None
        await reader


async def test_event_queue_waits_with_a_deadline_and_keeps_an_item_a_cancelled_getter_was_woken_for() -> None:
    queue: EventQueue[int] = EventQueue()
    loop = asyncio.get_running_loop()
    async with asyncio.timeout(WAIT):
        assert await queue.get_until(loop.time() + 0.01) is None
        getter = asyncio.ensure_future(queue.get())
        await asyncio.sleep(0)
        queue.put_nowait(1)
        getter.cancel()  # woken, then cancelled before it ran: the item stays for the next getter
        with pytest.raises(asyncio.CancelledError):
            await getter
        assert await queue.get_until(loop.time() + WAIT) == 1
        assert queue.empty()


# -- against a streamable-HTTP backend over real sockets -------------------------------------------


class FakeBackend:
    """A streamable-HTTP backend in miniature: ``tools/call`` answers an SSE stream the test feeds
    (``call_events``), the standalone GET stream is fed by ``get_events``; everything else is JSON."""

    def __init__(self) -> None:
        self.call_events: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.get_events: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.calls = 0
        self.peers: set[int] = set()
        """Client ports of every tools/call (one per backend connection used)."""
        self.url = ""

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/mcp", self._post)
        app.router.add_get("/mcp", self._get)
        app.router.add_delete("/mcp", self._delete)
        return app

    async def _post(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        method = body.get("method")
        if "id" not in body:
            return web.Response(status=202)
        if method == "initialize":
            result: Json = {
                "protocolVersion": body["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "fake", "version": "0"},
            }
            return web.json_response(
                {"jsonrpc": "2.0", "id": body["id"], "result": result}, headers={"Mcp-Session-Id": "s1"}
            )
        if method != "tools/call":
            return web.json_response({"jsonrpc": "2.0", "id": body["id"], "result": {}})
        self.calls += 1
        peer = request.transport.get_extra_info("peername") if request.transport else None
        if peer is not None:
            self.peers.add(peer[1])
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        while (data := await self.call_events.get()) is not None:
            await resp.write(data.replace(b'"id": "CALL"', f'"id": {json.dumps(body["id"])}'.encode()))
        await resp.write_eof()
        return resp

    async def _get(self, request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        while (data := await self.get_events.get()) is not None:
            await resp.write(data)
        return resp

    async def _delete(self, request: web.Request) -> web.Response:
        return web.Response(status=200)


def sse(message: Json) -> bytes:
    return f"event: message\ndata: {json.dumps(message)}\n\n".encode()


ANSWER = sse({"jsonrpc": "2.0", "id": "CALL", "result": {"content": []}})


@pytest.fixture
async def backend() -> AsyncIterator[FakeBackend]:
    fake = FakeBackend()
    async with serving(fake.app()) as base:
        fake.url = f"{base}/mcp"
        try:
            yield fake
        finally:
            fake.get_events.put_nowait(None)


@pytest.fixture
async def session(backend: FakeBackend) -> AsyncIterator[StreamableHttpSession]:
    async with aiohttp.ClientSession() as http:
        opened = StreamableHttpSession(
            http, backend.url, capabilities={"elicitation": {}}, headers={}, timeout=WAIT, connect_timeout=WAIT
        )
        async with asyncio.timeout(WAIT):
            await opened.open()
        try:
            yield opened
        finally:
            backend.get_events.put_nowait(None)
            await opened.close()


async def test_a_request_on_the_standalone_stream_wakes_a_call_read_inline(
    backend: FakeBackend, session: StreamableHttpSession
) -> None:
    async with asyncio.timeout(WAIT):
        exchange = await session.start("tools/call", {"name": "t", "arguments": {}}, {}, owner=True)
        assert exchange.stream is not None
        assert exchange.reader is None
        waiting = asyncio.ensure_future(exchange.next(WAIT))
        await asyncio.sleep(0)
        elicit = {"jsonrpc": "2.0", "id": 41, "method": "elicitation/create", "params": {"message": "city?"}}
        backend.get_events.put_nowait(sse(elicit))
        assert await waiting == ServerRequest(41, "elicitation/create", {"message": "city?"})
        assert reader_of(exchange) is not None  # the rest of the call stream has a reader of its own
        backend.call_events.put_nowait(ANSWER)
        backend.call_events.put_nowait(None)
        assert await exchange.next(WAIT) == FinalResponse(result={"content": []})
    exchange.close_nowait()
    session.attach(None)


async def test_pass_through_answers_are_read_inline_and_reuse_the_backend_connection(
    backend: FakeBackend, session: StreamableHttpSession
) -> None:
    """No reader task per call, and each answered stream gives its connection back: the calls
    share one or two connections (the standalone stream holds one of its own)."""
    calls = 10
    for _ in range(calls):
        async with asyncio.timeout(WAIT):
            exchange = await session.start("tools/call", {"name": "t", "arguments": {}}, {}, owner=True)
            backend.call_events.put_nowait(ANSWER)
            backend.call_events.put_nowait(None)
            assert await exchange.next(WAIT) == FinalResponse(result={"content": []})
            assert exchange.reader is None
            exchange.close_nowait()
            # The stream's end may come after its answer: it is awaited here only so that the next
            # call finds the connection back in the pool (in service, the next call may just as
            # well open another one).
            while not backend.call_events.empty():
                await asyncio.sleep(0)
            for _ in range(20):
                await asyncio.sleep(0)
    assert backend.calls == calls
    assert len(backend.peers) < calls // 2, f"{len(backend.peers)} connections for {calls} calls"
