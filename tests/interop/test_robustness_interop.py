"""Issue 4 against the real mcp 1.30.0 server: streamed progress and logs, cancellation reaching
the tool, restarts and deaths of the backend, and server modes that cannot ask for input."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import mcp_types as types
import pytest
from harness import BareClient, accept, route, running_gateway
from mcp.client import Client
from mcp_types.jsonrpc import INTERNAL_ERROR
from peers.runner import free_port, legacy_argv, legacy_url, run_peer

from gateway import keys
from interop.flows import FLOW_TIMEOUT, text_of

pytestmark = pytest.mark.interop

MODERN = "2026-07-28"


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def test_progress_notifications_reach_the_client_in_order(legacy_server: str) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with running_gateway([route("legacy", "/mcp", legacy_server)]) as gw:
        with anyio.fail_after(FLOW_TIMEOUT):
            async with Client(gw.url(), mode=MODERN) as client:
                result = await client.call_tool("count", {"n": 25}, progress_callback=on_progress)
    assert text_of(result) == "counted=25"
    assert [p for p, _, _ in seen] == [float(i) for i in range(1, 26)]
    assert seen[-1] == (25.0, 25.0, "step 25")


async def test_log_messages_arrive_only_when_a_log_level_is_requested(legacy_server: str) -> None:
    async def collect(log_level: types.LoggingLevel | None) -> list[Any]:
        logs: list[Any] = []

        async def on_log(params: types.LoggingMessageNotificationParams) -> None:
            logs.append(params.data)

        async with Client(gw.url(), mode=MODERN, logging_callback=on_log, log_level=log_level) as client:
            assert text_of(await client.call_tool("count", {"n": 3})) == "counted=3"
        return logs

    async with running_gateway([route("legacy", "/mcp", legacy_server)]) as gw:
        with anyio.fail_after(FLOW_TIMEOUT):
            assert await collect(None) == []
            assert await collect("info") == ["step 1 of 3", "step 2 of 3", "step 3 of 3"]
            assert await collect("error") == []


async def test_client_disconnect_cancels_the_legacy_tool(legacy_server: str, http: aiohttp.ClientSession) -> None:
    tag = f"cancel-{time.monotonic_ns()}"
    async with running_gateway([route("legacy", "/mcp", legacy_server)]) as gw:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=0.5)) as short:
            with pytest.raises(TimeoutError):
                await BareClient(short, gw.url()).call_tool("wait_for_cancel", {"tag": tag, "seconds": 30})
        client = BareClient(http, gw.url())
        with anyio.fail_after(10):
            while tag not in (await client.call_tool("cancelled")).text.split(","):
                await anyio.sleep(0.05)


async def test_backend_restart_between_calls_is_invisible(peer_log_dir: Path, http: aiohttp.ClientSession) -> None:
    port = free_port()
    async with running_gateway([route("legacy", "/mcp", legacy_url(port, "streamable-http"))]) as gw:
        client = BareClient(http, gw.url())
        with run_peer("restart-a", legacy_argv(port), port, peer_log_dir):
            assert (await client.call_tool("add", {"a": 1, "b": 2})).text == "3"
        with run_peer("restart-b", legacy_argv(port), port, peer_log_dir):
            assert (await client.call_tool("add", {"a": 2, "b": 2})).text == "4"
            result = (await client.call_tool("ask_city")).result
            (key,) = result["inputRequests"]
            done = await client.retry("ask_city", result["requestState"], {key: accept(city="Oslo")})
            assert done.text == "city=Oslo"


async def test_backend_killed_while_a_call_is_held(peer_log_dir: Path, http: aiohttp.ClientSession) -> None:
    port = free_port()
    gateway_route = route("legacy", "/mcp", legacy_url(port, "streamable-http"), backend={"timeout": 3})
    async with running_gateway([gateway_route]) as gw:
        client = BareClient(http, gw.url())
        with run_peer("killed", legacy_argv(port), port, peer_log_dir):
            held = (await client.call_tool("ask_city")).result
        (key,) = held["inputRequests"]
        started = time.monotonic()
        reply = await client.retry("ask_city", held["requestState"], {key: accept(city="x")})
        assert (reply.error["code"], reply.error["data"]["reason"]) == (INTERNAL_ERROR, "backend_unavailable")
        assert reply.status == 502
        assert reply.error["data"]["cause"] in {"stream_closed", "stream_broken", "connect_failed", "session_lost"}
        assert time.monotonic() - started < 4


async def test_json_response_server_cannot_ask_so_the_call_ends_with_a_clear_timeout(
    start_legacy_server: Callable[..., str], http: aiohttp.ClientSession
) -> None:
    """mcp 1.x in JSON-response mode drops server requests: the gateway must not hang."""
    url = start_legacy_server(json_response=True)
    async with running_gateway([route("legacy", "/mcp", url, backend={"timeout": 1.5})]) as gw:
        client = BareClient(http, gw.url())
        assert (await client.call_tool("add", {"a": 1, "b": 2})).text == "3"
        started = time.monotonic()
        reply = await client.call_tool("ask_city")
        assert (reply.error["code"], reply.error["data"]["reason"]) == (INTERNAL_ERROR, "backend_unavailable")
        assert reply.error["data"]["cause"] == "timeout"
        assert time.monotonic() - started < 3


async def test_stateless_server_loses_the_answer_so_the_retry_ends_with_a_clear_timeout(
    start_legacy_server: Callable[..., str], http: aiohttp.ClientSession
) -> None:
    """mcp 1.x stateless mode sends the elicitation but routes the answer to a fresh transport."""
    url = start_legacy_server(stateless=True)
    async with running_gateway([route("legacy", "/mcp", url, backend={"timeout": 1.5})]) as gw:
        client = BareClient(http, gw.url())
        assert (await client.call_tool("add", {"a": 1, "b": 2})).text == "3"
        result = (await client.call_tool("ask_city")).result
        assert result["resultType"] == "input_required"
        (key,) = result["inputRequests"]
        started = time.monotonic()
        done = await client.retry("ask_city", result["requestState"], {key: accept(city="x")})
        assert (done.error["code"], done.error["data"]["reason"]) == (INTERNAL_ERROR, "backend_unavailable")
        assert time.monotonic() - started < 3


async def test_silent_backend_call_times_out_on_the_route_timeout_and_is_cancelled(
    legacy_server: str, http: aiohttp.ClientSession
) -> None:
    tag = f"timeout-{time.monotonic_ns()}"
    async with running_gateway([route("legacy", "/mcp", legacy_server, backend={"timeout": 1})]) as gw:
        client = BareClient(http, gw.url())
        started = time.monotonic()
        reply = await client.call_tool("wait_for_cancel", {"tag": tag, "seconds": 30})
        assert (reply.error["code"], reply.error["data"]) == (
            INTERNAL_ERROR,
            {"reason": "backend_unavailable", "cause": "timeout"},
        )
        assert reply.status == 502
        assert time.monotonic() - started < 2.5
        with anyio.fail_after(10):
            while tag not in (await client.call_tool("cancelled")).text.split(","):
                await anyio.sleep(0.05)


@pytest.mark.parametrize("pinned", ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"])
async def test_a_route_can_pin_the_revision_offered_to_a_real_server(
    legacy_server: str, http: aiohttp.ClientSession, pinned: str
) -> None:
    async with running_gateway([route("legacy", "/mcp", legacy_server, backend={"protocol_version": pinned})]) as gw:
        client = BareClient(http, gw.url())
        assert (await client.call_tool("add", {"a": 1, "b": 1})).text == "2"
        pool = gw.app[keys.ROUTES]["/mcp"].pool
        (pooled,) = pool.idle_sessions()
        assert pooled.session.protocol_version == pinned
        # Before 2025-06-18 the gateway declares no elicitation upstream (the exact shapes per
        # revision are pinned in tests/e2e/test_negotiation.py); FastMCP 1.30.0 asks anyway, and
        # since this request's client declared elicitation, the round is still served.
        result = (await client.call_tool("ask_city")).result
        (key,) = result["inputRequests"]
        done = await client.retry("ask_city", result["requestState"], {key: accept(city="Quito")})
        assert done.text == "city=Quito"
