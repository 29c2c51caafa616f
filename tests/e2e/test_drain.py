"""Graceful drain (issue 11 item 1): a replica told to stop refuses new calls with a retryable
error, keeps serving the retries of the calls it holds until they finish, and then exits, within
``listen.drain_timeout``. In process (the drain object driven directly, one replica and two) and
as an operator runs it (``python -m gateway serve``, SIGTERM)."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path
from typing import Any

import aiohttp
from fake_backend import FakeBackend
from harness import TEST_KEY, BareClient, _free_port, accept, route, running_gateway, running_replicas, start_serve
from mcp_types.jsonrpc import INTERNAL_ERROR
from waiting import until_status

from gateway import keys
from gateway.server import SHUTDOWN_TIMEOUT

Backend = tuple[FakeBackend, str]
BOUND = 30  # seconds: every wait in these tests is bounded


def assert_draining_refusal(reply: Any) -> None:
    assert reply.status == 503
    assert reply.headers["Retry-After"] == "1"
    assert reply.error["code"] == INTERNAL_ERROR
    assert reply.error["data"]["reason"] == "draining"


async def test_a_draining_replica_refuses_new_calls_and_finishes_held_ones(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url)]) as gw:
        client = BareClient(http, gw.url())
        first = (await client.call_tool("ask_two")).result
        drain = gw.app[keys.DRAIN]
        drain.begin()
        async with http.get(gw.url("/readyz")) as resp:
            assert resp.status == 503
            assert (await resp.json())["status"] == "draining"
        assert_draining_refusal(await client.call_tool("ask_city"))
        assert_draining_refusal(await client.call_tool("add", {"a": 1, "b": 2}))
        assert (await client.request("tools/list")).status == 200, "plain requests are still served"
        waiting = asyncio.create_task(drain.wait())
        (k1,) = first["inputRequests"]
        second = (await client.retry("ask_two", first["requestState"], {k1: accept(name="Ada")})).result
        assert second["resultType"] == "input_required", "a held call may take another round while draining"
        assert not waiting.done()
        (k2,) = second["inputRequests"]
        done = await client.retry("ask_two", second["requestState"], {k2: accept(color="red")})
        assert done.text == "name=Ada;color=red"
        async with asyncio.timeout(BOUND):
            assert await waiting is True, "nothing held or in flight: the drain is over before its timeout"
        metrics = gw.app[keys.METRICS]
        assert metrics.rejections.labels("draining")._value.get() == 2


async def test_a_held_call_completes_through_a_draining_owner_from_another_replica(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    """The retry lands on a live replica (the load balancer no longer sends to the draining one),
    which forwards it to the draining owner; the owner still answers it."""
    _, url = fake_backend
    async with running_replicas(2, [route("demo", "/mcp", url)]) as (a, b):
        first = (await BareClient(http, a.url()).call_tool("ask_city")).result
        a.app[keys.DRAIN].begin()
        (key,) = first["inputRequests"]
        done = await BareClient(http, b.url()).retry("ask_city", first["requestState"], {key: accept(city="Oslo")})
        assert done.text == "city=Oslo"
        assert b.app[keys.METRICS].forwards.labels("demo", "forwarded")._value.get() == 1
        async with asyncio.timeout(BOUND):
            assert await a.app[keys.DRAIN].wait() is True
        # A new call that reaches the draining replica is refused; the live one takes it.
        assert_draining_refusal(await BareClient(http, a.url()).call_tool("ask_city"))
        assert (await BareClient(http, b.url()).call_tool("ask_city")).result["resultType"] == "input_required"


async def test_a_drain_ends_at_its_timeout_when_a_client_never_comes_back(fake_backend: Backend) -> None:
    _backend, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url)], listen={"drain_timeout": 0.2}) as gw:
        async with aiohttp.ClientSession() as http:
            (await BareClient(http, gw.url()).call_tool("ask_city")).result  # noqa: B018 - held, never retried
        drain = gw.app[keys.DRAIN]
        drain.begin()
        async with asyncio.timeout(BOUND):
            assert await drain.wait() is False
        assert len(gw.app[keys.HOLDS]) == 1, "the hold is left to the shutdown, which expires it as always"


async def test_a_second_signal_cuts_the_drain_short(fake_backend: Backend, http: aiohttp.ClientSession) -> None:
    _, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url)], listen={"drain_timeout": 3600}) as gw:
        await BareClient(http, gw.url()).call_tool("ask_city")
        drain = gw.app[keys.DRAIN]
        drain.begin()
        waiting = asyncio.create_task(drain.wait())
        await asyncio.sleep(0)  # one turn: the task is waiting on the drain when the second signal comes
        drain.begin()
        async with asyncio.timeout(BOUND):
            assert await waiting is False


# -- the process, as an operator runs it ------------------------------------------------------


async def _start_gateway(tmp_path: Path, backend_url: str, drain_timeout: float) -> tuple[Any, int]:
    port = _free_port()
    config = tmp_path / "gateway.yaml"
    config.write_text(
        json.dumps(
            {
                "state": {"keys": [TEST_KEY]},
                "listen": {"host": "127.0.0.1", "port": port, "drain_timeout": drain_timeout},
                "logging": {"json": True},
                "routes": [{"name": "demo", "path": "/mcp", "backend": {"url": backend_url, "timeout": 10}}],
            }
        ),
        encoding="utf-8",
    )
    proc = await start_serve(config)
    async with aiohttp.ClientSession() as http:
        await until_status(http, f"http://127.0.0.1:{port}/readyz", timeout=BOUND)
    return proc, port


async def _stop(proc: Any) -> str:
    if proc.returncode is None:
        proc.kill()
        await proc.wait()
    assert proc.stderr is not None
    text: str = (await proc.stderr.read()).decode()
    return text


async def test_sigterm_drains_a_real_process_and_it_exits_once_the_held_call_is_done(
    fake_backend: Backend, http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    _, url = fake_backend
    drain_timeout = 20
    proc, port = await _start_gateway(tmp_path, url, drain_timeout)
    try:
        client = BareClient(http, f"http://127.0.0.1:{port}/mcp")
        first = (await client.call_tool("ask_city")).result
        proc.send_signal(signal.SIGTERM)
        # the signal is handled asynchronously: wait for /readyz to say so
        await until_status(http, f"http://127.0.0.1:{port}/readyz", 503, timeout=BOUND, interval=0.02)
        assert_draining_refusal(await client.call_tool("ask_city"))
        (key,) = first["inputRequests"]
        done = await client.retry("ask_city", first["requestState"], {key: accept(city="Oslo")})
        assert done.text == "city=Oslo"
        async with asyncio.timeout(drain_timeout):  # well before the drain timeout: nothing is held
            assert await proc.wait() == 0
    finally:
        log = await _stop(proc)
    events = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    ended = [e for e in events if e.get("event") == "drain_ended"]
    assert ended, log
    assert ended[0]["drained"] is True, log


async def test_sigterm_with_a_call_never_retried_exits_within_the_drain_timeout(
    fake_backend: Backend, http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    _backend, url = fake_backend
    drain_timeout = 1.0
    proc, port = await _start_gateway(tmp_path, url, drain_timeout)
    try:
        await BareClient(http, f"http://127.0.0.1:{port}/mcp").call_tool("ask_city")
        proc.send_signal(signal.SIGTERM)
        # The drain gives up after drain_timeout; the shutdown (hold expiry, DELETE of the
        # backend session) takes at most SHUTDOWN_TIMEOUT more.
        async with asyncio.timeout(drain_timeout + SHUTDOWN_TIMEOUT):
            assert await proc.wait() == 0
    finally:
        log = await _stop(proc)
    events = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    names = [e.get("event") for e in events]
    assert names.index("drain_started") < names.index("drain_ended") < names.index("hold_expired"), log
    assert next(e for e in events if e.get("event") == "drain_ended")["drained"] is False


_HANGING_SHUTDOWN = """
import asyncio, sys
from gateway import server
from gateway.app import build_app
from gateway.config.load import load_config
from gateway.observability.logging import configure_logging

server.SHUTDOWN_TIMEOUT = 1.0
settings = load_config(sys.argv[1])
configure_logging("info", True)
app = build_app(settings)

async def never_done(app):  # a step of the shutdown that never ends (a backend that never answers)
    await asyncio.Event().wait()

app.on_cleanup.append(never_done)
server.run(app, "127.0.0.1", settings.config.listen.port, settings.config.listen)
"""


async def test_a_shutdown_step_that_never_ends_does_not_keep_the_process(
    fake_backend: Backend, http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    """After the drain the whole shutdown is bounded (SHUTDOWN_TIMEOUT, 1 s here): the process exits
    even if closing something never finishes, so it never outlives the pod's grace period."""
    _, url = fake_backend
    port = _free_port()
    config = tmp_path / "gateway.yaml"
    config.write_text(
        json.dumps(
            {
                "state": {"keys": [TEST_KEY]},
                "listen": {"host": "127.0.0.1", "port": port, "drain_timeout": 1},
                "routes": [{"name": "demo", "path": "/mcp", "backend": {"url": url}}],
            }
        ),
        encoding="utf-8",
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _HANGING_SHUTDOWN, str(config), stderr=asyncio.subprocess.PIPE
    )
    try:
        await until_status(http, f"http://127.0.0.1:{port}/readyz", timeout=BOUND)
        proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(BOUND):  # without the bound it would never exit
            assert await proc.wait() == 0
    finally:
        log = await _stop(proc)
    assert '"shutdown_timed_out"' in log, log
