"""A hung owner found in seconds (issue 20): the hop waits ``replicas.forward_timeout`` for the
owner's acknowledgement (``100 Continue``), not the route's ``backend.timeout``; the owner's own
status reaches the client unchanged."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from fake_backend import FakeBackend
from harness import TEST_KEY, BareClient, _free_port, accept, route, running_gateway, serving, start_serve
from mcp_types.jsonrpc import INTERNAL_ERROR
from waiting import until_status

from gateway import keys
from gateway.errors import HOLD_LOST
from gateway.replicas.forward import OWNER_UNRESPONSIVE

Backend = tuple[FakeBackend, str]
REPLAY = {"holds": {"on_lost": "replay"}}
FORWARD_TIMEOUT = 2.0


async def _retry_timed(client: BareClient, state: str, key: str) -> tuple[Any, float]:
    loop = asyncio.get_running_loop()
    started = loop.time()
    async with asyncio.timeout(30):
        reply = await client.retry("ask_city", state, {key: accept(city="Oslo")})
    return reply, loop.time() - started


def _assert_unresponsive(reply: Any, seconds: float, forwarder: Any) -> None:
    assert reply.status == 502, reply
    assert reply.error["code"] == INTERNAL_ERROR
    assert (reply.error["data"]["reason"], reply.error["data"]["cause"]) == (HOLD_LOST, OWNER_UNRESPONSIVE)
    assert seconds < FORWARD_TIMEOUT + 1.0, f"answered after {seconds:.2f} s"
    forwards = forwarder.app[keys.METRICS].forwards
    assert forwards.labels("demo", OWNER_UNRESPONSIVE)._value.get() == 1
    assert forwards.labels("demo", "replayed")._value.get() == 0, "an owner that may resume is never replayed"


async def test_an_owner_that_never_acknowledges_is_given_up_after_forward_timeout(
    fake_backend: Backend, http: aiohttp.ClientSession, silent_owner: str
) -> None:
    _, url = fake_backend
    routes = [route("demo", "/mcp", url, backend={"timeout": 30}, **REPLAY)]
    async with (
        running_gateway(routes, replica_id="a", replicas={"advertise_url": silent_owner}) as a,
        running_gateway(routes, replica_id="b", replicas={"forward_timeout": FORWARD_TIMEOUT}) as b,
    ):
        first = (await BareClient(http, a.url()).call_tool("ask_city")).result
        (key,) = first["inputRequests"]
        reply, seconds = await _retry_timed(BareClient(http, b.url()), first["requestState"], key)
        _assert_unresponsive(reply, seconds, b)
        assert len(a.app[keys.HOLDS]) == 1, "the hold is untouched"


async def test_a_stopped_owner_process_is_given_up_after_forward_timeout_and_its_hold_survives(
    fake_backend: Backend, http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    """The real thing: the owner is a gateway process stopped with SIGSTOP (its kernel still accepts
    the hop's connection). Before issue 20 the retry waited the route's backend.timeout (30 s)."""
    _, url = fake_backend
    port = _free_port()
    config = tmp_path / "owner.yaml"
    config.write_text(
        json.dumps(
            {
                "state": {"keys": [TEST_KEY]},
                "replica_id": "owner",
                "logging": {"level": "warning"},
                "listen": {"host": "127.0.0.1", "port": port},
                "replicas": {"advertise_url": f"http://127.0.0.1:{port}"},
                "routes": [route("demo", "/mcp", url, backend={"timeout": 30}, **REPLAY)],
            }
        ),
        encoding="utf-8",
    )
    owner = await start_serve(config)
    owner_url = f"http://127.0.0.1:{port}/mcp"
    try:
        await until_status(http, f"http://127.0.0.1:{port}/healthz", timeout=30)
        first = (await BareClient(http, owner_url).call_tool("ask_city")).result
        (key,) = first["inputRequests"]
        routes = [route("demo", "/mcp", url, backend={"timeout": 30}, **REPLAY)]
        async with running_gateway(routes, replica_id="b", replicas={"forward_timeout": FORWARD_TIMEOUT}) as b:
            owner.send_signal(signal.SIGSTOP)
            try:
                reply, seconds = await _retry_timed(BareClient(http, b.url()), first["requestState"], key)
            finally:
                owner.send_signal(signal.SIGCONT)
            _assert_unresponsive(reply, seconds, b)
        # Resumed, the owner still holds the call (nothing was replayed elsewhere): the retry works.
        async with asyncio.timeout(30):
            done = await BareClient(http, owner_url).retry(
                "ask_city", first["requestState"], {key: accept(city="Oslo")}
            )
        assert done.text == "city=Oslo"
    finally:
        if owner.returncode is None:
            owner.send_signal(signal.SIGCONT)
            owner.kill()
        await owner.wait()


@pytest.mark.parametrize("status", [400, 404, 502, 503])
async def test_the_owners_status_reaches_the_client_unchanged(
    fake_backend: Backend, http: aiohttp.ClientSession, status: int
) -> None:
    """The acknowledgement (``100 Continue``) is informational: the client gets the owner's final
    status, headers and body, whatever they are."""
    _, url = fake_backend
    seen: list[str] = []
    error = {"jsonrpc": "2.0", "id": 7, "error": {"code": -32603, "message": f"owner said {status}"}}

    async def owner(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Expect", ""))
        await request.read()
        return web.json_response(error, status=status, headers={"Retry-After": "3", "X-Owner": "yes"})

    app = web.Application()
    app.router.add_post("/mcp", owner)
    routes = [route("demo", "/mcp", url, **REPLAY)]
    async with (
        serving(app) as owner_base,
        running_gateway(routes, replica_id="a", replicas={"advertise_url": owner_base}) as a,
        running_gateway(routes, replica_id="b", replicas={"forward_timeout": FORWARD_TIMEOUT}) as b,
    ):
        first = (await BareClient(http, a.url()).call_tool("ask_city")).result
        (key,) = first["inputRequests"]
        reply = await BareClient(http, b.url()).retry("ask_city", first["requestState"], {key: accept(city="x")})
        assert (reply.status, reply.body) == (status, error)
        assert (reply.headers["Retry-After"], reply.headers["X-Owner"]) == ("3", "yes")
        assert seen == ["100-continue"]
        assert b.app[keys.METRICS].forwards.labels("demo", "forwarded")._value.get() == 1
