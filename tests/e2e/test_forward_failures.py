"""Issue 26 item 2: a retry forwarded to its owner whose connection dies after the request was sent.

The hop then finds out: a fresh connection to the owner's address refused proves the owner gone (a
replay route replays, an error route answers ``hold_lost``, cause ``owner_unreachable``); one accepted
gets the same retry sent once more, which the owner answers from what it kept for resends (so an
answer lost on its way back is not a lost call)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from fake_backend import FakeBackend
from harness import BareClient, _free_port, accept, route, running_gateway

from gateway import keys

Backend = tuple[FakeBackend, str]
REPLAY = {"holds": {"on_lost": "replay"}}


@contextlib.asynccontextmanager
async def answer_dropping_proxy(upstream_port: int, *, drops: int = 1) -> AsyncIterator[int]:
    """A TCP proxy to ``upstream_port`` that, on its first ``drops`` connections, passes the request
    and the owner's ``100 Continue`` through and cuts the connection when the final answer begins:
    the owner ran the retry, the forwarding replica never hears its answer."""
    port, cut = _free_port(), 0

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, cutting: bool) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await reader.read(65536):
                if cutting and not data.startswith(b"HTTP/1.1 100"):
                    writer.transport.abort()
                    return
                writer.write(data)
                await writer.drain()
        writer.close()

    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        nonlocal cut
        cutting = cut < drops
        cut += 1
        up_r, up_w = await asyncio.open_connection("127.0.0.1", upstream_port)
        await asyncio.gather(pipe(client_r, up_w, cutting=False), pipe(up_r, client_w, cutting=cutting))
        up_w.close()

    server = await asyncio.start_server(handle, "127.0.0.1", port)
    async with server:
        yield port


@contextlib.asynccontextmanager
async def dying_owner(requests: int = 1) -> AsyncIterator[tuple[int, asyncio.Event]]:
    """An address whose replica dies while a forwarded retry is on its way: it acknowledges the hop
    (``100 Continue``), reads the body, then the connection is cut; after ``requests`` such
    requests the listener is gone too (until then a fresh connection is still accepted, as a
    process being killed accepts for a moment)."""
    port, died = _free_port(), asyncio.Event()
    server: asyncio.Server | None = None
    seen = 0

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal seen
        with contextlib.suppress(asyncio.IncompleteReadError):  # the hop's check sends nothing
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            await writer.drain()
            await reader.read(1)
            seen += 1
            if seen >= requests:
                assert server is not None
                server.close()  # no one listens at the owner's address any more
                died.set()
        writer.transport.abort()

    server = await asyncio.start_server(handle, "127.0.0.1", port)
    try:
        yield port, died
    finally:
        server.close()


async def held_for(
    http: aiohttp.ClientSession, routes: list[dict[str, Any]], owner_port: int
) -> tuple[dict[str, Any], str]:
    """An ``ask_city`` round held by an owner that advertised ``owner_port`` and is gone now: the
    first answer and its one input key."""
    owner_config: dict[str, Any] = {
        "replica_id": "owner",
        "replicas": {"advertise_url": f"http://127.0.0.1:{owner_port}"},
    }
    async with running_gateway(routes, **owner_config) as owner:
        first = (await BareClient(http, owner.url()).call_tool("ask_city")).result
    (key,) = first["inputRequests"]
    return first, key


def _forwards(gw: Any, outcome: str) -> float:
    for sample in gw.app[keys.METRICS].forwards.collect()[0].samples:
        if sample.name.endswith("_total") and sample.labels == {"route": "demo", "outcome": outcome}:
            return float(sample.value)
    return 0.0


async def test_an_answer_lost_on_the_hop_is_asked_for_again_and_the_owner_answers_it(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    routes = [route("demo", "/mcp", url)]
    owner_port = _free_port()
    async with answer_dropping_proxy(owner_port) as proxy_port:
        owner_config: dict[str, Any] = {
            "replica_id": "owner",
            "replicas": {"advertise_url": f"http://127.0.0.1:{proxy_port}"},
        }
        async with (
            running_gateway(routes, port=owner_port, **owner_config) as owner,
            running_gateway(routes, replica_id="other") as other,
        ):
            first = (await BareClient(http, owner.url()).call_tool("ask_city")).result
            (key,) = first["inputRequests"]
            done = await BareClient(http, other.url()).retry(
                "ask_city", first["requestState"], {key: accept(city="Oslo")}
            )
            assert done.text == "city=Oslo"
            metrics = owner.app[keys.METRICS]
            answered = [
                s.value
                for s in metrics.resends.collect()[0].samples
                if s.name.endswith("_total") and s.labels["outcome"] == "answered"
            ]
            assert sum(answered) == 1, "the second send was answered from the owner's memory"
            assert _forwards(other, "replayed") == 0


@pytest.mark.parametrize("requests", [1, 2], ids=["refused-at-once", "accepts-one-resend-as-it-dies"])
async def test_a_retry_whose_owner_died_mid_hop_is_replayed_on_a_replay_route(
    fake_backend: Backend, http: aiohttp.ClientSession, requests: int
) -> None:
    """With ``requests`` 2, as seen under SIGKILL in the chaos test: the check after the cut was
    accepted, the resend was cut too, and only the next check was refused. The hop checks before
    every resend (``RESENDS``), so the owner is found gone and the call replayed, not lost as
    ``owner_failed``."""
    _, url = fake_backend
    async with dying_owner(requests) as (port, died):
        first, key = await held_for(http, [route("demo", "/mcp", url, **REPLAY)], port)
        async with running_gateway([route("demo", "/mcp", url, **REPLAY)], replica_id="other") as other:
            done = await BareClient(http, other.url()).retry(
                "ask_city", first["requestState"], {key: accept(city="Lima")}
            )
            assert died.is_set(), "the hop reached the owner, which died with the request"
            assert done.text == "city=Lima"
            assert _forwards(other, "replayed") == 1


async def test_a_retry_whose_owner_died_mid_hop_is_lost_on_an_error_route(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with dying_owner() as (port, died):
        first, key = await held_for(http, [route("demo", "/mcp", url)], port)
        async with running_gateway([route("demo", "/mcp", url)], replica_id="other") as other:
            lost = await BareClient(http, other.url()).retry(
                "ask_city", first["requestState"], {key: accept(city="Lima")}
            )
            assert died.is_set()
            assert lost.status == 502
            assert lost.error["data"] == {"reason": "hold_lost", "cause": "owner_unreachable"}
            assert _forwards(other, "owner_unreachable") == 1


@contextlib.asynccontextmanager
async def slow_owner(delay: float) -> AsyncIterator[int]:
    """An owner that acknowledges the hop at once (``100 Continue``), then answers after ``delay``."""
    port = _free_port()
    answer = b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"late but here"}]}}'

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
        )
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        await writer.drain()
        await reader.readexactly(length)
        await asyncio.sleep(delay)  # deliberate: the owner works past the hop's forward_timeout
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
            + f"Content-Length: {len(answer)}\r\n\r\n".encode()
            + answer
        )
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", port)
    async with server:
        yield port


async def test_an_acknowledged_owner_may_answer_after_forward_timeout(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    """The acknowledgement (the body sent after ``100 Continue``) lifts the ``forward_timeout``
    deadline: from then on only the route's ``backend.timeout`` bounds the owner."""
    _, url = fake_backend
    replicas = {"forward_timeout": 0.3}
    async with slow_owner(delay=1.0) as port:
        owner_config: dict[str, Any] = {
            "replica_id": "owner",
            "replicas": {**replicas, "advertise_url": f"http://127.0.0.1:{port}"},
        }
        async with running_gateway([route("demo", "/mcp", url)], **owner_config) as owner:
            first = (await BareClient(http, owner.url()).call_tool("ask_city")).result
        (key,) = first["inputRequests"]
        async with running_gateway([route("demo", "/mcp", url)], replica_id="other", replicas=replicas) as other:
            late = await BareClient(http, other.url()).retry("ask_city", first["requestState"], {key: accept(city="x")})
    assert late.status == 200
    assert late.text == "late but here"
