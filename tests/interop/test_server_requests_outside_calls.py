"""Server requests no call is ready for (issue 7, item 8), with legacy servers that ask ``roots/list``
as soon as a session is initialized and cache the answer, the way many published servers do:

* ``tests/peers/legacy_fastmcp_extras.py`` - mcp 1.30.0 FastMCP, roots/list on the GET stream;
* ``tests/interop/ts/roots_server.mjs`` - TypeScript SDK v1 (``Server.oninitialized``), which also
  runs a tool before it sends the POST's response headers (``roots_before_headers``).

Their ``startup_roots`` tool reports what the session-start request got *without waiting for it*, so
it shows whether the server had its answer when the tool ran: the gateway keeps such a request
pending on the session and asks it in the next interactive call's first round, before it sends the
call upstream - or answers it from the route's static ``roots``. Clients: the official mcp 2.3.0
client pinned to 2026-07-28, and the TypeScript SDK v2 client (``client.mjs``).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import anyio
import pytest
from harness import BareClient, GatewayHandle, route, running_gateway, stdio_route
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from peers.contract import STARTUP_ROOTS_FAILED, STARTUP_ROOTS_PENDING, startup_roots_text
from peers.runner import PEERS_DIR, free_port, legacy_python, run_peer

from gateway import keys
from interop.flows import FLOW_TIMEOUT, ROOTS, Recorder, WireLog, text_of
from interop.test_typescript_sdks import TS_DIR, assert_spoke_2026_07_28, node, run_ts_client

pytestmark = pytest.mark.interop

__all__ = ["node"]  # the fixture, imported so this module can use it

STATIC = [{"uri": "file:///workspace", "name": "workspace"}]
ROUTES = ("/py", "/ts")
SINGLE_STREAM = ("/py-sse", "/py-stdio")
"""The same mcp 1.30.0 peer over the transports whose every message arrives on one stream."""


@pytest.fixture(scope="module")
def py_roots_server(peer_log_dir: Path) -> Iterator[str]:
    port = free_port()
    argv = [legacy_python(), str(PEERS_DIR / "legacy_fastmcp_extras.py"), "--port", str(port)]
    with run_peer("legacy-extras", argv, port, peer_log_dir):
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.fixture(scope="module")
def ts_roots_server(node: str, peer_log_dir: Path) -> Iterator[str]:
    port = free_port()
    with run_peer("ts-roots", [node, str(TS_DIR / "roots_server.mjs"), str(port)], port, peer_log_dir):
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.fixture(scope="module")
def py_roots_sse_server(peer_log_dir: Path) -> Iterator[str]:
    port = free_port()
    argv = [legacy_python(), str(PEERS_DIR / "legacy_fastmcp_extras.py"), "--port", str(port), "--transport", "sse"]
    with run_peer("legacy-extras-sse", argv, port, peer_log_dir):
        yield f"http://127.0.0.1:{port}/sse"


@pytest.fixture
async def gateway(py_roots_server: str, ts_roots_server: str, py_roots_sse_server: str) -> AsyncIterator[GatewayHandle]:
    stdio_command = [legacy_python(), str(PEERS_DIR / "legacy_fastmcp_extras.py"), "--transport", "stdio"]
    routes = [
        route("py-sse", "/py-sse", py_roots_sse_server, backend={"transport": "sse"}),
        stdio_route("py-stdio", "/py-stdio", stdio_command, backend={"timeout": 30}),
        route("py", "/py", py_roots_server),
        route("ts", "/ts", ts_roots_server),
        route("py-static", "/py-static", py_roots_server, roots=STATIC),
        route("ts-static", "/ts-static", ts_roots_server, roots=STATIC),
        route("py-short", "/py-short", py_roots_server, holds={"ttl": 1}),
    ]
    async with running_gateway(routes) as gw:
        yield gw


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def call_with_sdk(url: str, tool: str, recorder: Recorder, wire: WireLog) -> str:
    with anyio.fail_after(FLOW_TIMEOUT):
        async with (
            wire.client() as http_client,
            Client(
                streamable_http_client(url, http_client=http_client),
                mode="2026-07-28",
                list_roots_callback=recorder.roots,
            ) as client,
        ):
            assert client.protocol_version == "2026-07-28"
            return text_of(await client.call_tool(tool, {}))


def assert_settled(gateway: GatewayHandle) -> None:
    assert len(gateway.app[keys.HOLDS]) == 0
    for runtime in gateway.app[keys.ROUTES].values():
        assert runtime.pool.leased_count == 0


@pytest.mark.parametrize("path", ROUTES + SINGLE_STREAM)
async def test_roots_asked_at_session_start_are_answered_before_the_tool_runs(
    gateway: GatewayHandle, path: str
) -> None:
    """The session-start roots/list becomes the call's first round, before the call is sent: the
    tool sees the roots the client's callback gave (2 tools/call POSTs: the round and the retry)."""
    recorder, wire = Recorder(), WireLog()
    text = await call_with_sdk(gateway.url(path), "startup_roots", recorder, wire)
    assert text == startup_roots_text(list(ROOTS))
    assert recorder.roots_calls == 1
    assert wire.count("tools/call") == 2
    assert_settled(gateway)


@pytest.mark.parametrize("path", ROUTES)
async def test_a_route_with_static_roots_answers_the_session_start_request_itself(
    gateway: GatewayHandle, path: str
) -> None:
    recorder, wire = Recorder(), WireLog()
    text = await call_with_sdk(gateway.url(f"{path}-static"), "startup_roots", recorder, wire)
    assert text == startup_roots_text(["file:///workspace"])
    assert recorder.roots_calls == 0
    assert wire.count("tools/call") == 1
    assert_settled(gateway)


async def test_a_request_the_tool_sends_before_the_response_headers_belongs_to_the_call(
    gateway: GatewayHandle,
) -> None:
    """TypeScript SDK v1 runs the tool before it sends the POST's headers; the tool's roots/list on
    the GET stream arrives while the POST is still unanswered, and is the call's all the same."""
    recorder, wire = Recorder(), WireLog()
    text = await call_with_sdk(gateway.url("/ts-static"), "roots_before_headers", recorder, wire)
    assert text == "roots=" + ",".join(ROOTS)
    assert recorder.roots_calls == 1
    assert wire.count("tools/call") == 2
    assert_settled(gateway)


async def test_plain_calls_never_receive_a_request_no_call_owns(
    gateway: GatewayHandle, http: aiohttp.ClientSession
) -> None:
    """Listing opens the session (the server asks its roots); the request waits for the next
    interactive call, which asks it first: its requestState round answers it, then the tool runs."""
    client = BareClient(http, gateway.url("/py"))
    assert "tools" in (await client.request("tools/list")).result
    assert "tools" in (await client.request("tools/list")).result
    first = (await client.call_tool("startup_roots")).result
    ((key, asked),) = first["inputRequests"].items()
    assert asked == {"method": "roots/list"}
    roots = {"roots": [{"uri": "file:///tmp/by-hand"}]}
    done = await client.retry("startup_roots", first["requestState"], {key: roots})
    assert done.text == startup_roots_text(["file:///tmp/by-hand"])
    assert_settled(gateway)


async def test_an_unclaimed_request_expires_with_the_hold_rules(
    gateway: GatewayHandle, http: aiohttp.ClientSession
) -> None:
    """No interactive call came within holds.ttl: the server's roots/list gets an error, not silence."""
    client = BareClient(http, gateway.url("/py-short"))
    assert "tools" in (await client.request("tools/list")).result
    pool = gateway.app[keys.ROUTES]["/py-short"].pool
    pool.reap(time.monotonic() + 2)  # past holds.ttl (1 s), well within session_idle
    with anyio.fail_after(FLOW_TIMEOUT):
        while (text := (await client.call_tool("startup_roots")).text) == STARTUP_ROOTS_PENDING:
            await anyio.sleep(0.05)
    assert text == STARTUP_ROOTS_FAILED
    assert pool.initializations == 1


@pytest.mark.parametrize("path", ROUTES)
async def test_ts_client_roots_at_session_start(node: str, gateway: GatewayHandle, path: str) -> None:
    run = await run_ts_client(node, gateway.url(path), "startup_roots")
    assert run.field("text") == startup_roots_text(list(ROOTS))
    assert run.field("roots") == 1
    assert_spoke_2026_07_28(run, tool_calls=2)


async def test_a_first_round_nobody_answers_expires_and_frees_the_session(
    gateway: GatewayHandle, http: aiohttp.ClientSession
) -> None:
    """The call was never sent upstream; on expiry the server's request gets its error and the
    session goes back to the pool for the next call."""
    client = BareClient(http, gateway.url("/py-short"))
    first = (await client.call_tool("startup_roots")).result
    assert first["resultType"] == "input_required"
    registry = gateway.app[keys.HOLDS]
    assert registry.reap(time.monotonic() + 2) == 1
    pool = gateway.app[keys.ROUTES]["/py-short"].pool
    with anyio.fail_after(FLOW_TIMEOUT):
        while pool.leased_count:
            await anyio.sleep(0.02)
        while (text := (await client.call_tool("startup_roots")).text) == STARTUP_ROOTS_PENDING:
            await anyio.sleep(0.05)
    assert text == STARTUP_ROOTS_FAILED
    assert pool.initializations == 1
    assert_settled(gateway)
