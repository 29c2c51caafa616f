"""An exchange is a queue and a deadline; what fills it is read by the session's reader tasks.

The session owns every task it starts (its streams' readers, an exchange's answer reader): closing
it, or leaving ``async with`` it, ends them all. Exercised against a small streamable-HTTP backend
over real sockets, and a stdio server of a few lines. Every wait is bounded by ``WAIT``.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import sys
import weakref
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from harness import serving
from waiting import eventually

from gateway.errors import BackendUnavailable
from gateway.legacy.events import EventQueue
from gateway.legacy.limits import BoundedExchange
from gateway.legacy.session import FinalResponse, ServerRequest
from gateway.legacy.stdio import StdioSession
from gateway.legacy.streamable_http import StreamableHttpSession
from gateway.legacy.wire import END_SECONDS, release_at_end

WAIT = 5.0
Json = dict[str, Any]


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


async def test_event_queue_wait_ends_when_its_fence_is_done() -> None:
    queue: EventQueue[int] = EventQueue()
    loop = asyncio.get_running_loop()
    fence: asyncio.Future[None] = loop.create_future()
    async with asyncio.timeout(WAIT):
        loop.call_soon(fence.set_result, None)
        assert await queue.get_until(loop.time() + WAIT, unless=fence) is None
        queue.put_nowait(1)  # an item already queued is taken even once the fence is done
        assert await queue.get_until(loop.time() + WAIT, unless=fence) == 1


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


def unopened(http: aiohttp.ClientSession, backend: FakeBackend) -> StreamableHttpSession:
    return StreamableHttpSession(
        http, backend.url, capabilities={"elicitation": {}}, headers={}, timeout=WAIT, connect_timeout=WAIT
    )


async def test_a_request_on_the_standalone_stream_reaches_the_call_its_reader_answers(
    backend: FakeBackend, session: StreamableHttpSession
) -> None:
    async with asyncio.timeout(WAIT):
        exchange = await session.start("tools/call", {"name": "t", "arguments": {}}, {}, owner=True)
        assert exchange.reader is not None  # the call's answer stream is read by a task of the session
        waiting = asyncio.ensure_future(exchange.next(WAIT))
        await asyncio.sleep(0)
        elicit = {"jsonrpc": "2.0", "id": 41, "method": "elicitation/create", "params": {"message": "city?"}}
        backend.get_events.put_nowait(sse(elicit))
        assert await waiting == ServerRequest(41, "elicitation/create", {"message": "city?"})
        backend.call_events.put_nowait(ANSWER)
        backend.call_events.put_nowait(None)
        assert await exchange.next(WAIT) == FinalResponse(result={"content": []})
        await exchange.aclose()
    session.attach(None)


async def test_pass_through_answers_reuse_the_backend_connection(
    backend: FakeBackend, session: StreamableHttpSession
) -> None:
    """A reader ends with the answer; the stream's end, which follows it, gives the connection
    back: the calls share one or two connections (the standalone stream holds one of its own)."""
    calls = 10
    for _ in range(calls):
        async with asyncio.timeout(WAIT):
            exchange = await session.start("tools/call", {"name": "t", "arguments": {}}, {}, owner=True)
            reader = exchange.reader
            assert reader is not None
            backend.call_events.put_nowait(ANSWER)
            backend.call_events.put_nowait(None)
            assert await exchange.next(WAIT) == FinalResponse(result={"content": []})
            # It read up to the answer, and no further: it ends with the answer's chunk (after a turn of
            # the loop if its parsing held the loop past LOOP_HOLD_SECONDS: a busy machine's preemption)
            await asyncio.wait({reader}, timeout=WAIT)
            assert reader.done()
            assert exchange.reader is None  # and let go of it at the answer: the session's group owned it to its end
            await exchange.aclose()
    assert backend.calls == calls
    assert len(backend.peers) < calls // 2, f"{len(backend.peers)} connections for {calls} calls"


async def test_an_answered_response_gives_its_connection_back_at_its_end_or_is_closed_after_a_bound(
    backend: FakeBackend,
) -> None:
    """What follows an answer is not read: a stream whose end arrives gives its connection back to
    the pool (the next request reuses it); one whose end does not come within ``END_SECONDS`` is
    released, its connection closed (the next request opens another)."""
    async with aiohttp.ClientSession() as http, asyncio.timeout(WAIT):

        async def answered_stream() -> aiohttp.ClientResponse:
            resp = await http.post(backend.url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/call"})
            assert (await resp.content.readany()).startswith(b"event: message")
            return resp

        backend.call_events.put_nowait(ANSWER)
        ended = await answered_stream()
        ending: set[aiohttp.ClientResponse] = set()
        release_at_end(ended, ending)
        assert ending == {ended}
        backend.call_events.put_nowait(None)  # its end comes after the answer was read
        await eventually(lambda: ended.closed, what="the response released at its end")
        assert not ending, "an ended response is no longer the session's to release"
        backend.call_events.put_nowait(ANSWER)
        endless = await answered_stream()
        assert len(backend.peers) == 1, "the second request reused the first one's connection"
        release_at_end(endless, ending)
        await asyncio.sleep(END_SECONDS / 2)
        assert not endless.closed, "released before its end had END_SECONDS to come"
        await eventually(lambda: endless.closed, what="the endless response released after END_SECONDS")
        assert not ending
        backend.call_events.put_nowait(None)
        backend.call_events.put_nowait(ANSWER)
        backend.call_events.put_nowait(None)
        (await answered_stream()).release()
        assert len(backend.peers) == 2, "the endless stream's connection was closed, not kept"


async def test_closing_the_session_ends_its_readers_and_fails_the_call_still_waiting(backend: FakeBackend) -> None:
    async with aiohttp.ClientSession() as http, asyncio.timeout(WAIT):
        async with unopened(http, backend) as session:
            exchange = await session.start("tools/call", {"name": "t", "arguments": {}}, {})
            reader = exchange.reader
            assert reader is not None
            waiting = asyncio.ensure_future(exchange.next(WAIT))
            await asyncio.sleep(0)
        backend.get_events.put_nowait(None)
        assert reader.done()
        with pytest.raises(BackendUnavailable) as failure:
            await waiting
        assert failure.value.reason == "stream_closed"
        assert session.broken
        assert not legacy_tasks()


STDIO_SERVER = """
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    result = {}
    if message["method"] == "initialize":
        result = {"protocolVersion": message["params"]["protocolVersion"], "capabilities": {},
                  "serverInfo": {"name": "echo", "version": "0"}}
    print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)
"""


def legacy_tasks() -> list[asyncio.Task[Any]]:
    return [task for task in asyncio.all_tasks() if task.get_name().startswith("legacy")]


async def test_a_stdio_session_owns_its_process_and_its_pipe_readers(tmp_path: Path) -> None:
    script = tmp_path / "echo_server.py"
    script.write_text(STDIO_SERVER, encoding="utf-8")
    session = StdioSession([sys.executable, str(script)], capabilities={}, timeout=WAIT, connect_timeout=WAIT)
    async with asyncio.timeout(WAIT):
        async with session:
            assert {task.get_name() for task in legacy_tasks()} == {"legacy-stdio-stdout", "legacy-stdio-stderr"}
            exchange = await session.start("tools/list", {}, {})
            assert await exchange.next(WAIT) == FinalResponse(result={})
            pid = session.pid
        assert not legacy_tasks()
        assert session.broken
        assert session.returncode is not None
    with pytest.raises(ProcessLookupError):
        os.kill(pid or 0, 0)


async def test_closing_the_session_releases_an_answered_stream_still_waiting_for_its_end(backend: FakeBackend) -> None:
    async with aiohttp.ClientSession() as http, asyncio.timeout(WAIT):
        async with unopened(http, backend) as session:
            exchange = await session.start("tools/call", {"name": "t", "arguments": {}}, {}, owner=True)
            backend.call_events.put_nowait(ANSWER)  # and no end
            assert await exchange.next(WAIT) == FinalResponse(result={"content": []})
            await eventually(lambda: len(session.ending) == 1, what="the answered stream waiting for its end")
            (answered,) = session.ending
            open_before_close = not answered.closed
        assert open_before_close
        assert answered.closed, "the session's close released it"
        assert not session.ending
        backend.call_events.put_nowait(None)
        backend.get_events.put_nowait(None)


async def test_a_held_session_keeps_no_attribute_dict_and_no_empty_deques(
    backend: FakeBackend, session: StreamableHttpSession
) -> None:
    """What a held call keeps for minutes stays small (bench.holds --legacy: 43.1-43.4 -> 39.4-39.8
    KiB per hold): an opened session declares its attributes (no per-instance dict, 1.5 KiB once it
    has over 30 names), its handshake's wait for the GET stream leaves nothing behind, and a call's
    exchange queues in lists (an empty deque is 760 bytes)."""
    assert not hasattr(session, "__dict__")
    assert weakref.ref(session)() is session  # gateway.mcptasks.passthrough keys a WeakKeyDictionary by it
    assert session._get_task is not None
    assert not session._get_task.done()  # the GET stream is open
    assert session._get_answered is None
    async with asyncio.timeout(WAIT):
        exchange = await session.start("tools/call", {"name": "t", "arguments": {}}, {}, owner=True)
        assert isinstance(exchange, BoundedExchange)
        kept = [*vars(exchange).values(), *(getattr(exchange.queue, name) for name in exchange.queue.__slots__)]
        assert not any(isinstance(value, collections.deque) for value in kept)
        backend.call_events.put_nowait(ANSWER)
        backend.call_events.put_nowait(None)
        assert await exchange.next(WAIT) == FinalResponse(result={"content": []})
        await exchange.aclose()
    session.attach(None)
