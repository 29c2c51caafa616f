"""Hostile legacy servers (tests/hostile.py): every misbehaviour ends in a clear backend error within
its bound, nothing the gateway added reaches another origin, and /healthz keeps answering."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from harness import BareClient, GatewayHandle, accept, route, running_gateway, serving
from hostile import HostileBackend, event, sse_response, text_result
from waiting import eventually

from gateway import keys
from gateway.errors import BackendUnavailable
from gateway.legacy.limits import FLOOD_REASON
from gateway.legacy.streamable_http import StreamableHttpSession

BOUND = 20.0
"""Upper bound on every wait in this module."""
HEALTHZ_BOUND = 1.0
"""Generous: it only proves the event loop never stalls for seconds (the figures are in bench/)."""


@asynccontextmanager
async def healthz_probe(http: aiohttp.ClientSession, gateway: GatewayHandle) -> AsyncIterator[list[float]]:
    """Requests /healthz back to back while the block runs; yields the latencies (seconds)."""
    samples: list[float] = []
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    async def probe() -> None:
        while not stop.is_set():
            started = loop.time()
            async with http.get(gateway.url("/healthz")) as resp:
                await resp.read()
            samples.append(loop.time() - started)
            await asyncio.sleep(0.01)  # pacing, not waiting for anything

    task = asyncio.create_task(probe())
    try:
        yield samples
    finally:
        stop.set()
        await asyncio.wait_for(task, BOUND)


def backend_error(reply: Any, cause: str) -> None:
    """The client got the gateway's "backend unavailable" error, for ``cause``."""
    assert reply.error["code"] == BackendUnavailable.code, reply.body
    assert reply.error["data"]["reason"] == BackendUnavailable.category, reply.body
    assert reply.error["data"]["cause"] == cause, reply.body


def only_session(gateway: GatewayHandle) -> StreamableHttpSession:
    sessions = [p.session for p in gateway.app[keys.ROUTES]["/mcp"].pool._all()]
    assert len(sessions) == 1
    session = sessions[0]
    assert isinstance(session, StreamableHttpSession)
    return session


ELICIT = {"message": "Which city?", "requestedSchema": {"type": "object", "properties": {"city": {"type": "string"}}}}


# --- issue 8 item 8: bounded server requests ----------------------------------------------------------


async def test_requests_flooding_a_round_fail_the_call_and_drop_the_session(
    backend: HostileBackend, http: aiohttp.ClientSession
) -> None:
    sent = 0

    async def flood(request: web.Request, message: dict[str, Any]) -> web.StreamResponse:
        nonlocal sent
        response = await sse_response(request)
        try:
            for index in range(5000):  # 1 ms apart: always inside the batch window
                ask = {"jsonrpc": "2.0", "id": f"s{index}", "method": "elicitation/create", "params": ELICIT}
                await response.write(event(ask))
                sent += 1
                await asyncio.sleep(0.001)  # pacing, not waiting for anything
        except (ConnectionResetError, ConnectionError):
            pass
        return response

    async def after_the_flood_began() -> None:
        """The round's fence: answered once more requests than a round may hold have been sent."""
        if sent:  # (not the ping after initialize)
            await eventually(lambda: sent > 16, what="the flood under way")

    backend.tools["flood"] = flood
    backend.on_ping = after_the_flood_began
    flood_route = route(
        "h", "/mcp", backend.url, holds={"batch_window": 0.2}, backend={"limits": {"max_round_requests": 16}}
    )
    async with running_gateway([flood_route]) as gw:
        client = BareClient(http, gw.url())
        async with asyncio.timeout(BOUND):
            reply = await client.call_tool("flood")
        backend_error(reply, FLOOD_REASON)
        assert sent < 5000  # the round did not wait for the backend to stop
        async with asyncio.timeout(BOUND):
            assert (await client.call_tool("ok")).result["resultType"] == "complete"
        assert backend.initializations == 2  # the flooding session was not handed out again


async def test_a_flood_into_a_held_call_is_bounded_and_fails_its_retry(
    backend: HostileBackend, http: aiohttp.ClientSession
) -> None:
    held, flooded = asyncio.Event(), asyncio.Event()

    async def held_flood(request: web.Request, message: dict[str, Any]) -> web.StreamResponse:
        response = await sse_response(request)
        ask = {"jsonrpc": "2.0", "id": "s1", "method": "elicitation/create", "params": ELICIT}
        await response.write(event(ask))
        await held.wait()  # the client has its input_required answer: the call is held now
        try:
            note = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x" * 500}}
            for index in range(5000):
                await response.write(event(note))
                if index % 100 == 0:
                    await asyncio.sleep(0)  # pacing: a turn for the gateway to read what was written
        finally:
            flooded.set()
        await asyncio.Event().wait()  # never answers
        return response

    backend.tools["held_flood"] = held_flood
    limits = {"max_queued_messages": 100}
    async with running_gateway([route("h", "/mcp", backend.url, backend={"limits": limits, "timeout": 5})]) as gw:
        client = BareClient(http, gw.url())
        async with asyncio.timeout(BOUND):
            first = await client.call_tool("held_flood")
            assert first.result["resultType"] == "input_required"
            held.set()
            await flooded.wait()
            (key,) = first.result["inputRequests"]
            retry = await client.retry("held_flood", first.result["requestState"], {key: accept(city="Paris")})
        backend_error(retry, FLOOD_REASON)


# --- issue 8 item 9: no cross-origin redirects --------------------------------------------------------


@asynccontextmanager
async def recording_listener() -> AsyncIterator[tuple[str, list[dict[str, Any]]]]:
    """A second origin that records every request it gets (it must get none)."""
    seen: list[dict[str, Any]] = []

    async def record(request: web.Request) -> web.StreamResponse:
        seen.append({"method": request.method, "headers": dict(request.headers), "body": await request.read()})
        return web.json_response({"jsonrpc": "2.0", "id": 1, "result": {"content": []}})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", record)
    async with serving(app) as base:
        yield base, seen


async def test_a_redirect_to_another_origin_is_refused_and_nothing_reaches_it(
    backend: HostileBackend, http: aiohttp.ClientSession
) -> None:
    async with recording_listener() as (elsewhere, seen):

        async def redirect(request: web.Request, message: dict[str, Any]) -> web.StreamResponse:
            raise web.HTTPTemporaryRedirect(elsewhere + "/steal")

        async def redirect_get(request: web.Request) -> web.StreamResponse:
            raise web.HTTPTemporaryRedirect(elsewhere + "/steal-stream")

        backend.tools["moved"] = redirect
        backend.on_get = redirect_get
        secret_route = route("h", "/mcp", backend.url, backend={"headers": {"X-Api-Key": "route-secret"}})
        async with running_gateway([secret_route]) as gw:
            client = BareClient(http, gw.url(), authorization="Bearer client-token")
            async with asyncio.timeout(BOUND):
                reply = await client.call_tool("moved", {"card": "4111"})
        backend_error(reply, "redirect_refused")
        assert backend.gets >= 1  # the GET stream was redirected too
        assert seen == []


async def test_a_same_origin_redirect_is_followed(backend: HostileBackend, http: aiohttp.ClientSession) -> None:
    async def moved(request: web.Request, message: dict[str, Any]) -> web.StreamResponse:
        if request.path == "/mcp":
            raise web.HTTPPermanentRedirect("/mcp-moved")
        return web.json_response(text_result(message["id"], "found " + request.headers.get("X-Api-Key", "")))

    backend.tools["moved"] = moved
    # the test app serves /mcp only: route the new path to the same handler
    async with hostile_redirect_app(backend) as url:
        same_origin = route("h", "/mcp", url, backend={"headers": {"X-Api-Key": "route-secret"}})
        async with running_gateway([same_origin]) as gw:
            client = BareClient(http, gw.url())
            async with asyncio.timeout(BOUND):
                reply = await client.call_tool("moved")
    assert reply.text == "found route-secret"


@asynccontextmanager
async def hostile_redirect_app(backend: HostileBackend) -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_route("*", "/mcp", backend.handle)
    app.router.add_route("*", "/mcp-moved", backend.handle)
    async with serving(app) as base:
        yield base + "/mcp"


async def test_an_http_sse_backend_redirecting_elsewhere_gets_nothing_sent_there(http: aiohttp.ClientSession) -> None:
    async with recording_listener() as (elsewhere, seen):

        async def sse(request: web.Request) -> web.StreamResponse:
            raise web.HTTPTemporaryRedirect(elsewhere + "/sse")

        app = web.Application()
        app.router.add_get("/sse", sse)
        async with serving(app) as base:
            sse_route = route("h", "/mcp", base + "/sse", backend={"transport": "sse", "headers": {"X-Api-Key": "k"}})
            async with running_gateway([sse_route]) as gw:
                async with asyncio.timeout(BOUND):
                    reply = await BareClient(http, gw.url(), authorization="Bearer t").call_tool("any")
        backend_error(reply, "redirect_refused")
        assert seen == []


# --- issue 7 item 1: backend JSON answers of any size up to the limit ---------------------------------


async def test_a_json_answer_of_several_mib_is_read_whole(backend: HostileBackend, http: aiohttp.ClientSession) -> None:
    text = "0123456789abcdef" * (6 * 1024 * 1024 // 16)  # 6 MiB

    async def big(request: web.Request, message: dict[str, Any]) -> web.StreamResponse:
        return web.json_response(text_result(message["id"], text))

    backend.tools["big"] = big
    async with running_gateway([route("h", "/mcp", backend.url)]) as gw:
        async with asyncio.timeout(BOUND):
            reply = await BareClient(http, gw.url()).call_tool("big")
    assert reply.text == text


async def test_a_json_answer_over_the_message_limit_is_refused(
    backend: HostileBackend, http: aiohttp.ClientSession
) -> None:
    async def big(request: web.Request, message: dict[str, Any]) -> web.StreamResponse:
        return web.json_response(text_result(message["id"], "x" * 300_000))

    backend.tools["big"] = big
    small = route("h", "/mcp", backend.url, backend={"limits": {"max_message_bytes": 100_000}})
    async with running_gateway([small]) as gw:
        async with asyncio.timeout(BOUND):
            reply = await BareClient(http, gw.url()).call_tool("big")
    backend_error(reply, "malformed_response")


# --- issue 8 item 10: the standalone GET stream is bounded ---------------------------------------------


async def endless_line(request: web.Request) -> web.StreamResponse:
    response = await sse_response(request)
    with_newlines_never = b"data: " + b"x" * 65536
    try:
        for _ in range(4096):  # 256 MiB if nobody stopped reading
            await response.write(with_newlines_never)
    except (ConnectionResetError, ConnectionError):
        pass
    return response


async def comment_flood(request: web.Request) -> web.StreamResponse:
    response = await sse_response(request)
    try:
        for _ in range(4096):
            await response.write(b": flood\n\n" * 6000)
    except (ConnectionResetError, ConnectionError):
        pass
    return response


@pytest.mark.parametrize("flood", [endless_line, comment_flood], ids=["endless-line", "comment-flood"])
async def test_a_flooding_get_stream_is_cut_retried_a_few_times_and_given_up(
    backend: HostileBackend, http: aiohttp.ClientSession, flood: Any
) -> None:
    backend.on_get = flood
    limits = {"max_message_bytes": 64 * 1024, "stream_reconnects": 3}
    async with running_gateway([route("h", "/mcp", backend.url, backend={"limits": limits})]) as gw:
        client = BareClient(http, gw.url())
        async with healthz_probe(http, gw) as latencies, asyncio.timeout(BOUND):
            assert (await client.call_tool("ok")).result["resultType"] == "complete"
            session = only_session(gw)
            get_task = session._get_task
            assert get_task is not None
            await asyncio.shield(get_task)  # the stream is given up: the task ends
            assert (await client.call_tool("ok")).result["resultType"] == "complete"
        assert backend.gets == 3  # not reset by each 200: three useless openings, then no more
        assert max(latencies) < HEALTHZ_BOUND


async def test_a_silent_get_stream_is_reopened_after_the_idle_timeout(
    backend: HostileBackend, http: aiohttp.ClientSession
) -> None:
    async def silent(request: web.Request) -> web.StreamResponse:
        response = await sse_response(request)
        await asyncio.Event().wait()
        return response

    backend.on_get = silent
    limits = {"stream_idle_timeout": 0.2}
    async with running_gateway([route("h", "/mcp", backend.url, backend={"limits": limits})]) as gw:
        client = BareClient(http, gw.url())
        async with asyncio.timeout(BOUND):
            assert (await client.call_tool("ok")).result["resultType"] == "complete"
            await backend.when_gets(4).wait()  # quiet periods are not failures: it keeps coming back
            session = only_session(gw)
            assert session._get_task is not None
            assert not session._get_task.done()


async def test_a_get_stream_that_delivers_messages_keeps_reconnecting(
    backend: HostileBackend, http: aiohttp.ClientSession
) -> None:
    async def one_ping_then_close(request: web.Request) -> web.StreamResponse:
        response = await sse_response(request)
        await response.write(event({"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": "hi"}}))
        return response

    backend.on_get = one_ping_then_close
    limits = {"stream_reconnects": 2}
    async with running_gateway([route("h", "/mcp", backend.url, backend={"limits": limits})]) as gw:
        client = BareClient(http, gw.url())
        async with asyncio.timeout(BOUND):
            assert (await client.call_tool("ok")).result["resultType"] == "complete"
            await backend.when_gets(6).wait()  # useful openings reset the count
