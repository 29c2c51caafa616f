"""The gateway in front of a real stdio server, driven by the official mcp 2.3.0 client pinned to
mode "2026-07-28".

The backend is ``mcp==1.30.0`` FastMCP run with ``transport="stdio"`` (``tests/peers/legacy_fastmcp.py
--transport stdio``): the gateway starts one such process per backend session and speaks
newline-delimited JSON-RPC on its pipes. Every response and every server request travels on the
process's stdout; the gateway attributes the requests to the call holding the session's lease and
turns them into ``InputRequiredResult`` rounds for the client. When the gateway stops, every
process it started is stopped and reaped.
"""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import cast

import aiohttp
import anyio
import mcp_types as types
import pytest
from harness import BareClient, GatewayHandle, accept, running_gateway, stdio_route
from mcp.client import Client
from mcp.client.session import ClientRequestContext
from peers.runner import PEERS_DIR, REPO_ROOT, legacy_python

from gateway import keys
from gateway.legacy.pool import SessionPool
from gateway.legacy.stdio import StdioSession
from interop.flows import ANSWERS, FLOW_TIMEOUT, ROOTS, SAMPLED_TEXT, Recorder, text_of

pytestmark = pytest.mark.interop

MODERN = "2026-07-28"
CONCURRENT_CALLS = 20
CONCURRENCY_TIMEOUT = 90.0
"""Twenty Python servers starting at once on a small CI machine take a while."""


def stdio_peer_route() -> dict[str, object]:
    command = [legacy_python(), str(PEERS_DIR / "legacy_fastmcp.py"), "--transport", "stdio", "--log-level", "WARNING"]
    return stdio_route("local", "/mcp", command, backend={"cwd": str(REPO_ROOT), "timeout": 60})


def pool_of(gateway: GatewayHandle) -> SessionPool:
    return gateway.app[keys.ROUTES]["/mcp"].pool


def child_pids(pool: SessionPool) -> set[int]:
    """PIDs of the processes behind the pool's sessions right now."""
    return {p.session.pid for p in pool._all() if isinstance(p.session, StdioSession) and p.session.pid is not None}


def assert_all_reaped(pids: set[int]) -> None:
    """Each process has exited and been waited for (a zombie would still answer signal 0)."""
    alive = []
    for pid in pids:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        alive.append(pid)
    assert alive == []


@asynccontextmanager
async def stdio_gateway() -> AsyncIterator[GatewayHandle]:
    async with running_gateway([stdio_peer_route()]) as gw:
        yield gw


@asynccontextmanager
async def modern_client(gateway: GatewayHandle, recorder: Recorder) -> AsyncIterator[Client]:
    async with Client(
        gateway.url(),
        mode=MODERN,
        elicitation_callback=recorder.elicit,
        sampling_callback=recorder.sample,
        list_roots_callback=recorder.roots,
    ) as client:
        assert client.protocol_version == MODERN
        yield client


async def test_every_flow_through_a_stdio_backend() -> None:
    recorder = Recorder()
    pids: set[int] = set()
    with anyio.fail_after(FLOW_TIMEOUT * 2):
        async with stdio_gateway() as gateway:
            async with modern_client(gateway, recorder) as client:
                tools = {tool.name for tool in (await client.list_tools()).tools}
                assert {"add", "ask_city", "ask_two", "summarize", "show_roots"} <= tools
                assert text_of(await client.call_tool("add", {"a": 20, "b": 22})) == "42"
                assert text_of(await client.call_tool("ask_city", {})) == "city=Paris"
                assert text_of(await client.call_tool("ask_two", {})) == "name=Ann;color=teal"
                summary = await client.call_tool("summarize", {"text": "a long text"})
                assert text_of(summary) == f"sampled={SAMPLED_TEXT}"
                pool = pool_of(gateway)
                pids = child_pids(pool)
                # One client, one credential, one set of capabilities, one call at a time: one process.
                assert (pool.size, pool.initializations, len(pids)) == (1, 1, 1)
                assert text_of(await client.call_tool("show_roots", {})) == "roots=" + ",".join(ROOTS)
            # The server may keep the client's roots for the session: it served that call only and was
            # closed after it (docs/session-state.md).
            assert (pool.size, pool.initializations) == (0, 1)
    assert recorder.elicitations == ["Which city?", "What is your name?", "Hello Ann, which color?"]
    assert recorder.samplings == ["Summarize: a long text"]
    assert recorder.roots_calls == 1
    assert_all_reaped(pids)


async def test_concurrent_calls_each_get_their_own_process() -> None:
    """Twenty ``ask_city`` calls held at once: each leases its own session, i.e. its own process."""
    everyone_asked = anyio.Event()
    asked: list[str] = []
    seen: dict[str, object] = {}

    with anyio.fail_after(CONCURRENCY_TIMEOUT):
        async with stdio_gateway() as gateway:
            pool = pool_of(gateway)

            async def elicit(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
                assert isinstance(params, types.ElicitRequestFormParams)
                asked.append(params.message)
                if len(asked) == CONCURRENT_CALLS:
                    # Every call's first round has ended with an InputRequiredResult: all are held.
                    seen.update(size=pool.size, leased=pool.leased_count, pids=child_pids(pool))
                    everyone_asked.set()
                await everyone_asked.wait()
                return types.ElicitResult(action="accept", content={"city": ANSWERS["city"]})

            results: list[str] = []
            async with Client(gateway.url(), mode=MODERN, elicitation_callback=elicit) as client:

                async def one_call() -> None:
                    results.append(text_of(await client.call_tool("ask_city", {})))

                async with anyio.create_task_group() as group:
                    for _ in range(CONCURRENT_CALLS):
                        group.start_soon(one_call)
            initializations = pool.initializations
            pids = child_pids(pool) | set(cast("list[int]", seen["pids"]))
    assert results == ["city=Paris"] * CONCURRENT_CALLS
    assert (seen["size"], seen["leased"]) == (CONCURRENT_CALLS, CONCURRENT_CALLS)
    assert len(seen["pids"]) == CONCURRENT_CALLS  # type: ignore[arg-type]
    assert initializations == CONCURRENT_CALLS
    assert_all_reaped(pids)


async def test_a_killed_server_fails_only_the_calls_on_it() -> None:
    """What the gateway does when the kernel (or anyone) kills a stdio server: the calls held on that
    process fail with a clear error (``backend_unavailable``, ``stream_closed``), a held call on
    another route of the same gateway is untouched, and the route's next call starts a new process
    (issue 27 item 3)."""
    command = [legacy_python(), str(PEERS_DIR / "legacy_fastmcp.py"), "--transport", "stdio", "--log-level", "WARNING"]
    backend = {"cwd": str(REPO_ROOT), "timeout": 60}
    routes = [stdio_route("a", "/a", command, backend=backend), stdio_route("b", "/b", command, backend=backend)]
    async with aiohttp.ClientSession() as http, running_gateway(routes) as gw:
        on_a, on_b = BareClient(http, gw.url("/a")), BareClient(http, gw.url("/b"))
        held_a = (await on_a.call_tool("ask_city")).result
        held_b = (await on_b.call_tool("ask_city")).result
        pool_a = gw.app[keys.ROUTES]["/a"].pool
        (victim,) = child_pids(pool_a)
        with open(f"/proc/{victim}/oom_score_adj") as adj:
            assert int(adj.read()) == 1000
        os.kill(victim, signal.SIGKILL)  # as the OOM killer does
        (key_a,) = held_a["inputRequests"]
        failed = await on_a.retry("ask_city", held_a["requestState"], {key_a: accept(city="Oslo")})
        (key_b,) = held_b["inputRequests"]
        fine = await on_b.retry("ask_city", held_b["requestState"], {key_b: accept(city="Lima")})
        again = (await on_a.call_tool("echo", {"text": "back"})).text
    assert failed.status == 502
    assert failed.error["data"] == {"reason": "backend_unavailable", "cause": "stream_closed"}
    assert "Lima" in fine.text
    assert again == "back"
