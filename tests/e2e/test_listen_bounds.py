"""Listen streams are bounded: per principal and in total, their backend sessions count in the
route's ``max_sessions``, and a hung backend delays only listens on its own route (issue 8 items
4 and 11)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import aiohttp
from aiohttp import web
from fake_backend import FakeBackend
from harness import BareClient, listen_request, route, running_gateway
from waiting import eventually

from gateway import keys

Backend = tuple[FakeBackend, str]


@asynccontextmanager
async def listen(http: aiohttp.ClientSession, url: str, who: str) -> AsyncIterator[aiohttp.ClientResponse]:
    """A listen stream open past its acknowledgment, or the refusal (any non-SSE answer)."""
    body, headers = listen_request(f"listen-{who}", authorization=f"Bearer {who}")
    async with http.post(url, data=body, headers=headers) as resp:
        if resp.content_type == "text/event-stream":
            async with asyncio.timeout(10):
                while not (await resp.content.readline()).startswith(b"data:"):
                    pass
        yield resp


async def test_listen_streams_are_bounded_per_principal_and_in_total(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    limits = {"max_listen_streams": 4, "max_listen_streams_per_principal": 2, "retry_after": 4}
    async with running_gateway([route("demo", "/mcp", url)], limits=limits) as gw, AsyncExitStack() as streams:
        for who in ("alice", "alice", "bob"):
            opened = await streams.enter_async_context(listen(http, gw.url(), who))
            assert opened.status == 200
        async with listen(http, gw.url(), "alice") as third:
            refused = await third.json()
            assert (third.status, third.headers["Retry-After"]) == (503, "4")
            assert refused["error"]["data"] == {
                "reason": "overloaded",
                "cause": "principal_listen_stream_limit",
                "retryAfter": 4,
            }
        assert (await streams.enter_async_context(listen(http, gw.url(), "carol"))).status == 200
        async with listen(http, gw.url(), "dave") as fifth:
            assert fifth.status == 503
            assert (await fifth.json())["error"]["data"]["cause"] == "listen_stream_limit"
        assert gw.app[keys.LISTEN_HUBS].stream_count == 4
        await streams.aclose()
        await eventually(lambda: not gw.app[keys.LISTEN_HUBS].stream_count, what="every listen stream ended")
        async with listen(http, gw.url(), "carol") as again:
            assert again.status == 200, "a stream that ended frees its place"


async def test_listen_sessions_count_in_the_routes_max_sessions(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    """One backend session (for stdio: one process) per credential must not escape the bound."""
    _, url = fake_backend
    demo = route("demo", "/mcp", url, backend={"max_sessions": 2, "session_wait": 0})
    async with running_gateway([demo]) as gw, AsyncExitStack() as streams:
        for who in ("alice", "bob"):
            assert (await streams.enter_async_context(listen(http, gw.url(), who))).status == 200
        assert gw.app[keys.ROUTES]["/mcp"].pool.size == 2
        for who in ("carol", "erin", "frank"):
            async with listen(http, gw.url(), who) as refused:
                assert refused.status == 503
                assert (await refused.json())["error"]["data"]["cause"] == "backend_sessions_exhausted"
        hubs = gw.app[keys.LISTEN_HUBS]
        assert (len(hubs), hubs.stream_count, len(hubs._locks)) == (2, 2, 2), "refused keys leave nothing behind"
        call = await BareClient(http, gw.url(), authorization="Bearer dave").call_tool("add", {"a": 1, "b": 2})
        assert call.error["data"]["cause"] == "backend_sessions_exhausted"
        await streams.aclose()
        await eventually(lambda: not gw.app[keys.ROUTES]["/mcp"].pool.size, what="the listen sessions closed")
        assert (
            await BareClient(http, gw.url(), authorization="Bearer dave").call_tool("add", {"a": 1, "b": 2})
        ).text == "3"


async def test_a_backend_whose_initialize_never_answers_delays_no_listen_on_another_route(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    initialize_seen = asyncio.Event()
    release = asyncio.Event()

    async def never_answers(request: web.Request) -> web.Response:
        initialize_seen.set()
        await release.wait()
        return web.Response(status=503)

    hung_app = web.Application()
    hung_app.router.add_route("*", "/mcp", never_answers)
    hung = web.AppRunner(hung_app)
    await hung.setup()
    site = web.TCPSite(hung, "127.0.0.1", 0)
    await site.start()
    hung_url = f"http://127.0.0.1:{hung.addresses[0][1]}/mcp"
    routes = [route("hung", "/hung", hung_url, backend={"timeout": 60}), route("demo", "/mcp", url)]
    try:
        async with running_gateway(routes) as gw:
            stuck = asyncio.create_task(_listen_status(http, gw.url("/hung"), "alice"))
            async with asyncio.timeout(10):
                await initialize_seen.wait()
            # The hung route's initialize is in flight; a listen elsewhere is acknowledged at once,
            # long before the hung backend's 60 s timeout (bounded wait, not a timing assertion).
            async with asyncio.timeout(20):
                for who in ("alice", "bob"):
                    async with listen(http, gw.url(), who) as other:
                        assert other.status == 200
            stuck.cancel()
    finally:
        release.set()
        await hung.cleanup()


async def _listen_status(http: aiohttp.ClientSession, url: str, who: str) -> int:
    async with listen(http, url, who) as resp:
        return resp.status
